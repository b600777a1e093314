"""Run-end notifications for the PostgreSQL store: one ``LISTEN`` connection per store.

``finish`` sends ``NOTIFY lovia_<schema>, '<run_id>'`` in its own statement, delivered
when it commits. :class:`Notifier` keeps one dedicated connection (outside the pool,
so pooled connections never carry ``LISTEN``) and wakes each :class:`Watch` whose run
was named. A notification is a hint, never the truth: a watcher re-reads the store
after each wake-up, and also after a timeout, so a lost notification (a dropped
connection, a server restart) costs latency, never a wrong answer.

Through PgBouncer in transaction mode a ``LISTEN`` lands on whichever server
connection ran it and its notifications never reach the client. So the notifier
proves the path once, after each connect: it sends itself a probe through the pool
and waits for it; when the probe does not arrive, it gives up listening and the
watchers poll (with backoff) from then on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["Notifier", "Watch"]

logger = logging.getLogger("lovia.stores")

PROBE_TIMEOUT_S = 2.0
"""How long a probe may take before notifications count as unavailable."""
RECONNECT_AFTER_S = 5.0
"""After a failed connect, how long watchers poll before the next try."""


class Watch:
    """Interest in one run's notifications; register before reading the run."""

    def __init__(self, notifier: Notifier | None, run_id: str) -> None:
        self._notifier = notifier
        self.run_id = run_id
        self._event = asyncio.Event()

    @property
    def listening(self) -> bool:
        """True while notifications arrive (False: callers should poll)."""
        return self._notifier is not None and self._notifier.listening

    def wake(self) -> None:
        self._event.set()

    async def listen(self) -> bool:
        """Reconnect the ``LISTEN`` connection if it dropped; True while listening."""
        if self._notifier is not None:
            await self._notifier.ensure()
        return self.listening

    async def wait(self, timeout_s: float) -> bool:
        """Wait for a notification about the run (True) or ``timeout_s`` (False)."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout_s)
        except TimeoutError:
            return False
        self._event.clear()
        return True


class Notifier:
    """The store's ``LISTEN`` connection and the watches it wakes."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[Any]],
        channel: str,
        send: Callable[[str, str], Awaitable[None]],
    ) -> None:
        self._connect = connect
        self.channel = channel
        self._send = send
        self._watches: dict[str, set[Watch]] = {}
        self._conn: Any = None
        self._lock = asyncio.Lock()
        self._probe: tuple[str, asyncio.Future[None]] | None = None
        self._retry_at = 0.0
        self._reconnecting = False  # watches registered before the first connect read after it
        self.unavailable = False  # the probe failed: notifications cannot arrive here

    @property
    def listening(self) -> bool:
        return self._conn is not None and not self.unavailable

    def add(self, watch: Watch) -> None:
        self._watches.setdefault(watch.run_id, set()).add(watch)

    def remove(self, watch: Watch) -> None:
        group = self._watches.get(watch.run_id)
        if group is not None:
            group.discard(watch)
            if not group:
                del self._watches[watch.run_id]

    async def ensure(self) -> None:
        """Connect and ``LISTEN`` unless listening, proven unavailable, or recently failed."""
        if self._conn is not None or self.unavailable:
            return
        loop = asyncio.get_running_loop()
        if loop.time() < self._retry_at:
            return
        async with self._lock:
            if self._conn is not None or self.unavailable or loop.time() < self._retry_at:
                return
            try:
                await self._listen(loop)
            except Exception as exc:  # the watchers poll meanwhile
                logger.warning("PostgreSQL notifications unavailable for now: %s", exc)
                self._retry_at = loop.time() + RECONNECT_AFTER_S
                await self._drop()

    async def _listen(self, loop: asyncio.AbstractEventLoop) -> None:
        conn = await self._connect()
        self._conn = conn
        conn.add_termination_listener(self._lost)
        await conn.add_listener(self.channel, self._notified)
        token = f"probe:{secrets.token_hex(8)}"
        arrived: asyncio.Future[None] = loop.create_future()
        self._probe = (token, arrived)
        try:
            await self._send(self.channel, token)
            await asyncio.wait_for(arrived, PROBE_TIMEOUT_S)
        except TimeoutError:
            logger.warning(
                "PostgreSQL notifications do not arrive on %s (PgBouncer in transaction "
                "mode?): waiting for runs by polling",
                self.channel,
            )
            self.unavailable = True
            await self._drop()
        finally:
            self._probe = None
        if self._reconnecting:  # runs that ended while no connection listened
            self._wake_all()
        self._reconnecting = True

    def _notified(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        probe = self._probe
        if probe is not None and payload == probe[0]:
            if not probe[1].done():
                probe[1].set_result(None)
            return
        for watch in self._watches.get(payload, ()):
            watch.wake()

    def _lost(self, _conn: Any) -> None:
        """The connection closed: reconnect on the next wait; re-read every run now."""
        self._conn = None
        self._wake_all()

    def _wake_all(self) -> None:
        for group in self._watches.values():
            for watch in group:
                watch.wake()

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=2)

    async def aclose(self) -> None:
        self.unavailable = True
        await self._drop()

    def terminate(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.terminate()
