# pyright: reportUnnecessaryIsInstance=false
# (runtime checks of user input are deliberate: not every caller runs a type checker)
"""``Runner``: stateless entry points. ``run`` drains the same event stream ``stream`` yields.

``run_sync`` called from a thread that already runs an event loop (a notebook, an async
web handler) runs the run on a worker thread with its own loop instead of failing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .agent import Agent
from .context import CancelToken, Mailbox
from .errors import UserError
from .events import Event
from .result import RunResult

if TYPE_CHECKING:
    from ._loop.state import RunParams
    from .providers.base import ModelSettings
    from .stores.base import Checkpointer, SessionStore
    from .usage import RunBudget

__all__ = ["DEFAULT_MAX_TURNS", "RunStream", "Runner"]

DEFAULT_MAX_TURNS = 50
"""Model steps per run when ``max_turns`` is not given."""

OutputT = TypeVar("OutputT")

_STORES: dict[str, Any] = {}


def _open_store(value: Any) -> Any:
    if value is None or not isinstance(value, str):
        return value
    store = _STORES.get(value)
    if store is None:
        from .stores import store as open_store

        store = _STORES[value] = open_store(value)
    return store


class RunStream(Generic[OutputT]):
    """A running run: iterate it for events; ``await result()`` for the RunResult.

    Iterating never raises because of the run: the last event is ``RunCompleted`` or
    ``RunFailed``; the run's error is raised by ``result()``.
    """

    def __init__(self, params: RunParams) -> None:
        from ._loop import Outcome, run_events  # the engine loads on the first run

        self._outcome = Outcome()
        self._events = run_events(params, self._outcome)
        self.cancel_token: CancelToken = params.cancel_token
        self.mailbox: Mailbox = params.mailbox

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events

    def cancel(self, reason: str = "cancelled by caller") -> None:
        """Cancel the run (in-flight model stream and tools are interrupted)."""
        self.cancel_token.cancel(reason)

    async def result(self) -> RunResult[OutputT]:
        """Wait for the end (draining events not yet consumed) and return the result."""
        if not self._outcome.done:
            async for _ in self._events:
                pass
        if self._outcome.error is not None:
            raise self._outcome.error
        if self._outcome.result is None:
            raise UserError(
                "the run's stream was closed before it finished",
                hint="Iterate the stream to its end or call result() first.",
            )
        return self._outcome.result  # type: ignore[return-value]

    async def aclose(self) -> None:
        await self._events.aclose()  # type: ignore[attr-defined]


class Runner:
    """Runs agents. Holds no state: every run's state is created and dropped per call."""

    @staticmethod
    def stream(
        agent: Agent[Any, OutputT],
        input: Any = None,
        *,
        deps: Any = None,
        session: SessionStore | str | None = None,
        session_id: str | None = None,
        run_id: str | None = None,
        checkpointer: Checkpointer | str | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        budget: RunBudget | None = None,
        extra_instructions: str | None = None,
        cancel_token: CancelToken | None = None,
        workspace: Any = None,
        approvals: Mapping[str, Any] | None = None,
        approval: Any = None,
        settings: ModelSettings | None = None,
        mailbox: Mailbox | None = None,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        nested: bool = False,
    ) -> RunStream[OutputT]:
        """Start a run and return its event stream (see :class:`RunStream`).

        ``nested=True``: events of child runs (agents run as tools, see
        :meth:`Agent.as_tool`) are yielded too, each wrapped in a ``ChildRunEvent``.
        """
        if not isinstance(agent, Agent):
            raise UserError(f"Runner needs an Agent, got {agent!r}")
        bound = getattr(workspace, "session", None)
        if isinstance(bound, str) and session_id is None:
            # a session-bound workspace: its conversation continues run after run
            session_id = bound
            if session is None:
                session = workspace.session_store_url()
        if session_id is not None and session is None:
            raise UserError(
                "session_id was given without a session store",
                hint='Pass session=lovia.stores.store("sqlite:///.lovia/lovia.db") (or a URL).',
            )
        if max_turns < 1:
            raise UserError("max_turns must be at least 1")
        from ._loop.state import RunParams

        params = RunParams(
            agent=agent,
            input=input,
            deps=deps,
            session=_open_store(session),
            session_id=session_id,
            run_id=run_id,
            checkpointer=_open_store(checkpointer),
            max_turns=max_turns,
            budget=budget,
            extra_instructions=extra_instructions,
            cancel_token=cancel_token if cancel_token is not None else CancelToken(),
            mailbox=mailbox if mailbox is not None else Mailbox(),
            workspace=workspace,
            approvals=approvals,
            approval=approval,
            settings=settings,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            nested=nested,
        )
        return RunStream(params)

    @staticmethod
    async def run(
        agent: Agent[Any, OutputT], input: Any = None, **options: Any
    ) -> RunResult[OutputT]:
        """Run to the end and return the result; options as :meth:`stream`."""
        return await Runner.stream(agent, input, **options).result()

    @staticmethod
    def run_sync(
        agent: Agent[Any, OutputT], input: Any = None, **options: Any
    ) -> RunResult[OutputT]:
        """Blocking :meth:`run`; inside a running event loop it uses a worker thread."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(Runner.run(agent, input, **options))
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lovia-run") as pool:
            return pool.submit(asyncio.run, Runner.run(agent, input, **options)).result()
