"""What changed between two views, and what differs in a view that fails to verify."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from ..transcript import TranscriptEntry, entry_from_dict, entry_to_dict
from ._load import RunData
from ._views import ReplayedView

__all__ = ["ViewDiff", "diff_views", "explain_mismatch"]


@dataclass(slots=True, kw_only=True)
class ViewDiff:
    """How view ``b`` differs from view ``a`` (usually an earlier turn's)."""

    a: str
    b: str
    added: list[str] = field(default_factory=list[str])
    """Transcript entry ids shown in full in ``b`` and not shown in ``a``."""
    evicted: list[str] = field(default_factory=list[str])
    """Entries shown in full in ``a`` that ``b`` shows as a stub (replaced)."""
    summarized: list[str] = field(default_factory=list[str])
    """Entries of ``a`` that ``b`` dropped in favour of a summary."""
    dropped: list[str] = field(default_factory=list[str])
    """Entries of ``a`` that ``b`` dropped without a summary (e.g. cleared, handoff filter)."""
    restored: list[str] = field(default_factory=list[str])
    """Entries replaced in ``a`` and shown in full again in ``b``."""
    summary: str | None = None
    """``b``'s summary text when it differs from ``a``'s."""
    injected_added: list[str] = field(default_factory=list[str])
    """Injected reminder texts in ``b`` and not in ``a``."""
    injected_removed: list[str] = field(default_factory=list[str])
    injected_kept: list[str] = field(default_factory=list[str])
    system: tuple[str, str] | None = None
    """``(a, b)`` system prompts when they differ."""
    tools_added: list[str] = field(default_factory=list[str])
    tools_removed: list[str] = field(default_factory=list[str])
    tools_changed: list[str] = field(default_factory=list[str])
    settings: tuple[dict[str, Any], dict[str, Any]] | None = None
    agent: tuple[str, str] | None = None

    @property
    def empty(self) -> bool:
        """True when nothing but the reminders' ids changed."""
        return not any(
            (
                self.added,
                self.evicted,
                self.summarized,
                self.dropped,
                self.restored,
                self.summary,
                self.injected_added,
                self.injected_removed,
                self.system,
                self.tools_added,
                self.tools_removed,
                self.tools_changed,
                self.settings,
                self.agent,
            )
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            out[f.name] = getattr(self, f.name)
        return out


def _full_ids(view: ReplayedView) -> list[str]:
    return [i for i in view.record.order if i not in view.record.replaced]


def _replaced_ids(view: ReplayedView) -> set[str]:
    return {i for i in view.record.order if i in view.record.replaced}


def _injected_texts(view: ReplayedView) -> list[str]:
    return [entry_text(entry_from_dict(e)) for e in view.record.injected]


def diff_views(a: ReplayedView, b: ReplayedView) -> ViewDiff:
    """Added / evicted / summarized entries, reminders, system prompt and tool changes."""
    out = ViewDiff(a=a.label, b=b.label)
    full_a, full_b = _full_ids(a), set(_full_ids(b))
    stub_a, stub_b = _replaced_ids(a), _replaced_ids(b)
    seen_a = set(full_a) | stub_a
    out.added = [i for i in _full_ids(b) if i not in seen_a]
    out.evicted = [i for i in full_a if i in stub_b]
    out.restored = [i for i in stub_a if i in full_b]
    gone = [i for i in full_a if i not in full_b and i not in stub_b]
    if b.record.summary is not None and b.record.summary != a.record.summary:
        out.summarized, out.summary = gone, b.record.summary
    else:
        out.dropped = gone
    texts_a, texts_b = _injected_texts(a), _injected_texts(b)
    out.injected_added = [t for t in texts_b if t not in texts_a]
    out.injected_removed = [t for t in texts_a if t not in texts_b]
    out.injected_kept = [t for t in texts_b if t in texts_a]
    if a.system != b.system:
        out.system = (a.system, b.system)
    _diff_tools(out, a.tools, b.tools)
    if a.settings != b.settings:
        out.settings = (a.settings, b.settings)
    if a.agent != b.agent:
        out.agent = (a.agent, b.agent)
    return out


def _diff_tools(out: ViewDiff, a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> None:
    tools_a = {str(t["name"]): t for t in a}
    tools_b = {str(t["name"]): t for t in b}
    out.tools_added = [n for n in tools_b if n not in tools_a]
    out.tools_removed = [n for n in tools_a if n not in tools_b]
    out.tools_changed = [n for n in tools_b if n in tools_a and tools_a[n] != tools_b[n]]


def entry_text(entry: TranscriptEntry) -> str:
    """The human-readable payload of an entry (one line per entry in listings)."""
    if entry.type in ("system", "input"):
        return str(getattr(entry, "content", ""))
    if entry.type in ("text", "reasoning"):
        return str(getattr(entry, "text", ""))
    if entry.type == "tool_call":
        return f"{getattr(entry, 'name', '')}({getattr(entry, 'arguments', '')})"
    if entry.type == "tool_result":
        return str(getattr(entry, "content", ""))
    return f"{getattr(entry, 'from_agent', '')} -> {getattr(entry, 'to_agent', '')}"


def explain_mismatch(
    view: ReplayedView, run: RunData, verified: Sequence[ReplayedView]
) -> list[str]:
    """Lines saying what differs in a view whose rebuilt hash is not the recorded one.

    The record stores entry ids, not their bytes, so the culprit is found by evidence:
    a second copy of the entry (the session segment) that differs, and the entries this
    view shares with no view that did verify.
    """
    lines = list(view.problems)
    ours = {e.id: e for e in run.entries}
    for entry_id in view.record.order:
        stored, copy = ours.get(entry_id), run.session_copies.get(entry_id)
        if stored is not None and copy is not None and stored != copy:
            lines.append(
                f"entry {entry_id} ({stored.type}, turn {stored.turn}) differs "
                "between the checkpoint and the session segment:"
            )
            lines.extend(_field_diff(entry_to_dict(copy), entry_to_dict(stored)))
    good = {i for v in verified if v.ok for i in v.record.order}
    suspects = [i for i in _full_ids(view) if i not in good]
    if good and suspects:
        lines.append("entries in this view and in no view that verified:")
        lines.extend(
            f"  {i}: {_short(ours[i]) if i in ours else '(session history)'}" for i in suspects
        )
    if not view.record.replaced and view.rebuilt_hash and not good:
        lines.append(
            "no other view of this run verifies: the stored transcript or this "
            "record was changed, or it was written by a different lovia version"
        )
    return lines


def _field_diff(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            lines.append(f"  - {key}: {_json(before.get(key))}   (session)")
            lines.append(f"  + {key}: {_json(after.get(key))}   (checkpoint)")
    return lines


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _short(entry: TranscriptEntry, width: int = 70) -> str:
    text = " ".join(entry_text(entry).split())
    text = text if len(text) <= width else text[: width - 1] + "…"
    return f"{entry.type} (turn {entry.turn}) {text}"
