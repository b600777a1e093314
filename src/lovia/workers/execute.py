"""What every queue back-end does with one task: run it, name the outcome, wait for it.

The Redis Streams :class:`~lovia.workers.Worker` and the Celery task
(``lovia.integrations.celery``) share these, so both map the same run outcomes onto
"acknowledge" and "deliver again", and record a task they cannot run the same way.
Nothing here imports a queue library.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal, cast

from ..agent import Agent
from ..context import CancelToken
from ..errors import ApprovalPending, ProviderError, RunCancelled, RunError, RunLeaseHeld, UserError
from ..events import Event
from ..runner import Runner
from ..stores import Store
from ..stores.base import RunInfo, RunSnapshot, RunWatch, RunWatcher
from ..transcript import entry_from_dict, entry_to_dict, input_entries

__all__ = [
    "Outcome",
    "decode_input",
    "encode_input",
    "execute_run",
    "record_unrunnable",
    "wait_for_run",
]

logger = logging.getLogger("lovia.workers")

Outcome = Literal["completed", "replayed", "failed", "paused", "lease_held", "retry", "cancelled"]
"""How a run ended, as a queue sees it: ``lease_held`` and ``retry`` ask for a new delivery."""
_ENDED = ("completed", "failed", "paused", "cancelled")


def encode_input(value: Any) -> Any:
    """A run's input as JSON: a str or None as is, entries as a list of dicts."""
    if value is None or isinstance(value, str):
        return value
    return [entry_to_dict(e) for e in input_entries(value)]


def decode_input(value: Any) -> Any:
    """A task's input as the runner takes it (a str, None, or a list of InputEntry)."""
    if isinstance(value, list):
        return [entry_from_dict(e) for e in cast("list[dict[str, Any]]", value)]  # task JSON
    return value


async def execute_run(
    agent: Agent[Any, Any],
    task: dict[str, Any],
    db: Store,
    *,
    deps: Any = None,
    token: CancelToken | None = None,
    worker: str = "",
    on_event: Callable[[Event], None] | None = None,
) -> Outcome:
    """Run one task (``run_id``, ``input``, ``session_id``, ``labels``, ``deps_key``) to
    its end; name the outcome. ``deps_key`` (built into ``deps`` by the caller) is stored
    in the run's row (``RunInfo.extra["deps_key"]``), so a sweep re-queues the run with it.

    The store is the checkpointer and the session store, so a task delivered again
    resumes (or replays) its run. Errors that a later delivery could fix (another
    worker's lease, a retryable provider error) come back as ``lease_held`` / ``retry``;
    anything unexpected propagates. ``on_event`` sees every event of the run (a durable
    engine's heartbeat on each checkpoint).
    """
    run_id = str(task["run_id"])
    try:
        handle = Runner.stream(
            agent,
            decode_input(task.get("input")),
            run_id=run_id,
            checkpointer=db,
            session=db,
            deps=deps,
            session_id=task.get("session_id"),
            cancel_token=token,
            labels=task.get("labels"),  # checked again: a task is data from the queue
            deps_key=task.get("deps_key"),  # recorded with the run: a sweep re-queues with it
        )
        if on_event is not None:
            async for event in handle:
                on_event(event)
        result = await handle.result()
    except RunLeaseHeld:
        return "lease_held"  # another worker runs it (LeaseLost too: fenced out); retried later
    except ApprovalPending:
        return "paused"  # the caller resumes it with approvals=
    except RunCancelled:
        return "cancelled"
    except ProviderError as exc:
        logger.warning("worker %s: run %s: %s", worker, run_id, exc)
        return "retry" if exc.retryable else "failed"
    except (RunError, UserError) as exc:
        logger.warning("worker %s: run %s failed: %s", worker, run_id, exc)
        return "failed"
    return "replayed" if result.replayed else "completed"


async def record_unrunnable(
    db: Store, run_id: str, agent: str, session_id: Any, why: str, error_type: str
) -> None:
    """Store a failed run for a task no worker can run (unknown agent, bad import path).

    A run already in the store is left as it is: the task is a late duplicate.
    """
    logger.error("task %s cannot run: %s", run_id, why)
    if await db.load(run_id) is not None:
        return
    now = time.time()
    info = RunInfo(
        run_id=run_id,
        agent=agent,
        session_id=session_id,
        status="failed",
        finish_reason="error",
        error_type=error_type,
        started_at=now,
        ended_at=now,
        extra={"error": why},
    )
    await db.finish(info, None)


async def wait_for_run(
    db: Store,
    run_id: str,
    *,
    settled: Callable[[RunSnapshot], Awaitable[bool]] | None = None,
    timeout_s: float = 60.0,
    poll_s: float = 0.2,
) -> RunSnapshot:
    """Wait until the run completed, or ended and ``settled(snapshot)`` agrees.

    A store that pushes run ends (PostgreSQL's ``LISTEN``/``NOTIFY``) wakes the waiter
    when the run finishes, re-read then and every :data:`WATCH_RECHECK_S` seconds in
    case a notification was lost; other stores are polled, every ``poll_s`` seconds at
    first, backing off to :data:`MAX_POLL_S`. ``settled`` lets a queue keep waiting on a
    failed run it will deliver again. Raises ``TimeoutError`` after ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    delay = poll_s
    async with _watch(db, run_id) as watch:
        while True:
            snap = await db.load(run_id)
            if snap is not None and await _settled(snap, settled):
                return snap
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"run {run_id} did not end within {timeout_s:g} s")
            ended = snap is not None and snap.info.status in _ENDED  # waiting on settled
            if watch is not None and not ended and await watch.listen():
                await watch.wait(min(left, WATCH_RECHECK_S))
                continue
            await asyncio.sleep(min(left, delay))
            delay = min(delay * 2, max(poll_s, MAX_POLL_S))


WATCH_RECHECK_S = 5.0
"""How often a waiter woken by notifications re-reads the run anyway."""
MAX_POLL_S = 1.0
"""The longest pause between two reads of a polled run."""


@asynccontextmanager
async def _watch(db: Store, run_id: str) -> AsyncGenerator[RunWatch | None]:
    if not isinstance(db, RunWatcher):
        yield None
        return
    async with db.watch_run(run_id) as watch:
        yield watch


async def _settled(
    snap: RunSnapshot, settled: Callable[[RunSnapshot], Awaitable[bool]] | None
) -> bool:
    status = snap.info.status
    if status not in _ENDED:
        return False
    return status == "completed" or settled is None or await settled(snap)
