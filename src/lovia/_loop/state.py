"""RunState: the mutable record of one run. Created at run start, dropped at the end.

Nothing here lives on the Agent, the Runner or a plugin object.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from .. import events as ev
from .._defaults import DEFAULT_MAX_TURNS
from ..agent import Agent, Handoff
from ..context import CancelToken, Mailbox, RunContext
from ..guardrails import Guardrail
from ..hooks import AgentHooks
from ..model import ModelSettings, Provider, ToolSpec
from ..output import OutputMode
from ..plugins.base import ViewInjector
from ..stores.base import Checkpointer, CheckpointRecord, SessionStore
from ..stores.records import EntriesRecord, LedgerStatus, Record, StateRecord, to_checkpoint
from ..tools import ApprovalVerdict, Approver, Tool
from ..transcript import (
    InputEntry,
    ToolCallEntry,
    Transcript,
    TranscriptEntry,
)
from ..usage import RunBudget, Usage
from ..view.base import ContextStrategy, ViewHasher

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from ..result import RunResult
    from .share import BudgetShare
    from .watch import RunWatch

CHILD_EVENT_BUFFER = 256
"""Child-run events a ``nested=True`` stream holds before the children wait for it."""

__all__ = [
    "CHILD_EVENT_BUFFER",
    "ActiveAgent",
    "EndRun",
    "EventBase",
    "LeaseHold",
    "ParentLink",
    "Progress",
    "RunParams",
    "RunState",
    "Runtime",
    "current_run",
]


class EventBase(TypedDict):
    """The fields every event of a run carries."""

    run_id: str
    agent: str
    turn: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RunParams:
    """Everything ``Runner.run`` / ``stream`` was called with: set once, never changed."""

    agent: Agent[Any, Any]
    input: Any
    """What the caller passed: text, entries, or anything its instructions accept."""
    deps: Any = None
    """The caller's dependencies object (``RunContext.deps``); lovia never reads it."""
    session: SessionStore | None = None
    session_id: str | None = None
    run_id: str | None = None
    checkpointer: Checkpointer | None = None
    prune_records: bool = False
    max_turns: int = DEFAULT_MAX_TURNS
    budget: RunBudget | None = None
    extra_instructions: str | None = None
    cancel_token: CancelToken = field(default_factory=CancelToken)
    mailbox: Mailbox = field(default_factory=Mailbox)
    workspace: Any = None
    """A ``lovia.plugins.Workspace`` (typed loosely: plugins are imported only when used)."""
    approvals: Mapping[str, ApprovalVerdict] | None = None
    approval: Approver | None = None
    approved_by: str | None = None
    """Who decided ``approvals`` (recorded with each decision; None: ``api``)."""
    settings: ModelSettings | None = None
    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None
    nested: bool = False
    """Child runs' events appear on this run's stream as ``ChildRunEvent`` wrappers."""
    parent: ParentLink | None = None
    """Set when this run is a child run started by a tool call of another run."""
    labels: dict[str, str] = field(default_factory=dict[str, str])
    """Attribution labels (checked by ``lovia.labels``); a child run gets its parent's."""
    deps_key: str | None = None
    """The key ``deps`` was built from (a task queue's), kept in the run's row."""
    drained: bool = False
    """The caller only awaits the result (``Runner.run``): nobody iterates the stream, so
    a streamed answer's chunks become events only for a hook or an observer."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParentLink:
    """A child run's link to the run (and tool call) that started it."""

    state: RunState
    """The parent's live state: its budget and usage cover the child."""
    call_id: str

    @property
    def run_id(self) -> str:
        return self.state.run_id


class EndRun(Exception):
    """Raised by a tool to end its run with ``error`` (a child hit the run's limit)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(slots=True, kw_only=True)
class ActiveAgent:
    """The active agent, resolved: provider, merged tools, prompt, plugin contributions.

    Tuples, not lists: empty ones cost nothing and the immutable parts of a plugin-less
    agent are shared by all its runs (thousands in flight keep one copy).
    """

    agent: Agent[Any, Any]
    provider: Provider
    system: str = ""
    tools: dict[str, Tool] = field(default_factory=dict[str, Tool])
    """This run's own dict (a run may add the recall tool): never shared between runs."""
    specs: tuple[ToolSpec, ...] = ()
    handoffs: Mapping[str, Handoff] = field(default_factory=dict[str, Handoff])
    """Read-only: runs of a plugin-less agent share one."""
    injectors: tuple[tuple[str, ViewInjector], ...] = ()
    hooks: tuple[tuple[str | None, AgentHooks], ...] = ()
    """``(plugin name, hooks)``; None for the agent's own (the only ones that may be strict)."""
    input_guardrails: tuple[Guardrail, ...] = ()
    output_guardrails: tuple[Guardrail, ...] = ()
    output: OutputMode | None = None
    strategy: ContextStrategy[Any] | None = None
    strategy_state: Any = None
    """The strategy's own state object (``ContextStrategy.new_state()``): its type is the
    strategy's business."""
    settings: ModelSettings = field(default_factory=ModelSettings)
    handoff_filter: Callable[[Sequence[Any]], Sequence[Any]] | None = None


@dataclass(slots=True)
class LeaseHold:
    """This worker's lease on its run: runtime state, never persisted."""

    owner: str | None = None
    token: int | None = None
    """The fencing token of this run's lease: every checkpoint write carries it."""
    ttl_s: float = 0.0
    """The TTL the lease was granted with (read once: renewals and checks use it)."""
    renewed: float = 0.0
    """``time.monotonic()`` when the lease was last granted or renewed (sent)."""
    lost: Exception | None = None
    """Set (a LeaseLost) when the heartbeat found the lease taken over."""
    took_over: str | None = None
    """The lease owner this worker took the run from at once (its process was gone)."""
    granted_at: float = 0.0
    """``time.time()`` when this worker took the lease: a cancel request stored before
    it was meant for an earlier attempt (this one resumed the run on purpose)."""
    cancel_request: dict[str, Any] | None = None
    """The cancel request the heartbeat found on the run's row (``{"reason", "at"}``):
    the run is stopping for it, and its end keeps it on the row."""


@dataclass(slots=True, kw_only=True)
class Progress:
    """Where the run is, as its checkpoint records say it: exactly what
    ``checkpoint.restore()`` folds back from a stored run's ledger and state records
    (a new run starts from an empty one). A phase that changes a field here notes the
    record that carries the change (``RunState.note_state``, a ``LedgerRecord``)."""

    turn: int = 0
    usage: Usage = field(default_factory=Usage)
    """This run's own usage (child runs' is in ``children`` and ``Runtime.live``)."""
    agent: str | None = None
    """The agent active at the last state record (None: the starting agent)."""
    ledger: dict[str, LedgerStatus] = field(default_factory=dict[str, LedgerStatus])
    """Each tool call's status: what makes a resumed run never redo a completed call."""
    children: dict[str, Usage] = field(default_factory=dict[str, Usage])
    """The total usage of each finished child run, by the tool call that ran it."""
    last_input_tokens: int | None = None
    """Input tokens reported for the run's last model call (None: unknown)."""
    trace_links: tuple[str, ...] = ()
    """``trace_id:span_id`` of the run span of each earlier attempt."""


@dataclass(slots=True, kw_only=True)
class Runtime:
    """What this worker holds while it runs the run: never persisted, gone with it."""

    watch: RunWatch | None = None
    """The cancel token and ``max_seconds`` deadline around the loop's own awaits (set
    by the driver as the run starts)."""
    lease: LeaseHold = field(default_factory=LeaseHold)
    pending: list[CheckpointRecord] = field(default_factory=list[CheckpointRecord])
    """Checkpoint records noted since the last commit point (the driver writes them)."""
    closers: list[tuple[str, Callable[[], Awaitable[Any] | Any]]] | None = None
    """``(plugin name, aclose)`` of the plugin instances set up in this run (None: none;
    add through :meth:`RunState.add_closer`)."""
    activated: dict[int, ActiveAgent] = field(default_factory=dict[int, ActiveAgent])
    """Agents already set up in this run (plugins are set up once per run per agent)."""
    live: dict[str, RunState | None] = field(default_factory=dict[str, "RunState | None"])
    """Running child runs by the tool call that started them (None: admitted, not yet
    started); a finished child's usage moves to ``Progress.children``."""
    child_events: asyncio.Queue[ev.Event] | None = None
    """Events of running child runs, for a ``nested=True`` stream (at most
    ``CHILD_EVENT_BUFFER``: a child waits while its parent's consumer is behind)."""
    spans: dict[ev.Event, Any] = field(default_factory=dict[ev.Event, Any])
    """The live span of each emitted event whose phase parents later work under it
    (``RunStarted``, ``ToolCallStarted``), by the event the phase built (events compare
    by identity). The emitter writes it, the phase takes it (:meth:`RunState.span_of`):
    the events themselves are never changed."""
    budget_share: BudgetShare | None = None
    """Reservations of the model calls in flight in this run's tree (when its budget
    limits tokens or cost and calls run in parallel: see ``share``)."""
    completed_result: RunResult[Any] | None = None
    """Set when the run_id was already completed: the stored RunResult."""
    row: bool = False
    """True once the run's row is in the store: written by the start commit, or found
    when the run resumes. A run that fails before it (in a plugin's setup) writes it with
    its failure."""
    views_read: bool = False
    """True once anyone can read the run's view records and hashes: a store or a tracer
    (set at the start), a stream's consumer, a hook or an observer (set by
    ``model_call.views_read``). From then on
    every view is recorded, so the record chain a reader sees has no gap."""


@dataclass(slots=True, kw_only=True)
class RunState:
    """One run while it runs: its parameters (frozen), its progress (what the records
    say), this worker's runtime (never persisted), and the attempt's own facts. Created
    at the run's start, dropped at its end; the phases share it."""

    params: RunParams
    run_id: str
    ctx: RunContext[Any]
    transcript: Transcript
    """Session history, then this run's entries (from ``run_start``)."""
    progress: Progress
    runtime: Runtime
    active: ActiveAgent | None = None
    run_start: int = 0
    """Index in the transcript of this run's first entry (after session history)."""
    history: Sequence[TranscriptEntry] = ()
    """The session's history this run started from (its length is in the run's row)."""
    started: float = field(default_factory=time.monotonic)
    started_wall: float = field(default_factory=time.time)
    """When the run's first attempt started (a resumed run keeps the stored time)."""
    hasher: ViewHasher = field(default_factory=ViewHasher)
    """The view-record hash chain (continued from the last stored view on resume)."""
    last_view_size: int = 0
    repairs_left: int = 0
    resume_calls: Sequence[ToolCallEntry] | None = None
    """A resumed run: the stored calls of the turn it stopped in that have no result yet
    (empty: it stopped between turns); None: a new run."""
    attempt: int = 1
    """This lease grant's number among the run's attempts (1: the first)."""
    trace_ids: tuple[str, str] | None = None
    """This attempt's run span ``(trace_id, span_id)``."""
    first_trace: tuple[str, str] | None = None
    """The first attempt's ``(trace_id, span_id)``: the run's row keeps them on resume."""
    undelivered: Sequence[InputEntry] = ()
    """Mailbox messages left when the run ended (set by the finish phase)."""

    @property
    def checkpointer(self) -> Checkpointer | None:
        return self.params.checkpointer

    @property
    def session(self) -> SessionStore | None:
        return self.params.session

    def add_closer(self, name: str, aclose: Callable[[], Awaitable[Any] | Any]) -> None:
        """Register a plugin instance's ``aclose`` (called last-in, first-out at the end)."""
        runtime = self.runtime
        if runtime.closers is None:
            runtime.closers = []
        runtime.closers.append((name, aclose))

    def span_of(self, event: ev.Event) -> Any:
        """The span the emitter opened for ``event`` (None: not traced); taken once."""
        return self.runtime.spans.pop(event, None)

    def note(self, record: Record) -> None:
        """Queue a checkpoint record (dropped when the run has no checkpointer)."""
        if self.params.checkpointer is not None:
            self.runtime.pending.append(to_checkpoint(record))

    def note_entries(self, entries: Sequence[TranscriptEntry]) -> None:
        if self.params.checkpointer is not None and entries:
            self.note(EntriesRecord(tuple(entries)))

    def note_state(self, agent: str, *, trace: str | None = None) -> None:
        """Queue the run's counters with ``agent`` active (``trace``: a resuming worker's)."""
        progress = self.progress
        progress.agent = agent
        if self.params.checkpointer is not None:
            self.note(
                StateRecord(
                    turn=progress.turn,
                    usage=progress.usage.copy(),
                    agent=agent,
                    last_input_tokens=progress.last_input_tokens,
                    trace=trace,
                )
            )

    def new_entries(self) -> list[TranscriptEntry]:
        return list(self.transcript.view(self.run_start))

    def hooked(self) -> bool:
        """Whether the agent running now has hooks (its own or its plugins')."""
        if self.active is not None:
            return bool(self.active.hooks)
        return self.params.agent.hooks is not None

    def base(self) -> EventBase:
        agent = self.active.agent.name if self.active else self.params.agent.name
        return {"run_id": self.run_id, "agent": agent, "turn": self.progress.turn}

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def total_usage(self) -> Usage:
        """This run's own usage plus its child runs' (running ones as used so far)."""
        total = self.progress.usage.copy()
        for usage in self.progress.children.values():
            total.add(usage)
        for child in self.runtime.live.values():
            if child is not None:
                total.add(child.total_usage())
        return total

    def child_usage(self) -> dict[str, Usage]:
        """Each child run's total usage, by the tool call that started it."""
        out = {call_id: usage.copy() for call_id, usage in self.progress.children.items()}
        for call_id, child in self.runtime.live.items():
            if call_id not in out:
                out[call_id] = child.total_usage() if child is not None else Usage()
        return out

    def child_count(self) -> int:
        """Child runs started by this run's tool calls, finished or running."""
        return len(self.progress.children.keys() | self.runtime.live.keys())

    def has_child(self, call_id: str) -> bool:
        return call_id in self.runtime.live or call_id in self.progress.children

    def child_started(self, call_id: str, child: RunState | None) -> None:
        """``call_id`` runs a child run (None: admitted, not started yet): its usage is
        counted live from now on, in place of any the call's earlier attempt stored."""
        self.progress.children.pop(call_id, None)
        self.runtime.live[call_id] = child

    def child_ended(self, call_id: str, usage: Usage) -> None:
        """The child run of ``call_id`` ended having used ``usage`` in all."""
        self.runtime.live.pop(call_id, None)
        self.progress.children[call_id] = usage

    def settle_child(self, call_id: str) -> Usage | None:
        """The total usage of the child run ``call_id`` ran (None: it ran none), final
        now that the call has ended (a child still counted live is read and settled)."""
        if call_id in self.runtime.live:
            child = self.runtime.live[call_id]
            self.child_ended(call_id, child.total_usage() if child is not None else Usage())
        return self.progress.children.get(call_id)


current_run: ContextVar[RunState | None] = ContextVar("lovia_current_run", default=None)
"""The run whose tool is executing (set around each tool call; agent tools read it)."""
