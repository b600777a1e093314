"""Loaded runs kept while they are unchanged, so a page does only its own work.

A view page rebuilds the one view it shows (and the one it is diffed against), not
every view of the run: rebuilding all of them is quadratic in the run's length (each
view holds the whole transcript so far). Loading, parsing and rebuilding run on worker
threads, so the server keeps answering (``/api/health``) while a big run loads.

A cached run is re-checked against the store at most every :data:`FRESH_S` seconds
(:data:`FRESH_DONE_S` for a completed run, which nothing can change but a prune);
when its records, status or end did not change, the parsed run is reused.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..replay import (
    ReplayedView,
    RunData,
    SpanRow,
    Turn,
    load_run,
    rebuild_view,
    require_views,
    run_from_snapshot,
    turns,
)
from ..stores.base import ReadOnlyStore, RunSnapshot
from ..stores.lifecycle import life_of
from ..transcript import TranscriptEntry
from ..view.record import stored_records

__all__ = ["FRESH_DONE_S", "FRESH_S", "Loaded", "RunCache", "off_loop"]

FRESH_S = 1.0
"""How long a loaded run that may still change is served before re-checking."""
FRESH_DONE_S = 30.0
"""The same for a completed run (only pruning or deleting changes it)."""
MAX_RUNS = 8
"""Loaded runs kept (least recently used dropped first)."""

T = TypeVar("T")


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a worker thread: CPU work never stalls the event loop."""
    return await asyncio.to_thread(fn, *args)


def _token(snapshot: RunSnapshot) -> tuple[Any, ...]:
    info = snapshot.info
    return (len(snapshot.records), info.status, info.ended_at, info.turns, info.extra)


@dataclass(slots=True, kw_only=True)
class Loaded:
    """One run as parsed once, and what pages derived from it (built when first asked)."""

    run: RunData
    token: tuple[Any, ...]
    checked_at: float
    _turns: list[Turn] | None = None
    _by_id: dict[str, TranscriptEntry] | None = None
    _views: dict[int, ReplayedView] = field(default_factory=dict[int, ReplayedView])
    _all_views: list[ReplayedView] | None = None
    spans: tuple[list[SpanRow], str] | None = None
    extra: dict[str, Any] = field(default_factory=dict[str, Any])
    """Other derived data pages keep here (keyed by what they are)."""

    def turns(self) -> list[Turn]:
        if self._turns is None:
            self._turns = turns(self.run)
        return self._turns

    def _by_turn(self) -> dict[int, list[int]]:
        found: dict[int, list[int]] | None = self.extra.get("views_by_turn")
        if found is None:
            found = {}
            for i, record in enumerate(stored_records(self.run.views)):
                found.setdefault(record.turn, []).append(i)
            self.extra["views_by_turn"] = found
        return found

    def view_turns(self) -> list[int]:
        return sorted(self._by_turn())

    def view_index(self, turn: int, attempt: int | None) -> int | None:
        """The index (in call order) of the last view of ``turn`` (of ``attempt``)."""
        stored = stored_records(self.run.views)
        found = [
            i
            for i in self._by_turn().get(turn, [])
            if attempt is None or stored[i].attempt == attempt
        ]
        return found[-1] if found else None

    def attempts(self, turn: int) -> list[int]:
        stored = stored_records(self.run.views)
        return [stored[i].attempt for i in self._by_turn().get(turn, [])]

    def view(self, index: int) -> ReplayedView:
        """The view at ``index``, rebuilt and hash-checked alone (cached)."""
        if self._all_views is not None:
            return self._all_views[index]
        found = self._views.get(index)
        if found is None:
            if self._by_id is None:
                self._by_id = {e.id: e for e in self.run.transcript}
            found = rebuild_view(self.run.views[index], self._by_id)
            self._views[index] = found
        return found

    def all_views(self) -> list[ReplayedView]:
        """Every view (only needed to explain a mismatch: which views did verify)."""
        if self._all_views is None:
            require_views(self.run)
            self._all_views = [self.view(i) for i in range(len(self.run.views))]
        return self._all_views


class RunCache:
    """Loaded runs by id (LRU), each re-checked against the store when stale."""

    def __init__(self, max_runs: int = MAX_RUNS) -> None:
        self.max_runs = max_runs
        self._runs: OrderedDict[str, Loaded] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, db: ReadOnlyStore, run_id: str) -> Loaded:
        """The run (``run_id`` may be a prefix or ``last``), parsed at most once per change."""
        lock = self._locks.setdefault(run_id, asyncio.Lock())
        async with lock:
            return await self._get(db, run_id)

    async def _get(self, db: ReadOnlyStore, run_id: str) -> Loaded:
        cached = self._runs.get(run_id)
        now = time.monotonic()
        if cached is not None:
            fresh = FRESH_DONE_S if cached.run.info.status == "completed" else FRESH_S
            if now - cached.checked_at < fresh:
                self._runs.move_to_end(run_id)
                return cached
        snapshot = await db.load(run_id)
        if snapshot is None:  # a prefix, ``last``, or no such run: the CLI's resolution
            run = await load_run(run_id, db)
            return self._keep(run_id, Loaded(run=run, token=(), checked_at=now))
        info = snapshot.info
        life = await life_of(db, info, snapshot)  # a holder may have died meanwhile
        if cached is not None and cached.token == _token(snapshot):
            cached.checked_at = now
            cached.run.life = life
            self._runs.move_to_end(run_id)
            return cached
        session = None if info.session_id is None else await db.load_session(info.session_id)
        run = await off_loop(run_from_snapshot, snapshot, session, life)
        return self._keep(run_id, Loaded(run=run, token=_token(snapshot), checked_at=now))

    def forget(self, run_id: str) -> None:
        """Drop a run this server just changed (approvals), so the next page reloads it."""
        self._runs.pop(run_id, None)

    def _keep(self, run_id: str, loaded: Loaded) -> Loaded:
        self._runs[run_id] = loaded
        self._runs.move_to_end(run_id)
        while len(self._runs) > self.max_runs:
            dropped, _ = self._runs.popitem(last=False)
            self._locks.pop(dropped, None)
        return loaded
