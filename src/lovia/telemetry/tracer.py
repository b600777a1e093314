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
- a checkpoint write is a span event on the innermost open span, never a span: stamped
  when the write ended (before the hooks run), with its duration; a failed one with
  ``error.type`` and ``error.message``;
- streamed deltas cost one dict lookup and return the chat span.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable
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
from .label_sets import ChatLabels, chat_labels, record_chat, record_tool
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
_FEW = 3
"""End attributes up to this many are set one by one (cheaper in the SDK than a batch)."""
INTERRUPTED_CALL = frozenset({"RunCancelled", "CancelledError", "LeaseLost"})
"""``error.type`` of a model call cut off by the run itself (cancelled, out of time, lease
lost): not a model-call error, so it records no ``gen_ai.client.operation.duration``."""


class RunTracer:
    """Opens and closes spans (and records metrics) from one run's events."""

    __slots__ = (
        "_agent_label",
        "_base",
        "_base_key",
        "_capture",
        "_chat",
        "_chat_content",
        "_chat_labels",
        "_chat_set",
        "_common",
        "_compacted",
        "_events",
        "_guards",
        "_latest",
        "_m",
        "_policy",
        "_run",
        "_run_ctx",
        "_run_labels",
        "_run_token",
        "_spend",
        "_spend_key",
        "_tools",
        "_tracer",
        "_turn",
        "_turn_ctx",
        "_view",
        "_view_ctx",
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
        self._turn: Span | None = None
        self._turn_ctx: Any = None
        self._view: Span | None = None
        self._view_ctx: Any = None
        """The view span's context, made when a child needs it (most views have none)."""
        self._base: Attrs = {}
        self._base_key: tuple[str, str, int] | None = None
        """``_base``: the start attributes every span of this (run id, agent, turn) has."""
        self._chat: Span | None = None
        self._chat_labels: Attrs = {}
        self._chat_set: ChatLabels | None = None
        self._chat_content: dict[str, Any] = {}
        self._tools: dict[str, Span] = {}
        self._guards: dict[tuple[str, str], Span] = {}
        self._run_labels: Attrs = {}
        self._agent_label: str | None = None
        self._spend: Attrs = {}
        self._spend_key: tuple[Any, ...] = ()
        self._compacted = False

    # -- the two calls the Emitter makes ---------------------------------------------

    def start(self, event: ev.Event) -> Any:
        """Called before hooks see ``event``; returns the live span of its phase."""
        kind = type(event)
        if kind in _DELTAS:  # streamed chunks: no span work
            return self._chat
        route = _ROUTES.get(kind)
        if route is None:
            return None
        act, phase, guarded = route
        if not guarded:  # an attached event: the innermost span's own event
            return act(self, phase, event)
        try:
            return act(self, phase, event)
        except Exception:  # telemetry must never break a run
            logger.exception("tracing failed on %s", type(event).__name__)
            return None

    def end(self, event: ev.Event, span: Any) -> None:
        """Called after hooks saw ``event``; ends ``span`` (what ``start`` returned for
        it) if the phase ended."""
        if span is None:
            return
        if type(event) in _ENDS:
            span.end()

    def record(self, event: ev.Event) -> Any:
        """``start`` then ``end``, for a consumer without hooks (a what-if call); returns
        the span of ``event``'s phase (None: none)."""
        span = self.start(event)
        self.end(event, span)
        return span

    # -- actions ---------------------------------------------------------------------

    def _name(self, phase: Phase, event: ev.Event) -> str:
        return f"{phase.span} {phase.title(event)}" if phase.title is not None else phase.span

    def _base_attrs(self, event: ev.Event) -> Attrs:
        """The attributes every span of ``event``'s run, agent and turn starts with."""
        key = (event.run_id, event.agent, event.turn)
        if key != self._base_key:
            attrs = dict(self._common)
            if A.RUN_ID not in attrs and event.run_id:  # a span outside a run (what-if)
                attrs[A.RUN_ID] = event.run_id
            attrs[A.AGENT_NAME] = event.agent
            if event.turn:
                attrs[A.TURN_INDEX] = event.turn
            self._base, self._base_key = attrs, key
        return self._base

    def _attrs(self, phase: Phase, event: ev.Event) -> Attrs:
        """A span's start attributes: the base of its run, agent and turn (built once
        for all of them), then its phase's own."""
        base = self._base
        if (event.run_id, event.agent, event.turn) != self._base_key:
            base = self._base_attrs(event)
        return dict(base) if phase.attrs is None else {**base, **phase.attrs(event)}

    def _container(self) -> Any:
        if self._view is not None:
            if self._view_ctx is None:
                self._view_ctx = trace.set_span_in_context(self._view)
            return self._view_ctx
        if self._turn is not None:
            return self._turn_ctx
        return self._run_ctx

    def _parent(self, slot: str) -> Any:
        if slot == "run":
            return self._run_ctx
        if slot == "view" or slot == "tool":
            return self._turn_ctx if self._turn is not None else self._run_ctx
        return self._container()

    def _start(self, phase: Phase, event: ev.Event, parent: Any) -> Span:
        title = phase.title
        return self._tracer.start_span(
            phase.span if title is None else f"{phase.span} {title(event)}",
            context=parent,
            kind=phase.kind,
            attributes=self._attrs(phase, event),
        )

    def _open_turn(self, phase: Phase, event: ev.Event) -> Span:
        span = self._turn = self._start(phase, event, self._container())
        self._turn_ctx = trace.set_span_in_context(span)
        return span

    def _open_view(self, phase: Phase, event: ev.Event) -> Span:
        span = self._view = self._start(phase, event, self._parent("view"))
        self._view_ctx = None
        return span

    def _open_chat(self, phase: Phase, event: ev.ModelCallStarted) -> Span:
        span = self._chat = self._start(phase, event, self._container())
        self._chat_opened(event, span)
        return span

    def _open_tool(self, phase: Phase, event: ev.ToolCallStarted) -> Span:
        span = self._start(phase, event, self._parent("tool"))
        call = event.call
        self._tools[call.call_id] = span
        if self._capture:
            args = self._content(span, A.TOOL_ARGUMENTS, C.parse_args(call.arguments))
            self._tool_event(A.EVENT_TOOL_ARGUMENTS, span, event, A.TOOL_ARGUMENTS, args)
        return span

    def _open_guardrail(self, phase: Phase, event: ev.GuardrailStarted) -> Span:
        span = self._start(phase, event, self._container())
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
        self._base_key = None  # the common attributes changed
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
        self._agent_label = event.agent
        # spend is the top-level run's: a child's cost counts under its root's agent
        self._spend = {A.AGENT_NAME: event.root_agent or event.agent, A.RUN_NESTED: nested}
        if event.labels:  # attribution, capped: top values by first seen, the rest "other"
            self._spend.update(label_cap().attributes(dict(event.labels)))
        self._spend_key = tuple(self._spend.items())
        return span

    def _attach(self, phase: Phase, event: ev.Event) -> Any:
        if isinstance(event, ev.ProviderRetry):
            return self._retry(event)
        if isinstance(event, ev.ApprovalDecided):
            return self._approval(event)
        if isinstance(event, ev.GuardrailTriggered):
            span = self._innermost()
            if span is None:
                return None
            span.add_event(
                A.EVENT_GUARDRAIL_TRIPPED,
                {A.GUARDRAIL_NAME: event.guardrail, A.GUARDRAIL_KIND: event.kind},
            )
            return span
        return self._chat

    def _innermost(self) -> Span | None:
        """The innermost open span of view, turn and run (None: none is open)."""
        if self._view is not None:
            return self._view
        if self._turn is not None:
            return self._turn
        return trace.get_current_span(self._run_ctx) if self._run_ctx is not None else None

    def _retry(self, event: ev.ProviderRetry) -> Any:
        """A provider retry: a ``lovia.provider.retry`` event on the chat span."""
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

    def _approval(self, event: ev.ApprovalDecided) -> Any:
        """A decision on a tool call: a ``lovia.approval`` event on the innermost span."""
        span = self._innermost()
        if span is None:
            return None
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
        """A checkpoint write: an event on the innermost open span (none open: nothing
        is recorded; a write is bookkeeping, never a span of its own)."""
        span = self._view if self._view is not None else self._turn
        if span is None:
            span = self._run
        if span is None:
            return None
        attrs = phase.attrs(event) if phase.attrs is not None else {}
        attrs[A.CHECKPOINT_DURATION] = getattr(event, "duration_s", 0.0) or 0.0
        attrs[A.AGENT_NAME] = event.agent
        if event.turn:
            attrs[A.TURN_INDEX] = event.turn
        error = getattr(event, "error", None)
        if error is not None:
            attrs[A.ERROR_MESSAGE] = C.status_text(
                self._policy, type(error).__name__, str(error), error
            )
        span.add_event(phase.span, attrs)
        return span

    def _ended(self, phase: Phase, event: ev.Event, span: Span | None) -> Span | None:
        """A phase's span that closes: its end attributes, and its status if it failed."""
        if span is None:
            return None
        attrs = phase.attrs(event) if phase.attrs is not None else {}
        if len(attrs) > _FEW:
            span.set_attributes(attrs)
        else:  # the SDK's set_attributes costs more than a few set_attribute calls
            for key, value in attrs.items():
                span.set_attribute(key, value)
        if A.ERROR_TYPE in attrs:
            error = getattr(event, "error", None)
            message = str(getattr(event, "message", ""))
            span.set_status(self._status(str(attrs[A.ERROR_TYPE]), message, error))
        return span

    def _close_turn(self, phase: Phase, event: ev.Event) -> Span | None:
        span, self._turn, self._turn_ctx = self._turn, None, None
        return self._ended(phase, event, span)

    def _close_view(self, phase: Phase, event: ev.Event) -> Span | None:
        span, self._view, self._view_ctx = self._view, None, None
        self._compacted = bool(getattr(event, "compacted", False))
        return self._ended(phase, event, span)

    def _close_chat(self, phase: Phase, event: ev.Event) -> Span | None:
        span, self._chat = self._chat, None
        if self._ended(phase, event, span) is None:
            return None
        assert span is not None
        self._chat_closed(event, span)
        return span

    def _close_guardrail(
        self, phase: Phase, event: ev.GuardrailCompleted | ev.GuardrailTriggered
    ) -> Span | None:
        span = self._guards.pop((event.kind, event.guardrail), None)
        return self._ended(phase, event, span)

    def _close_tool(self, phase: Phase, event: ev.ToolCallCompleted) -> Span | None:
        span = self._tools.pop(event.call.call_id, None)
        if span is None:  # never started (refused / handoff): a zero-length leaf
            span = self._start(phase, event, self._parent("tool"))
        if self._capture and not event.is_error:
            result = self._content(span, A.TOOL_RESULT, event.result.content)
            self._tool_event(A.EVENT_TOOL_RESULT, span, event, A.TOOL_RESULT, result)
        if self._m is not None:
            record_tool(self._m, event, self._agent(event))
        return self._ended(phase, event, span)

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
        spans.extend(s for s in (self._view, self._turn) if s is not None)
        self._tools.clear()
        self._guards.clear()
        self._chat = self._view = self._turn = self._view_ctx = self._turn_ctx = None
        for span in spans:
            span.set_attributes({A.ERROR_TYPE: error_type, A.SPAN_INTERRUPTED: True})
            span.set_status(status)
            span.end()

    # -- chat details: content + metrics ---------------------------------------------

    def _chat_opened(self, event: ev.ModelCallStarted, span: Span) -> None:
        chat = chat_labels(event, self._agent(event), self._spend, self._spend_key)
        self._chat_set, self._chat_labels = chat, chat.base
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
            if self._m is not None and self._chat_set is not None:
                record_chat(self._m, self._chat_set, event, self._latest)
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
        agent = self._agent_label
        return agent if agent is not None else event.agent

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


_Act = Callable[[RunTracer, Phase, Any], Any]
_OPENERS: dict[str, _Act] = {
    "run": RunTracer._open_run,  # pyright: ignore[reportPrivateUsage]
    "turn": RunTracer._open_turn,  # pyright: ignore[reportPrivateUsage]
    "view": RunTracer._open_view,  # pyright: ignore[reportPrivateUsage]
    "chat": RunTracer._open_chat,  # pyright: ignore[reportPrivateUsage]
    "tool": RunTracer._open_tool,  # pyright: ignore[reportPrivateUsage]
    "guardrail": RunTracer._open_guardrail,  # pyright: ignore[reportPrivateUsage]
}
_CLOSERS: dict[str, _Act] = {
    "run": RunTracer._close_run,  # pyright: ignore[reportPrivateUsage]
    "turn": RunTracer._close_turn,  # pyright: ignore[reportPrivateUsage]
    "view": RunTracer._close_view,  # pyright: ignore[reportPrivateUsage]
    "chat": RunTracer._close_chat,  # pyright: ignore[reportPrivateUsage]
    "tool": RunTracer._close_tool,  # pyright: ignore[reportPrivateUsage]
    "guardrail": RunTracer._close_guardrail,  # pyright: ignore[reportPrivateUsage]
}


def _act(phase: Phase) -> _Act:
    """The ``RunTracer`` method that does ``phase``'s span work."""
    if phase.action == "open":
        return _OPENERS[phase.slot]
    if phase.action == "close":
        return _CLOSERS[phase.slot]
    if phase.action == "attach":
        return RunTracer._attach  # pyright: ignore[reportPrivateUsage]
    if phase.action == "note":
        return RunTracer._note  # pyright: ignore[reportPrivateUsage]
    return RunTracer._leaf  # pyright: ignore[reportPrivateUsage]


_ROUTES: dict[type[ev.Event], tuple[_Act, Phase, bool]] = {
    kind: (_act(phase), phase, phase.action != "attach") for kind, phase in EVENTS.items()
}
"""``mapping.EVENTS`` with each phase's method (and whether a failure in it is caught and
logged): one lookup per event picks its work."""
_ENDS = frozenset(kind for kind, phase in EVENTS.items() if phase.action in ("close", "leaf"))
"""Events whose span ``end`` ends (a closed phase, a leaf)."""


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
