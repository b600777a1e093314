"""Where the SQLite store's statements run: its worker thread, or inline on the caller's.

:class:`Worker` is a thread that owns one connection and runs queued jobs in order
(reads, large writes, pruning, and any write that :class:`Inline` hands back).
:class:`Inline` runs a small write on the calling thread (the event loop) on a second
connection that never waits for a lock: ``BEGIN IMMEDIATE`` with no busy timeout, and
when another writer holds the lock (the worker, another process, a stalled process) the
write goes to the worker instead, which waits its turn with the store's busy timeout.
See :mod:`lovia.stores.sqlite` for why.
"""

from __future__ import annotations

import asyncio
import os
import queue
import sqlite3
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from ..errors import LoviaError, StoreError
from . import _sqlite_sql as sql

__all__ = ["FALLBACK", "Inline", "Worker", "store_error"]

T = TypeVar("T")

FALLBACK: Final = object()
"""What :meth:`Inline.run` returns when the write must go to the worker instead."""


@dataclass(slots=True)
class _Job:
    """One queued call: ``fn(conn, *args)``, settled on ``future``'s loop (if any)."""

    loop: asyncio.AbstractEventLoop | None
    future: asyncio.Future[Any] | None
    fn: Callable[..., Any] | None
    args: tuple[Any, ...]
    write: bool
    path: str
    counted: bool = True
    """Counts as outstanding: an inline write waits for it (the store's call order)."""

    def settle(self, ok: bool, value: Any) -> None:
        """Hand the outcome back to the event loop (thread-safe)."""
        if self.loop is None or self.future is None:
            return
        if isinstance(value, sqlite3.Error):
            value = store_error(value, self.path)
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


def _is_busy(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorname", "").startswith(tuple(_BUSY))


def store_error(exc: sqlite3.Error, path: str) -> StoreError:
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


class Worker:
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
        self.ready = False
        """The connection is open and the schema exists (set on the worker thread)."""
        self._conn: sqlite3.Connection | None = None
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._main, name="lovia-sqlite", daemon=True)
        self._lock = threading.Lock()
        self._outstanding = 0
        """Counted jobs queued or running (changed under ``_lock``)."""
        self._pid = os.getpid()

    def idle(self) -> bool:
        """Ready, and no counted job is queued or running: an inline write now comes after
        every call made before it (a racy read is fine: the lock orders the updates, and a
        caller only compares with calls it made itself)."""
        return self.ready and self._outstanding == 0 and self._pid == os.getpid()

    def submit(self, fn: Callable[..., T], args: tuple[Any, ...], write: bool) -> asyncio.Future[T]:
        """Queue a job; the returned future resolves on the calling loop."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._start()
        with self._lock:
            self._outstanding += 1
        self._queue.put(_Job(loop, future, fn, args, write, self.path))
        return future

    def checkpoint(self) -> None:
        """Queue a PASSIVE WAL checkpoint that nobody waits for. It counts as outstanding:
        writes queue behind it, so it copies every frame and the next write can start the
        WAL over (with inline writes going on beside it, it might never catch up)."""
        self._start()
        with self._lock:
            self._outstanding += 1
        self._queue.put(_Job(None, None, sql.wal_checkpoint, (), False, self.path))

    async def close(self) -> None:
        """Close the connection after every queued job and end the thread."""
        if not self._thread.is_alive():
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._queue.put(_Job(loop, future, None, (), False, self.path, counted=False))
        await future

    def stop(self) -> None:
        """Ask the thread to exit (from a finalizer: no loop needed)."""
        self._queue.put(None)

    def _start(self) -> None:
        if self._pid != os.getpid():  # forked: the thread and connection stayed behind
            self._conn = None
            self.ready = False
            self._outstanding = 0
            self._lock = threading.Lock()
            self._queue = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._main, name="lovia-sqlite", daemon=True)
            self._pid = os.getpid()
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
            self._conn = sql.connect(self.path, self.timeout_s, self.read_only)
            self.ready = True
        return self._conn

    def _done(self, jobs: list[_Job]) -> None:
        """Count ``jobs`` as no longer outstanding (after their commit, before settling)."""
        counted = sum(job.counted for job in jobs)
        if counted:
            with self._lock:
                self._outstanding -= counted

    def _run_read(self, job: _Job) -> None:
        try:
            assert job.fn is not None
            ok, value = True, job.fn(self._connection(), *job.args)
        except Exception as exc:
            ok, value = False, exc
        self._done([job])
        job.settle(ok, value)

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
        self._done(batch)
        for job, (ok, value) in zip(batch, outcomes, strict=True):
            job.settle(ok, value)

    def _shutdown(self, job: _Job | None) -> None:
        self.ready = False
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


class Inline:
    """Small writes on the calling thread, on a connection that never waits for a lock.

    :meth:`run` commits ``fn(conn, *args)`` in its own ``BEGIN IMMEDIATE`` ... ``COMMIT``
    and returns its value, or returns :data:`FALLBACK` (nothing written) when the write
    must go to the worker: the worker has not opened the file yet or has jobs in hand
    (they were called first), another thread is using this connection, or another
    writer holds the lock (``SQLITE_BUSY`` at once: the busy timeout is 0). The WAL is
    never checkpointed here (``wal_autocheckpoint=0``: a checkpoint copies pages and
    syncs); every :attr:`checkpoint_every` commits the worker is asked for a PASSIVE one
    (the worker's own commits checkpoint as usual, every 1000 WAL pages).

    :meth:`read` runs a small read here on the same terms (it never waits either).
    """

    checkpoint_every = 200

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._commits = 0
        self.enabled = not worker.read_only and worker.path != ":memory:"
        """False: every write goes to the worker (read-only or in-memory store, or the
        file is not in WAL mode)."""

    def run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """``fn(conn, *args)`` committed here, or :data:`FALLBACK`."""
        value = self._call(fn, args, True)
        if value is not FALLBACK:
            self._commits += 1
            if self._commits >= self.checkpoint_every:
                self._commits = 0
                self._worker.checkpoint()
        return value

    def read(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """``fn(conn, *args)`` read here (no transaction of its own: each statement reads
        the latest commit), or :data:`FALLBACK`, also when SQLite reports an error (the
        worker then reads it and reports what it finds)."""
        return self._call(fn, args, False)

    def _call(self, fn: Callable[..., Any], args: tuple[Any, ...], write: bool) -> Any:
        if not (self.enabled and self._worker.idle()):
            return FALLBACK
        if not self._lock.acquire(blocking=False):
            return FALLBACK
        try:
            conn = self._connection()
            if conn is None:
                return FALLBACK
            if write:
                return self._transaction(conn, fn, args)
            try:
                return fn(conn, *args)
            except sqlite3.Error:
                return FALLBACK
        finally:
            self._lock.release()

    def _transaction(self, conn: sqlite3.Connection, fn: Callable[..., Any], args: Any) -> Any:
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                value = fn(conn, *args)
                conn.execute("COMMIT")
            except BaseException:
                self._rollback(conn)
                raise
        except sqlite3.Error as exc:
            if _is_busy(exc):  # not committed: the worker writes it, waiting its turn
                return FALLBACK
            raise store_error(exc, self._worker.path) from exc
        return value

    def _rollback(self, conn: sqlite3.Connection) -> None:
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:  # the connection is in an unknown state: open a new one
            self._drop()

    def _connection(self) -> sqlite3.Connection | None:
        if self._pid != os.getpid():  # forked: that connection belongs to the parent
            self._conn, self._pid, self._commits = None, os.getpid(), 0
        if self._conn is None:
            try:
                self._conn = sql.connect_inline(self._worker.path)
            except sqlite3.Error as exc:
                if not _is_busy(exc):  # e.g. not in WAL mode: the worker does it all
                    self.enabled = False
                return None
            if self._conn is None:
                self.enabled = False
        return self._conn

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def close(self) -> None:
        """Close the connection (waits for a write another thread has in hand)."""
        with self._lock:
            if self._pid == os.getpid():
                self._drop()
            self.enabled = False
