"""One long-lived event loop per worker process, and what lives on it.

A Celery task body is synchronous. Every task of a process hands its run to the same
event loop, on a daemon thread started on first use, and blocks until the run ends;
with Celery's ``threads`` pool one process so carries ``--concurrency`` runs on one
loop, sharing its HTTP connections and store pool. Stores are opened on that loop (an
asyncpg pool belongs to the loop that made it) and reused.
After a ``fork`` (the prefork pool) the child starts its own loop: the parent's thread
does not exist there.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from ..._imports import import_object
from ...context import CancelToken
from ...stores import Store
from ...stores import store as open_store

__all__ = ["SHUTDOWN", "ProcessLoop", "process_loop"]

SHUTDOWN = "worker shutting down"
"""The cancel reason of runs stopped by a bounded shutdown (handed back, not ended)."""

T = TypeVar("T")


class ProcessLoop:
    """The event loop thread of this process, its open stores and in-flight runs."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="lovia-celery-loop", daemon=True
        )
        self._thread.start()
        self._stores: dict[str, Store] = {}
        self._imported: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.inflight: dict[str, CancelToken] = {}
        """``run_id`` -> the token of the run this process is executing."""
        self._cancelled: dict[str, tuple[float, str]] = {}
        self.stopping = threading.Event()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for it (from any thread but the loop's)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    async def wait(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` run on the process loop, from another event loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def store(self, url: str) -> Store:
        """The store at ``url``, opened once per process (call it on the loop)."""
        db = self._stores.get(url)
        if db is None:
            db = self._stores[url] = open_store(url)
        return db

    def imported(self, path: str) -> Any:
        """The object at import path ``path``, imported once per process."""
        with self._lock:
            if path not in self._imported:
                self._imported[path] = import_object(
                    path,
                    hint="The worker imports it by path: the module must be importable there.",
                )
            return self._imported[path]

    def cancel(self, run_id: str, reason: str, remember_s: float) -> bool:
        """Cancel the run if this process executes it, else hold the cancel for its next
        delivery here for ``remember_s`` seconds; True when it was running here."""
        token = self.inflight.get(run_id)
        if token is not None:
            token.cancel(reason)
            return True
        with self._lock:
            now = time.monotonic()
            for stale in [k for k, (until, _) in self._cancelled.items() if until < now]:
                del self._cancelled[stale]
            self._cancelled[run_id] = (now + remember_s, reason)
        return False

    def take_cancel(self, run_id: str) -> str | None:
        """The reason of a cancel held for ``run_id`` (consumed), if one is."""
        with self._lock:
            held = self._cancelled.pop(run_id, None)
        return held[1] if held is not None and held[0] >= time.monotonic() else None

    def stop_runs_after(self, drain_s: float) -> None:
        """Shutdown: after ``drain_s`` seconds, stop the runs still in flight here (each
        ends at its next step, releases its lease and is handed back)."""
        if self.stopping.is_set():
            return
        self.stopping.set()

        def stop() -> None:
            for token in list(self.inflight.values()):
                token.cancel(SHUTDOWN)

        timer = threading.Timer(drain_s, lambda: self.loop.call_soon_threadsafe(stop))
        timer.daemon = True
        timer.start()

    def close(self) -> None:
        """Close the stores and stop the loop (worker shutdown)."""
        stores, self._stores = list(self._stores.values()), {}
        if self._thread.is_alive():
            for db in stores:
                self.call(db.aclose())
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)


_current: ProcessLoop | None = None
_guard = threading.Lock()


def process_loop() -> ProcessLoop:
    """This process's loop, started on first use (and again in a forked child)."""
    global _current
    with _guard:
        if _current is None or _current.pid != os.getpid():
            _current = ProcessLoop()
        return _current


def shutdown() -> None:
    """Close this process's loop if it was started."""
    global _current
    with _guard:
        running, _current = _current, None
    if running is not None and running.pid == os.getpid():
        running.close()


async def maybe_await(value: Any) -> Any:
    """``value``, awaited if it is awaitable (sync or async deps factories)."""
    return await value if inspect.isawaitable(value) else value
