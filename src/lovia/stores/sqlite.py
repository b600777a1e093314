"""SQLite store: the embedded default (stdlib ``sqlite3``, WAL mode).

URL forms:

- ``sqlite:///relative/path.db`` — relative to the working directory
- ``sqlite:////abs/path.db`` — absolute (four slashes)
- ``sqlite://:memory:`` (or ``sqlite:///:memory:``) — private to this store object

Where the work runs: each store owns a worker thread with its own connection, and
reads, pruning, deletes and large writes are jobs on that thread, so the event loop never
waits on disk for them. A small write (a checkpoint append, begin/finish, a lease, a
session segment: up to :attr:`SQLiteStore.inline_max_bytes` of payload) runs inline on
the calling thread, on a second connection: with WAL and ``synchronous=NORMAL`` its
commit does not sync, so it costs tens of microseconds, less than the hop to a thread
and back. That connection never waits: it has no busy timeout and never checkpoints the
WAL (the worker does, every few hundred inline commits). When another writer holds the
lock (this store's worker, another process, a stalled process), or the worker still has
jobs that were called first, the write goes to the worker, which waits its turn with
``timeout_s``. Either way the write, with its fence check, is one transaction, and the
call returns after its commit. A read that is one index lookup runs inline on the same
terms: a session's labels, and whether a run or a session exists (an unknown one is
answered at once; a known one is read on the worker).

Several processes can share one file: WAL lets readers run beside the writer, every
write is a short ``BEGIN IMMEDIATE`` transaction, and the worker's busy timeout makes
writers wait their turn instead of failing with "database is locked".

``read_only=True`` (what ``lovia runs/show/trace/replay`` use) opens the file with
SQLite's ``mode=ro``: nothing is created or changed, a missing file is a clear
"no lovia store" error and a file without lovia's tables is refused.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import unquote

from .._redact import redact_url
from ..errors import StoreError, UserError
from ..transcript import TranscriptEntry
from . import _sqlite_sql as sql
from ._codec import (
    RUN_COLUMNS,
    dump_json,
    encode_entries,
    encode_records,
    info_from_row,
    info_row,
    join_segments,
    run_filter,
)
from ._sqlite_exec import FALLBACK, Inline, Worker
from .base import (
    RESUMABLE_SQL,
    SCHEMA_VERSION,
    CheckpointRecord,
    RunEnd,
    RunInfo,
    RunSnapshot,
    Tombstone,
    prune_statuses,
)
from .session_labels import decode_labels, encode_labels, sqlite_session_labels
from .spend import sqlite_reserve, sqlite_settle, sqlite_spent

__all__ = ["SQLiteStore", "sqlite_path"]

T = TypeVar("T")

_EXTRA = RUN_COLUMNS.index("extra")


def sqlite_path(url: str) -> str:
    """The file path (or ``:memory:``) a ``sqlite://`` URL names."""
    scheme, sep, rest = url.partition("://")
    if scheme.lower() != "sqlite" or not sep or "?" in rest:
        raise UserError(
            f"not a SQLite store URL: {redact_url(url)!r}",
            hint="Use sqlite:///relative/path.db, sqlite:////absolute/path.db "
            "or sqlite://:memory: (no query string).",
        )
    path = unquote(rest[1:] if rest.startswith("/") else rest)
    if not path:
        raise UserError(f"SQLite store URL {url!r} names no file", hint="e.g. sqlite:///lovia.db")
    return path


def _close(worker: Worker, inline: Inline) -> None:
    inline.close()
    worker.stop()


class SQLiteStore:
    """Session and checkpoint store in one SQLite file (see the module docs)."""

    inline_max_bytes = 32 * 1024
    """Writes with up to this much payload run inline on the caller's thread when the
    file's write lock is free (see the module docs); larger ones, and all of them when
    this is negative, go to the worker thread."""

    def __init__(
        self,
        url: str = "sqlite:///.lovia/lovia.db",
        *,
        timeout_s: float = 30.0,
        read_only: bool = False,
    ) -> None:
        self.url = url
        self.path = sqlite_path(url)
        self.timeout_s = timeout_s
        """How long a write waits for another writer (process) before failing."""
        self.read_only = read_only
        """Opened with ``mode=ro``: reads only; the file and its tables must exist."""
        self._worker = Worker(self.path, timeout_s, read_only)
        self._inline = Inline(self._worker)
        self._counts: sql.Counts = {}
        """Each running run's record count as last written here (see ``sql.Counts``)."""
        self._closed = False
        weakref.finalize(self, _close, self._worker, self._inline)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    def _run(self, fn: Callable[..., T], *args: Any, write: bool = False) -> asyncio.Future[T]:
        """Queue ``fn(conn, *args)`` on the worker thread (``write``: in a transaction)."""
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        return self._worker.submit(fn, args, write)

    def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(conn, *args)`` read inline, or :data:`FALLBACK` (see the module docs)."""
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        return self._inline.read(fn, args)

    async def _write(self, fn: Callable[..., T], *args: Any, size: int = 0) -> T:
        """Commit ``fn(conn, *args)``: inline when small and the lock is free, else on
        the worker (see the module docs)."""
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        if size <= self.inline_max_bytes:
            value = self._inline.run(fn, args)
            if value is not FALLBACK:
                return value
        return await self._worker.submit(fn, args, True)

    # -- checkpointer -------------------------------------------------------------

    async def begin(self, info: RunInfo) -> None:
        """Create the run; a no-op when it already exists (resume)."""
        row = info_row(info)
        await self._write(sql.begin, row, size=len(row[_EXTRA]))

    async def append(
        self, run_id: str, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int:
        """Append records in order after the run's last one; return payload bytes."""
        rows, size = encode_records(run_id, records)
        if rows:
            await self._write(sql.append, run_id, rows, fence, self._counts, size=size)
        return size

    async def start_run(
        self, info: RunInfo, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int:
        """A new run's row and first records in one transaction; the records' bytes
        (see :func:`~lovia.stores.base.start_run`)."""
        row = info_row(info)
        rows, size = encode_records(info.run_id, records)
        counts = self._counts
        await self._write(sql.start, row, rows, fence, counts, size=size + len(row[_EXTRA]))
        return size

    async def load(self, run_id: str) -> RunSnapshot | None:
        """The run, its records in order and its result; None when unknown."""
        if self._read(sql.has_run, run_id) is False:
            return None
        return await self._run(sql.load, run_id)

    async def finish(
        self, info: RunInfo, result: dict[str, Any] | None, *, fence: int | None = None
    ) -> None:
        """Record the run's outcome and result (creates the run if it was never begun)."""
        row = info_row(info)
        data = None if result is None else dump_json(result, f"result of run {info.run_id}")
        size = len(row[_EXTRA]) + (0 if data is None else len(data))
        await self._write(sql.finish, row, data, fence, size=size)

    async def acquire(self, run_id: str, owner: str, ttl_s: float) -> int | None:
        """Grant a lease with the next fencing token; None while another owner's lease
        is unexpired or the run is completed."""
        return await self._write(sql.acquire, run_id, owner, ttl_s)

    async def renew(self, run_id: str, owner: str, fence: int, ttl_s: float) -> bool:
        """Extend the lease granted with ``fence``; False when a later grant replaced it."""
        query = "UPDATE leases SET expires_at = ? WHERE run_id = ? AND owner = ? AND token = ?"
        params = (time.time() + ttl_s, run_id, owner, fence)
        return await self._write(sql.exec_, query, params) > 0

    async def renew_many(self, leases: Sequence[tuple[str, str, int]], ttl_s: float) -> set[str]:
        """``renew`` for each ``(run_id, owner, fence)`` in one transaction; the run ids
        not renewed."""
        if not leases:
            return set()
        expires = time.time() + ttl_s
        return await self._write(sql.renew_many, leases, expires, size=64 * len(leases))

    async def cancel_requests(self, run_ids: Sequence[str]) -> dict[str, Any]:
        """The cancel requests on the rows of ``run_ids`` (run id -> the request)."""
        if not run_ids:
            return {}
        found = self._read(sql.cancel_requests, list(run_ids))
        if found is FALLBACK:
            found = await self._run(sql.cancel_requests, list(run_ids))
        return found

    async def lease_holder(self, run_id: str) -> str | None:
        """The owner of the unexpired lease on ``run_id``, if any."""
        return await self._run(sql.lease_holder, run_id)

    async def release(self, run_id: str, owner: str) -> None:
        """Free the lease if ``owner`` holds it (its token is kept)."""
        await self._write(sql.exec_, sql.RELEASE, (run_id, owner))

    async def end_run(self, end: RunEnd) -> int:
        """A run's last records, outcome, session segment and lease release in one
        transaction; the records' bytes (see :func:`~lovia.stores.base.end_run`)."""
        info = end.info
        row = info_row(info)
        data = None if end.result is None else dump_json(end.result, f"result of run {info.run_id}")
        rows, size = encode_records(info.run_id, end.records)
        segment = None
        text = ""
        if end.session_id is not None:
            text = encode_entries(end.session_id, end.entries)
            segment = (end.session_id, info.run_id, SCHEMA_VERSION, text, time.time())
        total = size + len(row[_EXTRA]) + len(data or "") + len(text)
        args = (row, data, end.fence, rows, segment, end.release, self._counts)
        await self._write(sql.end, *args, size=total)
        return size

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
        where, params = run_filter(
            lambda n: "?",
            top_level=top_level,
            labels=labels,
            label_sql=_label_sql,
            session_id=session_id,
            agent=agent,
            status=status,
            parent_run_id=parent_run_id,
        )
        query = f"SELECT {sql.COLS} FROM runs {where} ORDER BY started_at DESC, rowid DESC LIMIT ?"
        rows = await self._run(sql.fetch, query, (*params, limit))
        return [info_from_row(row) for row in rows]

    # -- spend ledger (spend limits: see lovia.stores.spend) ----------------------------

    async def reserve_spend(
        self, key: str, window_start: float, amount: float, limit: float
    ) -> float | None:
        return await self._write(sqlite_reserve, key, window_start, amount, limit)

    async def settle_spend(
        self, key: str, window_start: float, reserved: float, actual: float
    ) -> None:
        await self._write(sqlite_settle, key, window_start, reserved, actual)

    async def spent(self, key: str, window_start: float) -> float:
        return await self._run(sqlite_spent, key, window_start)

    async def find_run_by_trace(self, trace_id: str) -> RunInfo | None:
        """The newest run recorded with this trace id, if any."""
        query = f"SELECT {sql.COLS} FROM runs WHERE trace_id = ? ORDER BY started_at DESC LIMIT 1"
        rows = await self._run(sql.fetch, query, (trace_id,))
        return info_from_row(rows[0]) if rows else None

    async def delete_run(self, run_id: str) -> None:
        """Remove the run, its records and its lease (its session segment stays)."""
        await self._run(sql.delete, "run_id = ?", (run_id,), write=True)

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
        records, keeping the summary row); return count. Failed runs with a tool ledger
        are kept unless ``force``; a run deleted whole leaves a tombstone."""
        statuses = prune_statuses(status)
        where = (
            f"status IN ({', '.join('?' for _ in statuses)}) "
            "AND ended_at IS NOT NULL AND ended_at <= ?"
        )
        params: tuple[Any, ...] = (*statuses, time.time() - older_than_s)
        if run_id is not None:
            where, params = f"{where} AND run_id = ?", (*params, run_id)
        if not force:
            where += " AND " + RESUMABLE_SQL.format(records="records", runs="runs")
        if records_only:
            return await self._run(sql.drop_records, where, params, write=True)
        return await self._run(sql.prune_delete, where, params, write=True)

    async def tombstone(self, run_id: str) -> Tombstone | None:
        """What is left of ``run_id`` if ``prune`` deleted it (None otherwise)."""
        row = await self._run(sql.tombstone, run_id)
        return (
            None
            if row is None
            else Tombstone(run_id=row[0], status=row[1], ended_at=row[2], pruned_at=row[3])
        )

    # -- sessions -----------------------------------------------------------------

    async def load_session(self, session_id: str) -> list[TranscriptEntry]:
        """Every segment's entries, in the order the segments were written."""
        if self._read(sql.has_segments, session_id) is False:
            return []
        query = "SELECT version, entries FROM sessions WHERE session_id = ? ORDER BY seq"
        rows = await self._run(sql.fetch, query, (session_id,))
        return join_segments(session_id, rows)

    async def session_labels(
        self, session_id: str, record: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The session's labels; ``record`` becomes them when it has none."""
        if record:
            text = encode_labels(record)
            found = await self._write(sqlite_session_labels, session_id, text, time.time())
        else:
            found = self._read(sqlite_session_labels, session_id, None, 0.0)
            if found is FALLBACK:
                found = await self._run(sqlite_session_labels, session_id, None, 0.0)
        return decode_labels(session_id, found)

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
        params = (session_id, run_id, SCHEMA_VERSION, text, time.time())
        return await self._write(sql.segment, params, fence, size=len(text))

    async def aclose(self) -> None:
        """Close the connection and stop the worker thread; later calls fail."""
        if self._closed:
            return
        self._closed = True
        self._inline.close()
        await self._worker.close()


def _label_sql(key: str) -> tuple[str, str]:
    """A run's label ``key`` (checked: ``[a-z][a-z0-9_]*``) in its ``extra`` JSON."""
    return "json_extract(extra, {key}) = {value}", f'$.labels."{key}"'
