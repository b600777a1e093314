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
from ..runner import check_deps_key
from ..stores import Store
from ..stores import store as open_store
from ..stores.lifecycle import list_lives
from .execute import execute_run, record_unrunnable
from .marks import BAD_DEPS_KEY, Admission, admit, mark_dead_lettered
from .metrics import queue_metrics
from .queue import RunQueue
from .registry import AgentRegistry, UnknownAgent

__all__ = ["Worker"]

logger = logging.getLogger("lovia.workers")

Message = tuple[str, dict[str, str]]
_ACK = frozenset(
    {"completed", "replayed", "failed", "paused", "unknown_agent", "malformed", "refused"}
)
_LAST_ERROR_TTL_S = 86400
_FRONT_IDLE_MS = 10 * 365 * 86400 * 1000
"""The idle time given to a task handed back: any worker's next ``XAUTOCLAIM`` takes it,
before any new task (the front of the queue)."""


class Worker:
    """Runs tasks from a :class:`RunQueue` until ``stop_event`` is set.

    ``agents`` maps the names tasks use to agents (or to their import paths), or lists
    allowed import paths: a task naming anything else is recorded as failed
    (``UnknownAgent``) and moved to ``<stream>:dead`` without importing or calling
    anything (see :class:`~lovia.workers.registry.AgentRegistry`). ``store`` (a URL or a
    store) is the checkpointer and session store shared by all workers.
    ``deps(deps_key)`` (sync or async) builds each run's deps.

    Operations: ``drain_timeout_s`` bounds a shutdown (runs not finished by then are
    cancelled at their next step, their leases released and their tasks handed back to
    the front of the queue); ``max_kills`` dead-letters a run whose worker was lost that
    many times (a run that lost one is run alone); ``sweep_s`` is how often the worker
    looks in the store for interrupted runs of this queue and takes them over.

    ``stats`` counts outcomes: completed, replayed, failed, paused, lease_held, retry,
    cancelled, error, unknown_agent, bad_deps_key, malformed, refused, requeued, swept,
    dead_lettered.

    A task's ``deps_key`` is checked before ``deps`` sees it (a str of at most 256
    printable characters): a bad one dead-letters the run (``bad_deps_key``). The key
    is stored with the run (``RunInfo.extra["deps_key"]``); the sweep re-queues the
    run's pending task, which still carries it.
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
        drain_timeout_s: float = 20.0,
        max_deliveries: int | None = 10,
        max_kills: int | None = 3,
        sweep_s: float = 10.0,
    ) -> None:
        if concurrency < 1:
            raise UserError("Worker(concurrency=...) must be at least 1")
        if max_kills is not None and max_kills < 1:
            raise UserError("Worker(max_kills=...) must be at least 1 (or None: never)")
        self.agents = AgentRegistry(agents, owner="Worker")
        self.queue, self.deps = queue, deps
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self.concurrency, self.drain_timeout_s = concurrency, drain_timeout_s
        self.claim_idle_s = claim_idle_s if claim_idle_s is not None else lease_ttl() + 10
        self.max_deliveries, self.max_kills, self.sweep_s = max_deliveries, max_kills, sweep_s
        self.stats: Counter[str] = Counter()
        self._store_arg = store
        self._db: Store | None = None
        self._inflight: dict[str, CancelToken] = {}
        self._runs: dict[str, str] = {}
        """``msg_id`` -> ``run_id`` of the tasks in flight here."""
        self._alone: str | None = None
        """The ``msg_id`` of a suspect run: while set, this worker takes no other task."""
        self._alone_lock = asyncio.Lock()
        self._waiting: set[str] = set()
        """Suspect runs waiting for their turn to run alone."""
        self._held: set[str] = set()
        """Runs held back while a suspect runs (or waits to run) alone."""
        self._stopping = False
        self._next_tick = 0.0
        self._next_sweep = 0.0
        self._cursor = "0-0"
        self._metrics = queue_metrics("redis", queue.stream)

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
                free = 0 if self._alone else self.concurrency - len(self._inflight)
                if free <= 0:
                    await self._next_batch(0)  # keeps our in-flight tasks fresh
                    if tasks:
                        await asyncio.wait(tasks, timeout=0.5, return_when=asyncio.FIRST_COMPLETED)
                    else:
                        await asyncio.sleep(0.1)
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
        """Every few seconds: refresh our in-flight tasks, deliver cancels, sweep the
        store for interrupted runs, take over abandoned tasks."""
        now = time.monotonic()
        if now < self._next_tick:
            return []
        self._next_tick = now + max(0.1, min(self.claim_idle_s / 3, 5.0))
        q = self.queue
        if self._inflight:
            await q.client.xclaim(
                q.stream, q.group, self.name, 0, list(self._inflight), justid=True
            )
            await self._deliver_cancels()
        if now >= self._next_sweep:
            self._next_sweep = now + self.sweep_s
            await self._sweep()
        await self._observe_depth()
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

    async def _deliver_cancels(self) -> None:
        """Cancel the runs in flight here that ``RunQueue.cancel`` asked to stop."""
        pairs = [(m, r) for m, r in self._runs.items() if m in self._inflight]
        if not pairs:
            return
        reasons: list[Any] = await self.queue.client.mget(
            [self.queue.cancel_key(r) for _, r in pairs]
        )
        for (msg_id, run_id), reason in zip(pairs, reasons, strict=True):
            token = self._inflight.get(msg_id)
            if reason is not None and token is not None and not token.cancelled:
                logger.info("worker %s: cancelling run %s (%s)", self.name, run_id, reason)
                token.cancel(str(reason))

    async def _sweep(self) -> None:
        """Interrupted runs of this queue (lease expired, task still pending) go to the
        front: one worker claims each (a store lease on ``<run_id>:requeue``)."""
        assert self._db is not None
        for run_id in await interrupted_runs(self._db):
            msg_id: Any = await self.queue.client.hget(self.queue.running_key, run_id)
            if msg_id is None or msg_id in self._inflight:
                continue
            gate = await admit(self._db, run_id, max_kills=self.max_kills)
            if await self._db.acquire(f"{run_id}:requeue", self.name, self.claim_idle_s) is None:
                continue  # another worker re-queued it
            if gate.verdict == "poison":  # its last worker died too: no new attempt
                await self._give_up_pending(str(msg_id), run_id, gate)
                continue
            await self._to_front(str(msg_id))
            self.stats["swept"] += 1
            logger.info("worker %s: run %s was interrupted; re-queued first", self.name, run_id)

    async def _give_up_pending(self, msg_id: str, run_id: str, gate: Admission) -> None:
        """Dead-letter a pending task the sweep found poison (another consumer holds it)."""
        q = self.queue
        found: Any = await q.client.xrange(q.stream, msg_id, msg_id)
        if not found:
            return
        await self._note_error(run_id, gate.detail)
        await self._give_up(msg_id, found[0][1], gate.attempts, "poison", gate.kills)

    async def _to_front(self, msg_id: str) -> None:
        """Make a pending task look long abandoned: the next ``XAUTOCLAIM`` takes it."""
        q = self.queue
        await q.client.xclaim(
            q.stream, q.group, self.name, 0, [msg_id], idle=_FRONT_IDLE_MS, justid=True
        )
        self._cursor = "0-0"

    async def _observe_depth(self) -> None:
        q = self.queue
        length, pending = await q.client.xlen(q.stream), await q.pending()
        info: Any = await q.client.xinfo_groups(q.stream)
        lag = next((g.get("lag") for g in info if g.get("name") == q.group), None)
        waiting = int(lag) if lag is not None else max(0, int(length) - pending)
        self._metrics.depth(waiting, pending, await q.client.xlen(q.dead_stream))

    async def _dead_letter(self, claimed: list[Message]) -> list[Message]:
        """Move tasks delivered more than ``max_deliveries`` times to ``<stream>:dead``.

        A run that keeps failing for retryable reasons would otherwise be resumed
        forever; its checkpoint stays in the store, so it can still be resumed by hand.
        """
        if not claimed:
            return claimed
        q = self.queue
        keep: list[Message] = []
        for msg_id, fields in claimed:
            info: Any = await q.client.xpending_range(q.stream, q.group, msg_id, msg_id, 1)
            delivered = int(info[0]["times_delivered"]) if info else 0
            self._metrics.delivered(redelivery=True)
            if self.max_deliveries is None or delivered <= self.max_deliveries:
                keep.append((msg_id, fields))
                continue
            logger.error(
                "worker %s: task %s delivered %d times; dead-lettered", self.name, msg_id, delivered
            )
            await self._give_up(msg_id, fields, delivered, "max_deliveries")
        return keep

    async def _give_up(
        self, msg_id: str, fields: dict[str, str], deliveries: int, reason: str, kills: int = 0
    ) -> None:
        """Dead-letter a task: its run marked in the store (an unknown agent's run is
        already stored as failed with ``UnknownAgent``), then to ``<stream>:dead``: a
        dead letter anyone sees is already marked in the store."""
        assert self._db is not None
        q = self.queue
        try:
            task: dict[str, Any] = json.loads(fields["task"])
            run_id: str | None = str(task["run_id"])
        except (KeyError, TypeError, ValueError):
            task, run_id = {}, None  # a malformed task has no run to mark
        if run_id is not None and reason != "unknown_agent":
            last: Any = await q.client.hget(q.errors_key, run_id)
            await mark_dead_lettered(
                self._db,
                task,
                deliveries=deliveries,
                reason=reason,
                last_error=last,
                queue=q.stream,
                kills=kills,
            )
        await self._to_dead(msg_id, fields, {"deliveries": str(deliveries), "reason": reason})
        self.stats["dead_lettered"] += 1
        self._metrics.dead_lettered(reason)
        if run_id is not None:  # done with it: result() stops waiting
            await q.ack(msg_id, run_id, "dead_lettered")

    async def _to_dead(self, msg_id: str, fields: dict[str, str], extra: dict[str, str]) -> None:
        """Move a task to ``<stream>:dead`` (with ``extra`` fields) and acknowledge it."""
        q = self.queue
        # commands are queued on the pipeline (`_ =`: not coroutines) and run by execute()
        async with q.client.pipeline(transaction=True) as pipe:
            _ = pipe.xadd(q.dead_stream, {**fields, **extra})
            _ = pipe.xack(q.stream, q.group, msg_id)
            await pipe.execute()

    async def _read(self, count: int) -> list[Message]:
        q = self.queue
        reply: Any = await q.client.xreadgroup(
            q.group, self.name, {q.stream: ">"}, count=count, block=1000
        )
        if not reply:
            return []
        messages = [(i, f) for _, messages in reply for i, f in messages]  # RESP2 shape
        for _ in messages:
            self._metrics.delivered(redelivery=False)
        return messages

    async def _handle(self, msg_id: str, fields: dict[str, str]) -> None:
        token, run_id = self._inflight[msg_id], None
        self._metrics.busy(+1)
        try:
            task = json.loads(fields["task"])
            run_id = self._runs[msg_id] = str(task["run_id"])
            await self.queue.client.hset(self.queue.running_key, run_id, msg_id)
            outcome = await self._admitted(msg_id, fields, task, run_id, token)
        except (KeyError, TypeError, ValueError):
            logger.error("worker %s: malformed task %s: %r", self.name, msg_id, fields)
            outcome = "malformed"
        except Exception as exc:
            logger.exception("worker %s: task %s failed; left pending", self.name, msg_id)
            await self._note_error(run_id, f"{type(exc).__name__}: {exc}")
            outcome = "error"
        finally:
            self._metrics.busy(-1)
            if self._alone == msg_id:
                self._alone = None
        self.stats[outcome] += 1
        await self._settle(msg_id, fields, run_id, outcome, token)

    async def _settle(
        self,
        msg_id: str,
        fields: dict[str, str],
        run_id: str | None,
        outcome: str,
        token: CancelToken,
    ) -> None:
        """Acknowledge, dead-letter, hand back or leave pending, as the outcome says."""
        try:
            if outcome in ("unknown_agent", BAD_DEPS_KEY):  # no delivery fixes it
                await self._give_up(msg_id, fields, 1, outcome)
            if outcome == "cancelled" and not (self._stopping and token.reason == _SHUTDOWN):
                outcome = "refused"  # cancelled by request: the task is done with
            if outcome in _ACK:
                await self.queue.ack(msg_id, run_id, outcome)
            elif outcome == "cancelled":
                await self._hand_back(msg_id)
            elif outcome in ("retry", "lease_held") and run_id is not None:
                await self._note_error(run_id, outcome)
        except Exception:
            logger.exception("worker %s: could not acknowledge task %s", self.name, msg_id)
        finally:
            self._inflight.pop(msg_id, None)
            self._runs.pop(msg_id, None)

    async def _note_error(self, run_id: str | None, text: str) -> None:
        """Keep the run's last error for its dead-letter mark (best effort)."""
        if run_id is None:
            return
        try:
            q = self.queue
            await q.client.hset(q.errors_key, run_id, text[:500])
            await q.client.expire(q.errors_key, _LAST_ERROR_TTL_S)
        except Exception:
            logger.warning("worker %s: could not note the error of run %s", self.name, run_id)

    async def _admitted(
        self,
        msg_id: str,
        fields: dict[str, str],
        task: dict[str, Any],
        run_id: str,
        token: CancelToken,
    ) -> str:
        """Check the store first: a cancel request, a dead letter, a poison run."""
        assert self._db is not None
        gate: Admission = await admit(self._db, run_id, max_kills=self.max_kills)
        if gate.verdict in ("cancelled", "ended"):
            logger.info("worker %s: run %s not started: %s", self.name, run_id, gate.detail)
            return "refused"
        if gate.verdict == "poison":
            logger.error("worker %s: run %s is poison: %s", self.name, run_id, gate.detail)
            await self._note_error(run_id, gate.detail)
            delivered = await self._deliveries(msg_id)
            await self._give_up(msg_id, fields, delivered, "poison", gate.kills)
            return "poison"
        if gate.suspect:  # it took a worker down before: run it with nothing else here
            return await self._run_alone(msg_id, task, run_id, token)
        if self._alone is not None or self._waiting:  # a suspect goes first, alone
            self._held.add(msg_id)
            try:
                while (self._alone is not None or self._waiting) and not token.cancelled:  # noqa: ASYNC110 -- polls a dict
                    await asyncio.sleep(0.1)
            finally:
                self._held.discard(msg_id)
        return await self._execute(task, run_id, token)

    async def _run_alone(
        self, msg_id: str, task: dict[str, Any], run_id: str, token: CancelToken
    ) -> str:
        """Run a suspect once the other runs here ended; no other run starts meanwhile."""
        self._waiting.add(msg_id)
        try:
            async with self._alone_lock:
                self._waiting.discard(msg_id)
                self._alone = msg_id
                while self._others_running() and not token.cancelled:  # noqa: ASYNC110 -- polls a dict
                    await asyncio.sleep(0.1)
                return await self._execute(task, run_id, token)
        finally:
            self._waiting.discard(msg_id)

    def _others_running(self) -> bool:
        """Whether runs other than the suspect (and runs waiting for their turn) run."""
        return len(self._inflight) - len(self._waiting) - len(self._held) > 1

    async def _deliveries(self, msg_id: str) -> int:
        q = self.queue
        info: Any = await q.client.xpending_range(q.stream, q.group, msg_id, msg_id, 1)
        return int(info[0]["times_delivered"]) if info else 1

    async def _execute(self, task: dict[str, Any], run_id: str, token: CancelToken) -> str:
        assert self._db is not None
        try:  # the name comes from whoever wrote the task: only registered agents run
            agent = self.agents.resolve(task["agent"], f"worker {self.name}")
        except UserError as exc:  # not registered, or its registered path does not import
            kind = "UnknownAgent" if isinstance(exc, UnknownAgent) else type(exc).__name__
            shown = str(task["agent"])[:100]
            await record_unrunnable(self._db, run_id, shown, task.get("session_id"), str(exc), kind)
            return "unknown_agent"
        try:  # data from the queue: checked before any factory sees it
            deps_key = check_deps_key(task.get("deps_key"))
        except UserError as exc:
            logger.error("worker %s: run %s: %s; dead-lettered", self.name, run_id, exc)
            await self._note_error(run_id, str(exc))
            return BAD_DEPS_KEY
        deps = None if self.deps is None else self.deps(deps_key)
        deps = await deps if inspect.isawaitable(deps) else deps
        return await execute_run(agent, task, self._db, deps=deps, token=token, worker=self.name)

    async def _hand_back(self, msg_id: str) -> None:
        """A run stopped by shutdown (its lease released): to the front of the queue."""
        await self._to_front(msg_id)
        self.stats["requeued"] += 1

    async def _drain(self, tasks: set[asyncio.Task[None]]) -> None:
        """Let in-flight runs finish; after ``drain_timeout_s`` stop them (resumable)."""
        self._stopping = True
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=self.drain_timeout_s)
        if pending:
            logger.warning("worker %s: handing back %d run(s) at shutdown", self.name, len(pending))
            for token in self._inflight.values():
                token.cancel(_SHUTDOWN)
            await asyncio.wait(pending)


_SHUTDOWN = "worker shutting down"


async def interrupted_runs(db: Store, limit: int = 100) -> list[str]:
    """The ids of interrupted runs in the store (lease expired or holder gone)."""
    return [info.run_id for info, _ in await list_lives(db, state="interrupted", limit=limit)]
