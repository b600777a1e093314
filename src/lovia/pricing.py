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

``auto_update_prices()`` (or ``LOVIA_PRICES_AUTO_UPDATE=1``) opts in to genai-prices' own
background table updates; off by default (no network).

``price_source`` names what priced a call (``genai-prices==X`` or ``overrides@<hash>``, the
hash of the whole override set), recorded on each ``chat`` span as ``lovia.cost.source``.

It runs for every model response, so the table lookup happens once per
``(provider, model)`` and is cached; plain (non-tiered) prices are then applied with
float arithmetic (≈1 µs). Tiered prices (long-context tiers) and per-request
fees go through ``genai-prices``' own calculator. As in OpenTelemetry and ``genai-prices``,
``Usage.input_tokens`` *includes* cache reads and writes; those are priced at their own
rates when the table has one, else at the input rate. Date-ranged prices are resolved
when a model is first looked up in the process.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import os
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Never

from ._price_file import PriceEntry, check_entry, read_price_file
from .errors import UserError
from .usage import Usage

__all__ = [
    "auto_update_prices",
    "clear_prices",
    "has_price",
    "load_prices",
    "price_call",
    "price_source",
    "price_table_version",
    "price_usage",
    "set_price",
    "stop_auto_update",
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
    """The genai-prices ``ModelPrice`` when only its own calculator prices a call right: it
    has tiers (slow path above ``tier_start``) or a per-request fee (slow path always)."""
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
_ENV_AUTO = "LOVIA_PRICES_AUTO_UPDATE"
_updater: Any = None
"""genai-prices' ``UpdatePrices`` once auto-update is on (None: the bundled table only)."""
_snapshot: Any = None
"""The genai-prices snapshot ``_cache`` was filled from (checked only with auto-update)."""
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
    **unknown: Never,
) -> None:
    """Use these prices (USD per million tokens) for ``provider``/``model``.

    Checked like a price file's entry: a negative, NaN, infinite or non-number rate, an
    empty name or an unknown keyword (a typo type checkers flag too) raises
    :class:`~lovia.UserError` and changes nothing."""
    entry = check_entry(
        "set_price()",
        {
            "provider": provider,
            "model": model,
            "input_per_mtok": input_per_mtok,
            "output_per_mtok": output_per_mtok,
            "cache_read_per_mtok": cache_read_per_mtok,
            "cache_write_per_mtok": cache_write_per_mtok,
            **unknown,
        },
    )
    _apply([entry])


def _apply(entries: list[PriceEntry]) -> None:
    global _override_tag
    with _lock:
        for e in entries:
            _overrides[(e.provider.lower(), e.model.lower())] = _Price(
                input=e.input_per_mtok / _MTOK,
                output=e.output_per_mtok / _MTOK,
                cache_read=_per_token(e.cache_read_per_mtok),
                cache_write=_per_token(e.cache_write_per_mtok),
            )
        _override_tag = None


def _per_token(per_mtok: float | None) -> float | None:
    return None if per_mtok is None else per_mtok / _MTOK


def load_prices(path: str | os.PathLike[str]) -> int:
    """Add the overrides in a YAML or JSON file (see ``lovia._price_file``); returns how
    many. The whole file is checked first: a bad one raises :class:`~lovia.UserError`
    naming the file and the entry, and changes nothing."""
    entries = read_price_file(path)
    _apply(entries)
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


def auto_update_prices(*, interval_s: float = 3600.0, wait: bool | float = False) -> None:
    """Opt in to ``genai-prices``' own background update: its table is fetched from the
    genai-prices project now and every ``interval_s`` seconds (a daemon thread), and calls
    are priced from the newest table fetched (overrides still win). Off by default: the
    bundled snapshot needs no network. ``LOVIA_PRICES_AUTO_UPDATE=1`` (or a number of
    seconds) turns it on at the first pricing. ``wait``: block until the first fetch
    (seconds, or True for 30 s); a failed fetch then raises, otherwise it is logged and
    the table in use stays. Calls priced from a fetched table record the source
    ``genai-prices==<version>+update@<fetched at>``."""
    if not (math.isfinite(interval_s) and interval_s > 0):
        raise UserError(
            f"auto_update_prices(interval_s={interval_s!r}): expected seconds > 0",
            hint="e.g. interval_s=3600 (the genai-prices default: hourly).",
        )
    try:
        from genai_prices import UpdatePrices
    except ImportError:
        raise UserError(
            "auto_update_prices() needs the genai-prices package",
            hint="pip install 'lovia[otel]'",
        ) from None
    global _updater
    with _lock:
        if _updater is None:
            _updater = UpdatePrices(update_interval=float(interval_s))
            _updater.start()
        updater = _updater
    if wait:
        updater.wait(30.0 if wait is True else float(wait))


def stop_auto_update() -> None:
    """Stop the background update (the table fetched last stays in use)."""
    global _updater
    with _lock:
        updater, _updater = _updater, None
    if updater is not None:
        updater.stop()


def _read_env() -> None:
    """Load ``LOVIA_PRICES`` once. A bad file raises on every pricing until it is fixed:
    a run never goes on silently priced from the wrong table."""
    global _env_read
    path = os.environ.get(_ENV, "").strip()
    if path:
        load_prices(path)
    auto = os.environ.get(_ENV_AUTO, "").strip().lower()
    if auto and auto not in ("0", "false", "no", "off"):
        interval = 3600.0 if auto in ("1", "true", "yes", "on") else _seconds(auto)
        auto_update_prices(interval_s=interval)
    _env_read = True


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise UserError(
            f"{_ENV_AUTO}={text!r} is neither 1/0 nor a number of seconds",
            hint=f"Set {_ENV_AUTO}=1 (hourly) or e.g. {_ENV_AUTO}=600.",
        ) from None


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


def _table_version() -> str:
    """``genai-prices==<version>``, ``+update@<when>`` when priced from a fetched table
    (also after ``stop_auto_update()``: the table fetched last stays in use)."""
    base = _package_version()
    if base == "none":
        return base
    snapshot: Any = _current_snapshot()
    if snapshot is None or not snapshot.from_auto_update:
        return base
    return f"{base}+update@{snapshot.timestamp:%Y%m%dT%H%M%S}"


def _current_snapshot() -> Any:
    from genai_prices import data_snapshot

    return data_snapshot.get_snapshot()


@functools.cache
def _package_version() -> str:
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
    if _updater is not None:
        _follow_updates()
    try:
        return _cache[key]
    except KeyError:
        pass
    price = _from_table(*key)
    with _lock:
        _cache[key] = price
    return price


def _follow_updates() -> None:
    """With auto-update on: forget the looked-up prices when a newer table was fetched."""
    global _snapshot
    snapshot = _current_snapshot()
    if snapshot is not _snapshot:
        with _lock:
            _cache.clear()
            _snapshot = snapshot


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
    # a per-request fee (e.g. web-search models) is billed by genai-prices' calculator only
    slow = bool(tiered) or getattr(mp, "requests_kcount", None) is not None

    def per_token(v: Any) -> float | None:
        if v is None:
            return None
        return float(v.base if hasattr(v, "base") else v) / _MTOK

    return _Price(
        input=per_token(fields["input"]) or 0.0,
        output=per_token(fields["output"]) or 0.0,
        cache_read=per_token(fields["cache_read"]),
        cache_write=per_token(fields["cache_write"]),
        model_price=mp if slow else None,
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
