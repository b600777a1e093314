# pyright: reportUnnecessaryIsInstance=false
# (runtime checks of user input are deliberate: not every caller runs a type checker)
"""Runs as Celery tasks: ``CeleryRunQueue`` registers the task, submits, waits, cancels.

Needs the ``celery`` extra (``pip install 'lovia[celery]'``). The submitter and the
workers build the same ``CeleryRunQueue(app, store=...)`` (usually in the module that
``celery -A`` loads). A task names its agent by one of the names in the queue's
``agents=`` registry (anyone who can publish to the broker chooses that name, so a
worker runs only registered agents and imports nothing a message names); its
``run_id`` is the Celery task id and lovia's idempotency key. Correctness comes from
the store, as with ``lovia.workers``: a task delivered again resumes its run from the checkpoint, or
returns the stored result without a model call.

- ``acks_late`` + ``reject_on_worker_lost``: a task is acknowledged when its run ended,
  so a killed worker's runs are delivered again and resume.
- One event loop per worker process (``_process``): run the worker with
  ``--pool threads --concurrency N`` and one process carries N runs on one loop.
- Results are read from lovia's store (``result``/``get``), never from a Celery result
  backend; ``cancel(run_id)`` stores the cancel on the run (a queued run never starts)
  and broadcasts it to the worker running it.
- Operations (``_ops``): the app gets settings that survive a broker connection drop
  (:data:`CELERY_DEFAULTS`); a warm shutdown waits ``drain_timeout_s`` for runs, then
  hands the rest back to the front queue; every worker sweeps the store for
  interrupted runs of its agents (a stalled worker's runs) and re-queues them first,
  with the ``deps_key`` stored in the run's row (``RunInfo.extra["deps_key"]``).
- The submitter's OpenTelemetry context travels in the task, so the run's
  ``invoke_agent`` span is a child of the span that submitted it.
"""

from __future__ import annotations

import importlib
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import propagate

from ...agent import Agent
from ...errors import UserError
from ...runner import check_deps_key
from ...stores.base import RunSnapshot
from ...workers.execute import encode_input, wait_for_run
from ...workers.marks import request_cancel
from ...workers.metrics import queue_metrics
from ...workers.registry import AgentRegistry
from ._ops import CELERY_DEFAULTS, apply_defaults, start_operations
from ._process import process_loop, shutdown
from ._task import Settings, dead_letter_queue, run_delivery

try:  # celery ships no type information: its modules are Any here
    signals: Any = importlib.import_module("celery.signals")
    control_command: Any = importlib.import_module("celery.worker.control").control_command
except ImportError as exc:
    raise UserError(
        "lovia.integrations.celery needs the celery package", hint="pip install 'lovia[celery]'"
    ) from exc

__all__ = ["CELERY_DEFAULTS", "CeleryRunQueue", "apply_defaults"]

CANCEL_COMMAND = "lovia_cancel"


class CeleryRunQueue:
    """Run tasks on a Celery app, with results and cancellation through lovia's store.

    ``store`` is the URL of the store every worker shares (PostgreSQL across machines).
    ``queue`` is the Celery queue of the runs (start workers with ``-Q`` naming it);
    ``max_deliveries`` bounds how often one run is delivered (retries and redeliveries
    after a lost worker) before it goes to ``<queue>.dead``; ``retry_delay_s`` is the
    countdown of a retry, by default the lease TTL + 10 s (``LOVIA_LEASE_TTL_S``), so the
    lease of a worker lost on another host has expired when the run is tried again.
    ``deps`` is the import path of a ``deps(deps_key)`` factory.

    Operations: ``max_kills`` dead-letters a run whose worker was lost that many times
    (a Redis Streams worker runs one that lost a worker alone; Celery does not);
    ``drain_timeout_s`` bounds a warm shutdown (the default fits Kubernetes' 30 s grace
    period); ``sweep_s`` is how often a worker looks for interrupted runs to re-queue.
    The app's settings are completed with :data:`CELERY_DEFAULTS` (a setting you made
    is kept).

    ``agents`` is the registry of the agents workers run: ``{"support": support_agent}``
    (names to agents or to their import paths) or a list of allowed import paths. A
    task naming anything else is recorded as failed (``UnknownAgent``) and sent to
    ``<queue>.dead`` without importing or calling anything.
    """

    def __init__(
        self,
        app: Any,
        store: str,
        *,
        agents: Mapping[str, Agent[Any, Any] | str] | Sequence[str] | None = None,
        queue: str = "lovia.runs",
        task_name: str = "lovia.run",
        max_deliveries: int = 10,
        retry_delay_s: float | None = None,
        cancel_memory_s: float = 300.0,
        deps: str | None = None,
        max_kills: int | None = 3,
        drain_timeout_s: float = 20.0,
        sweep_s: float = 10.0,
    ) -> None:
        if not isinstance(store, str):
            raise UserError(
                "CeleryRunQueue(store=...) takes a store URL",
                hint="Each worker process opens it on its own loop: pass e.g. 'postgresql://...'.",
            )
        if max_deliveries < 1:
            raise UserError("CeleryRunQueue(max_deliveries=...) must be at least 1")
        if agents is None:
            raise UserError(
                "CeleryRunQueue(agents=...) is required: the agents its workers may run",
                hint='Pass agents={"support": support_agent} (or a list of import paths such '
                'as ["myapp.agents:support"]); a task naming anything else is refused.',
            )
        if max_kills is not None and max_kills < 1:
            raise UserError("CeleryRunQueue(max_kills=...) must be at least 1 (or None: never)")
        self.app = app
        apply_defaults(app)
        self.settings = Settings(
            store=store,
            agents=AgentRegistry(agents, owner="CeleryRunQueue"),
            queue=queue,
            dead_letter_queue=f"{queue}.dead",
            max_deliveries=max_deliveries,
            retry_delay_s=retry_delay_s,
            deps=deps,
            cancel_memory_s=cancel_memory_s,
            front_queue=f"{queue}.front",
            max_kills=max_kills,
            drain_timeout_s=drain_timeout_s,
            sweep_s=sweep_s,
            metrics=queue_metrics("celery", queue),
        )
        settings = self.settings

        def run(task: Any, **kwargs: Any) -> str:
            return run_delivery(task, settings, kwargs)

        run.__name__ = run.__qualname__ = "lovia_run"
        self.task: Any = app.task(
            name=task_name,
            bind=True,
            acks_late=True,
            reject_on_worker_lost=True,
            ignore_result=True,
            max_retries=None,
        )(run)
        start_operations(self)

    def submit(
        self,
        agent: str,
        input: Any = None,
        *,
        run_id: str | None = None,
        session_id: str | None = None,
        deps_key: str | None = None,
    ) -> str:
        """Queue a run of the agent registered as ``agent``; return its ``run_id``.

        ``run_id`` (generated when absent) is the idempotency key: submitting it again
        is safe. The current OpenTelemetry context goes along with the task. ``deps_key``
        (at most 256 printable characters, checked here) is handed to the workers'
        ``deps`` factory and stored with the run, so the sweep re-queues it with it.
        """
        if not isinstance(agent, str):
            raise UserError(
                f"submit() takes the agent's registered name, got {type(agent).__name__}",
                hint=f"Write queue.submit(name, ...) with a name of agents=: "
                f"{', '.join(self.settings.agents.names())}.",
            )
        self.settings.agents.check(agent, "this queue")
        check_deps_key(deps_key)
        run_id = run_id or secrets.token_hex(16)
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        kwargs = {
            "run_id": run_id,
            "agent": agent,
            "input": encode_input(input),
            "session_id": session_id,
            "deps_key": deps_key,
            "otel": carrier,
        }
        self.task.apply_async(kwargs=kwargs, task_id=run_id, queue=self.settings.queue)
        return run_id

    async def result(
        self, run_id: str, *, timeout_s: float = 60.0, poll_s: float = 0.2
    ) -> RunSnapshot:
        """Wait until the stored run completed, failed or paused; return it.

        ``.info.status`` and ``.result["output"]`` as with ``RunQueue.result``; raises
        ``TimeoutError`` after ``timeout_s`` seconds.
        """
        return await process_loop().wait(self._wait(run_id, timeout_s, poll_s))

    def get(self, run_id: str, *, timeout_s: float = 60.0, poll_s: float = 0.2) -> RunSnapshot:
        """Blocking :meth:`result` (like ``AsyncResult.get``), for synchronous code."""
        return process_loop().call(self._wait(run_id, timeout_s, poll_s))

    async def _wait(self, run_id: str, timeout_s: float, poll_s: float) -> RunSnapshot:
        db = process_loop().store(self.settings.store)
        return await wait_for_run(db, run_id, timeout_s=timeout_s, poll_s=poll_s)

    def cancel(
        self, run_id: str, reason: str = "cancelled", *, timeout_s: float = 1.0
    ) -> list[str]:
        """Cancel the run wherever it runs; return the workers that were running it.

        The cancel is stored on the run first (a worker reads it before it starts any
        delivery, so a queued run never starts, even after a worker restart), then
        broadcast to every worker: the one executing the run cancels its token (the
        run ends as cancelled and stays resumable); the others hold the cancel for
        ``cancel_memory_s``.
        """
        process_loop().call(self._store_cancel(run_id, reason))
        remember_s = self.settings.cancel_memory_s
        arguments = {"run_id": run_id, "reason": reason, "remember_s": remember_s}
        replies: list[dict[str, dict[str, Any]]] = self.app.control.broadcast(
            CANCEL_COMMAND, arguments=arguments, reply=True, timeout=timeout_s
        )
        running: list[str] = []
        for reply in replies:
            running += [name for name, answer in reply.items() if answer.get("running")]
        return sorted(running)

    async def _store_cancel(self, run_id: str, reason: str) -> str:
        return await request_cancel(process_loop().store(self.settings.store), run_id, reason)

    def dead_letters(self) -> list[dict[str, Any]]:
        """The tasks in the dead-letter queue (left there): their kwargs and deliveries."""
        queue = dead_letter_queue(self.settings.dead_letter_queue)
        found: list[dict[str, Any]] = []
        with self.app.connection_for_read() as conn:
            bound: Any = queue(conn.default_channel)
            bound.declare()
            messages: list[Any] = []
            while (message := bound.get(no_ack=False)) is not None:
                messages.append(message)
                body: dict[str, Any] = message.decode()
                found.append(body)
            for message in messages:
                message.requeue()
        return found


@control_command(
    args=[("run_id", str), ("reason", str), ("remember_s", float)],
    signature="<run_id> [reason] [remember_s]",
)
def lovia_cancel(
    state: Any, run_id: str, reason: str = "cancelled", remember_s: float = 300.0
) -> dict[str, Any]:
    """Worker side of :meth:`CeleryRunQueue.cancel` (runs in the worker's consumer)."""
    return {"running": process_loop().cancel(run_id, reason, remember_s)}


def _on_shutdown(**_: Any) -> None:
    shutdown()


signals.worker_shutdown.connect(_on_shutdown, weak=False)
