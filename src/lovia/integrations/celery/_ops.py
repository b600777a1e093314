"""What keeps a fleet of Celery workers operable: broker settings, the front queue, a
bounded shutdown, the sweep for interrupted runs, the queue-depth gauge.

- :data:`CELERY_DEFAULTS` are applied to the app (a setting the app already made is
  kept). ``worker_enable_prefetch_count_reduction=False``: after a broker connection
  drop, Celery otherwise lowers the prefetch count with ``basic.qos`` on the new
  connection and blocks there until the AMQP heartbeat gives up (minutes);
  ``broker_heartbeat=10`` bounds any such wait; prefetch 1 with late acknowledgement
  keeps a worker from holding runs it is not running.
- Every worker that consumes the run queue also consumes ``<queue>.front``, where
  redeliveries after a lost worker, runs handed back at shutdown and runs found
  interrupted go: they are not queued behind the backlog.
- On a warm shutdown (``worker_shutting_down``) runs get ``drain_timeout_s`` to finish;
  the rest are cancelled at their next step, release their lease and are re-published
  to the front queue (resumed from their checkpoint by another worker).
- Every ``sweep_s`` a worker lists the store's interrupted runs (lease expired: their
  worker died or stalled) of the agents it serves, claims each with a store lease on
  ``<run_id>:requeue`` (one worker re-queues it) and publishes it to the front queue.
  The run's lease and fencing still decide who executes it. A run whose lost workers
  reached ``max_kills`` is dead-lettered by the sweep at once (its last worker died
  too: no attempt is started to find out again). The re-queued task carries the
  ``deps_key`` its run was started with: a worker stores it in the run's row
  (``RunInfo.extra["deps_key"]``). A stored key that is not a str of at most 256
  printable characters dead-letters the run (``bad_deps_key``); on a queue with a
  ``deps`` factory a run without a stored key (submitted with ``deps_key=None``, or
  started before keys were stored) is left to the broker: the factory is never
  guessed a key.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from typing import Any, Protocol

from ... import lease_ttl
from ...errors import UserError
from ...runner import check_deps_key
from ...stores.base import DEPS_KEY
from ...stores.lifecycle import list_lives, owner_id
from ...workers.marks import admit, poison_error
from ._process import ProcessLoop, process_loop
from ._task import BAD_DEPS_KEY, Settings, dead_letter


class CeleryRunQueue(Protocol):
    """What the operations need of a ``CeleryRunQueue`` (the package's class)."""

    app: Any
    task: Any
    settings: Settings


__all__ = ["CELERY_DEFAULTS", "apply_defaults", "start_operations"]

logger = logging.getLogger("lovia.integrations.celery")

CELERY_DEFAULTS: dict[str, Any] = {
    "worker_enable_prefetch_count_reduction": False,
    "worker_prefetch_multiplier": 1,
    "broker_heartbeat": 10,
    "broker_connection_retry": True,
    "broker_connection_max_retries": None,
    "broker_connection_retry_on_startup": True,
    "task_acks_late": True,
    "task_reject_on_worker_lost": True,
}
"""The Celery settings lovia's queue needs to survive broker drops and lost workers."""


def apply_defaults(app: Any) -> dict[str, Any]:
    """Set :data:`CELERY_DEFAULTS` on ``app`` where the app did not choose; return what
    was set."""
    chosen: Any = app.conf.changes
    applied = {k: v for k, v in CELERY_DEFAULTS.items() if k not in chosen}
    app.conf.update(applied)
    return applied


def start_operations(runs: CeleryRunQueue) -> None:
    """Connect the worker signals of ``runs``' queue (they fire only in a worker)."""
    signals: Any = importlib.import_module("celery.signals")
    settings = runs.settings
    consuming: list[bool] = [False]

    def after_setup(sender: Any = None, instance: Any = None, **_: Any) -> None:
        queues: Any = instance.app.amqp.queues
        if settings.queue in queues.consume_from:
            queues.select_add(settings.front_queue)
            consuming[0] = True

    def ready(**_: Any) -> None:
        if consuming[0]:
            proc = process_loop()
            asyncio.run_coroutine_threadsafe(_sweep_forever(runs, proc), proc.loop)

    def shutting_down(**_: Any) -> None:
        if consuming[0]:
            process_loop().stop_runs_after(settings.drain_timeout_s)

    signals.celeryd_after_setup.connect(after_setup, weak=False)
    signals.worker_ready.connect(ready, weak=False)
    signals.worker_shutting_down.connect(shutting_down, weak=False)


async def _sweep_forever(runs: CeleryRunQueue, proc: ProcessLoop) -> None:
    owner = owner_id()
    while not proc.stopping.is_set():
        try:
            await sweep(runs, proc, owner)
            await asyncio.to_thread(_observe_depth, runs)
        except Exception:
            logger.exception("sweep of queue %s failed; trying again", runs.settings.queue)
        await asyncio.sleep(runs.settings.sweep_s)


async def sweep(runs: CeleryRunQueue, proc: ProcessLoop, owner: str) -> list[str]:
    """Re-queue the interrupted runs of this queue's agents first; their ids."""
    settings = runs.settings
    db = proc.store(settings.store)
    names = _names_by_agent(runs)
    requeued: list[str] = []
    for info, _ in await list_lives(db, state="interrupted", limit=100):
        name = names.get(str(info.extra.get("first_agent") or info.agent))
        if name is None or (settings.deps is not None and DEPS_KEY not in info.extra):
            continue  # not ours, or its deps key is unknown: left to the broker
        gate = await admit(db, info.run_id, max_kills=settings.max_kills)
        if await db.acquire(f"{info.run_id}:requeue", owner, lease_ttl() + 10) is None:
            continue  # another worker re-queued it
        kwargs: dict[str, Any] = {"run_id": info.run_id, "agent": name, "input": None, "otel": {},
                  "session_id": info.session_id, "deps_key": None}  # fmt: skip
        try:  # stored data: a bad key must not reach the factory, nor stop the sweep
            kwargs["deps_key"] = check_deps_key(info.extra.get(DEPS_KEY))
        except UserError as exc:
            kwargs["last_error"] = f"stored {exc}"
            await asyncio.to_thread(
                dead_letter, runs.app, settings, kwargs, gate.attempts, BAD_DEPS_KEY
            )
            continue
        if gate.verdict == "poison":  # its last worker died too: no new attempt
            kwargs["last_error"] = poison_error(gate.kills)
            await asyncio.to_thread(
                dead_letter, runs.app, settings, kwargs, gate.attempts, "poison", gate.kills
            )
            continue
        await asyncio.to_thread(
            runs.task.apply_async, kwargs=kwargs, task_id=info.run_id, queue=settings.front_queue
        )
        logger.warning("run %s was interrupted; re-queued first", info.run_id)
        requeued.append(info.run_id)
    return requeued


def _names_by_agent(runs: CeleryRunQueue) -> dict[str, str]:
    """Agent name -> the registry name a task uses for it (registered agents only)."""
    registry = runs.settings.agents
    found: dict[str, str] = {}
    for name in registry.names():
        try:
            found.setdefault(registry.resolve(name, "the sweep").name, name)
        except Exception:
            continue  # not importable here: its tasks fail on their own
    return found


def _observe_depth(runs: CeleryRunQueue) -> None:
    """Set the depth gauge from the broker (messages ready in the queues)."""
    settings = runs.settings
    if settings.metrics is None:
        return
    counts: list[int] = []
    for name in (settings.queue, settings.front_queue, settings.dead_letter_queue):
        with runs.app.connection_for_read() as conn:
            try:
                _, ready, _ = conn.default_channel.queue_declare(queue=name, passive=True)
            except Exception:
                ready = 0  # not declared yet
        counts.append(int(ready))
    settings.metrics.depth(counts[0] + counts[1], None, counts[2])
