"""A run's spans: from the embedded span store, else rebuilt from its own records.

Spans come from ``lovia.telemetry.load_spans`` (the local exporter of
``lovia.telemetry.configure(exporter="local")`` writes them next to the runs). Each
span may be a mapping or an object; :func:`normalize` reads the usual field names of
OpenTelemetry ``ReadableSpan`` and of JSON span dumps; :func:`normalize_all` also
turns the ``lovia.checkpoint.write`` span events a span carries into child rows of that
span (a checkpoint write is a span event, not a span; a failed one's row is an error).
Without stored spans, :func:`spans_from_run` rebuilds the run's outline (turns, model
calls, tool calls) from the timestamps of its transcript entries.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from ..errors import UserError
from ..stores.lifecycle import Attempt
from ..transcript import ToolCallEntry, ToolResultEntry
from ._load import RunData

__all__ = [
    "AttemptPart",
    "SpanRow",
    "attempt_parts",
    "build_tree",
    "load_run_spans",
    "normalize",
    "normalize_all",
    "span_json",
    "spans_from_run",
]


@dataclass(slots=True, kw_only=True)
class SpanRow:
    name: str
    span_id: str
    parent_id: str | None
    trace_id: str = ""
    start: float = 0.0
    end: float | None = None
    attributes: dict[str, Any] = field(default_factory=dict[str, Any])
    error: str | None = None
    children: list[SpanRow] = field(default_factory=list["SpanRow"])
    from_event: bool = False
    """A row drawn from a span event (a checkpoint write), not a span."""

    @property
    def duration(self) -> float | None:
        return None if self.end is None else max(0.0, self.end - self.start)


async def load_run_spans(url: str, run_id: str, trace_id: str | None) -> list[Any]:
    """The stored spans of a run (raw), or [] when the store keeps none."""
    try:
        from .. import telemetry
    except ImportError as exc:  # pragma: no cover - telemetry is part of the core
        raise UserError("lovia.telemetry failed to import") from exc
    load_spans: Any = getattr(telemetry, "load_spans", None)
    if load_spans is None:
        raise UserError(
            "this lovia has no embedded span store to read",
            hint="Upgrade lovia, or look the run up in Jaeger/Tempo.",
        )
    found: Any = load_spans(url, run_id=run_id, trace_id=trace_id)
    if inspect.isawaitable(found):
        found = await found
    spans: list[Any] = list(found or ())
    return spans


def _get(span: Any, *names: str) -> Any:
    for name in names:
        value: Any
        if isinstance(span, Mapping):
            mapping = cast("Mapping[str, Any]", span)  # a stored span (JSON)
            value = mapping.get(name)
        else:
            value = getattr(span, name, None)
        if value is not None:
            return value
    return None


def _seconds(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number / 1e9 if number > 1e14 else number


def _hex(value: Any, width: int) -> str:
    if value is None:
        return ""
    return f"{value:0{width}x}" if isinstance(value, int) else str(value)


def normalize(span: Any) -> SpanRow:
    """A span (mapping or object, OpenTelemetry or JSON field names) as a :class:`SpanRow`."""
    context = _get(span, "context")
    parent = _get(span, "parent")
    status = _get(span, "status")
    code = _get(status, "status_code", "code") if status is not None else None
    code_text = str(getattr(code, "name", code) or status if code or status else "")
    attributes = dict(_get(span, "attributes") or {})
    failed = "ERROR" in code_text.upper() or _get(span, "status_code") in ("ERROR", 2)
    message = _get(status, "description", "message") if status is not None else None
    error = None
    if failed or "error.type" in attributes:
        error = str(attributes.get("error.type") or "error")
        error += f": {message}" if message else ""
    return SpanRow(
        name=str(_get(span, "name") or "?"),
        span_id=_hex(_get(span, "span_id") or _get(context, "span_id"), 16),
        parent_id=_hex(_get(span, "parent_span_id", "parent_id") or _get(parent, "span_id"), 16)
        or None,
        trace_id=_hex(_get(span, "trace_id") or _get(context, "trace_id"), 32),
        start=_seconds(_get(span, "start_time", "start_time_unix_nano", "start")) or 0.0,
        end=_seconds(_get(span, "end_time", "end_time_unix_nano", "end")),
        attributes=attributes,
        error=error,
    )


CHECKPOINT_EVENT = "lovia.checkpoint.write"


def normalize_all(spans: Sequence[Any]) -> list[SpanRow]:
    """Every span as a :class:`SpanRow`, plus a child row for each checkpoint write
    recorded as a span event (from ``ts - lovia.checkpoint.duration_s`` to ``ts``; an
    error row when the event carries ``error.type``)."""
    out: list[SpanRow] = []
    for span in spans:
        row = normalize(span)
        out.append(row)
        for i, item in enumerate(_get(span, "events") or ()):
            if _get(item, "name") == CHECKPOINT_EVENT:
                out.append(_event_row(row, item, i))
    return out


def _event_row(parent: SpanRow, item: Any, index: int) -> SpanRow:
    attributes = dict(_get(item, "attributes") or {})
    end = _seconds(_get(item, "ts_ns", "timestamp", "time_unix_nano")) or parent.start
    duration = float(attributes.get("lovia.checkpoint.duration_s") or 0.0)
    error = None
    if "error.type" in attributes:
        error = str(attributes["error.type"])
        message = attributes.get("error.message")
        error += f": {message}" if message and message != error else ""
    return SpanRow(
        name=CHECKPOINT_EVENT,
        span_id=f"{parent.span_id}.e{index}",
        parent_id=parent.span_id,
        trace_id=parent.trace_id,
        start=end - duration,
        end=end,
        attributes=attributes,
        error=error,
        from_event=True,
    )


def build_tree(spans: Sequence[SpanRow]) -> list[SpanRow]:
    """Link spans to their parents; spans whose parent is absent become roots."""
    by_id = {s.span_id: s for s in spans}
    roots: list[SpanRow] = []
    for span in sorted(spans, key=lambda s: s.start):
        parent = by_id.get(span.parent_id or "")
        (parent.children if parent is not None and parent is not span else roots).append(span)
    return roots


def span_json(span: SpanRow) -> dict[str, Any]:
    """A span and its children as JSON."""
    return {
        "name": span.name,
        "span_id": span.span_id,
        "parent_id": span.parent_id,
        "start": span.start,
        "duration_s": span.duration,
        "error": span.error,
        "attributes": span.attributes,
        "children": [span_json(c) for c in span.children],
    }


def spans_from_run(run: RunData) -> list[SpanRow]:
    """The run's outline rebuilt from its entries' timestamps (no span store needed).

    ``invoke_agent`` for the run, one ``turn N`` per turn, ``chat`` for the model's
    answer of the turn and ``execute_tool NAME`` from each call to its result.
    """
    info = run.info
    entries = run.entries or list(run.session_copies.values())
    end = info.ended_at or max((e.ts for e in entries), default=info.started_at)
    root = SpanRow(
        name=f"invoke_agent {info.extra.get('first_agent', info.agent)}",
        span_id="run",
        parent_id=None,
        start=info.started_at,
        end=end,
        error=info.error_type,
    )
    spans = [root]
    results = {e.call_id: e for e in entries if isinstance(e, ToolResultEntry)}
    by_turn: dict[int, list[Any]] = {}
    for entry in entries:
        by_turn.setdefault(entry.turn, []).append(entry)
    previous_end = info.started_at
    for turn, group in sorted(by_turn.items()):
        turn_id = f"turn-{turn}"
        first, last = min(e.ts for e in group), max(e.ts for e in group)
        start = min(previous_end, first) if turn > 0 else first
        spans.append(
            SpanRow(name=f"turn {turn}", span_id=turn_id, parent_id="run", start=start, end=last)
        )
        answer = [e for e in group if e.type in ("text", "reasoning", "tool_call")]
        if answer:
            spans.append(
                SpanRow(
                    name="chat",
                    span_id=f"chat-{turn}",
                    parent_id=turn_id,
                    start=start,
                    end=min(e.ts for e in answer),
                )
            )
        for call in (e for e in group if isinstance(e, ToolCallEntry)):
            result = results.get(call.call_id)
            spans.append(
                SpanRow(
                    name=f"execute_tool {call.name}",
                    span_id=f"tool-{call.call_id}",
                    parent_id=turn_id,
                    start=call.ts,
                    end=None if result is None else result.ts,
                    error="tool error" if result is not None and result.is_error else None,
                )
            )
        previous_end = last
    return spans


@dataclass(slots=True, kw_only=True)
class AttemptPart:
    """The spans of one attempt of the run (``attempt`` None: spans of no known attempt)."""

    attempt: int | None
    how: str | None = None
    trace_id: str | None = None
    roots: list[SpanRow] = field(default_factory=list[SpanRow])
    note: str = ""

    def title(self) -> str:
        if self.attempt is None:
            return "other spans of this run"
        how = self.how or "running"
        return f"attempt {self.attempt} · {how} · trace {self.trace_id or '-'}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "how": self.how,
            "trace_id": self.trace_id,
            "note": self.note or None,
            "spans": [span_json(s) for s in self.roots],
        }


def attempt_parts(attempts: Sequence[Attempt], spans: Sequence[SpanRow]) -> list[AttemptPart]:
    """The run's spans split by attempt (by trace id), each attempt's tree on its own, and
    a plain note where an attempt's spans (or its root span) died with its process."""
    by_trace: dict[str, list[SpanRow]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    parts: list[AttemptPart] = []
    for a in attempts:
        if a.trace_id is None:
            continue
        mine = by_trace.pop(a.trace_id, [])
        part = AttemptPart(attempt=a.attempt, how=a.how, trace_id=a.trace_id)
        part.roots = build_tree(mine)
        dead = a.how in ("killed", "lease_lost")
        if not mine:
            part.note = (
                "no spans: they were lost with its process (a killed worker cannot export "
                "the spans it still buffered)"
                if dead
                else "no spans stored for this attempt"
            )
        elif a.span_id and all(s.span_id != a.span_id for s in mine):
            part.note = (
                "its root span was lost with its process; the spans it exported before "
                "are shown without it"
                if dead
                else "its root span is not stored (still running?)"
            )
        parts.append(part)
    rest = [s for trace in by_trace.values() for s in trace]
    if rest or not parts:
        parts.append(AttemptPart(attempt=None, roots=build_tree(rest)))
    return parts
