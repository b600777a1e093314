"""In-memory store: both Session and Checkpoint, for tests and single-process use.

It behaves like the persistent stores in everything a caller can observe: payloads
are kept encoded (so a caller mutating what it appended or loaded changes nothing
stored, and what cannot be stored fails here too), ``append`` returns the same byte
counts, and the same versions are refused.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import RunNotFound
from ..transcript import TranscriptEntry
from ._codec import (
    EncodedRecord,
    decode_record,
    dump_json,
    encode_entries,
    encode_records,
    join_segments,
    load_result,
)
from .base import (
    LABELS_KEY,
    PRUNED_KEY,
    SCHEMA_VERSION,
    CheckpointRecord,
    RunEnd,
    RunInfo,
    RunSnapshot,
    Tombstone,
    cancel_mark,
    check_version,
    lease_lost,
    prune_statuses,
)
from .spend import MemorySpend

__all__ = ["MemoryStore"]


def _copy(info: RunInfo) -> RunInfo:
    return replace(info, extra=dict(info.extra))


class MemoryStore:
    """Keeps everything in dicts; safe for concurrent tasks of one event loop."""

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._runs: dict[str, RunInfo] = {}
        self._order: dict[str, int] = {}
        self._records: dict[str, list[EncodedRecord]] = {}
        self._results: dict[str, str | None] = {}
        self._leases: dict[str, tuple[str, float, int]] = {}
        """run_id -> (owner, expires_at, fencing token); kept after release."""
        self._sessions: dict[str, list[tuple[str, int, str]]] = {}
        self._tombstones: dict[str, Tombstone] = {}
        self._created = 0
        self._spend = MemorySpend()
        self._session_labels: dict[str, dict[str, str]] = {}

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._runs)} runs, {len(self._sessions)} sessions)"

    async def begin(self, info: RunInfo) -> None:
        """Create the run (no-op when it exists: resume)."""
        check_version(info.version, f"run {info.run_id}")
        if info.run_id not in self._runs:
            self._put(info)
            self._records[info.run_id] = []

    def _put(self, info: RunInfo) -> None:
        if info.run_id not in self._order:
            self._created += 1
            self._order[info.run_id] = self._created
        self._runs[info.run_id] = _copy(info)

    def _fence(self, run_id: str, fence: int | None) -> None:
        held = self._leases.get(run_id)
        if fence is not None and (held is None or held[2] != fence):
            raise lease_lost(run_id, fence)

    async def append(
        self, run_id: str, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int:
        """Append deltas in order; return payload bytes (as the SQL stores count them)."""
        rows, size = encode_records(run_id, records)
        if rows:
            self._fence(run_id, fence)
            if run_id not in self._runs:
                raise RunNotFound(f"no run {run_id!r} to append to", hint="Call begin() first.")
            self._records.setdefault(run_id, []).extend(rows)
        return size

    async def load(self, run_id: str) -> RunSnapshot | None:
        """The run, its records in order and its result; None when unknown."""
        info = self._runs.get(run_id)
        if info is None:
            return None
        check_version(info.version, f"run {run_id}")
        records = [
            decode_record(run_id, seq, version, kind, data)
            for seq, (kind, version, data) in enumerate(self._records.get(run_id, []), 1)
        ]
        result = self._results.get(run_id)
        return RunSnapshot(
            info=_copy(info),
            records=records,
            result=load_result(run_id, result),
        )

    async def finish(
        self, info: RunInfo, result: dict[str, Any] | None, *, fence: int | None = None
    ) -> None:
        """Mark the run completed / failed / paused with its result."""
        check_version(info.version, f"run {info.run_id}")
        data = None if result is None else dump_json(result, f"result of run {info.run_id}")
        self._fence(info.run_id, fence)
        self._set_outcome(info, data)

    def _set_outcome(self, info: RunInfo, data: str | None) -> None:
        self._put(info)
        self._records.setdefault(info.run_id, [])
        self._results[info.run_id] = data

    async def end_run(self, end: RunEnd) -> int:
        """A run's last records, outcome, session segment and lease release, all or
        nothing: everything is encoded and the fence checked before anything is written
        (as the SQL stores do it in one transaction); the records' bytes."""
        info, run_id = end.info, end.info.run_id
        check_version(info.version, f"run {run_id}")
        rows, size = encode_records(run_id, end.records)
        data = None if end.result is None else dump_json(end.result, f"result of run {run_id}")
        text = None if end.session_id is None else encode_entries(end.session_id, end.entries)
        self._fence(run_id, end.fence)
        if rows and run_id not in self._runs:
            raise RunNotFound(f"no run {run_id!r} to append to", hint="Call begin() first.")
        self._records.setdefault(run_id, []).extend(rows)
        self._set_outcome(info, data)
        if end.session_id is not None and text is not None:
            self._add_segment(end.session_id, run_id, text)
        if end.release is not None:
            self._free(run_id, end.release)
        return size

    async def acquire(self, run_id: str, owner: str, ttl_s: float) -> int | None:
        """Grant a lease with the next fencing token; None while another owner's lease
        is unexpired or the run is completed."""
        now = time.time()
        held = self._leases.get(run_id)
        run = self._runs.get(run_id)
        if run is not None and run.status == "completed":
            return None
        if held is not None and held[0] != owner and held[1] > now:
            return None
        token = 1 if held is None else held[2] + 1
        self._leases[run_id] = (owner, now + ttl_s, token)
        return token

    async def renew(self, run_id: str, owner: str, fence: int, ttl_s: float) -> bool:
        """Extend the lease granted with ``fence``; False when a later grant replaced it."""
        held = self._leases.get(run_id)
        if held is None or held[0] != owner or held[2] != fence:
            return False
        self._leases[run_id] = (owner, time.time() + ttl_s, fence)
        return True

    async def renew_many(self, leases: Sequence[tuple[str, str, int]], ttl_s: float) -> set[str]:
        """``renew`` for each ``(run_id, owner, fence)``; the run ids not renewed."""
        return {r for r, owner, fence in leases if not await self.renew(r, owner, fence, ttl_s)}

    async def cancel_requests(self, run_ids: Sequence[str]) -> dict[str, Any]:
        """The cancel requests on the rows of ``run_ids`` (run id -> the request)."""
        found: dict[str, Any] = {}
        for run_id in run_ids:
            info = self._runs.get(run_id)
            mark = None if info is None else cancel_mark(info)
            if mark is not None:
                found[run_id] = copy.deepcopy(mark)
        return found

    async def lease_holder(self, run_id: str) -> str | None:
        """The owner of the unexpired lease on ``run_id``, if any."""
        held = self._leases.get(run_id)
        return held[0] if held is not None and held[1] > time.time() else None

    async def release(self, run_id: str, owner: str) -> None:
        """Free the lease if ``owner`` holds it (its token is kept)."""
        self._free(run_id, owner)

    def _free(self, run_id: str, owner: str) -> None:
        held = self._leases.get(run_id)
        if held is not None and held[0] == owner:
            self._leases[run_id] = ("", 0.0, held[2])

    async def list_runs(
        self,
        *,
        session_id: str | None = None,
        agent: str | None = None,
        status: str | None = None,
        limit: int = 50,
        parent_run_id: str | None = None,
        top_level: bool = False,
        labels: Mapping[str, str] | None = None,
    ) -> list[RunInfo]:
        """Runs matching every given filter, newest first."""
        wanted = dict(labels or {}).items()
        rows = [
            r
            for r in self._runs.values()
            if (session_id is None or r.session_id == session_id)
            and (agent is None or r.agent == agent)
            and (status is None or r.status == status)
            and (parent_run_id is None or r.parent_run_id == parent_run_id)
            and not (top_level and r.parent_run_id is not None)
            and wanted <= dict(r.extra.get(LABELS_KEY) or {}).items()
        ]
        rows.sort(key=lambda r: (r.started_at, self._order[r.run_id]), reverse=True)
        for r in rows[:limit]:
            check_version(r.version, f"run {r.run_id}")
        return [_copy(r) for r in rows[:limit]]

    # -- spend ledger (spend limits: see lovia.stores.spend) ----------------------------

    async def reserve_spend(
        self, key: str, window_start: float, amount: float, limit: float
    ) -> float | None:
        return self._spend.reserve(key, window_start, amount, limit)

    async def settle_spend(
        self, key: str, window_start: float, reserved: float, actual: float
    ) -> None:
        self._spend.settle(key, window_start, reserved, actual)

    async def spent(self, key: str, window_start: float) -> float:
        return self._spend.spent(key, window_start)

    async def find_run_by_trace(self, trace_id: str) -> RunInfo | None:
        """The newest run recorded with this trace id, if any."""
        found = [r for r in self._runs.values() if r.trace_id == trace_id]
        if not found:
            return None
        newest = max(found, key=lambda r: (r.started_at, self._order[r.run_id]))
        check_version(newest.version, f"run {newest.run_id}")
        return _copy(newest)

    async def delete_run(self, run_id: str) -> None:
        """Remove the run, its records and its lease (its session segment stays)."""
        self._runs.pop(run_id, None)
        self._order.pop(run_id, None)
        self._records.pop(run_id, None)
        self._results.pop(run_id, None)
        self._leases.pop(run_id, None)

    async def prune(
        self,
        older_than_s: float,
        *,
        status: str | None = None,
        run_id: str | None = None,
        records_only: bool = False,
        force: bool = False,
    ) -> int:
        """Delete finished runs that ended over ``older_than_s`` ago (or only their
        records); return count. Failed runs with a tool ledger are kept unless ``force``;
        a run deleted whole leaves a tombstone."""
        statuses, cutoff = prune_statuses(status), time.time() - older_than_s
        old = [
            r
            for r in self._runs.values()
            if r.status in statuses
            and r.ended_at is not None
            and r.ended_at <= cutoff
            and (run_id is None or r.run_id == run_id)
            and not (records_only and PRUNED_KEY in r.extra)
            and (force or not self._resumable(r))
        ]
        now = time.time()
        for r in old:
            if records_only:
                self._records.pop(r.run_id, None)
                self._leases.pop(r.run_id, None)
                r.extra = {**r.extra, PRUNED_KEY: now}
            else:
                await self.delete_run(r.run_id)
                self._tombstones[r.run_id] = Tombstone(
                    run_id=r.run_id, status=r.status, ended_at=r.ended_at, pruned_at=now
                )
        return len(old)

    def _resumable(self, info: RunInfo) -> bool:
        """A failed or cancelled run with a tool ledger (see ``Store.prune``)."""
        records = self._records.get(info.run_id, ())
        return info.status in ("failed", "cancelled") and any(
            kind == "ledger" for kind, _, _ in records
        )

    async def tombstone(self, run_id: str) -> Tombstone | None:
        """What is left of ``run_id`` if ``prune`` deleted it (None otherwise)."""
        return self._tombstones.get(run_id)

    async def load_session(self, session_id: str) -> list[TranscriptEntry]:
        """Every segment's entries, in the order the segments were written."""
        segments = self._sessions.get(session_id, [])
        return join_segments(session_id, [(version, text) for _, version, text in segments])

    async def session_labels(
        self, session_id: str, record: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The session's labels; ``record`` becomes them when it has none."""
        if record and session_id not in self._session_labels:
            self._session_labels[session_id] = dict(record)
        return dict(self._session_labels.get(session_id, {}))

    async def append_segment(
        self,
        session_id: str,
        run_id: str,
        entries: Sequence[TranscriptEntry],
        *,
        fence: int | None = None,
    ) -> bool:
        """Write the run's segment once; False (nothing written) when it exists."""
        text = encode_entries(session_id, entries)
        self._fence(run_id, fence)
        return self._add_segment(session_id, run_id, text)

    def _add_segment(self, session_id: str, run_id: str, text: str) -> bool:
        segments = self._sessions.setdefault(session_id, [])
        if any(rid == run_id for rid, _, _ in segments):
            return False
        segments.append((run_id, SCHEMA_VERSION, text))
        return True

    async def aclose(self) -> None:
        """Nothing to release."""
