"""Typed events, one per phase boundary of the agent loop.

``Runner.stream`` yields them, hooks receive them, and lovia's own tracing is built
on them. Each event is a slotted dataclass, read-only by contract, and carries
``run_id``, ``agent`` and ``turn``, plus ``span``: the live OpenTelemetry span of its
phase (``None`` when tracing is off), so a hook can enrich or scrub it before it is
exported. Nothing changes an event once anyone but the phase that built it has seen
it: when a run is traced, the event that opens a span gets it as it is emitted, before
hooks and the stream see it. Events are not ``frozen``: that would set each field
through ``object.__setattr__``, several times the cost of building one.

Events compare by identity (``eq=False``): they are occurrences, not values, and
skipping the generated ``__eq__``/``__hash__`` keeps ``import lovia`` fast.

Phase pairs (``*Started`` … ``*Completed`` / ``*Failed``) open and close one span each;
see ``lovia.telemetry`` for the single table that maps events to spans.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._lazy import lazy_exports
from .transcript import ToolCallEntry, ToolResultEntry, TranscriptEntry
from .usage import Usage

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = [
    "ApprovalDecided",
    "CheckpointSaved",
    "ChildRunEvent",
    "CompactionApplied",
    "Event",
    "GuardrailCompleted",
    "GuardrailStarted",
    "GuardrailTriggered",
    "HandoffOccurred",
    "MessageCompleted",
    "ModelCallCompleted",
    "ModelCallFailed",
    "ModelCallStarted",
    "PluginClosed",
    "PluginSetup",
    "ProviderRetry",
    "ReasoningDelta",
    "RunCompleted",
    "RunFailed",
    "RunStarted",
    "SessionWritten",
    "SummaryCompleted",
    "TextDelta",
    "ToolCallCompleted",
    "ToolCallDelta",
    "ToolCallStarted",
    "TurnEnded",
    "TurnStarted",
    "ViewBuilt",
    "ViewStarted",
]


@dataclass(slots=True, kw_only=True, eq=False)
class Event:
    """Base of every event."""

    run_id: str
    agent: str
    turn: int = 0
    span: Span | None = field(default=None, compare=False, repr=False)
    """The span of this event's phase (``None`` if not traced), set when the event is
    built; live while hooks run (a phase's last event's span ends after its hooks)."""


@dataclass(slots=True, kw_only=True, eq=False)
class RunStarted(Event):
    """A run began (or resumed from its checkpoint)."""

    session_id: str | None = None
    model: str = ""
    provider: str = ""
    resumed: bool = False
    attempt: int = 1
    """Which lease grant of the run this is (1: the first; a resume counts up)."""
    trace_links: tuple[str, ...] = ()
    """``trace_id:span_id`` of earlier attempts of this run (set when resuming)."""
    parent_run_id: str | None = None
    """Set for a child run (an agent run as a tool): the run that started it."""
    parent_call_id: str | None = None
    """The parent's tool call that started this child run."""
    root_agent: str | None = None
    """Set for a child run: the starting agent of its top-level run (spend metrics
    name it, so a top-level run's cost includes its children's)."""
    description: str = ""
    """The agent's ``description`` (``gen_ai.agent.description`` on the run span)."""
    labels: tuple[tuple[str, str], ...] = ()
    """The run's attribution labels (``lovia.label.<key>`` on the run span)."""


@dataclass(slots=True, kw_only=True, eq=False)
class PluginSetup(Event):
    """A plugin's ``setup`` finished for the active agent (``error`` if it failed)."""

    plugin: str
    duration_s: float = 0.0
    error: BaseException | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class PluginClosed(Event):
    """A plugin's ``aclose`` finished at run end (``error`` if it failed)."""

    plugin: str
    duration_s: float = 0.0
    error: BaseException | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class GuardrailStarted(Event):
    kind: str
    """``input`` or ``output``."""
    guardrail: str


@dataclass(slots=True, kw_only=True, eq=False)
class GuardrailCompleted(Event):
    kind: str
    guardrail: str
    tripped: bool = False
    reason: str = ""


@dataclass(slots=True, kw_only=True, eq=False)
class GuardrailTriggered(Event):
    """A guardrail's tripwire fired; the run will end with the
    :class:`~lovia.errors.GuardrailTripped` error (this event was named
    ``GuardrailTripped`` before 0.x; that name still works, with a DeprecationWarning)."""

    kind: str
    guardrail: str
    reason: str = ""


@dataclass(slots=True, kw_only=True, eq=False)
class TurnStarted(Event):
    """A new turn begins (limits were checked, the mailbox is about to be drained)."""


@dataclass(slots=True, kw_only=True, eq=False)
class ViewStarted(Event):
    """The context strategy is about to build this turn's view."""

    attempt: int = 1


@dataclass(slots=True, kw_only=True, eq=False)
class ViewBuilt(Event):
    """The view for one model call is ready (strategy + injectors)."""

    view_hash: str
    entries: int
    injected: int = 0
    compacted: bool = False
    record: Any = field(default=None, compare=False, repr=False)
    """The :class:`~lovia.view.ViewRecord` that makes this view reproducible."""
    attempt: int = 1


@dataclass(slots=True, kw_only=True, eq=False)
class ApprovalDecided(Event):
    """A tool call that needed approval was approved or denied (recorded in the run)."""

    call_id: str
    tool: str
    decision: str
    """``approved`` or ``denied``."""
    actor: str
    """Who decided: ``cli:USER``, ``web:IDENTITY``, ``api:CALLER`` or ``policy:NAME``."""
    reason: str | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class CompactionApplied(Event):
    """The strategy changed the view (evicted, cleared or summarized entries)."""

    kind: str
    """``evict`` | ``clear`` | ``summarize``."""
    entry_ids: tuple[str, ...] = ()
    tokens_before: int | None = None
    """The strategy's token estimate of the view without this build's changes (for
    :class:`~lovia.view.Compaction`: its ``estimator``, characters / 4 plus framing by
    default); None when the strategy reports none. One build that makes several kinds of
    change gives each of its events the whole build's figures."""
    tokens_after: int | None = None
    """The strategy's token estimate of the view it built (same estimate)."""
    duration_s: float = 0.0


@dataclass(slots=True, kw_only=True, eq=False)
class ModelCallStarted(Event):
    """A model call begins (one per call; provider retries happen inside it)."""

    model: str
    provider: str
    view_hash: str = ""
    stream: bool = True
    settings: Mapping[str, Any] = field(default_factory=dict[str, Any])
    server_address: str | None = None
    server_port: int | None = None
    compacted: bool = False
    request: Any = field(default=None, compare=False, repr=False)
    """The :class:`~lovia.providers.ModelRequest` (for content capture; may be None)."""
    purpose: str = "main"
    """Why lovia made the call: ``main`` (the agent's turn), ``repair`` (answering a
    structured-output repair request), ``summary`` (compaction), ``what_if``
    (``lovia replay --model``). Summary calls emit no deltas."""


@dataclass(slots=True, kw_only=True, eq=False)
class ProviderRetry(Event):
    """The provider is retrying the call after a retryable error, before any content."""

    attempt: int
    error_type: str
    message: str
    delay_s: float


@dataclass(slots=True, kw_only=True, eq=False)
class TextDelta(Event):
    text: str


@dataclass(slots=True, kw_only=True, eq=False)
class ReasoningDelta(Event):
    text: str


@dataclass(slots=True, kw_only=True, eq=False)
class ToolCallDelta(Event):
    index: int
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True, kw_only=True, eq=False)
class ModelCallCompleted(Event):
    """A model call returned. Hook :class:`MessageCompleted` for the agent's answers,
    :class:`SummaryCompleted` for compaction's summaries, this class for every call
    (what is priced and traced: one per ``chat`` span)."""

    entries: Sequence[TranscriptEntry] = ()
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    raw_finish_reason: str | None = None
    response_id: str | None = None
    response_model: str | None = None
    model: str = ""
    provider: str = ""
    time_to_first_chunk_s: float | None = None
    """None when the call did not stream."""
    duration_s: float = 0.0
    purpose: str = "main"
    """See :attr:`ModelCallStarted.purpose`; a ``summary`` response is not appended to
    the transcript (it becomes the view's summary entry)."""

    @property
    def text(self) -> str:
        return "".join(getattr(e, "text", "") for e in self.entries if e.type == "text")

    @property
    def tool_calls(self) -> tuple[ToolCallEntry, ...]:
        return tuple(e for e in self.entries if isinstance(e, ToolCallEntry))


class MessageCompleted(ModelCallCompleted):
    """The model answered the run's view (``purpose`` ``main`` or ``repair``); its
    entries are appended to the transcript. Handlers may rely on it meaning "the model
    has seen this turn's view" (the bundled ``LoopGuard`` example does)."""


class SummaryCompleted(ModelCallCompleted):
    """Compaction's summary call returned (``purpose="summary"``), made while the view
    is built; its text becomes the view's summary entry, not a transcript entry."""


@dataclass(slots=True, kw_only=True, eq=False)
class ModelCallFailed(Event):
    """The model call failed (after the provider's retries)."""

    model: str
    provider: str
    error_type: str
    message: str
    error: BaseException | None = field(default=None, compare=False, repr=False)
    duration_s: float = 0.0
    purpose: str = "main"
    """See :attr:`ModelCallStarted.purpose`."""


@dataclass(slots=True, kw_only=True, eq=False)
class ToolCallStarted(Event):
    """A tool call passed its pre-checks and is about to run."""

    call: ToolCallEntry
    idempotency_key: str = ""
    description: str = ""


@dataclass(slots=True, kw_only=True, eq=False)
class ToolCallCompleted(Event):
    """A tool call finished; ``is_error`` results go back to the model as errors."""

    call: ToolCallEntry
    result: ToolResultEntry
    is_error: bool = False
    error_type: str | None = None
    duration_s: float = 0.0
    started: bool = True
    """False when it never ran (refused by a pre-check, denied, or unknown tool)."""
    known: bool = True
    """False when the model named a tool the agent does not have (metrics label such
    calls ``_unknown``: the model's invented names never become label values)."""
    recovered: bool = False
    """True when a resumed run answered the call from its tool ledger without running
    it: it was running when an earlier attempt died, and is not idempotent (its outcome
    is unknown). Not an execution: tool metrics do not count it as one."""


@dataclass(slots=True, kw_only=True, eq=False)
class HandoffOccurred(Event):
    from_agent: str
    to_agent: str


@dataclass(slots=True, kw_only=True, eq=False)
class CheckpointSaved(Event):
    """Progress was written to the checkpointer (``error``: the write failed; the run
    then fails with that error)."""

    entries: int = 0
    bytes: int = 0
    kind: str = "progress"
    store: str = ""
    duration_s: float = 0.0
    error: BaseException | None = None


@dataclass(slots=True, kw_only=True, eq=False)
class SessionWritten(Event):
    """The run's new entries were written to the session as one segment."""

    session_id: str
    entries: int = 0
    store: str = ""
    duration_s: float = 0.0


@dataclass(slots=True, kw_only=True, eq=False)
class TurnEnded(Event):
    usage: Usage = field(default_factory=Usage)
    """Usage of this turn."""
    tool_calls: int = 0


@dataclass(slots=True, kw_only=True, eq=False)
class RunCompleted(Event):
    """Terminal event: the run produced its final output."""

    output: Any = None
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    finish_reason: str = "stop"
    duration_s: float = 0.0
    replayed: bool = False
    """True when the run_id was already completed and the stored result was returned."""
    child_usage: Usage | None = None
    """The part of ``usage`` its child runs (agents as tools) used; None: no child run."""


@dataclass(slots=True, kw_only=True, eq=False)
class RunFailed(Event):
    """Terminal event: the run ended without an output (the error is in ``result()``)."""

    error_type: str
    message: str
    error: BaseException | None = field(default=None, compare=False, repr=False)
    usage: Usage = field(default_factory=Usage)
    turns: int = 0
    finish_reason: str = "error"
    duration_s: float = 0.0
    child_usage: Usage | None = None
    """The part of ``usage`` its child runs (agents as tools) used; None: no child run."""


@dataclass(slots=True, kw_only=True, eq=False)
class ChildRunEvent(Event):
    """An event of a child run, on the parent's stream (only with ``nested=True``).

    ``run_id``/``agent``/``turn`` are the parent's; ``event`` is the child's own event
    (a grandchild's arrives as a ``ChildRunEvent`` inside it).
    """

    call_id: str
    """The parent's tool call running the child."""
    child_run_id: str
    event: Event


# the error that ends a tripped run is lovia.errors.GuardrailTripped; this event was renamed
__getattr__, __dir__ = lazy_exports(
    __name__, {}, renamed={"GuardrailTripped": "GuardrailTriggered"}
)
