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
    "RunParams",
    "RunState",
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


@dataclass(slots=True, kw_only=True)
class RunState:
    """Mutable per-run state shared by the phase functions."""

    params: RunParams
    ctx: RunContext[Any]
    transcript: Transcript
    run_id: str
    active: ActiveAgent | None = None
    run_start: int = 0
    """Index in the transcript of this run's first entry (after session history)."""
    turn: int = 0
    usage: Usage = field(default_factory=Usage)
    started: float = field(default_factory=time.monotonic)
    started_wall: float = field(default_factory=time.time)
    checkpointer: Checkpointer | None = None
    session: SessionStore | None = None
    ledger: dict[str, LedgerStatus] = field(default_factory=dict[str, LedgerStatus])
    closers: list[tuple[str, Callable[[], Awaitable[Any] | Any]]] | None = None
    """``(plugin name, aclose)`` of the plugin instances set up in this run (None: none;
    add through :meth:`add_closer`)."""
    activated: dict[int, ActiveAgent] = field(default_factory=dict[int, ActiveAgent])
    """Agents already set up in this run (plugins are set up once per run per agent)."""
    hasher: ViewHasher = field(default_factory=ViewHasher)
    pending: list[CheckpointRecord] = field(default_factory=list[CheckpointRecord])
    """Checkpoint records waiting for the next write."""
    last_input_tokens: int | None = None
    last_view_size: int = 0
    repairs_left: int = 0
    resumed: bool = False
    resume_calls: Sequence[ToolCallEntry] = ()
    """Resuming inside a turn's tool phase: the stored calls that have no result yet."""
    watch: RunWatch | None = None
    """The cancel token and ``max_seconds`` deadline around the loop's own awaits."""
    trace_ids: tuple[str, str] | None = None
    trace_links: tuple[str, ...] = ()
    history: Sequence[TranscriptEntry] = ()
    undelivered: Sequence[InputEntry] = ()
    """Mailbox messages left when the run ended (set by the finish phase)."""
    lease: LeaseHold = field(default_factory=LeaseHold)
    """This worker's lease on the run (runtime: never persisted)."""
    attempt: int = 1
    """This lease grant's number among the run's attempts (1: the first)."""
    first_trace: tuple[str, str] | None = None
    """The first attempt's ``(trace_id, span_id)``: the run's row keeps them on resume."""
    completed_result: RunResult[Any] | None = None
    """Set when the run_id was already completed: the stored RunResult."""
    children: dict[str, RunState | Usage] = field(default_factory=dict[str, "RunState | Usage"])
    """Child runs by the tool call that started them: live while running, then usage."""
    budget_share: BudgetShare | None = None
    """Reservations of the model calls in flight in this run's tree (when its budget
    limits tokens or cost and calls run in parallel: see ``share``)."""
    child_events: asyncio.Queue[ev.Event] | None = None
    """Events of running child runs, for a ``nested=True`` stream (at most
    ``CHILD_EVENT_BUFFER``: a child waits while its parent's consumer is behind)."""

    def add_closer(self, name: str, aclose: Callable[[], Awaitable[Any] | Any]) -> None:
        """Register a plugin instance's ``aclose`` (called last-in, first-out at the end)."""
        if self.closers is None:
            self.closers = []
        self.closers.append((name, aclose))

    def note(self, record: Record) -> None:
        """Queue a checkpoint record (dropped when the run has no checkpointer)."""
        if self.checkpointer is not None:
            self.pending.append(to_checkpoint(record))

    def note_entries(self, entries: Sequence[TranscriptEntry]) -> None:
        if self.checkpointer is not None and entries:
            self.note(EntriesRecord(tuple(entries)))

    def note_state(self, agent: str, *, trace: str | None = None) -> None:
        """Queue the run's counters with ``agent`` active (``trace``: a resuming worker's)."""
        if self.checkpointer is not None:
            self.note(
                StateRecord(
                    turn=self.turn,
                    usage=self.usage.copy(),
                    agent=agent,
                    last_input_tokens=self.last_input_tokens,
                    trace=trace,
                )
            )

    def new_entries(self) -> list[TranscriptEntry]:
        return list(self.transcript.view(self.run_start))

    def base(self) -> EventBase:
        agent = self.active.agent.name if self.active else self.params.agent.name
        return {"run_id": self.run_id, "agent": agent, "turn": self.turn}

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def total_usage(self) -> Usage:
        """This run's own usage plus its child runs' (running ones as used so far)."""
        total = self.usage.copy()
        for child in self.children.values():
            total.add(child if isinstance(child, Usage) else child.total_usage())
        return total

    def child_usage(self) -> dict[str, Usage]:
        """Each child run's total usage, by the tool call that started it."""
        return {
            call_id: child.copy() if isinstance(child, Usage) else child.total_usage()
            for call_id, child in self.children.items()
        }


current_run: ContextVar[RunState | None] = ContextVar("lovia_current_run", default=None)
"""The run whose tool is executing (set around each tool call; agent tools read it)."""
