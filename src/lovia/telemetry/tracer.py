"""The built-in tracing: a consumer of the run's event stream (one table, see mapping).

``make_run_tracer`` returns None — zero work per event — unless an OpenTelemetry SDK
is in use (a ``tracer_provider`` was passed, or a real global tracer/meter provider is
installed). Otherwise the :class:`RunTracer` of one run turns each event into span work
through ``mapping.EVENTS``:

- parenting is explicit: the run span, the current turn span and the current view span
  are kept here and passed as ``context=`` to every child, never read from the ambient
  context (the generator may resume in different tasks). Only the run span takes its
  parent from the ambient context, so a run started inside a tool (nested run) or inside
  a user's own span becomes its child;
- one ``chat`` span per model call, whatever its purpose (``lovia.call.purpose``: a
  compaction summary is a child of the view span, the turn's call of the turn span);
  provider retries inside it are span events ``lovia.provider.retry`` (``error.type``,
  message, delay), not separate spans;
- metric labels name the run's starting agent (``_agent``), spans the acting agent;
- leaf spans (session, handoff, compaction, plugins) start at ``now - duration_s``
  when their event is emitted and end after the hooks saw it;
- a checkpoint write is a span event on the innermost open span, unless it failed or
  took ``attributes.CHECKPOINT_SPAN_MIN_S`` or longer: then it is a span of its own
  from ``now - duration_s`` to ``now`` (its real end, whatever the hooks take);
- streamed deltas cost one dict lookup and return the chat span.
"""

from __future__ import annotations

import logging
import time
import weakref
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanContext, Status, StatusCode, TraceFlags, Tracer

from .. import events as ev
from ..labels import label_cap
from ..pricing import price_table_version
from . import attributes as A
from . import content as C
from . import semconv
from .events_log import ContentEvents, events_for, structured, warn_no_logs
from .mapping import EVENTS, Attrs, Phase
from .metrics import Instruments, instruments_for

__all__ = ["RunTracer", "make_run_tracer", "run_span"]

_RUN_SPAN: ContextVar[tuple[Tracer, Any] | None] = ContextVar("lovia_run_span", default=None)


def run_span() -> tuple[Tracer, Any] | None:
    """The tracer and span context of the run this task is executing (its own tracer
    provider's), for work a run does outside its phases' spans: a plugin's setup (MCP
    ``initialize``, ``tools/list``). None outside a traced run."""
    return _RUN_SPAN.get()


logger = logging.getLogger("lovia.telemetry")

_tracers: weakref.WeakKeyDictionary[Any, Tracer] = weakref.WeakKeyDictionary()
_DELTAS = frozenset({ev.TextDelta, ev.ReasoningDelta, ev.ToolCallDelta})
"""Streamed chunks: ``start`` returns the chat span (``mapping.EVENTS`` says the same)."""
INTERRUPTED_CALL = frozenset({"RunCancelled", "CancelledError", "LeaseLost"})
"""``error.type`` of a model call cut off by the run itself (cancelled, out of time, lease
lost): not a model-call error, so it records no ``gen_ai.client.operation.duration``."""


class RunTracer:
    """Opens and closes spans (and records metrics) from one run's events."""

    __slots__ = (
        "_capture",
        "_chat",
        "_chat_content",
        "_chat_labels",
        "_common",
        "_compacted",
        "_events",
        "_guards",
        "_latest",
        "_m",
        "_noted",
        "_policy",
        "_run",
        "_run_ctx",
        "_run_labels",
        "_run_token",
        "_spend",
        "_tools",
        "_tracer",
        "_turn",
        "_view",
    )

    def __init__(
        self,
        tracer: Tracer,
        instruments: Instruments | None,
        policy: C.ContentPolicy | None = None,
        events: ContentEvents | None = None,
        latest: semconv.LatestInstruments | None = None,
    ) -> None:
        self._tracer = tracer
        self._m = instruments
        self._policy = policy or C.ContentPolicy()
        self._capture = self._policy.enabled  # content capture on: checked per span
        self._events = events if self._policy.on_event else None
        if self._policy.on_event and events is None:
            warn_no_logs()
        self._latest = latest
        """The newest token metrics (``OTEL_SEMCONV_STABILITY_OPT_IN``), else None."""
        self._common: Attrs = {A.VERSION: A.TELEMETRY_VERSION}
        self._run: Span | None = None
        self._run_ctx: Any = None
        self._run_token: Token[tuple[Tracer, Any] | None] | None = None
        self._turn: tuple[Span, Any] | None = None
        self._view: tuple[Span, Any] | None = None
        self._chat: Span | None = None
        self._chat_labels: Attrs = {}
        self._chat_content: dict[str, Any] = {}
        self._tools: dict[str, Span] = {}
        self._guards: dict[tuple[str, str], Span] = {}
        self._run_labels: Attrs = {}
        self._spend: Attrs = {}
        self._compacted = False
        self._noted: tuple[Span, int] | None = None

    # -- the two calls the Emitter makes ---------------------------------------------

    def start(self, event: ev.Event) -> Any:
        """Called before hooks see ``event``; returns the live span of its phase."""
        kind = type(event)
        if kind in _DELTAS:  # streamed chunks: no span work
            return self._chat
        phase = EVENTS.get(kind)
        if phase is None:
            return None
        action = phase.action
        if action == "attach":
            return self._attach(event)
        try:
            if action == "open":
                return self._open(phase, event)
            if action == "close":
                return self._close(phase, event)
            if action == "note":
                return self._note(phase, event)
            return self._leaf(phase, event)
        except Exception:  # telemetry must never break a run
            logger.exception("tracing failed on %s", type(event).__name__)
            return None

    def end(self, event: ev.Event, span: Any) -> None:
        """Called after hooks saw ``event``; ends ``span`` (what ``start`` returned for
        it) if the phase ended."""
        if span is None:
            return
        kind = type(event)
        if kind in _DELTAS:
            return
        phase = EVENTS.get(kind)
        if phase is None:
            return
        action = phase.action
        if action == "close" or action == "leaf":
            span.end()
        elif action == "note" and self._noted is not None and self._noted[0] is span:
            span.end(end_time=self._noted[1])
            self._noted = None

    def record(self, event: ev.Event) -> Any:
        """``start`` then ``end``, for a consumer without hooks (a what-if call); returns
        the span of ``event``'s phase (None: none)."""
        span = self.start(event)
        self.end(event, span)
        return span

    # -- actions ---------------------------------------------------------------------

    def _name(self, phase: Phase, event: ev.Event) -> str:
        return f"{phase.span} {phase.title(event)}" if phase.title is not None else phase.span

    def _attrs(self, phase: Phase, event: ev.Event) -> Attrs:
        attrs = dict(self._common)
        if A.RUN_ID not in attrs and event.run_id:  # a span outside a run (what-if)
            attrs[A.RUN_ID] = event.run_id
        attrs[A.AGENT_NAME] = event.agent
        if event.turn:
            attrs[A.TURN_INDEX] = event.turn
        if phase.attrs is not None:
            attrs.update(phase.attrs(event))
        return attrs

    def _container(self) -> Any:
        if self._view is not None:
            return self._view[1]
        if self._turn is not None:
            return self._turn[1]
        return self._run_ctx

    def _parent(self, slot: str) -> Any:
        if slot == "run":
            return self._run_ctx
        if slot == "view" or slot == "tool":
            return self._turn[1] if self._turn is not None else self._run_ctx
        return self._container()

    def _open(self, phase: Phase, event: ev.Event) -> Span:
        slot = phase.slot
        if slot == "run":
            assert isinstance(event, ev.RunStarted)  # the mapping table's run opener
            return self._open_run(phase, event)
        span = self._tracer.start_span(
            self._name(phase, event),
            context=self._parent(slot),
            kind=phase.kind,
            attributes=self._attrs(phase, event),
        )
        if slot == "turn":
            self._turn = (span, trace.set_span_in_context(span))
        elif slot == "view":
            self._view = (span, trace.set_span_in_context(span))
        elif slot == "chat":
            self._chat = span
            assert isinstance(event, ev.ModelCallStarted)
            self._chat_opened(event, span)
        elif slot == "tool":
            assert isinstance(event, ev.ToolCallStarted)
            call = event.call
            self._tools[call.call_id] = span
            if self._capture:
                args = self._content(span, A.TOOL_ARGUMENTS, C.parse_args(call.arguments))
                self._tool_event(A.EVENT_TOOL_ARGUMENTS, span, event, A.TOOL_ARGUMENTS, args)
        else:
            assert isinstance(event, ev.GuardrailStarted)
            self._guards[(event.kind, event.guardrail)] = span
        return span

    def _forget_run_span(self) -> None:
        """The task's run span is the one before this run's again (a parent's, or none)."""
        token, self._run_token = self._run_token, None
        if token is None:
            return
        try:
            _RUN_SPAN.reset(token)
        except ValueError:  # closed from another context than it was opened in
            pass

    def _open_run(self, phase: Phase, event: ev.RunStarted) -> Span:
        self._common[A.RUN_ID] = event.run_id
        if event.session_id:
            self._common[A.CONVERSATION_ID] = event.session_id
        attrs = self._attrs(phase, event)
        attrs[A.PRICE_TABLE_VERSION] = price_table_version()
        span = self._tracer.start_span(
            self._name(phase, event),
            context=otel_context.get_current(),
            kind=phase.kind,
            attributes=attrs,
            links=_links(event.trace_links),
        )
        self._run = span
        self._run_ctx = trace.set_span_in_context(span)
        self._run_token = _RUN_SPAN.set((self._tracer, self._run_ctx))
        nested = event.parent_run_id is not None  # a child run: dashboards can leave it out
        self._run_labels = {
            A.AGENT_NAME: event.agent,
            A.REQUEST_MODEL: event.model,
            A.RUN_NESTED: nested,
        }
        if event.provider:
            self._run_labels[A.PROVIDER_NAME] = event.provider
        # spend is the top-level run's: a child's cost counts under its root's agent
        self._spend = {A.AGENT_NAME: event.root_agent or event.agent, A.RUN_NESTED: nested}
        if event.labels:  # attribution, capped: top values by first seen, the rest "other"
            self._spend.update(label_cap().attributes(dict(event.labels)))
        return span

    def _attach(self, event: ev.Event) -> Any:
        if isinstance(event, ev.ProviderRetry):
            span = self._chat
            if span is not None:
                text = C.status_text(self._policy, event.error_type, event.message)
                span.add_event(
                    A.EVENT_RETRY,
                    {
                        A.ERROR_TYPE: event.error_type,
                        A.RETRY_MESSAGE: text,
                        A.RETRY_ATTEMPT: event.attempt,
                        A.RETRY_DELAY: event.delay_s,
                    },
                )
            if self._m is not None:
                labels = {
                    k: self._chat_labels[k]
                    for k in (A.PROVIDER_NAME, A.REQUEST_MODEL)
                    if k in self._chat_labels
                }
                labels[A.ERROR_TYPE] = event.error_type
                self._m.retries.add(1, labels)
            return span
        if isinstance(event, ev.ApprovalDecided):
            return self._approval(event)
        if isinstance(event, ev.GuardrailTriggered):
            container = self._container()
            if container is None:
                return None
            span = trace.get_current_span(container)
            span.add_event(
                A.EVENT_GUARDRAIL_TRIPPED,
                {A.GUARDRAIL_NAME: event.guardrail, A.GUARDRAIL_KIND: event.kind},
            )
            return span
        return self._chat

    def _approval(self, event: ev.ApprovalDecided) -> Any:
        """A decision on a tool call: a ``lovia.approval`` event on the innermost span."""
        container = self._container()
        if container is None:
            return None
        span = trace.get_current_span(container)
        attrs: Attrs = {
            A.APPROVAL_CALL_ID: event.call_id,
            A.APPROVAL_TOOL: event.tool,
            A.APPROVAL_DECISION: event.decision,
            A.APPROVAL_ACTOR: event.actor,
        }
        if event.reason:
            attrs[A.APPROVAL_REASON] = event.reason
        span.add_event(A.EVENT_APPROVAL, attrs)
        return span

    def _leaf(self, phase: Phase, event: ev.Event) -> Span:
        duration = getattr(event, "duration_s", 0.0) or 0.0
        start = time.time_ns() - int(duration * 1e9)
        span = self._tracer.start_span(
            self._name(phase, event),
            context=self._parent(phase.slot),
            kind=phase.kind,
            attributes=self._attrs(phase, event),
            start_time=start,
        )
        error = getattr(event, "error", None)
        if error is not None:
            span.set_status(self._status(type(error).__name__, str(error), error))
        if isinstance(event, ev.CompactionApplied) and self._m is not None:
            labels = {A.AGENT_NAME: self._agent(event), A.COMPACTION_KIND: event.kind}
            self._m.compactions.add(1, labels)
        return span

    def _note(self, phase: Phase, event: ev.Event) -> Span | None:
        """A checkpoint write: an event on the innermost open span, or (failed, slow,
        or no span open) a span of its own with its real start and end time."""
        duration: float = getattr(event, "duration_s", 0.0) or 0.0
        error = getattr(event, "error", None)
        carrier = self._view or self._turn
        span = carrier[0] if carrier is not None else self._run
        if error is None and duration < A.CHECKPOINT_SPAN_MIN_S and span is not None:
            attrs = phase.attrs(event) if phase.attrs is not None else {}
            attrs[A.CHECKPOINT_DURATION] = duration
            attrs[A.AGENT_NAME] = event.agent
            if event.turn:
                attrs[A.TURN_INDEX] = event.turn
            span.add_event(phase.span, attrs)
            return span
        now = time.time_ns()
        span = self._tracer.start_span(
            phase.span,
            context=self._parent(phase.slot),
            kind=phase.kind,
            attributes=self._attrs(phase, event),
            start_time=now - int(duration * 1e9),
        )
        if error is not None:
            span.set_status(self._status(type(error).__name__, str(error), error))
        self._noted = (span, now)
        return span

    def _close(self, phase: Phase, event: ev.Event) -> Span | None:
        slot = phase.slot
        span: Span | None
        if slot == "run":
            assert isinstance(event, ev.RunCompleted | ev.RunFailed)
            return self._close_run(phase, event)
        if slot == "turn":
            span, self._turn = (self._turn[0] if self._turn else None), None
        elif slot == "view":
            span, self._view = (self._view[0] if self._view else None), None
            self._compacted = bool(getattr(event, "compacted", False))
        elif slot == "chat":
            span, self._chat = self._chat, None
        elif slot == "tool":
            assert isinstance(event, ev.ToolCallCompleted)
            span = self._close_tool(phase, event)
        else:
            assert isinstance(event, ev.GuardrailCompleted | ev.GuardrailTriggered)
            span = self._guards.pop((event.kind, event.guardrail), None)
        if span is None:
            return None
        attrs = phase.attrs(event) if phase.attrs is not None else {}
        span.set_attributes(attrs)
        if A.ERROR_TYPE in attrs:
            error = getattr(event, "error", None)
            message = str(getattr(event, "message", ""))
            span.set_status(self._status(str(attrs[A.ERROR_TYPE]), message, error))
        if slot == "chat":
            self._chat_closed(event, span)
        return span

    def _close_tool(self, phase: Phase, event: ev.ToolCallCompleted) -> Span:
        span = self._tools.pop(event.call.call_id, None)
        if span is None:  # never started (refused / handoff): a zero-length leaf
            span = self._tracer.start_span(
                self._name(phase, event),
                context=self._parent("tool"),
                kind=phase.kind,
                attributes=self._attrs(phase, event),
            )
        if self._capture and not event.is_error:
            result = self._content(span, A.TOOL_RESULT, event.result.content)
            self._tool_event(A.EVENT_TOOL_RESULT, span, event, A.TOOL_RESULT, result)
        if self._m is not None:
            name = event.call.name if event.known else A.UNKNOWN_TOOL
            labels: Attrs = {A.TOOL_NAME: name, A.AGENT_NAME: self._agent(event)}
            if event.recovered:  # answered from the ledger: not a new execution
                self._m.tool_recovered.add(1, {**labels, A.TOOL_OUTCOME: "unknown"})
                return span
            self._m.tool_calls.add(1, labels)  # every call the model made, run or refused
            if event.is_error:
                labels = {**labels, A.ERROR_TYPE: event.error_type or "ToolError"}
                self._m.tool_errors.add(1, labels)
            if event.started:
                duration = {**labels, A.OPERATION_NAME: "execute_tool"}
                self._m.tool_duration.record(event.duration_s, duration)
        return span

    def _close_run(self, phase: Phase, event: ev.RunCompleted | ev.RunFailed) -> Span | None:
        span = self._run
        if span is None:
            return None
        self._forget_run_span()
        if isinstance(event, ev.RunFailed):
            self._fail_open_spans(event.error_type, event.message)
        attrs = phase.attrs(event) if phase.attrs is not None else {}
        # a replayed run (completed run_id resubmitted) writes no checkpoint: not a new run
        replayed = isinstance(event, ev.RunCompleted) and (event.replayed)
        if replayed:
            attrs[A.RUN_REPLAYED] = True
        span.set_attributes(attrs)
        if A.ERROR_TYPE in attrs and isinstance(event, ev.RunFailed):
            span.set_status(self._status(event.error_type, event.message, event.error))
        if self._m is not None:
            self._run_metrics(event, attrs, replayed)
        return span

    def _status(self, error_type: str, message: str, error: Any = None) -> Status:
        """An ERROR status whose text follows the content policy (``content.status_text``)."""
        return Status(StatusCode.ERROR, C.status_text(self._policy, error_type, message, error))

    def abandon(self) -> None:
        """End every open span: the consumer closed the stream before the run ended."""
        if self._run is None:
            return
        message = "the stream was closed before the run ended"
        self._fail_open_spans("StreamAbandoned", message)
        self._run.set_attribute(A.ERROR_TYPE, "StreamAbandoned")
        self._run.set_status(Status(StatusCode.ERROR, message))
        self._run.end()
        self._run = None

    def _fail_open_spans(self, error_type: str, message: str) -> None:
        status = self._status(error_type, message)
        spans: list[Span] = [*self._tools.values(), *self._guards.values()]
        spans.extend(s for s in (self._chat,) if s is not None)
        spans.extend(p[0] for p in (self._view, self._turn) if p is not None)
        self._tools.clear()
        self._guards.clear()
        self._chat = self._view = self._turn = None
        for span in spans:
            span.set_attribute(A.ERROR_TYPE, error_type)
            span.set_status(status)
            span.end()

    # -- chat details: content + metrics ---------------------------------------------

    def _chat_opened(self, event: ev.ModelCallStarted, span: Span) -> None:
        self._chat_labels = {
            A.OPERATION_NAME: "chat",
            A.PROVIDER_NAME: event.provider,
            A.REQUEST_MODEL: event.model,
            A.AGENT_NAME: self._agent(event),
            A.CALL_PURPOSE: event.purpose,
        }
        if event.server_address:
            self._chat_labels[A.SERVER_ADDRESS] = event.server_address
            if event.server_port:
                self._chat_labels[A.SERVER_PORT] = event.server_port
        self._chat_content = {}
        if self._compacted:  # the view this call uses was compacted by the strategy
            span.set_attribute(A.CONVERSATION_COMPACTED, True)
            self._compacted = False
        request = event.request
        if self._policy.by_reference and event.view_hash:
            self._reference(event, span)
        if self._capture and request is not None:
            for key, value in (
                (A.SYSTEM_INSTRUCTIONS, C.system_instructions(request.system)),
                (A.INPUT_MESSAGES, C.messages(request.messages)),
                (A.TOOL_DEFINITIONS, C.tool_definitions(request.tools)),
            ):
                if value:
                    self._chat_content[key] = self._content(span, key, value)

    def _chat_closed(self, event: ev.Event, span: Span) -> None:
        if isinstance(event, ev.ModelCallCompleted):
            if self._capture:
                out = C.output_messages(event.entries, event.finish_reason)
                self._chat_content[A.OUTPUT_MESSAGES] = self._content(span, A.OUTPUT_MESSAGES, out)
            if self._m is not None:
                _chat_metrics(self._m, self._chat_labels, self._spend, event, self._latest)
        elif (
            isinstance(event, ev.ModelCallFailed)
            and self._m is not None
            and event.error_type not in INTERRUPTED_CALL  # a cut-off call is no latency
        ):
            labels = {**self._chat_labels, A.ERROR_TYPE: event.error_type}
            self._m.op_duration.record(event.duration_s, labels)
            if self._latest is not None:  # the newest token metrics count failed calls too
                self._latest.record(self._chat_labels, None, event.error_type)
        if self._events is not None and self._capture:
            self._details_event(event, span)
        self._chat_content = {}

    def _reference(self, event: ev.ModelCallStarted, span: Span) -> None:
        """REFERENCE capture: where the view's content is, instead of the content."""
        run_id = str(self._common.get(A.RUN_ID, event.run_id))
        ref = C.content_ref(run_id, event.view_hash)
        attrs: Attrs = {A.CONTENT_REF: ref}
        messages = getattr(event.request, "messages", ())
        if messages:
            attrs[A.CONTENT_ENTRIES] = f"{messages[0].id}..{messages[-1].id}"
        url = C.content_url(run_id, event.view_hash, event.turn)
        if url:
            attrs[A.CONTENT_URL] = url
        span.set_attributes(attrs)

    def _details_event(self, event: ev.Event, span: Span) -> None:
        """The ``gen_ai.client.inference.operation.details`` log event of a model call:
        the chat span's identifying attributes plus its content, structured."""
        assert self._events is not None
        attrs: dict[str, Any] = {
            k: v for k, v in self._chat_labels.items() if k not in (A.AGENT_NAME, A.CALL_PURPOSE)
        }
        if isinstance(event, ev.ModelCallCompleted):
            attrs[A.RESPONSE_FINISH_REASONS] = [event.finish_reason]
            if event.response_id:
                attrs[A.RESPONSE_ID] = event.response_id
            if event.response_model:
                attrs[A.RESPONSE_MODEL] = event.response_model
            if not event.usage.missing:
                attrs[A.USAGE_INPUT] = event.usage.input_tokens
                attrs[A.USAGE_OUTPUT] = event.usage.output_tokens
        elif isinstance(event, ev.ModelCallFailed):
            attrs[A.ERROR_TYPE] = event.error_type
        attrs.update({k: v for k, v in self._chat_content.items() if v is not None})
        self._emit(A.EVENT_DETAILS, span, attrs)

    def _tool_event(
        self,
        name: str,
        span: Span,
        event: ev.ToolCallStarted | ev.ToolCallCompleted,
        key: str,
        value: Any,
    ) -> None:
        if self._events is None or value is None:
            return
        attrs: dict[str, Any] = {
            A.OPERATION_NAME: "execute_tool",
            A.TOOL_NAME: event.call.name,
            A.TOOL_CALL_ID: event.call.call_id,
            key: value,
        }
        self._emit(name, span, attrs)

    def _emit(self, name: str, span: Span, attrs: dict[str, Any]) -> None:
        assert self._events is not None
        try:
            self._events.emit(name, span, attrs)
        except Exception:  # telemetry must never break a run
            logger.exception("emitting the %s event failed", name)

    def _agent(self, event: ev.Event) -> str:
        """The ``gen_ai.agent.name`` metric label: the run's starting agent (see
        ``attributes.METRIC_LABELS``); the event's own agent outside a run."""
        return str(self._run_labels.get(A.AGENT_NAME, event.agent))

    def _content(self, span: Span, key: str, value: Any) -> Any:
        """Scrub one content value; put it on ``span`` (SPAN modes) and return it in
        structured form for an event (None: scrubbed away, or events are off)."""
        try:
            value = self._policy.scrubbed(key, value)
            if value is None:
                return None
            if self._policy.on_span:
                text = self._policy.to_text(value)
                if text is not None:
                    span.set_attribute(key, text)
            return structured(value) if self._events is not None else None
        except Exception:
            logger.exception("the content scrubber failed on %s; nothing recorded", key)
            return None

    def _run_metrics(
        self, event: ev.RunCompleted | ev.RunFailed, attrs: Attrs, replayed: bool
    ) -> None:
        m = self._m
        assert m is not None
        outcome = str(attrs[A.RUN_OUTCOME])
        error = attrs.get(A.ERROR_TYPE)
        duration: Attrs = {**self._run_labels, A.OPERATION_NAME: "invoke_agent"}
        runs: Attrs = {
            A.AGENT_NAME: self._run_labels[A.AGENT_NAME],
            A.RUN_OUTCOME: outcome,
            A.RUN_FINISH_REASON: event.finish_reason,
        }
        nested = {A.RUN_NESTED: self._run_labels.get(A.RUN_NESTED, False)}
        runs.update(nested)
        if error is not None:
            duration[A.ERROR_TYPE] = error
            runs[A.ERROR_TYPE] = error
        if replayed:  # the stored result was returned: not a run, and not its latency
            return
        m.agent_duration.record(event.duration_s, duration)
        m.runs.add(1, runs)
        m.turns.record(
            event.turns, {A.AGENT_NAME: runs[A.AGENT_NAME], A.RUN_OUTCOME: outcome, **nested}
        )


def _chat_metrics(
    m: Instruments,
    base: Attrs,
    run: Attrs,
    event: ev.ModelCallCompleted,
    latest: semconv.LatestInstruments | None = None,
) -> None:
    """``run``: the spend labels of the run (its top-level run's agent, nested or not)."""
    labels = {**base, A.RESPONSE_MODEL: event.response_model or event.model}
    m.op_duration.record(event.duration_s, labels)
    if event.time_to_first_chunk_s is not None:
        m.ttfc.record(event.time_to_first_chunk_s, labels)
    if latest is not None:
        latest.record(labels, event.usage, None)
    u = event.usage
    spend: Attrs = {
        A.AGENT_NAME: run.get(A.AGENT_NAME, base[A.AGENT_NAME]),
        A.PROVIDER_NAME: base[A.PROVIDER_NAME],
        A.REQUEST_MODEL: base[A.REQUEST_MODEL],
        A.CALL_PURPOSE: base[A.CALL_PURPOSE],
        A.RUN_NESTED: run.get(A.RUN_NESTED, False),
    }
    if len(run) > 2:  # attribution labels (lovia.label.*), already capped
        spend.update((k, v) for k, v in run.items() if k.startswith(A.LABEL_PREFIX))
    if u.cost_usd:
        m.cost.add(u.cost_usd, spend)
    if u.unpriced:
        m.unpriced.add(u.unpriced, spend)
    if u.missing:
        return
    if latest is None:  # the released name; the newest set replaces it
        m.token_usage.record(u.input_tokens, {**labels, A.TOKEN_TYPE: "input"})
        m.token_usage.record(u.output_tokens, {**labels, A.TOKEN_TYPE: "output"})
    for kind, value in (
        ("input", u.input_tokens),
        ("output", u.output_tokens),
        ("cache_read", u.cache_read_tokens),
        ("cache_write", u.cache_write_tokens),
        ("reasoning", u.reasoning_tokens),
    ):
        if value or kind in ("input", "output"):
            m.tokens.add(value, {**spend, A.TOKEN_TYPE: kind})


def _links(trace_links: tuple[str, ...]) -> list[Link]:
    out: list[Link] = []
    seen: set[str] = set()
    for item in trace_links:
        if item in seen:
            continue
        seen.add(item)
        try:
            trace_hex, span_hex = item.split(":", 1)
            ctx = SpanContext(
                int(trace_hex, 16),
                int(span_hex, 16),
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
            )
        except ValueError:
            continue
        if ctx.is_valid:
            out.append(Link(ctx, {"lovia.link.kind": "previous_attempt"}))
    return out


def _no_sdk_tracing(provider: Any) -> bool:
    return isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))


def _no_sdk_metrics(provider: Any) -> bool:
    return type(provider).__name__ in ("_ProxyMeterProvider", "NoOpMeterProvider")


def _tracer_of(provider: Any) -> Tracer:
    found = _tracers.get(provider)
    if found is None:
        from .._version import __version__

        found = provider.get_tracer(
            A.SCOPE_NAME,
            __version__,
            schema_url=semconv.SCHEMA_URL,
            attributes={A.VERSION: A.TELEMETRY_VERSION},
        )
        try:
            _tracers[provider] = found
        except TypeError:
            pass
    return found


def make_run_tracer(tracer_provider: Any = None, meter_provider: Any = None) -> RunTracer | None:
    """A tracer for one run, or None when no OpenTelemetry SDK is configured."""
    from opentelemetry import metrics

    tp = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    if tracer_provider is None and _no_sdk_tracing(tp):
        tp = None
    mp = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    if meter_provider is None and _no_sdk_metrics(mp):
        mp = None
    if tp is None and mp is None:
        return None
    tracer = _tracer_of(tp) if tp is not None else trace.NoOpTracer()
    policy = C.current_policy()
    events = events_for(tp) if policy.on_event and tp is not None else None
    latest = semconv.latest_for(mp) if mp is not None and semconv.latest_experimental() else None
    return RunTracer(
        tracer, instruments_for(mp) if mp is not None else None, policy, events, latest
    )
