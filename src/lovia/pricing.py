"""Token prices, from ``genai-prices`` (extra ``otel``) plus user overrides.

A core module: the engine prices each call (budgets) and telemetry reports the cost, so
neither owns it. ``lovia.telemetry`` re-exports these names.

``price_call`` returns the cost in USD of one model call, or None when it is unknown (no
price, the extra not installed, or no usage reported); the engine then counts the call in
``Usage.unpriced`` and the first unpriced call of a model is logged (level INFO).
``price_usage`` is the same with 0.0 for unknown. Overrides win over the table:
``set_price("openai", "my-finetune", input_per_mtok=..., output_per_mtok=...)``, or a file
of them: ``load_prices(path)``, or ``LOVIA_PRICES=path`` (read once, on first pricing). A
model priced at 0 (``free: true``, a self-hosted model) is *priced*: its calls cost $0 and
are not counted as unpriced. Model ``*`` prices every model of a provider.

``price_source`` names what priced a call (``genai-prices==X`` or ``overrides@<hash>``, the
hash of the whole override set), recorded on each ``chat`` span as ``lovia.cost.source``.

It runs for every model response, so the table lookup happens once per
``(provider, model)`` and is cached; plain (non-tiered) prices are then applied with
float arithmetic (≈1 µs). Tiered prices (long-context tiers) go through
``genai-prices``' own calculator. As in OpenTelemetry and ``genai-prices``,
``Usage.input_tokens`` *includes* cache reads and writes; those are priced at their own
rates when the table has one, else at the input rate. Date-ranged prices are resolved
when a model is first looked up in the process.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ._price_file import read_price_file
from .usage import Usage

__all__ = [
    "clear_prices",
    "has_price",
    "load_prices",
    "price_call",
    "price_source",
    "price_table_version",
    "price_usage",
    "set_price",
]

logger = logging.getLogger("lovia.telemetry")

_MTOK = 1_000_000.0


@dataclass(frozen=True, slots=True)
class _Price:
    """Per-token prices in USD (None = priced at the input rate)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    model_price: Any = None
    """The genai-prices ``ModelPrice`` when it has tiers (slow path above ``tier_start``)."""
    tier_start: int = 0

    def cost(self, usage: Usage) -> float:
        if self.model_price is not None and usage.input_tokens >= self.tier_start:
            return _tiered_cost(self.model_price, usage)
        read = usage.cache_read_tokens
        write = usage.cache_write_tokens
        plain = usage.input_tokens - read - write
        total = max(plain, 0) * self.input + usage.output_tokens * self.output
        total += read * (self.input if self.cache_read is None else self.cache_read)
        total += write * (self.input if self.cache_write is None else self.cache_write)
        return total


_overrides: dict[tuple[str, str], _Price] = {}
_cache: dict[tuple[str, str], _Price | None] = {}
_lock = threading.Lock()
_ENV = "LOVIA_PRICES"
_env_read = False
_override_tag: str | None = None
"""``overrides@<hash>`` of the current override set (None = not computed yet)."""
_ANY = "*"


def set_price(
    provider: str,
    model: str,
    *,
    input_per_mtok: float,
    output_per_mtok: float,
    cache_read_per_mtok: float | None = None,
    cache_write_per_mtok: float | None = None,
) -> None:
    """Use these prices (USD per million tokens) for ``provider``/``model``."""
    price = _Price(
        input=input_per_mtok / _MTOK,
        output=output_per_mtok / _MTOK,
        cache_read=None if cache_read_per_mtok is None else cache_read_per_mtok / _MTOK,
        cache_write=None if cache_write_per_mtok is None else cache_write_per_mtok / _MTOK,
    )
    global _override_tag
    with _lock:
        _overrides[(provider.lower(), model.lower())] = price
        _override_tag = None


def load_prices(path: str | os.PathLike[str]) -> int:
    """Add the overrides in a YAML or JSON file (see ``lovia._price_file``); returns how
    many. The whole file is checked first: a bad one raises :class:`~lovia.UserError`
    naming the file and the entry, and changes nothing."""
    entries = read_price_file(path)
    for e in entries:
        set_price(
            e.provider,
            e.model,
            input_per_mtok=e.input_per_mtok,
            output_per_mtok=e.output_per_mtok,
            cache_read_per_mtok=e.cache_read_per_mtok,
            cache_write_per_mtok=e.cache_write_per_mtok,
        )
    return len(entries)


def clear_prices() -> None:
    """Forget every override and the lookup cache (``LOVIA_PRICES``, when set, is read
    again on the next pricing)."""
    global _override_tag, _env_read
    with _lock:
        _overrides.clear()
        _cache.clear()
        _override_tag = None
        _env_read = False


def _read_env() -> None:
    """Load ``LOVIA_PRICES`` once. A bad file raises on every pricing until it is fixed:
    a run never goes on silently priced from the wrong table."""
    global _env_read
    path = os.environ.get(_ENV, "").strip()
    if path:
        load_prices(path)
    _env_read = True


def _tag() -> str:
    """``overrides@`` + 8 hex digits of SHA-256 over the sorted override set."""
    global _override_tag
    tag = _override_tag
    if tag is None:
        with _lock:
            rows = sorted(
                (k, (p.input, p.output, p.cache_read, p.cache_write)) for k, p in _overrides.items()
            )
        digest = hashlib.sha256(repr(rows).encode()).hexdigest()[:8]
        tag = _override_tag = f"overrides@{digest}"
    return tag


def price_source(provider: str, model: str) -> str | None:
    """What prices ``provider``/``model``: ``overrides@<hash>`` (a user override),
    ``genai-prices==<version>`` (the table), or None (no price: unknown)."""
    if _override(provider.lower(), model.lower()) is not None:
        return _tag()
    return _table_version() if _lookup(provider, model) is not None else None


def has_price(provider: str, model: str) -> bool:
    """True when ``price_usage`` can price this model (override or table entry)."""
    return _lookup(provider, model) is not None


def price_usage(provider: str, model: str, usage: Usage) -> float:
    """Cost in USD of ``usage`` on ``provider``/``model`` (0.0 when unknown)."""
    cost = price_call(provider, model, usage)
    return 0.0 if cost is None else cost


def price_call(provider: str, model: str, usage: Usage) -> float | None:
    """Cost in USD of one call's ``usage``, or None when it is unknown: no price for the
    model, or the provider reported no usage (unknown is not free)."""
    if usage.missing and not (usage.input_tokens or usage.output_tokens):
        return None
    price = _lookup(provider, model)
    if price is None:
        _warn_unpriced(provider, model)
        return None
    try:
        return price.cost(usage)
    except Exception:  # a pricing bug must never break a run
        logger.debug("pricing %s/%s failed", provider, model, exc_info=True)
        return None


_warned: set[tuple[str, str]] = set()


def _warn_unpriced(provider: str, model: str) -> None:
    """Say once per model that its calls are not priced (unknown is not free; every
    surface shows it, so a log line is enough)."""
    key = (provider.lower(), model.lower())
    if key in _warned:
        return
    _warned.add(key)
    logger.info(  # not a warning: test fakes and local models are unpriced by design
        "no price is known for %s:%s: its calls count as unpriced (lovia.cost.unpriced) "
        "and every cost that includes them is a lower bound; register one with "
        "lovia.set_price or a price file (lovia.load_prices, LOVIA_PRICES)",
        provider,
        model,
    )


def price_table_version() -> str:
    """``genai-prices==<version>`` (``+overrides@<hash>`` when any is set), or ``none``."""
    if not _env_read:
        _read_env()
    return _table_version() + (f"+{_tag()}" if _overrides else "")


@functools.cache
def _table_version() -> str:
    """Read once: package metadata lookups cost ~1 ms, and this is on every run span."""
    try:
        from importlib.metadata import version

        return f"genai-prices=={version('genai-prices')}"
    except Exception:
        return "none"


def _override(provider: str, model: str) -> _Price | None:
    if not _env_read:
        _read_env()
    found = _overrides.get((provider, model))
    return found if found is not None else _overrides.get((provider, _ANY))


def _lookup(provider: str, model: str) -> _Price | None:
    key = (provider.lower(), model.lower())
    found = _override(*key)
    if found is not None:
        return found
    try:
        return _cache[key]
    except KeyError:
        pass
    price = _from_table(*key)
    with _lock:
        _cache[key] = price
    return price


def _from_table(provider: str, model: str) -> _Price | None:
    try:
        from genai_prices import data_snapshot
    except ImportError:
        return None
    try:
        snapshot: Any = data_snapshot.get_snapshot()
        _, info = snapshot.find_provider_model(model, None, provider or None, None)
        mp: Any = info.get_prices(datetime.now(tz=UTC))
    except Exception:  # LookupError for unknown models; anything else: unknown too
        return None
    fields = {
        name: getattr(mp, f"{name}_mtok", None)
        for name in ("input", "output", "cache_read", "cache_write")
    }
    if fields["input"] is None and fields["output"] is None:
        return None
    tiered = [v for v in fields.values() if v is not None and hasattr(v, "tiers")]
    starts = [int(t.start) for v in tiered for t in v.tiers]

    def per_token(v: Any) -> float | None:
        if v is None:
            return None
        return float(v.base if hasattr(v, "base") else v) / _MTOK

    return _Price(
        input=per_token(fields["input"]) or 0.0,
        output=per_token(fields["output"]) or 0.0,
        cache_read=per_token(fields["cache_read"]),
        cache_write=per_token(fields["cache_write"]),
        model_price=mp if tiered else None,
        tier_start=min(starts, default=0),
    )


def _tiered_cost(model_price: Any, usage: Usage) -> float:
    from genai_prices import Usage as PriceUsage

    calc: Any = model_price.calc_price(
        PriceUsage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens or None,
            cache_write_tokens=usage.cache_write_tokens or None,
        )
    )
    return float(calc["total_price"])
