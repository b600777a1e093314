"""``Worker``: reads run tasks from a :class:`RunQueue`, runs them, acknowledges them."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import secrets
import socket
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import lease_ttl
from ..agent import Agent
from ..context import CancelToken
from ..errors import UserError
from ..stores import Store
from ..stores import store as open_store
from .execute import execute_run, record_unrunnable
from .queue import RunQueue
from .registry import AgentRegistry, UnknownAgent

__all__ = ["Worker"]

logger = logging.getLogger("lovia.workers")

Message = tuple[str, dict[str, str]]
_ACK = frozenset({"completed", "replayed", "failed", "paused", "unknown_agent", "malformed"})


class Worker:
    """Runs tasks from a :class:`RunQueue` until ``stop_event`` is set.

    ``agents`` maps the names tasks use to agents (or to their import paths), or lists
    allowed import paths: a task naming anything else is recorded as failed
    (``UnknownAgent``) and moved to ``<stream>:dead`` without importing or calling
    anything (see :class:`~lovia.workers.registry.AgentRegistry`). ``store`` (a URL or a
    store) is the checkpointer and session store shared by all workers. ``deps(deps_key)`` (sync or
    async) builds each run's deps. ``stats`` counts outcomes: completed, replayed,
    failed, paused, lease_held, retry, cancelled, error, unknown_agent, malformed.
    """

    def __init__(
        self,
        queue: RunQueue,
        agents: Mapping[str, Agent[Any, Any] | str] | Sequence[str],
        store: str | Store,
        *,
        name: str | None = None,
        concurrency: int = 4,
        deps: Callable[[str | None], Any] | None = None,
        claim_idle_s: float | None = None,
        drain_timeout_s: float = 30.0,
        max_deliveries: int | None = 10,
    ) -> None:
        if concurrency < 1:
            raise UserError("Worker(concurrency=...) must be at least 1")
        self.agents = AgentRegistry(agents, owner="Worker")
        self.queue, self.deps = queue, deps
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.concurrency, self.drain_timeout_s = concurrency, drain_timeout_s
        self.claim_idle_s = claim_idle_s if claim_idle_s is not None else lease_ttl() + 10
        self.max_deliveries = max_deliveries
        self.stats: Counter[str] = Counter()
        self._store_arg = store
        self._db: Store | None = None
        self._inflight: dict[str, CancelToken] = {}
        self._stopping = False
        self._next_tick = 0.0
        self._cursor = "0-0"

    async def run(self, stop_event: asyncio.Event | None = None) -> None:
        """Read, run and acknowledge tasks; on ``stop_event``, drain and return."""
        stop = stop_event or asyncio.Event()
        arg = self._store_arg
        self._db = open_store(arg) if isinstance(arg, str) else arg
        self._stopping = False
        await self.queue.ensure_group()
        tasks: set[asyncio.Task[None]] = set()
        try:
            while not stop.is_set():
                free = self.concurrency - len(self._inflight)
                if free <= 0:
                    await self._next_batch(0)  # keeps our in-flight tasks fresh
                    await asyncio.wait(tasks, timeout=0.5, return_when=asyncio.FIRST_COMPLETED)
                    continue
                for msg_id, fields in await self._next_batch(free):
                    if msg_id not in self._inflight:
                        self._inflight[msg_id] = CancelToken()
                        task = asyncio.create_task(self._handle(msg_id, fields))
                        tasks.add(task)
                        task.add_done_callback(tasks.discard)
        finally:
            await self._drain(tasks)
            if isinstance(arg, str):
                await self._db.aclose()

    async def _next_batch(self, free: int) -> list[Message]:
        """Abandoned tasks first, else new ones; Redis errors are logged and waited out."""
        try:
            claimed = await self._maintain(free)
            return claimed if claimed or free <= 0 else await self._read(free)
        except Exception as exc:
            logger.warning("worker %s: Redis error (%s); retrying in 1 s", self.name, exc)
            await asyncio.sleep(1.0)
            if "NOGROUP" in str(exc):  # Redis restarted without persistence
                await self.queue.ensure_group()
            return []

    async def _maintain(self, free: int) -> list[Message]:
        """Every few seconds: refresh our in-flight tasks, take over abandoned ones."""
        now = time.monotonic()
        if now < self._next_tick:
            return []
        self._next_tick = now + max(0.1, min(self.claim_idle_s / 3, 5.0))
        q = self.queue
        if self._inflight:
            await q.client.xclaim(
                q.stream, q.group, self.name, 0, list(self._inflight), justid=True
            )
        if free <= 0:
            return []
        idle_ms = int(self.claim_idle_s * 1000)
        reply = await q.client.xautoclaim(
            q.stream, q.group, self.name, idle_ms, start_id=self._cursor, count=free
        )
        self._cursor = str(reply[0])
        claimed: list[Message] = [(i, f) for i, f in reply[1] if f]
        for msg_id, _ in claimed:
            logger.info("worker %s took over task %s", self.name, msg_id)
        return await self._dead_letter(claimed)

    async def _dead_letter(self, claimed: list[Message]) -> list[Message]:
        """Move tasks delivered more than ``max_deliveries`` times to ``<stream>:dead``.

        A run that keeps failing for retryable reasons would otherwise be resumed
        forever; its checkpoint stays in the store, so it can still be resumed by hand.
        """
        if self.max_deliveries is None or not claimed:
            return claimed
        q = self.queue
        keep: list[Message] = []
        for msg_id, fields in claimed:
            info: Any = await q.client.xpending_range(q.stream, q.group, msg_id, msg_id, 1)
            delivered = int(info[0]["times_delivered"]) if info else 0
            if delivered <= self.max_deliveries:
                keep.append((msg_id, fields))
                continue
            logger.error(
                "worker %s: task %s delivered %d times; dead-lettered", self.name, msg_id, delivered
            )
            await self._to_dead(msg_id, fields, {"deliveries": str(delivered)})
            self.stats["dead_lettered"] += 1
        return keep

    async def _to_dead(self, msg_id: str, fields: dict[str, str], extra: dict[str, str]) -> None:
        """Move a task to ``<stream>:dead`` (with ``extra`` fields) and acknowledge it."""
        q = self.queue
        # commands are queued on the pipeline (`_ =`: not coroutines) and run by execute()
        async with q.client.pipeline(transaction=True) as pipe:
            _ = pipe.xadd(f"{q.stream}:dead", {**fields, **extra})
            _ = pipe.xack(q.stream, q.group, msg_id)
            await pipe.execute()

    async def _read(self, count: int) -> list[Message]:
        q = self.queue
        reply: Any = await q.client.xreadgroup(
            q.group, self.name, {q.stream: ">"}, count=count, block=1000
        )
        if not reply:
            return []
        return [(i, f) for _, messages in reply for i, f in messages]  # RESP2 shape

    async def _handle(self, msg_id: str, fields: dict[str, str]) -> None:
        token, run_id = self._inflight[msg_id], None
        try:
            task = json.loads(fields["task"])
            run_id = str(task["run_id"])
            outcome = await self._execute(task, run_id, token)
        except (KeyError, TypeError, ValueError):
            logger.error("worker %s: malformed task %s: %r", self.name, msg_id, fields)
            outcome = "malformed"
        except Exception:
            logger.exception("worker %s: task %s failed; left pending", self.name, msg_id)
            outcome = "error"
        self.stats[outcome] += 1
        try:
            if outcome == "unknown_agent":
                await self._to_dead(msg_id, fields, {"reason": outcome})
                self.stats["dead_lettered"] += 1
            if outcome in _ACK:
                await self.queue.ack(msg_id, run_id, outcome)
            elif outcome == "cancelled" and self._stopping:
                await self._hand_back(msg_id, fields)
        except Exception:
            logger.exception("worker %s: could not acknowledge task %s", self.name, msg_id)
        finally:
            self._inflight.pop(msg_id, None)

    async def _execute(self, task: dict[str, Any], run_id: str, token: CancelToken) -> str:
        assert self._db is not None
        try:  # the name comes from whoever wrote the task: only registered agents run
            agent = self.agents.resolve(task["agent"], f"worker {self.name}")
        except UserError as exc:  # not registered, or its registered path does not import
            kind = "UnknownAgent" if isinstance(exc, UnknownAgent) else type(exc).__name__
            shown = str(task["agent"])[:100]
            await record_unrunnable(self._db, run_id, shown, task.get("session_id"), str(exc), kind)
            return "unknown_agent"
        deps = None if self.deps is None else self.deps(task.get("deps_key"))
        deps = await deps if inspect.isawaitable(deps) else deps
        return await execute_run(agent, task, self._db, deps=deps, token=token, worker=self.name)

    async def _hand_back(self, msg_id: str, fields: dict[str, str]) -> None:
        """Requeue a task cancelled by shutdown, so any worker resumes it right away."""
        q = self.queue
        # commands are queued on the pipeline (`_ =`: not coroutines) and run by execute()
        async with q.client.pipeline(transaction=True) as pipe:
            _ = pipe.xadd(q.stream, {**fields})  # a dict literal: xadd's invariant Dict type
            _ = pipe.xack(q.stream, q.group, msg_id)
            await pipe.execute()
        self.stats["requeued"] += 1

    async def _drain(self, tasks: set[asyncio.Task[None]]) -> None:
        """Let in-flight runs finish; after ``drain_timeout_s`` cancel them (resumable)."""
        self._stopping = True
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=self.drain_timeout_s)
        if pending:
            logger.warning("worker %s: cancelling %d run(s) at shutdown", self.name, len(pending))
            for token in self._inflight.values():
                token.cancel("worker shutting down")
            await asyncio.wait(pending)
