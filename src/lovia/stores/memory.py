"""In-memory store: both Session and Checkpoint, for tests and single-process use."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..transcript import TranscriptEntry
from .base import CheckpointRecord, RunInfo, RunSnapshot, check_version

__all__ = ["MemoryStore"]


class MemoryStore:
    """Keeps everything in dicts; safe for concurrent tasks of one event loop."""

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._runs: dict[str, RunInfo] = {}
        self._records: dict[str, list[CheckpointRecord]] = {}
        self._results: dict[str, dict[str, Any] | None] = {}
        self._leases: dict[str, tuple[str, float]] = {}
        self._sessions: dict[str, list[tuple[str, list[TranscriptEntry]]]] = {}
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._runs)} runs, {len(self._sessions)} sessions)"

    async def begin(self, info: RunInfo) -> None:
        self._runs.setdefault(info.run_id, replace(info))
        self._records.setdefault(info.run_id, [])

    async def append(self, run_id: str, records: Sequence[CheckpointRecord]) -> int:
        for r in records:
            check_version(r.version, f"checkpoint record of run {run_id}")
        self._records.setdefault(run_id, []).extend(records)
        return sum(len(r.data) for r in records)

    async def load(self, run_id: str) -> RunSnapshot | None:
        info = self._runs.get(run_id)
        if info is None:
            return None
        check_version(info.version, f"run {run_id}")
        return RunSnapshot(
            info=replace(info),
            records=list(self._records.get(run_id, [])),
            result=self._results.get(run_id),
        )

    async def finish(self, info: RunInfo, result: dict[str, Any] | None) -> None:
        self._runs[info.run_id] = replace(info)
        self._results[info.run_id] = result

    async def acquire(self, run_id: str, owner: str, ttl_s: float) -> bool:
        now = time.time()
        held = self._leases.get(run_id)
        if held is not None and held[0] != owner and held[1] > now:
            return False
        self._leases[run_id] = (owner, now + ttl_s)
        return True

    async def release(self, run_id: str, owner: str) -> None:
        held = self._leases.get(run_id)
        if held is not None and held[0] == owner:
            del self._leases[run_id]

    async def list_runs(
        self,
        *,
        session_id: str | None = None,
        agent: str | None = None,
        status: str | None = None,
        limit: int = 50,
    ) -> list[RunInfo]:
        rows = [
            replace(r)
            for r in self._runs.values()
            if (session_id is None or r.session_id == session_id)
            and (agent is None or r.agent == agent)
            and (status is None or r.status == status)
        ]
        rows.sort(key=lambda r: r.started_at, reverse=True)
        return rows[:limit]

    async def delete_run(self, run_id: str) -> None:
        self._runs.pop(run_id, None)
        self._records.pop(run_id, None)
        self._results.pop(run_id, None)

    async def prune(self, older_than_s: float) -> int:
        cutoff = time.time() - older_than_s
        old = [r.run_id for r in self._runs.values() if r.ended_at and r.ended_at < cutoff]
        for run_id in old:
            await self.delete_run(run_id)
        return len(old)

    async def load_session(self, session_id: str) -> list[TranscriptEntry]:
        out: list[TranscriptEntry] = []
        for _, entries in self._sessions.get(session_id, []):
            out.extend(entries)
        return out

    async def append_segment(
        self, session_id: str, run_id: str, entries: Sequence[TranscriptEntry]
    ) -> bool:
        segments = self._sessions.setdefault(session_id, [])
        if any(rid == run_id for rid, _ in segments):
            return False
        segments.append((run_id, list(entries)))
        return True

    async def aclose(self) -> None:
        return None
