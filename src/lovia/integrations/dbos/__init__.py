# pyright: reportUnnecessaryIsInstance=false
# (runtime checks of user input are deliberate: not every caller runs a type checker)
"""Runs as DBOS workflows: ``DBOSRuns`` registers the workflow, starts, awaits, cancels.

Needs the ``dbos`` extra (``pip install 'lovia[dbos]'``). One lovia run is one DBOS
workflow whose id is the run id, and the whole run is ONE DBOS step: lovia's own
checkpoint records and per-call ledger are the journal inside it (a DBOS step per model
or tool call would be a second journal of the same calls, and the two disagree on
resume). What DBOS adds is the supervisor: when a worker process dies, DBOS's recovery
(at ``DBOS.launch()`` of an executor with the same executor id, or by DBOS Conductor)
runs the workflow again, the step runs again, and ``Runner.run`` resumes the run from
its checkpoint — completed tool calls are not run again.

lovia's lease and fencing stay the fence: if DBOS ever runs the same workflow twice at
once (a recovery while the old process is only stalled), the second execution finds the
lease held; its step is retried by DBOS (``lease_retries``), and the stalled one cannot
write once it is taken over. Cancelling the workflow (``cancel``, or
``DBOS.cancel_workflow``) preempts the step: the run ends *cancelled* in lovia's store,
and stays resumable (``resume``).

Build ``DBOSRuns`` before ``DBOS.launch()`` in every process that starts or recovers
runs (DBOS finds a recovered workflow's function by the name it was registered under).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from ...agent import Agent
from ...errors import LoviaError, UserError
from ...stores import Store
from ...stores.base import RunSnapshot
from ...workers.execute import Outcome, encode_input, execute_run, wait_for_run
from ...workers.registry import AgentRegistry
from .._stores import LoopStores

try:
    from dbos import DBOS, SetWorkflowID, WorkflowHandleAsync
    from dbos._error import DBOSAwaitedWorkflowCancelledError, DBOSWorkflowIDInUseError
except ImportError as exc:  # pragma: no cover - the extra is installed in the test venv
    raise UserError(
        "lovia.integrations.dbos needs the dbos package", hint="pip install 'lovia[dbos]'"
    ) from exc

__all__ = ["DBOSRuns", "RunAlreadyStarted"]

CANCEL_SETTLE_S = 30.0
"""How long ``result`` of a cancelled workflow waits for its preempted step to record
the run (DBOS checks for cancellation about once a second)."""

_REGISTERED: set[str] = set()
"""Workflow names registered in this process (DBOS keeps one function per name)."""


class RunAlreadyStarted(LoviaError):
    """A workflow with this run id exists: a run id is started once."""


class _TryAgain(Exception):
    """The step's outcome asks for another attempt (a live lease elsewhere, a retryable
    provider error): DBOS retries the step."""


class DBOSRuns:
    """Start, await and cancel lovia runs as DBOS workflows.

    ``store`` is the URL of lovia's store (PostgreSQL when several processes share the
    runs; it may be the database DBOS uses, with its own schema). ``agents`` is the
    registry of the agents a workflow may name (``{"support": support_agent}`` or import
    paths, as for the queue workers): a workflow naming anything else fails without
    importing anything. ``deps(deps_key)`` builds a run's ``RunContext.deps``.

    ``lease_retries`` and ``lease_retry_s`` bound how long a step waits for a lease held
    by another worker (and for a retryable provider error) before its workflow fails: by
    default 12 tries 10 s apart, two minutes, past the default lease TTL (60 s), so the
    lease of a worker lost on another host has expired by then.
    """

    def __init__(
        self,
        store: str,
        *,
        agents: Mapping[str, Agent[Any, Any] | str] | Sequence[str],
        name: str = "lovia.run",
        deps: Callable[[str | None], Any] | None = None,
        lease_retries: int = 12,
        lease_retry_s: float = 10.0,
    ) -> None:
        if not isinstance(store, str):
            raise UserError(
                "DBOSRuns(store=...) takes a store URL",
                hint="Each event loop opens it on its own: pass e.g. 'postgresql://...'.",
            )
        if name in _REGISTERED:
            raise UserError(
                f"a DBOS workflow named {name!r} is already registered in this process",
                hint="Build one DBOSRuns per name (module level, before DBOS.launch()), "
                "or give the second one its own name=.",
            )
        if lease_retries < 1:
            raise UserError("DBOSRuns(lease_retries=...) must be at least 1")
        self.name = name
        self.agents = AgentRegistry(agents, owner="DBOSRuns")
        self._deps = deps
        self._stores = LoopStores(store)
        step = DBOS.step(
            name=f"{name}.step",
            retries_allowed=True,
            max_attempts=lease_retries + 1,
            interval_seconds=lease_retry_s,
            backoff_rate=1.0,
            should_retry=lambda exc: isinstance(exc, _TryAgain),
            preemptible=True,  # DBOS's cancellation stops the run (it ends cancelled)
        )(self._step_fn())

        async def lovia_run(
            agent: str, input: Any, session_id: str | None, deps_key: str | None
        ) -> str:
            run_id = DBOS.workflow_id
            assert run_id is not None  # DBOS runs this only as a workflow
            return await step(run_id, agent, input, session_id, deps_key)

        self._workflow = DBOS.workflow(name=name)(lovia_run)
        _REGISTERED.add(name)

    @property
    def store_url(self) -> str:
        return self._stores.url

    def store(self) -> Store:
        """lovia's store, opened once per event loop (DBOS may run workflows on its own)."""
        return self._stores.get()

    def _step_fn(self) -> Callable[[str, str, Any, str | None, str | None], Awaitable[Outcome]]:
        async def lovia_run_step(
            run_id: str, agent: str, input: Any, session_id: str | None, deps_key: str | None
        ) -> Outcome:
            return await self._step(run_id, agent, input, session_id, deps_key)

        return lovia_run_step

    async def _step(
        self, run_id: str, agent: str, input: Any, session_id: str | None, deps_key: str | None
    ) -> Outcome:
        resolved = self.agents.resolve(agent, f"DBOS workflow {self.name!r}")
        deps = self._deps(deps_key) if self._deps is not None else None
        task = {"run_id": run_id, "input": input, "session_id": session_id}
        outcome = await execute_run(resolved, task, self.store(), deps=deps, worker="dbos")
        if outcome in ("lease_held", "retry"):
            raise _TryAgain(f"run {run_id}: {outcome}")
        return outcome

    async def start(
        self,
        agent: str,
        input: Any = None,
        *,
        run_id: str | None = None,
        session_id: str | None = None,
        deps_key: str | None = None,
    ) -> str:
        """Start a run of the agent registered as ``agent`` as a DBOS workflow; return its
        ``run_id`` (the workflow id; generated when absent).

        A run id is started once: a second ``start`` with it raises
        :class:`RunAlreadyStarted` (await it with :meth:`result`, or :meth:`resume` it).
        """
        if not isinstance(agent, str):
            raise UserError(
                f"start() takes the agent's registered name, got {type(agent).__name__}",
                hint=f"Write runs.start(name, ...) with a name of agents=: "
                f"{', '.join(self.agents.names())}.",
            )
        self.agents.check(agent, "DBOSRuns")
        run_id = run_id or secrets.token_hex(16)
        try:
            with SetWorkflowID(run_id, workflow_id_reuse_policy="reject"):
                await DBOS.start_workflow_async(
                    self._workflow, agent, encode_input(input), session_id, deps_key
                )
        except DBOSWorkflowIDInUseError:
            raise RunAlreadyStarted(
                f"run {run_id} was already started as a DBOS workflow",
                hint="Await it with runs.result(run_id); a cancelled one continues with "
                "runs.resume(run_id).",
            ) from None
        return run_id

    async def result(self, run_id: str, *, timeout_s: float | None = None) -> RunSnapshot:
        """Wait for the run's workflow to end; return the run as lovia's store has it
        (``.info.status``: ``completed``, ``failed``, ``paused`` or ``cancelled``;
        ``.result["output"]``). Raises ``TimeoutError`` after ``timeout_s`` seconds."""
        handle: WorkflowHandleAsync[Any] = await DBOS.retrieve_workflow_async(run_id)
        async with asyncio.timeout(timeout_s):
            try:
                await handle.get_result()
            except DBOSAwaitedWorkflowCancelledError:
                # DBOS says so at once; the preempted step records the run moments later
                return await wait_for_run(self.store(), run_id, timeout_s=CANCEL_SETTLE_S)
        snap = await self.store().load(run_id)
        if snap is None:  # the workflow ended before its run began (unknown agent, ...)
            raise UserError(
                f"run {run_id} ended in DBOS but lovia's store has no record of it",
                hint="Check the workflow's error with DBOS.get_workflow_status(run_id) "
                "and that every process uses the same store URL.",
            )
        return snap

    async def cancel(self, run_id: str) -> None:
        """Cancel the run's workflow: its step is preempted (within about a second), the
        run ends *cancelled* in lovia's store and stays resumable."""
        await DBOS.cancel_workflow_async(run_id)

    async def resume(self, run_id: str) -> None:
        """Continue a cancelled run's workflow; the run resumes from its checkpoint."""
        await DBOS.resume_workflow_async(run_id)

    async def aclose(self) -> None:
        """Close the store this event loop opened (call before the loop ends)."""
        await self._stores.aclose()
