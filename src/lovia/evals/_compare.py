"""Does a re-run's request reproduce a pinned view? The hash, and the first difference.

Every execution mints fresh entry ids and timestamps for the entries it creates (a tool
result, a handoff). The model never sees them, so the comparison takes them from the
pinned view position by position (entries of the same kind only) and then hashes the
request exactly as the loop does: everything the model is sent — text, arguments,
results, call ids, turn and agent stamps, system prompt, tools, settings, output schema
— must match byte for byte for the hash to be the recorded ``lovia.view.hash``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..model import ModelRequest
from ..transcript import TranscriptEntry, entry_to_dict
from ..view.record import ViewHasher, canonical_request

__all__ = ["Divergence", "compare_request", "first_difference", "identity_aligned"]

_IDENTITY = ("id", "ts")


@dataclass(frozen=True, slots=True, kw_only=True)
class Divergence:
    """Where a re-run first differed from the recording."""

    turn: int
    attempt: int
    where: str
    """``system``, ``tools``, ``settings``, ``output_schema``, ``entry 4``, ``length``,
    ``tool call``, ``calls``…"""
    recorded: str
    rerun: str

    def explain(self) -> str:
        return (
            f"turn {self.turn}"
            + (f" (attempt {self.attempt})" if self.attempt > 1 else "")
            + f": {self.where} differs\n  recorded: {self.recorded}\n  re-run:   {self.rerun}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "attempt": self.attempt,
            "where": self.where,
            "recorded": self.recorded,
            "rerun": self.rerun,
        }


def identity_aligned(
    live: Sequence[TranscriptEntry],
    pinned: Sequence[TranscriptEntry],
    cache: dict[tuple[str, str], TranscriptEntry] | None = None,
) -> list[TranscriptEntry]:
    """``live`` with each entry's id and timestamp taken from ``pinned`` at its position.

    ``cache`` (one per re-run) keeps each aligned copy, so the next view reuses the same
    objects and the hasher only hashes what is new.
    """
    memo = cache if cache is not None else {}
    out: list[TranscriptEntry] = []
    for index, entry in enumerate(live):
        ref = pinned[index] if index < len(pinned) else None
        if ref is None or type(ref) is not type(entry) or (ref.id, ref.ts) == (entry.id, entry.ts):
            out.append(entry)
            continue
        key = (entry.id, ref.id)
        copy = memo.get(key)
        if copy is None:  # entries are frozen and their ids unique: one copy per pair
            copy = memo[key] = entry.model_copy(update={"id": ref.id, "ts": ref.ts})
        out.append(copy)
    return out


def compare_request(
    live: ModelRequest,
    pinned: ModelRequest,
    hasher: ViewHasher | None = None,
    cache: dict[tuple[str, str], TranscriptEntry] | None = None,
) -> tuple[str, list[TranscriptEntry]]:
    """(the re-run's view hash after identity alignment, the aligned messages)."""
    aligned = identity_aligned(live.messages, pinned.messages, cache)
    request = ModelRequest(
        system=live.system,
        messages=aligned,
        tools=live.tools,
        settings=live.settings,
        output_schema=live.output_schema,
    )
    return (hasher or ViewHasher()).hash(request), aligned


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def first_difference(
    live: ModelRequest, aligned: Sequence[TranscriptEntry], pinned: ModelRequest
) -> tuple[str, str, str]:
    """(where, recorded, re-run) of the first difference between two requests."""
    a, b = canonical_request(pinned), canonical_request(live)
    for key in ("system", "tools", "settings", "output_schema"):
        if a[key] != b[key]:
            return key, _short(a[key]), _short(b[key])
    for index, (rec, got) in enumerate(zip(pinned.messages, aligned, strict=False)):
        rd, gd = entry_to_dict(rec), entry_to_dict(got)
        if rd != gd:
            fields = [k for k in sorted(set(rd) | set(gd)) if rd.get(k) != gd.get(k)]
            label = f"entry {index + 1} ({rd.get('type')}) field {', '.join(fields)}"
            field = fields[0]
            return label, _short(rd.get(field)), _short(gd.get(field))
    n, m = len(pinned.messages), len(aligned)
    if n != m:
        extra = aligned[n] if m > n else pinned.messages[m]
        what = _short(entry_to_dict(extra))
        return (
            "number of entries",
            f"{n} entries" + (f" (next: {what})" if n > m else ""),
            f"{m} entries" + (f" (next: {what})" if m > n else ""),
        )
    return "hash", pinned.system and "(same content)", "(same content, different hash)"
