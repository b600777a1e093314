"""``lovia trace RUN``: the run's span tree from the embedded span store.

The spans are read by the data layer shared with ``lovia web``
(``lovia.replay``: :func:`load_run_spans`, :func:`normalize`, :func:`build_tree`).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from .._display import fmt_run_cost, fmt_usage
from ..errors import LoviaError
from ..replay import (
    AttemptPart,
    SpanRow,
    attempt_parts,
    build_tree,
    load_run,
    load_run_spans,
    normalize,
    normalize_all,
    open_store,
    span_json,
)
from ..stores.lifecycle import Attempt
from ._common import store_url
from ._out import Out, fmt_duration, safe_name
from ._telemetry import has_span_table

__all__ = [
    "AttemptPart",
    "SpanRow",
    "attempt_parts",
    "build_tree",
    "normalize",
    "trace",
    "tree_lines",
]


async def trace(args: argparse.Namespace, out: Out) -> int:
    url = store_url(args)
    async with open_store(url) as db:
        run = await load_run(args.run, db)
    spans = normalize_all(await load_run_spans(url, run.info.run_id, run.info.trace_id))
    attempts = run.life.attempts if run.life is not None else []
    if not spans:
        raise _no_spans(url, run.info.run_id, run.info.trace_id, attempts)
    trace_id = run.info.trace_id or spans[0].trace_id
    parts = attempt_parts(attempts, spans)
    if out.json_mode:
        out.json(
            {
                "run_id": run.info.run_id,
                "trace_id": trace_id,
                "spans": [span_json(s) for s in build_tree(spans)],
                "attempts": [p.to_dict() for p in parts],
            }
        )
        return 0
    out.line(
        out.style(f"trace {trace_id}", "bold")
        + "  (search this trace id in Jaeger / Grafana Tempo)"
    )
    for part in parts:
        if len(parts) > 1 or part.note:  # a run of one attempt is just its tree
            out.line(out.style(part.title(), "bold", "blue"))
        if part.note:
            out.line(out.style(f"  ({part.note})", "yellow"))
        for line in tree_lines(part.roots, out):
            out.line(line)
    return 0


def _no_spans(
    url: str, run_id: str, trace_id: str | None, attempts: Sequence[Attempt]
) -> LoviaError:
    if has_span_table(url):  # the local exporter was configured: do not say to configure it
        lost = [a.attempt for a in attempts if a.how in ("killed", "lease_lost")]
        why = (
            f"attempt(s) {', '.join(map(str, lost))} were lost with their process (a killed "
            "worker cannot export the spans it still buffered)"
            if lost
            else "its worker process did not export them (it ran without telemetry, or "
            "exited before its spans were flushed)"
        )
        return LoviaError(
            f"the local span store has no spans for run {run_id}: {why}",
            hint="Spans are exported in batches: call telemetry.shutdown() (or let the "
            "process exit normally) to flush them"
            + (f"; search trace id {trace_id} in your tracing backend." if trace_id else "."),
        )
    return LoviaError(
        f"no spans stored for run {run_id}",
        hint='Record them with lovia.telemetry.configure(exporter="local") in the '
        "application (same store), or look the trace up in Jaeger/Tempo"
        + (f" by trace id {trace_id}." if trace_id else "."),
    )


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
    names = [safe_name(s.name) for _, s in rows]
    width = max((len(p) + len(n) for (p, _), n in zip(rows, names, strict=True)), default=0)
    lines: list[str] = []
    for (prefix, span), shown in zip(rows, names, strict=True):
        name = (prefix + shown).ljust(width)
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
            missing = bool(attrs.get(prefix + "missing"))
            out.append(f"tokens {fmt_usage(int(tokens_in or 0), int(tokens_out or 0), missing)}")
            break
    else:
        answered = attrs.get("gen_ai.operation.name") == "chat" and "error.type" not in attrs
        if answered and "gen_ai.usage.input_tokens" not in attrs:
            out.append("tokens ?")  # the provider reported no usage
    # a run span: its cost with its child runs (lovia.cost.usd there is its own share)
    cost = attrs.get("lovia.cost.total_usd", attrs.get("lovia.cost.usd"))
    unpriced = int(attrs.get("lovia.cost.unpriced") or 0)
    if cost or unpriced:
        out.append(fmt_run_cost(float(cost or 0.0), unpriced))
    finish = attrs.get("lovia.run.finish_reason") or attrs.get("gen_ai.response.finish_reasons")
    if finish:
        reasons = finish if isinstance(finish, str) else ",".join(str(r) for r in finish)
        out.append(f"finish={reasons}")
    view_hash = attrs.get("lovia.view.hash")
    if view_hash:
        out.append(f"view={str(view_hash)[:12]}")
    return out
