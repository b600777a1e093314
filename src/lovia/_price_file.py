"""Reading a price-override file (YAML or JSON) into checked entries.

The file is a list of entries, or a mapping with a ``prices`` list::

    prices:
      - provider: openai
        model: "ft:gpt-4o-mini:acme:support:abc123"
        input_per_mtok: 0.30
        output_per_mtok: 1.20
        cache_read_per_mtok: 0.15
      - provider: ollama
        model: "*"          # every model of this provider
        free: true          # self-hosted: priced at $0, not unknown

Every entry is checked before any is applied, so a bad file changes nothing.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from .errors import UserError

_RATES = ("input_per_mtok", "output_per_mtok", "cache_read_per_mtok", "cache_write_per_mtok")
_KEYS = frozenset(("provider", "model", "free", *_RATES))
_EXAMPLE = "e.g. {provider: openai, model: my-finetune, input_per_mtok: 0.3, output_per_mtok: 1.2}"


@dataclass(frozen=True, slots=True)
class PriceEntry:
    """One checked override: USD per million tokens (cache rates None = input rate)."""

    provider: str
    model: str
    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float | None = None
    cache_write_per_mtok: float | None = None


def read_price_file(path: str | os.PathLike[str]) -> list[PriceEntry]:
    """Parse and check ``path``; raise :class:`UserError` naming the file and the entry."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"cannot read the price file {str(file)!r}: {exc}",
            hint="Point load_prices() or LOVIA_PRICES at a readable UTF-8 YAML or JSON file.",
        ) from exc
    import yaml  # imported on use: `import lovia` stays fast

    try:
        data: Any = json.loads(text) if file.suffix.lower() == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise UserError(
            f"the price file {str(file)!r} is not valid {_kind(file)}: {exc}",
            hint=f"Fix the syntax; each entry looks like {_EXAMPLE}.",
        ) from exc
    if isinstance(data, Mapping) and set(cast("Mapping[str, Any]", data)) == {"prices"}:
        data = cast("Mapping[str, Any]", data)["prices"]
    if not isinstance(data, Sequence) or isinstance(data, (str, bytes)):
        raise UserError(
            f"the price file {str(file)!r} holds no list of prices",
            hint=f"Write a list (or 'prices:' followed by a list) of entries, {_EXAMPLE}.",
        )
    items = cast("Sequence[Any]", data)
    entries = [check_entry(_where(file, i), item) for i, item in enumerate(items)]
    seen: set[tuple[str, str]] = set()
    for i, e in enumerate(entries):
        key = (e.provider.lower(), e.model.lower())
        if key in seen:
            what = f"{e.provider}:{e.model} is priced twice"
            raise _bad(_where(file, i), what, "Keep one entry.")
        seen.add(key)
    return entries


def _kind(file: Path) -> str:
    return "JSON" if file.suffix.lower() == ".json" else "YAML"


def _where(file: Path, index: int) -> str:
    return f"the price file {str(file)!r}, entry {index + 1}"


def _bad(where: str, what: str, hint: str) -> UserError:
    return UserError(f"{where}: {what}", hint=hint)


def check_entry(where: str, item: Any) -> PriceEntry:
    """Check one entry (a mapping of the keys above); ``where`` names it in the error
    (``the price file 'p.yaml', entry 2`` or ``set_price()``)."""
    if not isinstance(item, Mapping):
        raise _bad(where, f"expected a mapping, got {item!r:.80}", f"Write {_EXAMPLE}.")
    raw = cast("Mapping[Any, Any]", item)
    unknown = sorted(str(k) for k in raw if k not in _KEYS)
    if unknown:
        raise _bad(where, f"unknown key(s) {unknown}", f"Allowed keys: {', '.join(sorted(_KEYS))}.")
    names: dict[str, str] = {}
    for key in ("provider", "model"):
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            raise _bad(where, f"{key!r} must be a non-empty string", f"Write {_EXAMPLE}.")
        names[key] = value.strip()
    label = f"{names['provider']}:{names['model']}"
    free = raw.get("free", False)
    if not isinstance(free, bool):
        raise _bad(where, f"{label}: 'free' must be true or false", "Write free: true.")
    rates = {k: _rate(where, label, k, raw.get(k)) for k in _RATES}
    if free:
        if any(v not in (None, 0.0) for v in rates.values()):
            raise _bad(where, f"{label} is 'free' and has non-zero prices", "Keep one of the two.")
        return PriceEntry(names["provider"], names["model"], 0.0, 0.0, 0.0, 0.0)
    missing = [k for k in _RATES[:2] if rates[k] is None]
    if missing:
        raise _bad(
            where,
            f"{label} has no {' or '.join(missing)}",
            "Give both input_per_mtok and output_per_mtok (USD per million tokens), "
            "or free: true for a model that costs nothing.",
        )
    return PriceEntry(
        names["provider"],
        names["model"],
        cast("float", rates["input_per_mtok"]),
        cast("float", rates["output_per_mtok"]),
        rates["cache_read_per_mtok"],
        rates["cache_write_per_mtok"],
    )


def _rate(where: str, label: str, key: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(where, f"{label}: {key} must be a number, got {value!r:.40}", _EXAMPLE)
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise _bad(where, f"{label}: {key} is {value!r}", "Prices are finite and never negative.")
    return number
