# pyright: reportUnnecessaryIsInstance=false
# (runtime checks of user input are deliberate: not every caller runs a type checker)
"""A run as ONE Temporal activity: ``TemporalRuns.activity``, registered on your worker.

Needs the ``temporal`` extra (``pip install 'lovia[temporal]'``). Your workflow (its
id is the run id) executes the activity with a :class:`RunRequest`; the activity runs
``Runner.run`` on lovia's store, so lovia's checkpoint records and per-call ledger are
the journal of the run, and Temporal is its supervisor:

- **Heartbeats**: one on every checkpoint the run writes (its details say which turn
  and which kind), and one on a timer (a long model call writes no checkpoint): every
  third of the activity's heartbeat timeout, or ``heartbeat_s`` without one. A worker
  that dies stops heartbeating; Temporal retries the activity elsewhere, and the run
  resumes from its checkpoint — completed tool calls are not run again.
- **Cancellation**: cancelling the activity (the workflow cancelled, or its scope)
  ends the run *cancelled* in lovia's store, resumable, and the activity raises the
  cancellation as Temporal expects.
- **Fencing**: lovia's lease stays the fence. A retry that finds the lease held by a
  worker still alive elsewhere fails with a retryable ``LeaseHeld`` error (Temporal
  retries it later); a stalled worker that lost its lease cannot write.

The activity returns the run's outcome (``completed``, ``replayed``, ``failed``,
``paused``, ``cancelled``); the run itself is read from lovia's store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ... import events as ev
from ...agent import Agent
from ...errors import UserError
from ...stores import Store
from ...workers.execute import Outcome, encode_input, execute_run
from ...workers.registry import AgentRegistry, UnknownAgent
from .._stores import LoopStores

try:
    from temporalio import activity
    from temporalio.exceptions import ApplicationError
except ImportError as exc:  # pragma: no cover - the extra is installed in the test venv
    raise UserError(
        "lovia.integrations.temporal needs the temporalio package",
        hint="pip install 'lovia[temporal]'",
    ) from exc

__all__ = ["RunRequest", "TemporalRuns", "run_request"]

RETRIED = {"lease_held": "LeaseHeld", "retry": "RetryableProviderError"}
"""Outcomes raised as a retryable ``ApplicationError`` of this type (Temporal tries
again later: another live worker holds the run's lease, or the provider asked for a
retry)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRequest:
    """The activity's one argument (JSON through Temporal's data converter)."""

    agent: str
    """A name in the activity's ``agents=`` registry."""
    input: Any = None
    """The run's input: text, or entries as dicts (``run_request`` encodes them)."""
    run_id: str | None = None
    """None: the calling workflow's id (the usual choice: workflow id = run id)."""
    session_id: str | None = None
    deps_key: str | None = None


def run_request(
    agent: str,
    input: Any = None,
    *,
    run_id: str | None = None,
    session_id: str | None = None,
    deps_key: str | None = None,
) -> RunRequest:
    """A :class:`RunRequest` with ``input`` encoded for the data converter."""
    return RunRequest(
        agent=agent,
        input=encode_input(input),
        run_id=run_id,
        session_id=session_id,
        deps_key=deps_key,
    )


class TemporalRuns:
    """The lovia run activity for a Temporal worker: ``Worker(..., activities=[runs.activity])``.

    ``store`` is the URL of lovia's store every worker shares; ``agents`` the registry of
    the agents a request may name (a name outside it fails without importing anything);
    ``deps(deps_key)`` builds a run's ``RunContext.deps``; ``name`` the activity type.
    """

    def __init__(
        self,
        store: str,
        *,
        agents: Mapping[str, Agent[Any, Any] | str] | Sequence[str],
        name: str = "lovia.run",
        heartbeat_s: float = 10.0,
        deps: Callable[[str | None], Any] | None = None,
    ) -> None:
        if not isinstance(store, str):
            raise UserError(
                "TemporalRuns(store=...) takes a store URL",
                hint="Each event loop opens it on its own: pass e.g. 'postgresql://...'.",
            )
        if not heartbeat_s > 0:
            raise UserError(f"TemporalRuns(heartbeat_s=...) must be positive, got {heartbeat_s}")
        self.agents = AgentRegistry(agents, owner="TemporalRuns")
        self.heartbeat_s = heartbeat_s
        self._deps = deps
        self._stores = LoopStores(store)
        self.activity: Callable[[RunRequest], Awaitable[Outcome]] = activity.defn(name=name)(
            self._activity_fn()
        )

    def _activity_fn(self) -> Callable[[RunRequest], Awaitable[Outcome]]:
        async def lovia_run(request: RunRequest) -> Outcome:
            return await self.run(request)

        return lovia_run

    @property
    def store_url(self) -> str:
        return self._stores.url

    def store(self) -> Store:
        """lovia's store, opened once per event loop."""
        return self._stores.get()

    async def aclose(self) -> None:
        """Close the store this event loop opened (call before the loop ends)."""
        await self._stores.aclose()

    def interval(self) -> float:
        """Seconds between timer heartbeats: a third of the heartbeat timeout, if any."""
        timeout = activity.info().heartbeat_timeout
        if timeout is not None and timeout.total_seconds() > 0:
            return min(self.heartbeat_s, timeout.total_seconds() / 3)
        return self.heartbeat_s

    async def run(self, request: RunRequest) -> Outcome:
        """The activity's body (call it only inside an activity)."""
        info = activity.info()
        run_id = request.run_id or info.workflow_id
        if not run_id:
            raise ApplicationError("no run id: not called from a workflow", non_retryable=True)
        try:
            agent = self.agents.resolve(request.agent, f"activity {info.activity_type!r}")
        except UnknownAgent as exc:  # no retry can fix it
            raise ApplicationError(exc.message, type="UnknownAgent", non_retryable=True) from None
        deps = self._deps(request.deps_key) if self._deps is not None else None
        task = {"run_id": run_id, "input": request.input, "session_id": request.session_id}
        timer = asyncio.ensure_future(_beat_every(self.interval(), run_id))
        try:
            outcome = await execute_run(
                agent, task, self.store(), deps=deps, worker="temporal", on_event=_on_checkpoint
            )
        finally:
            timer.cancel()
        if outcome in RETRIED:
            raise ApplicationError(f"run {run_id}: {outcome}", type=RETRIED[outcome])
        return outcome


def _on_checkpoint(event: ev.Event) -> None:
    """A heartbeat on every checkpoint the run writes."""
    if isinstance(event, ev.CheckpointSaved):
        activity.heartbeat({"run_id": event.run_id, "turn": event.turn, "checkpoint": event.kind})


async def _beat_every(seconds: float, run_id: str) -> None:
    """Heartbeat on a timer too: a long model call or tool writes no checkpoint."""
    while True:
        await asyncio.sleep(seconds)
        activity.heartbeat({"run_id": run_id, "alive": True})
