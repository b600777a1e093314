"""What a task queue writes into the store and reads back before it starts a run.

Both back-ends (the Redis Streams :class:`~lovia.workers.Worker` and the Celery task)
keep the facts an operator needs in lovia's store, where ``lovia runs``/``show`` and
``lovia web`` read them, rather than only in the broker:

- a **cancel request** (``lovia.stores.lifecycle.request_cancel``): the run's row says
  ``cancelled`` with ``extra["cancel_requested"]``, written whether the run is queued, running or
  interrupted; a worker checks it before it starts a delivery (:func:`admit`), so a
  queued run cannot escape its cancel, even across a worker restart;
- a **dead letter** (:func:`mark_dead_lettered`): the row says ``failed`` with
  ``extra["dead_letter"]`` (deliveries, lost workers, last error): the derived state is
  ``dead_lettered``;
- **lost workers** (:func:`admit`): attempts that ended with their worker killed or
  stalled past its lease. A run that lost ``max_kills`` workers is poison: it is
  dead-lettered instead of started again; one that lost a worker is a suspect, run
  alone (``Admission.suspect``), so it cannot take other runs down with it again.

Nothing here imports a queue library.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..stores import Checkpointer
from ..stores.base import RunInfo, RunSnapshot
from ..stores.lifecycle import DEAD_LETTER_KEY, cancel_request, life_of, request_cancel

__all__ = [
    "BAD_DEPS_KEY",
    "Admission",
    "admit",
    "cancel_request",
    "mark_dead_lettered",
    "poison_error",
    "request_cancel",
]

logger = logging.getLogger("lovia.workers")

BAD_DEPS_KEY = "bad_deps_key"
"""The outcome and dead-letter reason of a task whose ``deps_key`` is not a str of at most
256 printable characters (on both queue back-ends): its run is dead-lettered, the deps
factory never called."""
LOST = ("killed", "lease_lost")
"""How an attempt ended when its worker died or stalled (see ``lovia.stores.lifecycle``)."""
_SHOWN = 500
"""At most this many characters of an error are kept in the dead-letter mark."""


async def mark_dead_lettered(
    db: Checkpointer,
    task: dict[str, Any],
    *,
    deliveries: int,
    reason: str,
    last_error: str | None,
    queue: str,
    kills: int = 0,
) -> None:
    """Mark the task's run ``dead_lettered`` in the store (created when never started).

    The run's checkpoint is kept: it can still be resumed by hand (``lovia resume``).
    """
    run_id = str(task["run_id"])
    snap = await db.load(run_id)
    now = time.time()
    if snap is not None and snap.info.status == "completed":
        return  # a late duplicate of a run that finished
    if snap is None:
        shown = str(task.get("agent") or "?")[:100]
        info = RunInfo(run_id=run_id, agent=shown, session_id=task.get("session_id"))
        info.started_at = now
    else:
        info = replace(snap.info, extra=dict(snap.info.extra))
    error = (last_error or "")[:_SHOWN] or None
    info.status, info.error_type, info.ended_at = "failed", "DeadLettered", now
    info.extra[DEAD_LETTER_KEY] = {
        "deliveries": deliveries,
        "kills": kills,
        "last_error": error,
        "reason": reason,
        "queue": queue,
        "at": now,
    }
    info.extra["error"] = f"dead-lettered after {deliveries} deliveries ({reason})" + (
        f": {error}" if error else ""
    )
    info.extra["hint"] = (
        "A task queue gave up on this run; its checkpoint is kept. Fix the cause, then "
        "resume it: lovia resume RUN --agent pkg.module:agent."
    )
    await db.finish(info, None)


def poison_error(kills: int) -> str:
    """The last error a poison run is dead-lettered with."""
    return f"its worker was lost (killed or stalled) in {kills} attempts"


@dataclass(frozen=True, slots=True)
class Admission:
    """What a worker does with a delivery before it starts the run (see :func:`admit`)."""

    verdict: Literal["run", "cancelled", "ended", "poison"]
    """``run``; ``cancelled`` (a cancel request is stored: acknowledge, do not start);
    ``ended`` (dead-lettered already: a late duplicate); ``poison`` (dead-letter it)."""
    kills: int = 0
    """Attempts of the run whose worker was killed or stalled past its lease."""
    detail: str = ""
    attempts: int = 0
    """The run's attempts so far (lease grants)."""

    @property
    def suspect(self) -> bool:
        """It lost a worker before: run it alone, so it takes no other run down."""
        return self.verdict == "run" and self.kills > 0


async def admit(db: Checkpointer, run_id: str, *, max_kills: int | None) -> Admission:
    """Read the run's row and attempts: may this delivery start it?"""
    snap: RunSnapshot | None = await db.load(run_id)
    if snap is None:
        return Admission("run")
    info = snap.info
    reason = cancel_request(info)
    if reason is not None:
        return Admission("cancelled", detail=reason)
    if info.status == "failed" and DEAD_LETTER_KEY in info.extra:
        return Admission("ended", detail="dead-lettered already")
    if info.status not in ("running", "failed", "cancelled"):
        return Admission("run")  # completed (replayed without a call) or paused
    life = await life_of(db, info, snap)
    kills = sum(1 for a in life.attempts if a.how in LOST)
    if max_kills is not None and kills >= max_kills:
        detail = poison_error(kills)
        return Admission("poison", kills=kills, detail=detail, attempts=len(life.attempts))
    return Admission("run", kills=kills, attempts=len(life.attempts))
