# pyright: reportUnnecessaryIsInstance=false
# (runtime checks of user input are deliberate: not every caller runs a type checker)
"""``Runner``: stateless entry points. ``run`` drains the same event stream ``stream`` yields.

``run_sync`` called from a thread that already runs an event loop (a notebook, an async
web handler) runs the run on a worker thread with its own loop instead of failing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import difflib
import re
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypedDict, TypeVar, Unpack

from ._defaults import DEFAULT, DEFAULT_MAX_TURNS, Default, default_store
from .agent import Agent
from .context import CancelToken, Mailbox
from .errors import UserError
from .events import Event
from .labels import check_labels, text_problem
from .result import RunResult

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from ._loop.state import RunParams
    from .model import ModelSettings
    from .stores.base import Checkpointer, RunInfo, SessionStore, Store
    from .tools import ApprovalVerdict, Approver
    from .usage import RunBudget

__all__ = [
    "DEFAULT_MAX_TURNS",
    "MAX_ID_CHARS",
    "OPTION_NAMES",
    "RunOptions",
    "RunStream",
    "Runner",
    "check_deps_key",
    "check_id",
    "resume_options",
    "run_params",
]

OutputT = TypeVar("OutputT")

MAX_ID_CHARS = 256
"""Longest ``run_id`` / ``session_id`` accepted (every store indexes them)."""

_STORES: dict[str, Any] = {}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_id(name: str, value: str | None) -> None:
    """Refuse an id no store can key on faithfully: empty, control characters (NUL
    included), text that is not valid Unicode (a lone surrogate), or over-long.

    Checked once, where ids enter, so every store gives the same clear error.
    """
    if value is None:
        return
    if not isinstance(value, str):
        raise UserError(f"{name} must be a str, got {type(value).__name__}")
    what = "contains a control character (e.g. NUL)"
    problem = text_problem(value, MAX_ID_CHARS, _CONTROL, what)
    if problem:
        hint = "Pass printable text, e.g. a UUID or your own stable key"
        if name == "run_id":
            hint += ", or leave run_id=None for a new random id"
        raise UserError(f"{name} {value[:60]!r} {problem}", hint=hint + ".")


def check_deps_key(value: object) -> str | None:
    """``value`` as a ``deps_key`` (None or printable text of at most ``MAX_ID_CHARS``
    characters), or ``UserError``. The message never quotes the value: a deps key may
    name a tenant or hold a secret, and errors end up in logs."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise UserError(f"deps_key must be a str, got {type(value).__name__}", hint=_DEPS_HINT)
    what = "contains a control character (e.g. NUL)"
    problem = text_problem(value, MAX_ID_CHARS, _CONTROL, what) if value else ""
    if problem:
        raise UserError(f"deps_key {problem}", hint=_DEPS_HINT)
    return value


_DEPS_HINT = "Pass a short key your deps factory looks up (a tenant id), not the deps themselves."


def _open_store(value: Any) -> Any:
    if value is None or not isinstance(value, str):
        return value
    store = _STORES.get(value)
    if store is None:
        from .stores import store as open_store

        store = _STORES[value] = open_store(value)
    return store


class RunOptions(TypedDict, total=False):
    """The keyword options of :meth:`Runner.stream`, :meth:`Runner.run` and
    :meth:`Runner.run_sync`. Each is optional; one not given takes its default (below)."""

    deps: Any
    """Your dependencies object, ``RunContext.deps`` in tools (default None)."""
    session: SessionStore | str | None
    """Where the conversation of ``session_id`` is kept: a store or a store URL."""
    session_id: str | None
    """Continue this conversation: its history comes first in the transcript."""
    run_id: str | None
    """This run's id (default: a new random one). A stored, unfinished run resumes; a
    completed one returns its stored result."""
    checkpointer: Checkpointer | str | None
    """Where the run's progress is recorded, so a crashed run resumes."""
    store: Store | str | None | Default
    """Where the run is recorded when ``checkpointer``/``session`` are not given (default:
    ``lovia.configure(store=...)`` or ``$LOVIA_STORE``; None: not recorded)."""
    prune_records: bool
    """Once the run completes, drop its checkpoint records and keep its summary row
    (``lovia runs`` still lists it; replay cannot). Default False."""
    max_turns: int
    """Model turns before the run fails with ``MaxTurnsExceeded`` (default 50)."""
    budget: RunBudget | None
    """Token, cost, tool-call and time limits of the run."""
    extra_instructions: str | None
    """Appended to the agent's instructions for this run."""
    cancel_token: CancelToken | None
    """Cancel the run from elsewhere (default: a new token, ``RunStream.cancel``)."""
    workspace: Any
    """A ``lovia.plugins.Workspace``: files and shell for the tools; a session-bound
    workspace continues its conversation."""
    approvals: Mapping[str, ApprovalVerdict] | None
    """Decisions for calls that wait for approval, by call id."""
    approval: Approver | None
    """Decides calls that need approval, as they come."""
    approved_by: str | None
    """Who decided ``approvals`` (``cli:alice``, ``web:ops``; default ``api``), recorded
    with each decision."""
    settings: ModelSettings | None
    """Model settings for this run, over the agent's."""
    mailbox: Mailbox | None
    """Messages pushed into the run between turns (default: a new mailbox)."""
    tracer_provider: TracerProvider | None
    """An OpenTelemetry ``TracerProvider`` (default: the global one)."""
    meter_provider: MeterProvider | None
    """An OpenTelemetry ``MeterProvider`` (default: the global one)."""
    nested: bool
    """Child runs' events (agents run as tools, see :meth:`Agent.as_tool`) are yielded
    too, each wrapped in a ``ChildRunEvent``. Default False."""
    labels: Mapping[str, str] | None
    """Who the run is for (``{"tenant": "acme"}``): on its span, its stored row, the cost
    metrics and spend limits; a session's first labelled run records them for its later
    runs (see :mod:`lovia.labels`)."""
    deps_key: str | None
    """The key ``deps`` was built from (a task queue's ``deps(deps_key)`` factory), stored
    with the run (``RunInfo.extra["deps_key"]``) so a queue that re-queues the run builds
    the same deps; never on spans, metrics or logs."""


OPTION_NAMES: frozenset[str] = frozenset(RunOptions.__annotations__)
"""The names :class:`RunOptions` declares (what ``Runner`` accepts)."""


def run_params(
    agent: Agent[Any, Any], input: Any, options: RunOptions, *, drained: bool = False
) -> RunParams:
    """The run's frozen parameters from the caller's options, each checked once here
    (``drained``: only the result is awaited, see ``RunParams.drained``)."""
    if not isinstance(agent, Agent):
        raise UserError(f"Runner needs an Agent, got {agent!r}")
    given: dict[str, Any] = dict(options)
    _check_names(given)
    _check_deps(agent, given.get("deps"))
    check_id("run_id", given.get("run_id"))
    _bind_workspace(given)
    check_id("session_id", given.get("session_id"))
    _resolve_stores(given)
    for name in ("cancel_token", "mailbox"):  # None: a fresh one (the parameters' default)
        if given.get(name, 0) is None:
            del given[name]
    given["labels"] = check_labels(given.get("labels"))
    given["deps_key"] = check_deps_key(given.get("deps_key"))
    from ._loop.state import RunParams  # the engine loads on the first run

    params = RunParams(agent=agent, input=input, drained=drained, **given)
    if params.max_turns < 1:
        raise UserError("max_turns must be at least 1")
    return params


def _check_names(given: Mapping[str, Any]) -> None:
    unknown = sorted(set(given) - OPTION_NAMES)
    if not unknown:
        return
    name = unknown[0]
    close = difflib.get_close_matches(name, OPTION_NAMES, n=1)
    hint = f"Did you mean {close[0]!r}? " if close else ""
    raise UserError(
        f"Runner got an unknown option {name!r}",
        hint=hint + "The options are those of lovia.RunOptions: " + ", ".join(sorted(OPTION_NAMES)),
    )


def _bind_workspace(given: dict[str, Any]) -> None:
    """A session-bound workspace: its conversation continues run after run."""
    workspace: Any = given.get("workspace")
    bound = getattr(workspace, "session", None)
    if isinstance(bound, str) and given.get("session_id") is None:
        given["session_id"] = bound
        if given.get("session") is None:
            given["session"] = workspace.session_store_url()


def _resolve_stores(given: dict[str, Any]) -> None:
    """``store`` (or the configured default) as checkpointer and session; URLs opened."""
    store = given.pop("store", DEFAULT)
    recorder = default_store() if isinstance(store, Default) else store
    session_id = given.get("session_id")
    if recorder is not None:
        if given.get("checkpointer") is None:
            given["checkpointer"] = recorder
        if session_id is not None and given.get("session") is None:
            given["session"] = recorder
    if session_id is not None and given.get("session") is None:
        raise UserError(
            "session_id was given without a session store",
            hint='Pass session=lovia.stores.store("sqlite:///.lovia/lovia.db") (or a URL).',
        )
    for name in ("session", "checkpointer"):
        if name in given:
            given[name] = _open_store(given[name])


def resume_options(
    info: RunInfo,
    store: Store,
    *,
    approvals: Mapping[str, ApprovalVerdict] | None = None,
    approved_by: str | None = None,
) -> RunOptions:
    """The options of :meth:`Runner.run` that continue the stored run ``info`` on
    ``store``: its ``run_id``, ``store`` as its checkpointer (and its session store when
    the run has a session), never the default store, and the approval decisions given.

    ``lovia resume``, the web app's resume and approvals, and ``lovia eval`` (a case's
    pinned start is a stored run) all continue a run with these.
    """
    options: RunOptions = {"run_id": info.run_id, "checkpointer": store, "store": None}
    if info.session_id is not None:
        options.update(session=store, session_id=info.session_id)
    if approvals:
        options.update(approvals=approvals, approved_by=approved_by)
    return options


class RunStream(Generic[OutputT]):
    """A running run: iterate it for events; ``await result()`` for the RunResult.

    Iterating never raises because of the run: the last event is ``RunCompleted`` or
    ``RunFailed``; the run's error is raised by ``result()``.
    """

    __slots__ = ("_events", "_outcome", "cancel_token", "mailbox")  # no dict per run

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
        return self._outcome.result

    async def aclose(self) -> None:
        await self._events.aclose()


class Runner:
    """Runs agents. Holds no state: every run's state is created and dropped per call."""

    @staticmethod
    def stream(
        agent: Agent[Any, OutputT], input: Any = None, **options: Unpack[RunOptions]
    ) -> RunStream[OutputT]:
        """Start a run and return its event stream (see :class:`RunStream`).

        The options are :class:`RunOptions` (each documented there); an option not given
        takes the default of the run's parameters. A name that is not an option is a
        ``UserError`` naming the closest option.
        """
        return RunStream(run_params(agent, input, options))

    @staticmethod
    async def run(
        agent: Agent[Any, OutputT], input: Any = None, **options: Unpack[RunOptions]
    ) -> RunResult[OutputT]:
        """Run to the end and return the result; options as :meth:`stream`."""
        stream: RunStream[OutputT] = RunStream(run_params(agent, input, options, drained=True))
        return await stream.result()

    @staticmethod
    def run_sync(
        agent: Agent[Any, OutputT], input: Any = None, **options: Unpack[RunOptions]
    ) -> RunResult[OutputT]:
        """Blocking :meth:`run`; inside a running event loop it uses a worker thread."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(Runner.run(agent, input, **options))
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lovia-run") as pool:
            return pool.submit(asyncio.run, Runner.run(agent, input, **options)).result()


def _check_deps(agent: Agent[Any, Any], deps: Any) -> None:
    """``deps`` given for an agent with a class as ``deps_type`` must be an instance of it."""
    expected = agent.deps_type
    if deps is None or not isinstance(expected, type) or isinstance(deps, expected):
        return
    raise UserError(
        f"agent {agent.name!r} expects deps of type {expected.__name__}, got {type(deps).__name__}",
        hint=f"Pass Runner.run(agent, ..., deps={expected.__name__}(...)), or change "
        "the agent's deps_type.",
    )
