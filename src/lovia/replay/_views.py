"""Rebuild each model call's view from the transcript and its record; verify its hash."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import LoviaError
from ..model import ModelRequest
from ..transcript import TranscriptEntry, entry_from_dict, entry_to_dict
from ..view import record as view_record
from ..view.record import ViewHasher, ViewRecord
from ._load import RunData

__all__ = ["ReplayedView", "rebuild_request", "rebuild_view", "rebuild_views"]

HASH_ATTRIBUTE = "lovia.view.hash"
"""The span attribute (on ``chat`` spans) that carries the same view hash."""


@dataclass(slots=True, kw_only=True)
class ReplayedView:
    """One model call's view, rebuilt from stored data and checked against its hash."""

    turn: int
    attempt: int
    """1 for the first call of the turn; 2+ for retries after a context overflow."""
    agent: str
    model: str
    provider: str
    system: str
    messages: list[TranscriptEntry]
    """The view's entries in order (transcript entries, replacements, injected)."""
    tools: list[dict[str, Any]]
    settings: dict[str, Any]
    recorded_hash: str
    rebuilt_hash: str
    record: ViewRecord
    request: ModelRequest | None = None
    """The rebuilt request (None when the view could not be rebuilt)."""
    problems: list[str] = field(default_factory=list[str])
    """Why the view could not be rebuilt or why the hashes differ."""
    purpose: str = "main"
    """``main`` (the turn's call) or ``summary`` (a compaction summary made for it)."""
    summaries: list[ReplayedView] = field(default_factory=list["ReplayedView"])
    """The summary calls made while building this view, each rebuilt and verified."""

    @property
    def ok(self) -> bool:
        """True when the rebuilt view hashes to the recorded hash."""
        return bool(self.recorded_hash) and self.rebuilt_hash == self.recorded_hash

    @property
    def label(self) -> str:
        """``turn 3``, ``turn 3 (attempt 2)`` or ``turn 3 summary``."""
        extra = f" (attempt {self.attempt})" if self.attempt > 1 else ""
        kind = " summary" if self.purpose == "summary" else ""
        return f"turn {self.turn}{extra}{kind}"

    @property
    def injected(self) -> list[TranscriptEntry]:
        """Entries view injectors added to this view only (never persisted)."""
        return [entry_from_dict(e) for e in self.record.injected]

    @property
    def summary(self) -> str | None:
        return self.record.summary

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``lovia replay --format json``)."""
        return {
            "turn": self.turn,
            "attempt": self.attempt,
            "agent": self.agent,
            "model": self.model,
            "provider": self.provider,
            "ok": self.ok,
            "recorded_hash": self.recorded_hash,
            "rebuilt_hash": self.rebuilt_hash,
            "system": self.system,
            "tools": self.tools,
            "settings": self.settings,
            "output_schema": self.record.output_schema,
            "summary": self.record.summary,
            "replaced": sorted(self.record.replaced),
            "injected": len(self.record.injected),
            "messages": [entry_to_dict(e) for e in self.messages],
            "problems": self.problems,
            "purpose": self.purpose,
            "summaries": [s.to_dict() for s in self.summaries],
        }


def rebuild_request(
    record: ViewRecord, by_id: Mapping[str, TranscriptEntry]
) -> tuple[ModelRequest | None, list[str]]:
    """The exact request of a recorded (self-contained) model call, or None and why."""
    missing = [i for i in record.order if i not in record.replaced and i not in by_id]
    if missing:
        return None, [f"transcript entry {i} is missing from the stored run" for i in missing]
    try:
        return view_record.rebuild_request(record, by_id), []
    except LoviaError as exc:
        return None, [exc.message]


def rebuild_views(run: RunData) -> list[ReplayedView]:
    """Every view of the run, rebuilt and verified, in call order."""
    by_id = {e.id: e for e in run.transcript}
    hasher = ViewHasher()
    return [rebuild_view(record, by_id, hasher) for record in run.views]


def rebuild_view(
    record: ViewRecord,
    by_id: Mapping[str, TranscriptEntry],
    hasher: ViewHasher | None = None,
    purpose: str = "main",
) -> ReplayedView:
    """One view, rebuilt from the transcript (entries by id) and checked against its hash."""
    hasher = hasher or ViewHasher()
    request, problems = rebuild_request(record, by_id)
    rebuilt = hasher.hash(request) if request is not None else ""
    if request is not None and rebuilt != record.hash:
        problems.append("the rebuilt view does not hash to the recorded hash")
    return ReplayedView(
        turn=record.turn,
        attempt=record.attempt,
        agent=record.agent,
        model=record.model,
        provider=record.provider,
        system=record.system,
        messages=list(request.messages) if request is not None else [],
        tools=record.tools,
        settings=record.settings,
        recorded_hash=record.hash,
        rebuilt_hash=rebuilt,
        record=record,
        request=request,
        problems=problems,
        purpose=purpose,
        summaries=[_summary(data, by_id) for data in record.summary_views],
    )


def _summary(data: Mapping[str, Any], by_id: Mapping[str, TranscriptEntry]) -> ReplayedView:
    """A summary call's view (a self-contained record kept with the main one), verified."""
    try:
        record = ViewRecord.from_data(data)
    except (LoviaError, ValueError) as exc:
        bad = ViewRecord(hash=str(data.get("hash", "")))
        view = rebuild_view(bad, by_id, ViewHasher(), "summary")
        view.problems = [f"the summary call's view record does not load ({exc})"]
        view.rebuilt_hash = ""
        return view
    return rebuild_view(record, by_id, ViewHasher(), "summary")


def select(
    views: Sequence[ReplayedView], turn: int | None = None, attempt: int | None = None
) -> list[ReplayedView]:
    """The views of ``turn`` (all turns when None), optionally one ``attempt``."""
    return [
        v
        for v in views
        if (turn is None or v.turn == turn) and (attempt is None or v.attempt == attempt)
    ]
