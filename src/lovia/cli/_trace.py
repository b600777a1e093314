"""``lovia trace RUN``: the run's span tree from the embedded span store.

Spans come from ``lovia.telemetry.load_spans`` (the local exporter of
``lovia.telemetry.configure(exporter="local")`` writes them next to the runs). Each
span may be a mapping or an object; :func:`normalize` reads the usual field names of
OpenTelemetry ``ReadableSpan`` and of JSON span dumps.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import LoviaError, UserError
from ..replay import load_run, open_store
from ._common import store_url
from ._out import Out, fmt_cost, fmt_duration

__all__ = ["SpanRow", "normalize", "trace", "tree_lines"]


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

    @property
    def duration(self) -> float | None:
        return None if self.end is None else max(0.0, self.end - self.start)


async def trace(args: argparse.Namespace, out: Out) -> int:
    url = store_url(args)
    async with open_store(url) as db:
        run = await load_run(args.run, db)
    spans = [normalize(s) for s in await _load_spans(url, run.info.run_id, run.info.trace_id)]
    if not spans:
        raise LoviaError(
            f"no spans stored for run {run.info.run_id}",
            hint='Record them with lovia.telemetry.configure(exporter="local") in the '
            "application (same store), or look the trace up in Jaeger/Tempo"
            + (f" by trace id {run.info.trace_id}." if run.info.trace_id else "."),
        )
    trace_id = run.info.trace_id or spans[0].trace_id
    roots = build_tree(spans)
    if out.json_mode:
        out.json(
            {
                "run_id": run.info.run_id,
                "trace_id": trace_id,
                "spans": [_span_json(s) for s in roots],
            }
        )
        return 0
    out.line(
        out.style(f"trace {trace_id}", "bold")
        + "  (search this trace id in Jaeger / Grafana Tempo)"
    )
    for line in tree_lines(roots, out):
        out.line(line)
    return 0


async def _load_spans(url: str, run_id: str, trace_id: str | None) -> list[Any]:
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
            mapping: Mapping[str, Any] = span  # type: ignore[reportUnknownVariableType]
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


def build_tree(spans: Sequence[SpanRow]) -> list[SpanRow]:
    """Link spans to their parents; spans whose parent is absent become roots."""
    by_id = {s.span_id: s for s in spans}
    roots: list[SpanRow] = []
    for span in sorted(spans, key=lambda s: s.start):
        parent = by_id.get(span.parent_id or "")
        (parent.children if parent is not None and parent is not span else roots).append(span)
    return roots


def tree_lines(roots: Sequence[SpanRow], out: Out) -> list[str]:
    """``├─``/``└─`` lines: name, duration, usage, cost, finish reason, errors."""
    rows: list[tuple[str, SpanRow]] = []

    def walk(span: SpanRow, prefix: str, last: bool, depth: int) -> None:
        branch = "" if depth == 0 else ("└─ " if last else "├─ ")
        rows.append((prefix + branch, span))
        inner = prefix + ("" if depth == 0 else ("   " if last else "│  "))
        for i, child in enumerate(span.children):
            walk(child, inner, i == len(span.children) - 1, depth + 1)

    for root in roots:
        walk(root, "", True, 0)
    width = max((len(p) + len(s.name) for p, s in rows), default=0)
    lines: list[str] = []
    for prefix, span in rows:
        name = (prefix + span.name).ljust(width)
        details = _details(span.attributes)
        if span.error:
            details.append(out.style(f"ERROR {span.error}", "red"))
        lines.append(f"{name}  {fmt_duration(span.duration):>8}  {'  '.join(details)}".rstrip())
    return lines


def _details(attrs: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for prefix in ("gen_ai.usage.", "lovia.turn.usage.", "lovia.run.usage."):
        tokens_in, tokens_out = (
            attrs.get(prefix + "input_tokens"),
            attrs.get(prefix + "output_tokens"),
        )
        if tokens_in is not None or tokens_out is not None:
            out.append(f"tokens {tokens_in or 0}+{tokens_out or 0}")
            break
    cost = attrs.get("lovia.cost.usd")
    if cost:
        out.append(fmt_cost(float(cost)))
    finish = attrs.get("lovia.run.finish_reason") or attrs.get("gen_ai.response.finish_reasons")
    if finish:
        reasons = finish if isinstance(finish, str) else ",".join(str(r) for r in finish)
        out.append(f"finish={reasons}")
    view_hash = attrs.get("lovia.view.hash")
    if view_hash:
        out.append(f"view={str(view_hash)[:12]}")
    return out


def _span_json(span: SpanRow) -> dict[str, Any]:
    return {
        "name": span.name,
        "span_id": span.span_id,
        "parent_id": span.parent_id,
        "start": span.start,
        "duration_s": span.duration,
        "error": span.error,
        "attributes": span.attributes,
        "children": [_span_json(c) for c in span.children],
    }
