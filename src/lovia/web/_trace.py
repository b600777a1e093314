"""The run page's trace: one row per span, labelled, on a time axis, with a detail panel.

Rows are depth-first with x positions in per-mille of the time shown (the page's own
window on a paged run, so the axis is rescaled to it). Each row says what it is for:
the turn it belongs to, the purpose of a model call (main, repair, summary, eval…),
whether it is bookkeeping (checkpoint and session writes, hidden by default) or a
resumed attempt. A run with several attempts (resumed after a crash, a lost lease or
an approval) has its rows grouped by attempt, each under a heading that says how the
attempt ended; a long trace gets a minimap of all its rows on the time axis. The
detail panel (attributes, events, tokens, cost, ids,
``traceparent``, a link to the span in Jaeger/Grafana) is built in the browser from
the JSON each row carries; stored strings only ever reach the page as text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..replay import SpanRow, build_tree, load_run_spans, normalize_all, spans_from_run
from ..stores.lifecycle import Attempt
from ..telemetry import attributes as A
from ._cache import Loaded, off_loop

__all__ = [
    "MINIMAP_ROWS",
    "AttemptGroup",
    "Bar",
    "axis_ticks",
    "by_attempt",
    "minimap",
    "run_spans",
    "span_link",
    "trace_link",
    "waterfall",
]

BOOKKEEPING = ("lovia.checkpoint", "lovia.session", "lovia.lease", "lovia.plugin")
"""Span name prefixes of lovia's own bookkeeping (hidden unless asked for)."""
HEX_TRACE = re.compile(r"[0-9a-f]{32}")
HEX_SPAN = re.compile(r"[0-9a-f]{16}")


@dataclass(slots=True, kw_only=True)
class Bar:
    """One row of the waterfall: a span, its depth and its place on the time axis."""

    span: SpanRow
    depth: int
    left: float
    width: float
    turn: int | None
    purpose: str | None
    bookkeeping: bool
    resumed: bool
    call_id: str | None
    has_children: bool
    axis: tuple[float, float]
    """The time span all rows are drawn on (seconds since the epoch)."""
    attempt: int | None = None
    """The attempt the span belongs to (by its trace id, else by when it started)."""

    @property
    def label(self) -> str:
        """The span's name, with the purpose of a model call that is not the main one."""
        if self.purpose and self.purpose != "main":
            return f"{self.span.name} [{self.purpose}]"
        return self.span.name

    def to_dict(self) -> dict[str, Any]:
        span = self.span
        attributes = span.attributes
        return {
            "name": span.name,
            "label": self.label,
            "span_id": span.span_id,
            "parent_id": span.parent_id,
            "trace_id": span.trace_id,
            "depth": self.depth,
            "start": span.start,
            "duration_s": span.duration,
            "error": span.error,
            "retries": attributes.get("lovia.retries"),
            "turn": self.turn,
            "purpose": self.purpose,
            "bookkeeping": self.bookkeeping,
            "resumed": self.resumed,
            "call_id": self.call_id,
            "attempt": self.attempt,
            "input_tokens": attributes.get(A.USAGE_INPUT),
            "output_tokens": attributes.get(A.USAGE_OUTPUT),
            "cost_usd": attributes.get(A.COST_USD),
            "attributes": attributes,
            "events": [],
        }


def _turn_of(span: SpanRow, inherited: int | None) -> int | None:
    value = span.attributes.get(A.TURN_INDEX)
    if isinstance(value, int):
        return value
    match = re.fullmatch(r"turn (\d+)", span.name)
    return int(match.group(1)) if match else inherited


def _purpose(span: SpanRow) -> str | None:
    value = span.attributes.get(A.CALL_PURPOSE)
    if value is not None:
        return str(value)
    operation = span.attributes.get(A.OPERATION_NAME)
    if operation == "chat" or span.name.startswith("chat"):
        return "main"
    return None


def _resumed(span: SpanRow) -> bool:
    return bool(span.attributes.get(A.RUN_RESUMED))


def waterfall(
    spans: list[SpanRow],
    window: tuple[float, float] | None = None,
    attempts: Sequence[Attempt] = (),
) -> list[Bar]:
    """Depth-first rows positioned on the time span of the rows shown.

    ``window``: only spans that start inside it (and their ancestors), for paged runs;
    the axis then spans the window, not the whole run. ``attempts``: the run's, to say
    which one each row belongs to.
    """
    for span in spans:  # the rows are cached with the run: link them afresh
        span.children = []
    roots = build_tree(spans)
    if not roots:
        return []
    kept: list[tuple[SpanRow, int, int | None]] = []

    def inside(span: SpanRow) -> bool:
        if window is None or window[0] <= span.start <= window[1]:
            return True
        return any(inside(c) for c in span.children)

    def walk(span: SpanRow, depth: int, turn: int | None) -> None:
        if not inside(span):
            return
        turn = _turn_of(span, turn)
        kept.append((span, depth, turn))
        for child in span.children:
            walk(child, depth + 1, turn)

    for root in roots:
        walk(root, 0, None)
    t0, t1 = axis(kept, window)
    scale = 1000.0 / (t1 - t0)
    bars: list[Bar] = []
    for span, depth, turn in kept:
        start = min(max(span.start, t0), t1)
        end = min(max(span.end or t1, start), t1)
        left = (start - t0) * scale
        bars.append(
            Bar(
                span=span,
                depth=depth,
                left=left,
                width=min(max(2.0, (end - start) * scale), 1000.0 - left),
                turn=turn,
                purpose=_purpose(span),
                bookkeeping=span.from_event or span.name.startswith(BOOKKEEPING),
                resumed=_resumed(span),
                call_id=_call_id(span),
                has_children=bool(span.children),
                axis=(t0, t1),
                attempt=attempt_of(span, attempts),
            )
        )
    return bars


def attempt_of(span: SpanRow, attempts: Sequence[Attempt]) -> int | None:
    """The attempt whose trace the span is in; else the last one started before it (spans
    rebuilt from the records carry no trace id); None for a run of one attempt."""
    if len(attempts) < 2:
        return None
    for a in attempts:
        if a.trace_id and a.trace_id == span.trace_id:
            return a.attempt
    started = [a for a in attempts if a.started_at <= span.start]
    return started[-1].attempt if started else attempts[0].attempt


@dataclass(slots=True, kw_only=True)
class AttemptGroup:
    """Consecutive rows of one attempt, under a heading saying how the attempt ended."""

    attempt: Attempt | None
    bars: list[Bar] = field(default_factory=list[Bar])

    @property
    def title(self) -> str:
        a = self.attempt
        if a is None:
            return ""
        how = a.how or "running"
        where = f" on {a.host} (pid {a.pid})" if a.host else ""
        return f"attempt {a.attempt} · {how}{where}"

    @property
    def left(self) -> float:
        """Where the attempt starts on the time axis (per mille)."""
        return min((b.left for b in self.bars), default=0.0)


def by_attempt(bars: list[Bar], attempts: Sequence[Attempt]) -> list[AttemptGroup]:
    """The rows in runs of one attempt (one group, without a heading, for a run of one
    attempt)."""
    known = {a.attempt: a for a in attempts}
    groups: list[AttemptGroup] = []
    for bar in bars:
        if not groups or groups[-1].bars[-1].attempt != bar.attempt:
            groups.append(AttemptGroup(attempt=known.get(bar.attempt or 0)))
        groups[-1].bars.append(bar)
    return groups


MINIMAP_ROWS = 60
"""A trace with more rows than this gets a minimap (every row at once, on the axis)."""


def minimap(bars: list[Bar]) -> list[dict[str, Any]]:
    """One mark per row that is not bookkeeping: x and width on the axis, y the row's
    place among them (0-1000), an error flag; empty for a short trace."""
    rows = [b for b in bars if not b.bookkeeping]
    if len(rows) <= MINIMAP_ROWS:
        return []
    step = 1000.0 / len(rows)
    return [
        {
            "x": round(b.left, 1),
            "w": round(b.width, 1),
            "y": round(i * step, 1),
            "h": round(max(step, 1.0), 1),
            "error": bool(b.span.error),
            "span_id": b.span.span_id,
        }
        for i, b in enumerate(rows)
    ]


def _call_id(span: SpanRow) -> str | None:
    value = span.attributes.get(A.TOOL_CALL_ID)
    if value is not None:
        return str(value)
    return span.span_id[5:] if span.span_id.startswith("tool-") else None


def axis(
    kept: list[tuple[SpanRow, int, int | None]], window: tuple[float, float] | None
) -> tuple[float, float]:
    """The time span the rows are drawn on: the window's (a paged run) or the rows'."""
    if window is not None:
        inner = [s for s, _d, _t in kept if window[0] <= s.start <= window[1]]
        if inner:
            t0 = min(s.start for s in inner)
            t1 = max(max(s.end or s.start for s in inner), window[1])
            return t0, max(t1, t0 + 1e-6)
    t0 = min(s.start for s, _d, _t in kept)
    t1 = max(s.end or s.start for s, _d, _t in kept)
    return t0, max(t1, t0 + 1e-6)


def axis_ticks(bars: list[Bar], count: int = 5) -> list[tuple[float, str]]:
    """``(x per-mille, label)`` ticks for the axis above the bars (time from its start)."""
    if not bars:
        return []
    from .._display import fmt_duration

    t0, t1 = bars[0].axis
    return [(1000.0 * i / count, fmt_duration((t1 - t0) * i / count)) for i in range(count + 1)]


async def run_spans(loaded: Loaded, store_url: Any) -> tuple[list[SpanRow], str]:
    """The run's spans from the local span store, else rebuilt from its records (cached
    with the loaded run; read and parsed off the event loop)."""
    if loaded.spans is not None:
        return loaded.spans
    run = loaded.run
    found: tuple[list[SpanRow], str] | None = None
    if isinstance(store_url, str) and store_url.lower().startswith("sqlite:"):
        stored = await off_loop(_read_spans, store_url, run.info.run_id, run.info.trace_id)
        if stored:
            found = (normalize_all(stored), "span store")
            loaded.extra["span_events"] = {
                _hex_id(s.get("span_id")): s.get("events") or [] for s in stored
            }
    if found is None:
        found = (await off_loop(spans_from_run, run), "run records")
    loaded.spans = found
    return found


def _hex_id(value: Any) -> str:
    return f"{value:016x}" if isinstance(value, int) else str(value or "")


def _read_spans(url: str, run_id: str, trace_id: str | None) -> list[Any]:
    import asyncio

    return asyncio.run(load_run_spans(url, run_id, trace_id))


def trace_link(template: str | None, trace_id: str | None) -> str | None:
    """``$LOVIA_TRACE_URL`` with the run's trace id; only a hex id into an http(s) URL."""
    if not template or not trace_id or not HEX_TRACE.fullmatch(trace_id):
        return None
    link = template.replace("{trace_id}", trace_id).replace("{span_id}", "")
    return link if link.startswith(("http://", "https://")) else None


def span_link(template: str | None, trace_id: str, span_id: str) -> str | None:
    """The link to one span: ``{trace_id}`` and ``{span_id}`` filled with hex ids only
    (a template without ``{span_id}`` links to the trace)."""
    if not template or not HEX_TRACE.fullmatch(trace_id) or not HEX_SPAN.fullmatch(span_id):
        return None
    link = template.replace("{trace_id}", trace_id).replace("{span_id}", span_id)
    return link if link.startswith(("http://", "https://")) else None
