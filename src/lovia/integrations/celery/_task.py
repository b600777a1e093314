"""The body of the ``lovia.run`` Celery task: one delivery of one run.

Each delivery runs ``Runner.run`` on the process loop with the store as checkpointer
and session store; ``run_id`` makes every delivery after the first a resume (or a
replay of the stored result). Outcomes a later delivery could fix (another worker's
lease, a retryable provider error, a store error) are retried with ``task.retry``; a
run delivered ``max_deliveries`` times goes to the dead-letter queue instead. A
redelivery after a lost worker (``redelivered`` from the broker) is counted too: it is
re-published as a retry first, so a run that kills its worker every time still ends in
the dead-letter queue.

Before a delivery starts its run it reads the store (``lovia.workers.marks.admit``): a
stored cancel request ends it unstarted; a run that lost ``max_kills`` workers is
dead-lettered (poison); a ``deps_key`` that is not a str of at most 256 printable
characters dead-letters it (``bad_deps_key``) before the ``deps`` factory sees it.
Redeliveries, runs handed back at shutdown and runs the sweep found interrupted go to
the front queue ``<queue>.front``, which every worker of the queue also consumes.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate

from ... import lease_ttl
from ...context import CancelToken
from ...errors import UserError
from ...runner import check_deps_key
from ...workers.execute import execute_run, record_unrunnable
from ...workers.marks import BAD_DEPS_KEY, admit, mark_dead_lettered, poison_error
from ...workers.metrics import QueueMetrics
from ...workers.registry import AgentRegistry, UnknownAgent
from ._process import SHUTDOWN, ProcessLoop, maybe_await, process_loop

__all__ = [
    "BAD_DEPS_KEY",
    "RETRIED",
    "Settings",
    "dead_letter",
    "dead_letter_queue",
    "run_delivery",
]

logger = logging.getLogger("lovia.integrations.celery")

RETRIED = frozenset({"lease_held", "retry", "error"})
"""Outcomes that ask for another delivery (``error``: an unexpected exception)."""


@dataclass(frozen=True, slots=True)
class Settings:
    """What every delivery needs to know; the same on the submitter and the workers."""

    store: str
    agents: AgentRegistry
    """The only agents a task may name (fixed at start-up; nothing else is imported)."""
    queue: str
    dead_letter_queue: str
    max_deliveries: int
    retry_delay_s: float | None
    deps: str | None
    cancel_memory_s: float
    front_queue: str = ""
    """Where redeliveries, hand-backs and swept runs go: consumed before the backlog."""
    max_kills: int | None = 3
    drain_timeout_s: float = 20.0
    sweep_s: float = 10.0
    metrics: QueueMetrics | None = None


def dead_letter_queue(name: str) -> Any:
    """The durable queue (with its direct exchange) dead-lettered tasks are published to."""
    from kombu.entity import Exchange, Queue

    return Queue(name, Exchange(name, type="direct"), routing_key=name, durable=True)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def run_delivery(task: Any, settings: Settings, kwargs: dict[str, Any]) -> str:
    """Run one delivery of a ``lovia.run`` task; return its outcome, or raise ``Retry``."""
    request = task.request
    deliveries = int(request.retries or 0) + 1
    info: dict[str, Any] = request.delivery_info or {}
    redelivered = bool(info.get("redelivered"))
    if settings.metrics is not None:
        settings.metrics.delivered(redelivery=redelivered or deliveries > 1)
    if redelivered:  # its worker was lost: count that delivery, then go on as a retry
        return _again(task, settings, kwargs, deliveries, "its worker was lost", countdown=0.0)
    proc = process_loop()
    outcome = proc.call(_execute(proc, settings, kwargs))
    if outcome == "unknown_agent":  # no delivery fixes it: refused, kept for the operator
        return dead_letter(task.app, settings, kwargs, deliveries, outcome)
    if outcome.startswith("poison:"):
        kills = int(outcome[7:])
        last = poison_error(kills)
        again = {**kwargs, "last_error": last}
        return dead_letter(task.app, settings, again, deliveries, "poison", kills)
    if outcome.startswith(f"{BAD_DEPS_KEY}:"):  # no delivery fixes it
        bad = {**kwargs, "deps_key": None, "last_error": outcome[len(BAD_DEPS_KEY) + 1 :]}
        return dead_letter(task.app, settings, bad, deliveries, BAD_DEPS_KEY)
    if outcome == "handed_back":  # stopped by shutdown, lease released: first in line
        raise task.retry(countdown=0, max_retries=None, queue=settings.front_queue or None)
    if outcome in RETRIED:
        delay = settings.retry_delay_s
        delay = lease_ttl() + 10 if delay is None else delay  # a dead holder's lease expired
        return _again(task, settings, kwargs, deliveries, outcome, delay)
    return outcome


def _again(
    task: Any,
    settings: Settings,
    kwargs: dict[str, Any],
    deliveries: int,
    why: str,
    countdown: float,
) -> str:
    """Retry the task, or dead-letter it once it was delivered ``max_deliveries`` times.

    A redelivery after a lost worker goes to the front queue (not behind the backlog).
    """
    if deliveries < settings.max_deliveries:
        again = {**kwargs, "last_error": why}
        front = settings.front_queue if countdown == 0 and settings.front_queue else None
        raise task.retry(kwargs=again, countdown=countdown, max_retries=None, queue=front)
    return dead_letter(task.app, settings, {**kwargs, "last_error": why}, deliveries, why)


def dead_letter(
    app: Any, settings: Settings, kwargs: dict[str, Any], deliveries: int, why: str, kills: int = 0
) -> str:
    """Mark the task's run ``dead_lettered`` in the store, then publish the task to the
    dead-letter queue (its delivery is then acknowledged): a dead letter anyone sees is
    already marked in the store."""
    logger.error(
        "run %s: dead-lettered after %d deliveries (%s)", kwargs.get("run_id"), deliveries, why
    )
    if why != "unknown_agent":  # an unknown agent's run is stored failed (UnknownAgent)
        last = kwargs.get("last_error")
        proc = process_loop()
        proc.call(
            _mark(proc, settings, kwargs, deliveries, why, str(last) if last else None, kills)
        )
    queue = dead_letter_queue(settings.dead_letter_queue)
    body = {**kwargs, "deliveries": deliveries, "reason": why}
    body.pop("otel", None)
    with app.producer_or_acquire() as producer:
        producer.publish(
            body,
            exchange=queue.exchange,
            routing_key=queue.routing_key,
            declare=[queue],
            serializer="json",
            retry=True,
        )
    if settings.metrics is not None:
        settings.metrics.dead_lettered("max_deliveries" if why in RETRIED else why)
    return "dead_lettered"


async def _mark(
    proc: ProcessLoop,
    settings: Settings,
    kwargs: dict[str, Any],
    deliveries: int,
    why: str,
    last_error: str | None,
    kills: int,
) -> None:
    db = proc.store(settings.store)
    await mark_dead_lettered(
        db,
        kwargs,
        deliveries=deliveries,
        reason=why,
        last_error=last_error,
        queue=settings.queue,
        kills=kills,
    )


async def _execute(proc: ProcessLoop, settings: Settings, kwargs: dict[str, Any]) -> str:
    """One run on the process loop, inside the submitter's trace context."""
    run_id = str(kwargs["run_id"])
    if proc.take_cancel(run_id) is not None:
        logger.info("run %s: cancelled before this delivery started", run_id)
        return "cancelled"
    gate = await admit(proc.store(settings.store), run_id, max_kills=settings.max_kills)
    if gate.verdict in ("cancelled", "ended"):
        logger.info("run %s: not started: %s", run_id, gate.detail)
        return "cancelled" if gate.verdict == "cancelled" else "refused"
    if gate.verdict == "poison":
        logger.error("run %s is poison: %s", run_id, gate.detail)
        return f"poison:{gate.kills}"
    token = CancelToken()
    if run_id not in proc.inflight:  # a duplicate delivery here ends at once (lease held)
        proc.inflight[run_id] = token
    carrier: dict[str, str] = kwargs.get("otel") or {}
    attached = otel_context.attach(propagate.extract(carrier))
    if settings.metrics is not None:
        settings.metrics.busy(+1)
    try:
        # A suspect (it lost a worker before) runs like any other run here: holding a
        # process alone for it stalled recovery after kills; Redis Streams isolates it.
        outcome = await _run(proc, settings, kwargs, token)
        return "handed_back" if outcome == "cancelled" and token.reason == SHUTDOWN else outcome
    except Exception:
        logger.exception("run %s: unexpected error; delivering it again", run_id)
        return "error"
    finally:
        otel_context.detach(attached)
        if settings.metrics is not None:
            settings.metrics.busy(-1)
        if proc.inflight.get(run_id) is token:
            del proc.inflight[run_id]


async def _run(
    proc: ProcessLoop, settings: Settings, kwargs: dict[str, Any], token: CancelToken
) -> str:
    db = proc.store(settings.store)
    name = kwargs.get("agent")
    try:  # the name comes from whoever published the task: only registered agents run
        agent = settings.agents.resolve(name, f"worker {worker_name()}")
    except UserError as exc:  # not registered, or its registered path does not import
        kind = "UnknownAgent" if isinstance(exc, UnknownAgent) else type(exc).__name__
        shown = str(name)[:100]
        await record_unrunnable(
            db, str(kwargs["run_id"]), shown, kwargs.get("session_id"), str(exc), kind
        )
        return "unknown_agent"
    try:  # data from the broker: checked before any factory sees it
        deps_key = check_deps_key(kwargs.get("deps_key"))
    except UserError as exc:
        logger.error("run %s: %s; dead-lettered", kwargs["run_id"], exc)
        return f"{BAD_DEPS_KEY}:{exc}"
    deps = None
    if settings.deps is not None:
        factory = proc.imported(settings.deps)
        deps = await maybe_await(factory(deps_key))
    return await execute_run(agent, kwargs, db, deps=deps, token=token, worker=worker_name())
