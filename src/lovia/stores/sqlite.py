"""SQLite store: the embedded default (stdlib ``sqlite3``, WAL mode, off the event loop).

URL forms:

- ``sqlite:///relative/path.db`` — relative to the working directory
- ``sqlite:////abs/path.db`` — absolute (four slashes)
- ``sqlite://:memory:`` (or ``sqlite:///:memory:``) — private to this store object

Threading: each store owns one connection and one worker thread; every call is a job
on that thread (a single-worker executor), so the event loop never blocks on disk and
the connection is never used by two threads at once. Several processes can share one
file: WAL lets readers run beside the writer, every write is a short
``BEGIN IMMEDIATE`` transaction, and a busy timeout makes writers wait their turn
instead of failing with "database is locked".

``read_only=True`` (what ``lovia runs/show/trace/replay`` use) opens the file with
SQLite's ``mode=ro``: nothing is created or changed, a missing file is a clear
"no lovia store" error and a file without lovia's tables is refused.
"""

from __future__ import annotations

import asyncio
import os
import queue
import sqlite3
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

from ..errors import LoviaError, RunNotFound, StoreError, UserError
from ..transcript import TranscriptEntry
from ._codec import (
    RUN_COLUMNS,
    decode_record,
    dump_json,
    encode_entries,
    encode_records,
    info_from_row,
    info_row,
    join_segments,
    load_result,
    run_filter,
)
from .base import (
    PRUNED_KEY,
    SCHEMA_VERSION,
    CheckpointRecord,
    RunInfo,
    RunSnapshot,
    check_version,
    lease_lost,
    prune_statuses,
)

__all__ = ["SQLiteStore", "sqlite_path"]

T = TypeVar("T")

_COLS = ", ".join(RUN_COLUMNS)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, agent TEXT NOT NULL, session_id TEXT,
    status TEXT NOT NULL, finish_reason TEXT, error_type TEXT,
    turns INTEGER NOT NULL DEFAULT 0, input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0, cost_usd REAL NOT NULL DEFAULT 0,
    started_at REAL NOT NULL, ended_at REAL, trace_id TEXT, span_id TEXT,
    history_len INTEGER NOT NULL DEFAULT 0, version INTEGER NOT NULL,
    extra TEXT NOT NULL DEFAULT '{}', result TEXT,
    n_records INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_started ON runs (started_at);
CREATE INDEX IF NOT EXISTS runs_session ON runs (session_id, started_at);
CREATE INDEX IF NOT EXISTS runs_trace ON runs (trace_id);
CREATE INDEX IF NOT EXISTS runs_ended ON runs (ended_at);
CREATE TABLE IF NOT EXISTS records (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, version INTEGER NOT NULL,
    kind TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS leases (
    run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    seq INTEGER PRIMARY KEY, session_id TEXT NOT NULL, run_id TEXT NOT NULL,
    version INTEGER NOT NULL, entries TEXT NOT NULL, created_at REAL NOT NULL,
    UNIQUE (session_id, run_id)
);
"""


def sqlite_path(url: str) -> str:
    """The file path (or ``:memory:``) a ``sqlite://`` URL names."""
    scheme, sep, rest = url.partition("://")
    if scheme.lower() != "sqlite" or not sep or "?" in rest:
        raise UserError(
            f"not a SQLite store URL: {url!r}",
            hint="Use sqlite:///relative/path.db, sqlite:////absolute/path.db "
            "or sqlite://:memory: (no query string).",
        )
    path = unquote(rest[1:] if rest.startswith("/") else rest)
    if not path:
        raise UserError(f"SQLite store URL {url!r} names no file", hint="e.g. sqlite:///lovia.db")
    return path


class SQLiteStore:
    """Session and checkpoint store in one SQLite file (see the module docs)."""

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
        self._worker = _Worker(self.path, timeout_s, read_only)
        self._closed = False
        weakref.finalize(self, self._worker.stop)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"

    def _run(self, fn: Callable[..., T], *args: Any, write: bool = False) -> asyncio.Future[T]:
        """Queue ``fn(conn, *args)`` on the worker thread (``write``: in a transaction)."""
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        return self._worker.submit(fn, args, write)

    # -- checkpointer -------------------------------------------------------------

    async def begin(self, info: RunInfo) -> None:
        """Create the run; a no-op when it already exists (resume)."""
        await self._run(_begin, info_row(info), write=True)

    async def append(
        self, run_id: str, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int:
        """Append records in order after the run's last one; return payload bytes."""
        rows, size = encode_records(run_id, records)
        if rows:
            await self._run(_append, run_id, rows, fence, write=True)
        return size

    async def load(self, run_id: str) -> RunSnapshot | None:
        """The run, its records in order and its result; None when unknown."""
        return await self._run(_load, run_id)

    async def finish(
        self, info: RunInfo, result: dict[str, Any] | None, *, fence: int | None = None
    ) -> None:
        """Record the run's outcome and result (creates the run if it was never begun)."""
        row = info_row(info)
        data = None if result is None else dump_json(result, f"result of run {info.run_id}")
        await self._run(_finish, row, data, fence, write=True)

    async def acquire(self, run_id: str, owner: str, ttl_s: float) -> int | None:
        """Grant a lease with the next fencing token; None while another owner's lease
        is unexpired or the run is completed."""
        return await self._run(_acquire, run_id, owner, ttl_s, write=True)

    async def renew(self, run_id: str, owner: str, fence: int, ttl_s: float) -> bool:
        """Extend the lease granted with ``fence``; False when a later grant replaced it."""
        sql = "UPDATE leases SET expires_at = ? WHERE run_id = ? AND owner = ? AND token = ?"
        params = (time.time() + ttl_s, run_id, owner, fence)
        return await self._run(_exec, sql, params, write=True) > 0

    async def lease_holder(self, run_id: str) -> str | None:
        """The owner of the unexpired lease on ``run_id``, if any."""
        return await self._run(_lease_holder, run_id)

    async def release(self, run_id: str, owner: str) -> None:
        """Free the lease if ``owner`` holds it (its token is kept)."""
        sql = "UPDATE leases SET owner = '', expires_at = 0 WHERE run_id = ? AND owner = ?"
        await self._run(_exec, sql, (run_id, owner), write=True)

    async def list_runs(
        self,
        *,
        session_id: str | None = None,
        agent: str | None = None,
        status: str | None = None,
        limit: int = 50,
        parent_run_id: str | None = None,
        top_level: bool = False,
    ) -> list[RunInfo]:
        """Runs matching every given filter, newest first."""
        where, params = run_filter(
            lambda n: "?",
            top_level=top_level,
            session_id=session_id,
            agent=agent,
            status=status,
            parent_run_id=parent_run_id,
        )
        sql = f"SELECT {_COLS} FROM runs {where} ORDER BY started_at DESC, rowid DESC LIMIT ?"
        rows = await self._run(_fetch, sql, (*params, limit))
        return [info_from_row(row) for row in rows]

    async def find_run_by_trace(self, trace_id: str) -> RunInfo | None:
        """The newest run recorded with this trace id, if any."""
        sql = f"SELECT {_COLS} FROM runs WHERE trace_id = ? ORDER BY started_at DESC LIMIT 1"
        rows = await self._run(_fetch, sql, (trace_id,))
        return info_from_row(rows[0]) if rows else None

    async def delete_run(self, run_id: str) -> None:
        """Remove the run, its records and its lease (its session segment stays)."""
        await self._run(_delete, "run_id = ?", (run_id,), write=True)

    async def prune(
        self,
        older_than_s: float,
        *,
        status: str | None = None,
        run_id: str | None = None,
        records_only: bool = False,
    ) -> int:
        """Delete finished runs that ended over ``older_than_s`` ago (or only their
        records, keeping the summary row); return count."""
        statuses = prune_statuses(status)
        where = (
            f"status IN ({', '.join('?' for _ in statuses)}) "
            "AND ended_at IS NOT NULL AND ended_at <= ?"
        )
        params: tuple[Any, ...] = (*statuses, time.time() - older_than_s)
        if run_id is not None:
            where, params = f"{where} AND run_id = ?", (*params, run_id)
        if records_only:
            return await self._run(_drop_records, where, params, write=True)
        return await self._run(_delete, where, params, write=True)

    # -- sessions -----------------------------------------------------------------

    async def load_session(self, session_id: str) -> list[TranscriptEntry]:
        """Every segment's entries, in the order the segments were written."""
        sql = "SELECT version, entries FROM sessions WHERE session_id = ? ORDER BY seq"
        rows = await self._run(_fetch, sql, (session_id,))
        return join_segments(session_id, rows)

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
        return await self._run(_segment, params, fence, write=True)

    async def aclose(self) -> None:
        """Close the connection and stop the worker thread; later calls fail."""
        if self._closed:
            return
        self._closed = True
        await self._worker.close()


# -- the worker thread ---------------------------------------------------------------


class _Job:
    """One queued call: ``fn(conn, *args)``, settled on ``future``'s loop."""

    __slots__ = ("args", "fn", "future", "loop", "path", "write")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
        fn: Callable[..., Any] | None,
        args: tuple[Any, ...],
        write: bool,
        path: str,
    ) -> None:
        self.loop = loop
        self.future = future
        self.fn = fn
        self.args = args
        self.write = write
        self.path = path

    def settle(self, ok: bool, value: Any) -> None:
        """Hand the outcome back to the event loop (thread-safe)."""
        if isinstance(value, sqlite3.Error):
            value = _store_error(value, self.path)
        try:
            self.loop.call_soon_threadsafe(_settle, self.future, ok, value)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


_DAMAGED = frozenset({"SQLITE_NOTADB", "SQLITE_CORRUPT"})
_BUSY = frozenset({"SQLITE_BUSY", "SQLITE_LOCKED"})


def _store_error(exc: sqlite3.Error, path: str) -> StoreError:
    """A StoreError whose hint fits what SQLite reported (by its error code)."""
    code = getattr(exc, "sqlite_errorname", "")
    if code.startswith(tuple(_DAMAGED)):
        error = StoreError(
            f"the SQLite store {path} is damaged or is not a database: {exc}",
            hint="Point the store at another file, or restore this one from a backup "
            f"(`sqlite3 {path} .recover` may salvage what is left).",
        )
    elif code.startswith(tuple(_BUSY)):
        error = StoreError(
            f"SQLite store {path} is busy: {exc}",
            hint="Another process holds a long write; raise timeout_s or find that process.",
        )
    else:
        error = StoreError(
            f"SQLite store {path} failed: {exc}",
            hint="Check that the file and its folder are readable/writable and the disk has space.",
        )
    error.__cause__ = exc
    return error


class _Worker:
    """A thread that owns one connection and runs queued jobs in order.

    Consecutive write jobs are group-committed: one ``BEGIN IMMEDIATE`` ... ``COMMIT``
    holds up to :attr:`max_batch` of them, each in its own savepoint so that one failing
    job rolls back alone. A caller's future resolves only after its commit.
    """

    max_batch = 256

    def __init__(self, path: str, timeout_s: float, read_only: bool = False) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self.read_only = read_only
        self._conn: sqlite3.Connection | None = None
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._main, name="lovia-sqlite", daemon=True)
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def submit(self, fn: Callable[..., T], args: tuple[Any, ...], write: bool) -> asyncio.Future[T]:
        """Queue a job; the returned future resolves on the calling loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._start()
        self._queue.put(_Job(loop, future, fn, args, write, self.path))
        return future

    async def close(self) -> None:
        """Close the connection after every queued job and end the thread."""
        if not self._thread.is_alive():
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._queue.put(_Job(loop, future, None, (), False, self.path))
        await future

    def stop(self) -> None:
        """Ask the thread to exit (from a finalizer: no loop needed)."""
        self._queue.put(None)

    def _start(self) -> None:
        if self._pid != os.getpid():  # forked: the thread and connection stayed behind
            self._pid = os.getpid()
            self._conn = None
            self._queue = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._main, name="lovia-sqlite", daemon=True)
        if self._thread.ident is None:
            with self._lock:
                if self._thread.ident is None:
                    self._thread.start()

    def _main(self) -> None:
        backlog: deque[_Job | None] = deque()
        while True:
            job = backlog.popleft() if backlog else self._queue.get()
            if job is None or job.fn is None:
                self._shutdown(job)
                return
            if not job.write:
                self._run_read(job)
                continue
            batch = [job]
            while len(batch) < self.max_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None or not nxt.write:
                    backlog.append(nxt)
                    break
                batch.append(nxt)
            self._run_writes(batch)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = _connect(self.path, self.timeout_s, self.read_only)
        return self._conn

    def _run_read(self, job: _Job) -> None:
        try:
            assert job.fn is not None
            job.settle(True, job.fn(self._connection(), *job.args))
        except Exception as exc:
            job.settle(False, exc)

    def _run_writes(self, batch: list[_Job]) -> None:
        outcomes: list[tuple[bool, Any]] = []
        try:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                outcomes = _apply(conn, batch)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except Exception as exc:
            outcomes = [(False, exc)] * len(batch)
        for job, (ok, value) in zip(batch, outcomes, strict=True):
            job.settle(ok, value)

    def _shutdown(self, job: _Job | None) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None
        if job is not None:
            job.settle(True, None)


def _apply(conn: sqlite3.Connection, batch: list[_Job]) -> list[tuple[bool, Any]]:
    """Run write jobs inside an open transaction; one failure rolls back only its job."""
    if len(batch) == 1:
        fn = batch[0].fn
        assert fn is not None
        return [(True, fn(conn, *batch[0].args))]
    outcomes: list[tuple[bool, Any]] = []
    for job in batch:
        assert job.fn is not None
        conn.execute("SAVEPOINT job")
        try:
            outcomes.append((True, job.fn(conn, *job.args)))
        except (sqlite3.IntegrityError, LoviaError) as exc:
            conn.execute("ROLLBACK TO job")
            outcomes.append((False, exc))
        conn.execute("RELEASE job")
    return outcomes


# -- statements (all run on the worker thread) ------------------------------------------


def _connect(path: str, timeout_s: float, read_only: bool = False) -> sqlite3.Connection:
    """Open ``path``, switch to WAL and create the schema (first use, worker thread).

    Read-only: open with ``mode=ro`` and only check that lovia's tables are there.
    """
    if read_only:
        return _connect_read_only(path, timeout_s)
    if path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=timeout_s, isolation_level=None, check_same_thread=False)
    try:
        _init(conn, path, timeout_s)
    except BaseException:
        conn.close()
        raise
    return conn


def _connect_read_only(path: str, timeout_s: float) -> sqlite3.Connection:
    file = Path(path)
    if path == ":memory:" or not file.is_file():
        raise StoreError(
            f"no lovia store at {path}",
            hint="Check the path (--store URL or $LOVIA_STORE, e.g. sqlite:///path/lovia.db); "
            "a store is created when an agent runs with checkpointer=... .",
        )
    uri = f"{file.resolve().as_uri()}?mode=ro"
    conn = sqlite3.connect(
        uri, uri=True, timeout=timeout_s, isolation_level=None, check_same_thread=False
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
        _check_lovia_tables(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _check_lovia_tables(conn: sqlite3.Connection, path: str) -> None:
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    found = None
    if {"meta", "runs"} <= tables:
        found = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if found is None:
        raise StoreError(
            f"{path} is not a lovia store (it has no lovia tables)",
            hint="Check the --store URL / $LOVIA_STORE; lovia opened it read-only and "
            "changed nothing.",
        )
    check_version(int(found[0]), "this SQLite store")


def _init(conn: sqlite3.Connection, path: str, timeout_s: float) -> None:
    """Pragmas, schema and the schema-version check; retried while another process inits."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            if path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                _create_schema(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _create_schema(conn: sqlite3.Connection) -> None:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if row is None:
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
    found = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if found is None:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )
    else:
        check_version(int(found[0]), "this SQLite store")
    _add_lease_tokens(conn)
    _add_parent_link(conn)


# -- migrations (in place; each is idempotent and runs inside the init transaction) ----


def _add_lease_tokens(conn: sqlite3.Connection) -> None:
    """Fencing: each lease row keeps its run's last fencing token."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(leases)")}
    if "token" not in columns:
        conn.execute("ALTER TABLE leases ADD COLUMN token INTEGER NOT NULL DEFAULT 0")


def _add_parent_link(conn: sqlite3.Connection) -> None:
    """Agents as tools: the parent → child run link, on stores made without it."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    for name in ("parent_run_id", "parent_call_id"):
        if name not in columns:
            conn.execute(f"ALTER TABLE runs ADD COLUMN {name} TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS runs_parent ON runs (parent_run_id)")


def _exec(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> int:
    return conn.execute(sql, params).rowcount


def _fetch(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[Any]:
    return conn.execute(sql, params).fetchall()


def _begin(conn: sqlite3.Connection, row: tuple[Any, ...]) -> None:
    marks = ", ".join("?" * len(row))
    conn.execute(f"INSERT INTO runs ({_COLS}) VALUES ({marks}) ON CONFLICT DO NOTHING", row)


def _check_fence(conn: sqlite3.Connection, run_id: str, fence: int | None) -> None:
    """Raise LeaseLost unless ``fence`` is the run's current lease token (None: no check)."""
    if fence is None:
        return
    row = conn.execute("SELECT token FROM leases WHERE run_id = ?", (run_id,)).fetchone()
    if row is None or row[0] != fence:
        raise lease_lost(run_id, fence)


def _append(
    conn: sqlite3.Connection, run_id: str, rows: list[tuple[str, int, str]], fence: int | None
) -> None:
    _check_fence(conn, run_id, fence)
    found = conn.execute("SELECT n_records FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if found is None:
        raise RunNotFound(f"no run {run_id!r} to append to", hint="Call begin() first.")
    start: int = found[0]
    conn.execute("UPDATE runs SET n_records = ? WHERE run_id = ?", (start + len(rows), run_id))
    conn.executemany(
        "INSERT INTO records (run_id, seq, kind, version, data) VALUES (?, ?, ?, ?, ?)",
        [(run_id, start + i, *row) for i, row in enumerate(rows, 1)],
    )


def _load(conn: sqlite3.Connection, run_id: str) -> RunSnapshot | None:
    conn.execute("BEGIN")
    try:
        run = conn.execute(
            f"SELECT {_COLS}, result FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        if run is None:
            return None
        rows = conn.execute(
            "SELECT seq, version, kind, data FROM records WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
    finally:
        conn.execute("COMMIT")
    info = info_from_row(run)
    records = [decode_record(run_id, *row) for row in rows]
    result = run[len(RUN_COLUMNS)]
    return RunSnapshot(info=info, records=records, result=load_result(run_id, result))


def _finish(
    conn: sqlite3.Connection, row: tuple[Any, ...], result: str | None, fence: int | None
) -> None:
    _check_fence(conn, row[0], fence)
    names = [*RUN_COLUMNS, "result"]
    marks = ", ".join("?" * len(names))
    updates = ", ".join(f"{n} = excluded.{n}" for n in names[1:])
    conn.execute(
        f"INSERT INTO runs ({', '.join(names)}) VALUES ({marks}) "
        f"ON CONFLICT (run_id) DO UPDATE SET {updates}",
        (*row, result),
    )


def _lease_holder(conn: sqlite3.Connection, run_id: str) -> str | None:
    row = conn.execute(
        "SELECT owner FROM leases WHERE run_id = ? AND expires_at > ?", (run_id, time.time())
    ).fetchone()
    return None if row is None else str(row[0])


def _segment(conn: sqlite3.Connection, params: tuple[Any, ...], fence: int | None) -> bool:
    _check_fence(conn, params[1], fence)
    return (
        conn.execute(
            "INSERT INTO sessions (session_id, run_id, version, entries, created_at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, run_id) DO NOTHING",
            params,
        ).rowcount
        > 0
    )


def _acquire(conn: sqlite3.Connection, run_id: str, owner: str, ttl_s: float) -> int | None:
    """Runs in the write transaction, so the checks and the grant are one atomic step."""
    done = "SELECT 1 FROM runs WHERE run_id = ? AND status = 'completed'"
    if conn.execute(done, (run_id,)).fetchone() is not None:
        return None
    now = time.time()
    held = conn.execute(
        "SELECT owner, expires_at, token FROM leases WHERE run_id = ?", (run_id,)
    ).fetchone()
    if held is not None and held[0] != owner and held[1] > now:
        return None
    token = 1 if held is None else int(held[2]) + 1
    conn.execute(
        "INSERT INTO leases (run_id, owner, expires_at, token) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, "
        "expires_at = excluded.expires_at, token = excluded.token",
        (run_id, owner, now + ttl_s, token),
    )
    return token


def _delete(conn: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> int:
    """Delete the runs matching ``where`` with their records and leases; return count."""
    ids = f"SELECT run_id FROM runs WHERE {where}"
    conn.execute(f"DELETE FROM records WHERE run_id IN ({ids})", params)
    conn.execute(f"DELETE FROM leases WHERE run_id IN ({ids})", params)
    return conn.execute(f"DELETE FROM runs WHERE {where}", params).rowcount


def _drop_records(conn: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> int:
    """Drop the checkpoint records of the runs matching ``where``, keep their rows."""
    where = f"{where} AND json_extract(extra, '$.{PRUNED_KEY}') IS NULL"
    ids = f"SELECT run_id FROM runs WHERE {where}"
    conn.execute(f"DELETE FROM records WHERE run_id IN ({ids})", params)
    conn.execute(f"DELETE FROM leases WHERE run_id IN ({ids})", params)
    sql = f"UPDATE runs SET extra = json_set(extra, '$.{PRUNED_KEY}', ?) WHERE {where}"
    return conn.execute(sql, (time.time(), *params)).rowcount
