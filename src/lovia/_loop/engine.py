"""Host engines: a run inside a DBOS workflow, a Temporal activity, or any task its owner
may cancel.

Such a host stops the code it runs with its own control flow: ``asyncio.CancelledError``
delivered by ``task.cancel()`` (a Temporal activity's cancellation, a DBOS preemptible
step, a caller's timeout), a ``BaseException`` that is not an ``Exception`` (DBOS's
``DBOSWorkflowCancelledError``, ``KeyboardInterrupt``), or an engine's own cancellation
type that is an ``Exception`` (``temporalio.exceptions.CancelledError``). Those pass
through tool execution untouched — never an error result the model sees — and the run
ends **cancelled**: its status and lifecycle record say so, and the exception goes on to
the host, which needs it. Nothing here imports an engine: their types are looked up
only when the engine's module is already loaded.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable

from ..errors import RunCancelled
from .state import RunState

__all__ = ["host_cancelled", "host_stop", "record_host_stop"]

logger = logging.getLogger("lovia.loop")

_ENGINE_TYPES: tuple[tuple[str, str], ...] = (
    ("temporalio.exceptions", "CancelledError"),
    ("dbos._error", "DBOSWorkflowCancelledError"),
    ("dbos._error", "DBOSWorkflowConflictIDError"),
)
"""(module, class) of engine control-flow exceptions, checked when the module is loaded."""


def _engine_types() -> tuple[type[BaseException], ...]:
    found: list[type[BaseException]] = []
    for module_name, name in _ENGINE_TYPES:
        module = sys.modules.get(module_name)
        cls = getattr(module, name, None) if module is not None else None
        if isinstance(cls, type) and issubclass(cls, BaseException):
            found.append(cls)
    return tuple(found)


def host_stop(exc: BaseException) -> bool:
    """True when ``exc`` is a host's way to stop the run, not a failure of the run.

    ``asyncio.CancelledError`` counts only when the current task was cancelled (a
    ``task.cancel()`` from outside: the run's own cancellations are undone before this
    is asked); one a piece of code raised by itself does not.
    """
    if isinstance(exc, asyncio.CancelledError):
        task = asyncio.current_task()
        return task is not None and task.cancelling() > 0
    if isinstance(exc, GeneratorExit):
        return False
    if not isinstance(exc, Exception):
        return True
    engine = _engine_types()
    return bool(engine) and isinstance(exc, engine)


def host_cancelled(state: RunState, exc: BaseException) -> RunCancelled:
    """What the store records for a run its host stopped (the run stays resumable)."""
    what = type(exc).__name__
    error = RunCancelled(
        f"run {state.run_id} was stopped by its host at turn {state.progress.turn} ({what})",
        hint="Its checkpoint is resumable: run again with the same run_id (a durable "
        "engine's recovery does this).",
    )
    error.run_id, error.turn = state.run_id, state.progress.turn
    error.cancelled_by = f"host: {what}"
    return error


async def record_host_stop(
    state: RunState, exc: BaseException, mark: Callable[[RunState, BaseException], Awaitable[None]]
) -> None:
    """Record the run as cancelled with ``mark``, even when the host cancels again
    meanwhile (the write finishes; the host's exception is raised by the caller)."""
    write = asyncio.ensure_future(mark(state, host_cancelled(state, exc)))
    while not write.done():
        try:
            await asyncio.shield(write)
        except asyncio.CancelledError:
            continue  # cancelled again: the write goes on, the first stop is what is raised
        except Exception:  # mark logs its own failures; nothing else should reach here
            logger.exception("recording the host's stop of run %s failed", state.run_id)
            return
