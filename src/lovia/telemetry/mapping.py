"""THE table between lovia events and spans, used in both directions.

Forward (``RunTracer``): each event type has a :class:`Phase` saying which span it
opens, closes, annotates or emits as a leaf, under which parent, with which name, kind
and attributes. Backward (``processor.event_from_span``): each span name has a builder
that turns a *finished* span back into the typed event it stands for.

==========================  ==========================  =======  =========================
event(s)                    span                        kind     action
==========================  ==========================  =======  =========================
RunStarted → RunCompleted   ``invoke_agent {agent}``    INTERNAL open → close (run)
  / RunFailed
TurnStarted → TurnEnded     ``lovia.turn``              INTERNAL open → close (turn)
ViewStarted → ViewBuilt     ``lovia.view``              INTERNAL open → close (view)
ModelCallStarted →          ``chat {model}``            CLIENT   open → close (chat);
  MessageCompleted /                                             ProviderRetry = span event;
  ModelCallFailed                                                under the view if open
                                                                 (summary calls)
ToolCallStarted →           ``execute_tool {tool}``     INTERNAL open → close (by call id)
  ToolCallCompleted
GuardrailStarted →          ``lovia.guardrail {name}``  INTERNAL open → close
  GuardrailCompleted                                           GuardrailTriggered = event
ApprovalDecided             (the innermost open span)           attach: ``lovia.approval`` event
HandoffOccurred             ``lovia.handoff``           INTERNAL leaf
CompactionApplied           ``lovia.compaction``        INTERNAL leaf (under the view)
CheckpointSaved             (the innermost open span)           note: a span event
                                                                 ``lovia.checkpoint.write``,
                                                                 never a span
SessionWritten              ``lovia.session.write``     INTERNAL leaf
PluginSetup / PluginClosed  ``lovia.plugin.setup|close  INTERNAL leaf
                            {plugin}``
Text/Reasoning/ToolCall     (none: the chat span is returned, no work)
  deltas
==========================  ==========================  =======  =========================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue

from .. import events as ev
from ..pricing import price_source
from ..transcript import ToolCallEntry, ToolResultEntry
from ..usage import Usage
from . import attributes as A

__all__ = [
    "EVENTS",
    "OUTCOMES",
    "SPANS",
    "Attrs",
    "Phase",
    "checkpoint_from_event",
    "run_outcome",
    "span_base",
    "tool_outcome",
]

Attrs = dict[str, AttributeValue]
Action = Literal["open", "close", "leaf", "attach", "note"]
Slot = Literal["run", "turn", "view", "chat", "tool", "guardrail", "container"]


@dataclass(frozen=True, slots=True)
class Phase:
    """How one event type maps onto a span."""

    span: str
    """Span name (first word); ``title`` adds the suffix."""
    action: Action
    slot: Slot
    """The span slot opened/closed/annotated, or for leaves the parent (``run`` or
    ``container`` = innermost of view/turn/run)."""
    kind: SpanKind = SpanKind.INTERNAL
    title: Callable[[Any], str] | None = None
    attrs: Callable[[Any], Attrs] | None = None


def _usage_attrs(prefix: str, usage: Usage) -> Attrs:
    out: Attrs = {prefix + f: getattr(usage, f) for f in A.USAGE_FIELDS}
    out[prefix + "cost_usd"] = usage.cost_usd
    if usage.missing:
        out[prefix + "missing"] = True
    return out


def _run_start(e: ev.RunStarted) -> Attrs:
    out: Attrs = {
        A.OPERATION_NAME: "invoke_agent",
        A.PROVIDER_NAME: e.provider,
        A.REQUEST_MODEL: e.model,
    }
    if e.description:
        out[A.AGENT_DESCRIPTION] = e.description
    if e.resumed:
        out[A.RUN_RESUMED] = True
    if e.attempt > 1:
        out[A.RUN_ATTEMPT] = e.attempt
    if e.parent_run_id is not None:
        out[A.RUN_PARENT_ID] = e.parent_run_id
        out[A.RUN_PARENT_CALL_ID] = e.parent_call_id or ""
    for key, value in e.labels:
        out[A.LABEL_PREFIX + key] = value
    return out


def _run_end(e: ev.RunCompleted | ev.RunFailed) -> Attrs:
    out = _usage_attrs(A.RUN_USAGE_PREFIX, e.usage)
    out[A.RUN_TURNS] = e.turns
    out[A.RUN_FINISH_REASON] = e.finish_reason
    out[A.RUN_FINAL_AGENT] = e.agent
    out.update(_run_cost(e))
    if isinstance(e, ev.RunCompleted):
        out[A.RUN_OUTCOME] = "completed"
        if e.replayed:
            out[A.RUN_REPLAYED] = True
    else:
        out[A.RUN_OUTCOME] = run_outcome(e)
        if out[A.RUN_OUTCOME] != "paused":
            out[A.ERROR_TYPE] = e.error_type
    return out


def _run_cost(e: ev.RunCompleted | ev.RunFailed) -> Attrs:
    """Own cost and total cost: two attributes, so a sum over spans never counts a
    child run twice (``attributes.COST_USD`` / ``COST_TOTAL_USD``)."""
    own = e.usage.cost_usd - (e.child_usage.cost_usd if e.child_usage is not None else 0.0)
    out: Attrs = {A.COST_USD: max(own, 0.0), A.COST_TOTAL_USD: e.usage.cost_usd}
    if e.usage.unpriced:
        out[A.COST_UNPRICED] = e.usage.unpriced
    return out


OUTCOMES: Mapping[str, str] = {
    "ApprovalPending": "paused",
    "RunCancelled": "cancelled",
    "LeaseLost": "interrupted",
}
"""``lovia.run.outcome`` of a run that ended without an output, by error type (any other
error type: ``failed``). Only ``failed`` burns the run-success SLO's error budget."""


def run_outcome(e: ev.RunFailed) -> str:
    if e.finish_reason == "approval_pending":
        return "paused"
    return OUTCOMES.get(e.error_type, "failed")


def _turn_end(e: ev.TurnEnded) -> Attrs:
    out = _usage_attrs(A.TURN_USAGE_PREFIX, e.usage)
    out[A.TURN_TOOL_CALLS] = e.tool_calls
    if e.usage.unpriced:  # unknown is not zero: the turn's cost is a lower bound
        out[A.COST_UNPRICED] = e.usage.unpriced
    return out


def _view_built(e: ev.ViewBuilt) -> Attrs:
    out: Attrs = {
        A.VIEW_HASH: e.view_hash,
        A.VIEW_ENTRIES: e.entries,
        A.VIEW_INJECTED: e.injected,
        A.VIEW_ATTEMPT: e.attempt,
    }
    if e.compacted:
        out[A.CONVERSATION_COMPACTED] = True
    return out


_SETTINGS = (
    ("temperature", A.REQUEST_TEMPERATURE),
    ("top_p", A.REQUEST_TOP_P),
    ("max_tokens", A.REQUEST_MAX_TOKENS),
    ("stop", A.REQUEST_STOP_SEQUENCES),
    ("seed", A.REQUEST_SEED),
)


_DOUBLES = frozenset({A.REQUEST_TEMPERATURE, A.REQUEST_TOP_P})


def _chat_start(e: ev.ModelCallStarted) -> Attrs:
    out: Attrs = {
        A.OPERATION_NAME: "chat",
        A.PROVIDER_NAME: e.provider,
        A.REQUEST_MODEL: e.model,
        A.VIEW_HASH: e.view_hash,
        A.REQUEST_STREAM: e.stream,
        A.CALL_PURPOSE: e.purpose,
    }
    for key, attr in _SETTINGS:
        value: Any = e.settings.get(key)
        if isinstance(value, (list, tuple)):
            out[attr] = [str(v) for v in cast("Sequence[object]", value)]  # user settings
        elif attr in _DOUBLES and isinstance(value, int) and not isinstance(value, bool):
            out[attr] = float(value)  # the registry types them double: 1 is sent as 1.0
        elif value is not None:
            out[attr] = value
    if e.server_address:
        out[A.SERVER_ADDRESS] = e.server_address
    if e.server_port:
        out[A.SERVER_PORT] = e.server_port
    if e.compacted:
        out[A.CONVERSATION_COMPACTED] = True
    if getattr(e.request, "output_schema", None) is not None:  # a structured answer asked for
        out[A.OUTPUT_TYPE] = "json"
    return out


def _chat_end(e: ev.ModelCallCompleted) -> Attrs:
    out: Attrs = {A.RESPONSE_FINISH_REASONS: [e.finish_reason]}
    if e.usage.unpriced:  # unknown is not zero: no cost, and say so
        out[A.COST_UNPRICED] = e.usage.unpriced
    else:
        out[A.COST_USD] = e.usage.cost_usd
        source = price_source(e.provider, e.response_model or e.model)
        if source is not None:
            out[A.COST_SOURCE] = source
    if e.response_model:
        out[A.RESPONSE_MODEL] = e.response_model
    if e.response_id:
        out[A.RESPONSE_ID] = e.response_id
    if e.raw_finish_reason is not None:
        out[A.FINISH_REASON_RAW] = e.raw_finish_reason
    if e.time_to_first_chunk_s is not None:
        out[A.RESPONSE_TTFC] = e.time_to_first_chunk_s
    u = e.usage
    if not u.missing:
        out[A.USAGE_INPUT] = u.input_tokens
        out[A.USAGE_OUTPUT] = u.output_tokens
        out[A.USAGE_CACHE_READ] = u.cache_read_tokens
        out[A.USAGE_CACHE_WRITE] = u.cache_write_tokens
        out[A.USAGE_REASONING] = u.reasoning_tokens
    return out


def _chat_failed(e: ev.ModelCallFailed) -> Attrs:
    return {A.ERROR_TYPE: e.error_type, A.RESPONSE_FINISH_REASONS: ["error"]}


def _tool_start(e: ev.ToolCallStarted) -> Attrs:
    out: Attrs = {
        A.OPERATION_NAME: "execute_tool",
        A.TOOL_NAME: e.call.name,
        A.TOOL_CALL_ID: e.call.call_id,
        A.TOOL_TYPE: "function",
    }
    if e.description:
        out[A.TOOL_DESCRIPTION] = e.description
    if e.idempotency_key:
        out[A.TOOL_IDEMPOTENCY_KEY] = e.idempotency_key
    return out


def tool_outcome(e: ev.ToolCallCompleted) -> str:
    """``lovia.tool.outcome``: executed | unknown (recovered from the ledger) | refused."""
    if e.started:
        return "executed"
    return "unknown" if e.recovered else "refused"


def _tool_end(e: ev.ToolCallCompleted) -> Attrs:
    out: Attrs = {A.TOOL_IS_ERROR: e.is_error, A.TOOL_OUTCOME: tool_outcome(e)}
    if e.recovered:
        out[A.TOOL_RECOVERED] = True
    if not e.known:
        out[A.TOOL_KNOWN] = False
    if not e.started:
        out.update(
            {
                A.OPERATION_NAME: "execute_tool",
                A.TOOL_NAME: e.call.name,
                A.TOOL_CALL_ID: e.call.call_id,
                A.TOOL_TYPE: "function",
                A.TOOL_STARTED: False,
            }
        )
    if e.is_error:
        out[A.ERROR_TYPE] = e.error_type or "ToolError"
    return out


def _guard_start(e: ev.GuardrailStarted) -> Attrs:
    return {A.GUARDRAIL_NAME: e.guardrail, A.GUARDRAIL_KIND: e.kind}


def _guard_end(e: ev.GuardrailCompleted) -> Attrs:
    out: Attrs = {A.GUARDRAIL_TRIPPED: e.tripped}
    if e.tripped:
        out[A.ERROR_TYPE] = "GuardrailTripped"
        if e.reason:
            out[A.GUARDRAIL_REASON] = e.reason
    return out


def _handoff(e: ev.HandoffOccurred) -> Attrs:
    return {A.HANDOFF_FROM: e.from_agent, A.HANDOFF_TO: e.to_agent}


def _compaction(e: ev.CompactionApplied) -> Attrs:
    out: Attrs = {A.COMPACTION_KIND: e.kind, A.COMPACTION_ENTRIES: len(e.entry_ids)}
    if e.tokens_before is not None:
        out[A.COMPACTION_TOKENS_BEFORE] = e.tokens_before
    if e.tokens_after is not None:
        out[A.COMPACTION_TOKENS_AFTER] = e.tokens_after
    return out


def _checkpoint(e: ev.CheckpointSaved) -> Attrs:
    out: Attrs = {
        A.CHECKPOINT_KIND: e.kind,
        A.CHECKPOINT_ENTRIES: e.entries,
        A.CHECKPOINT_BYTES: e.bytes,
        A.STORE: e.store,
    }
    if e.error is not None:
        out[A.ERROR_TYPE] = type(e.error).__name__
    return out


def _session(e: ev.SessionWritten) -> Attrs:
    return {A.SESSION_ENTRIES: e.entries, A.STORE: e.store}


def _plugin(e: ev.PluginSetup | ev.PluginClosed) -> Attrs:
    out: Attrs = {A.PLUGIN_NAME: e.plugin}
    if e.error is not None:
        out[A.ERROR_TYPE] = type(e.error).__name__
    return out


_CHAT = Phase(A.SPAN_CHAT, "attach", "chat")

EVENTS: Mapping[type[ev.Event], Phase] = {
    ev.RunStarted: Phase(A.SPAN_RUN, "open", "run", title=lambda e: e.agent, attrs=_run_start),
    ev.RunCompleted: Phase(A.SPAN_RUN, "close", "run", attrs=_run_end),
    ev.RunFailed: Phase(A.SPAN_RUN, "close", "run", attrs=_run_end),
    ev.TurnStarted: Phase(A.SPAN_TURN, "open", "turn"),
    ev.TurnEnded: Phase(A.SPAN_TURN, "close", "turn", attrs=_turn_end),
    ev.ViewStarted: Phase(A.SPAN_VIEW, "open", "view"),
    ev.ViewBuilt: Phase(A.SPAN_VIEW, "close", "view", attrs=_view_built),
    ev.ModelCallStarted: Phase(
        A.SPAN_CHAT, "open", "chat", SpanKind.CLIENT, title=lambda e: e.model, attrs=_chat_start
    ),
    ev.TextDelta: _CHAT,
    ev.ReasoningDelta: _CHAT,
    ev.ToolCallDelta: _CHAT,
    ev.ProviderRetry: _CHAT,
    ev.MessageCompleted: Phase(A.SPAN_CHAT, "close", "chat", attrs=_chat_end),
    ev.SummaryCompleted: Phase(A.SPAN_CHAT, "close", "chat", attrs=_chat_end),
    ev.ModelCallFailed: Phase(A.SPAN_CHAT, "close", "chat", attrs=_chat_failed),
    ev.ToolCallStarted: Phase(
        A.SPAN_TOOL, "open", "tool", title=lambda e: e.call.name, attrs=_tool_start
    ),
    ev.ToolCallCompleted: Phase(
        A.SPAN_TOOL, "close", "tool", title=lambda e: e.call.name, attrs=_tool_end
    ),
    ev.GuardrailStarted: Phase(
        A.SPAN_GUARDRAIL, "open", "guardrail", title=lambda e: e.guardrail, attrs=_guard_start
    ),
    ev.GuardrailCompleted: Phase(A.SPAN_GUARDRAIL, "close", "guardrail", attrs=_guard_end),
    ev.GuardrailTriggered: Phase(A.SPAN_GUARDRAIL, "attach", "container"),
    ev.ApprovalDecided: Phase(A.SPAN_TURN, "attach", "container"),
    ev.HandoffOccurred: Phase(A.SPAN_HANDOFF, "leaf", "run", attrs=_handoff),
    ev.CompactionApplied: Phase(A.SPAN_COMPACTION, "leaf", "container", attrs=_compaction),
    ev.CheckpointSaved: Phase(A.EVENT_CHECKPOINT, "note", "container", attrs=_checkpoint),
    ev.SessionWritten: Phase(A.SPAN_SESSION, "leaf", "run", attrs=_session),
    ev.PluginSetup: Phase(
        A.SPAN_PLUGIN_SETUP, "leaf", "run", title=lambda e: e.plugin, attrs=_plugin
    ),
    ev.PluginClosed: Phase(
        A.SPAN_PLUGIN_CLOSE, "leaf", "run", title=lambda e: e.plugin, attrs=_plugin
    ),
}
"""Forward: event type → phase. Event types not listed get no span work."""


# -- backward: finished span → event ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Finished:
    """What the builders read from a finished span."""

    attrs: Mapping[str, Any]
    failed: bool
    message: str
    duration_s: float

    def get(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def base(self) -> dict[str, Any]:
        return {
            "run_id": str(self.get(A.RUN_ID, "")),
            "agent": str(self.get(A.AGENT_NAME, "")),
            "turn": int(self.get(A.TURN_INDEX, 0)),
        }

    def usage(self, prefix: str) -> Usage:
        values = {f: int(self.get(prefix + f, 0)) for f in A.USAGE_FIELDS}
        return Usage(
            **values,
            cost_usd=float(self.get(prefix + "cost_usd", 0.0)),
            missing=bool(self.get(prefix + "missing", False)),
            unpriced=int(self.get(A.COST_UNPRICED, 0)),  # run and turn spans carry it
        )


def _back_run(s: Finished) -> ev.Event:
    base = s.base()
    base["agent"] = str(s.get(A.RUN_FINAL_AGENT, base["agent"]))
    base["turn"] = int(s.get(A.RUN_TURNS, 0))  # the live terminal event's turn
    common: dict[str, Any] = {
        "usage": s.usage(A.RUN_USAGE_PREFIX),
        "turns": base["turn"],
        "finish_reason": str(s.get(A.RUN_FINISH_REASON, "")),
        "duration_s": s.duration_s,
    }
    outcome = s.get(A.RUN_OUTCOME)
    if outcome == "paused":
        return ev.RunFailed(**base, **common, error_type="ApprovalPending", message=s.message)
    if s.failed or outcome in ("failed", "cancelled", "interrupted"):
        return ev.RunFailed(
            **base, **common, error_type=str(s.get(A.ERROR_TYPE, "_OTHER")), message=s.message
        )
    return ev.RunCompleted(**base, **common, replayed=bool(s.get(A.RUN_REPLAYED, False)))


def _back_chat(s: Finished) -> ev.Event:
    model, provider = str(s.get(A.REQUEST_MODEL, "")), str(s.get(A.PROVIDER_NAME, ""))
    purpose = str(s.get(A.CALL_PURPOSE, "main"))
    if s.failed:
        return ev.ModelCallFailed(
            **s.base(),
            model=model,
            provider=provider,
            error_type=str(s.get(A.ERROR_TYPE, "_OTHER")),
            message=s.message,
            duration_s=s.duration_s,
            purpose=purpose,
        )
    reasons = s.get(A.RESPONSE_FINISH_REASONS) or ("stop",)
    usage = Usage(
        input_tokens=int(s.get(A.USAGE_INPUT, 0)),
        output_tokens=int(s.get(A.USAGE_OUTPUT, 0)),
        cache_read_tokens=int(s.get(A.USAGE_CACHE_READ, 0)),
        cache_write_tokens=int(s.get(A.USAGE_CACHE_WRITE, 0)),
        reasoning_tokens=int(s.get(A.USAGE_REASONING, 0)),
        requests=1,
        cost_usd=float(s.get(A.COST_USD, 0.0)),
        missing=A.USAGE_INPUT not in s.attrs,
        unpriced=int(s.get(A.COST_UNPRICED, 0)),
    )
    done = ev.SummaryCompleted if purpose == "summary" else ev.MessageCompleted
    return done(
        **s.base(),
        usage=usage,
        finish_reason=str(reasons[0]),
        raw_finish_reason=s.get(A.FINISH_REASON_RAW),
        response_id=s.get(A.RESPONSE_ID),
        response_model=s.get(A.RESPONSE_MODEL),
        model=model,
        provider=provider,
        time_to_first_chunk_s=s.get(A.RESPONSE_TTFC),
        duration_s=s.duration_s,
        purpose=purpose,
    )


def _back_tool(s: Finished) -> ev.Event:
    call_id, name = str(s.get(A.TOOL_CALL_ID, "")), str(s.get(A.TOOL_NAME, ""))
    is_error = bool(s.get(A.TOOL_IS_ERROR, s.failed))
    return ev.ToolCallCompleted(
        **s.base(),
        call=ToolCallEntry(call_id=call_id, name=name),
        result=ToolResultEntry(call_id=call_id, name=name, content="", is_error=is_error),
        is_error=is_error,
        error_type=s.get(A.ERROR_TYPE),
        duration_s=s.duration_s,
        started=bool(s.get(A.TOOL_STARTED, True)),
        known=bool(s.get(A.TOOL_KNOWN, True)),
        recovered=bool(s.get(A.TOOL_RECOVERED, False)),
    )


def _back_turn(s: Finished) -> ev.Event | None:
    if s.failed:  # the live stream ends a failed turn with RunFailed, no TurnEnded
        return None
    return ev.TurnEnded(
        **s.base(), usage=s.usage(A.TURN_USAGE_PREFIX), tool_calls=int(s.get(A.TURN_TOOL_CALLS, 0))
    )


def _back_guardrail(s: Finished) -> ev.Event:
    kind, name = str(s.get(A.GUARDRAIL_KIND, "")), str(s.get(A.GUARDRAIL_NAME, ""))
    reason = str(s.get(A.GUARDRAIL_REASON, ""))
    if s.get(A.GUARDRAIL_TRIPPED):
        return ev.GuardrailTriggered(**s.base(), kind=kind, guardrail=name, reason=reason)
    return ev.GuardrailCompleted(**s.base(), kind=kind, guardrail=name, reason=reason)


def _back_plugin(
    cls: type[ev.PluginSetup] | type[ev.PluginClosed],
) -> Callable[[Finished], ev.Event]:
    def build(s: Finished) -> ev.Event:
        error = RuntimeError(s.message or str(s.get(A.ERROR_TYPE))) if s.failed else None
        return cls(
            **s.base(), plugin=str(s.get(A.PLUGIN_NAME, "")), duration_s=s.duration_s, error=error
        )

    return build


def _back_checkpoint(
    base: dict[str, Any], attrs: Mapping[str, Any], duration_s: float, error: Exception | None
) -> ev.Event:
    return ev.CheckpointSaved(
        **base,
        kind=str(attrs.get(A.CHECKPOINT_KIND, "")),
        entries=int(attrs.get(A.CHECKPOINT_ENTRIES, 0)),
        bytes=int(attrs.get(A.CHECKPOINT_BYTES, 0)),
        store=str(attrs.get(A.STORE, "")),
        duration_s=duration_s,
        error=error,
    )


def checkpoint_from_event(carrier: Finished, attrs: Mapping[str, Any]) -> ev.Event:
    """The ``CheckpointSaved`` a ``lovia.checkpoint.write`` span event stands for
    (``carrier``: the finished span holding it; the event names its own agent and turn;
    a failed write's error is rebuilt from its ``error.message``, else its type)."""
    base = carrier.base()
    base["agent"] = str(attrs.get(A.AGENT_NAME, base["agent"]))
    base["turn"] = int(attrs.get(A.TURN_INDEX, 0))
    duration = float(attrs.get(A.CHECKPOINT_DURATION, 0.0))
    error = None
    if A.ERROR_TYPE in attrs:
        error = RuntimeError(str(attrs.get(A.ERROR_MESSAGE) or attrs[A.ERROR_TYPE]))
    return _back_checkpoint(base, attrs, duration, error)


def _back_checkpoint_span(s: Finished) -> ev.Event:
    """A checkpoint write recorded as a span (telemetry versions 3 and 4: a failed or slow
    write), so traces stored by an earlier lovia still read back."""
    error = RuntimeError(s.message or str(s.get(A.ERROR_TYPE))) if s.failed else None
    return _back_checkpoint(s.base(), s.attrs, s.duration_s, error)


SPANS: Mapping[str, Callable[[Finished], ev.Event | None]] = {
    A.SPAN_RUN: _back_run,
    A.SPAN_CHAT: _back_chat,
    A.SPAN_TOOL: _back_tool,
    A.SPAN_GUARDRAIL: _back_guardrail,
    A.SPAN_TURN: _back_turn,
    A.SPAN_VIEW: lambda s: ev.ViewBuilt(
        **s.base(),
        view_hash=str(s.get(A.VIEW_HASH, "")),
        entries=int(s.get(A.VIEW_ENTRIES, 0)),
        injected=int(s.get(A.VIEW_INJECTED, 0)),
        attempt=int(s.get(A.VIEW_ATTEMPT, 1)),
        compacted=bool(s.get(A.CONVERSATION_COMPACTED, False)),
    ),
    A.SPAN_HANDOFF: lambda s: ev.HandoffOccurred(
        **s.base(), from_agent=str(s.get(A.HANDOFF_FROM, "")), to_agent=str(s.get(A.HANDOFF_TO, ""))
    ),
    A.SPAN_COMPACTION: lambda s: ev.CompactionApplied(
        **s.base(),
        kind=str(s.get(A.COMPACTION_KIND, "")),
        tokens_before=s.get(A.COMPACTION_TOKENS_BEFORE),
        tokens_after=s.get(A.COMPACTION_TOKENS_AFTER),
        duration_s=s.duration_s,
    ),
    A.SPAN_CHECKPOINT: _back_checkpoint_span,
    A.SPAN_SESSION: lambda s: ev.SessionWritten(
        **s.base(),
        session_id=str(s.get(A.CONVERSATION_ID, "")),
        entries=int(s.get(A.SESSION_ENTRIES, 0)),
        store=str(s.get(A.STORE, "")),
        duration_s=s.duration_s,
    ),
    A.SPAN_PLUGIN_SETUP: _back_plugin(ev.PluginSetup),
    A.SPAN_PLUGIN_CLOSE: _back_plugin(ev.PluginClosed),
}
"""Backward: span name (first word) → builder of the event it stands for (None: the
span stands for no event the live stream emits)."""


def span_base(name: str) -> str:
    """The first word of a span name (``chat gpt-4o`` → ``chat``)."""
    return name.split(" ", 1)[0]
