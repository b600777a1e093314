"""Helpers: a private TracerProvider (deterministic ids, in-memory exporter) and a
private MeterProvider bound to every run's tracer; helpers to normalize span trees."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from lovia import events as ev
from lovia.model import ModelRequest, TextChunk
from lovia.testing import ScriptedModel

KEEP = (
    "error.type",
    "gen_ai.tool.name",
    "gen_ai.response.finish_reasons",
    "lovia.run.outcome",
    "lovia.run.turns",
    "lovia.run.finish_reason",
    "lovia.guardrail.tripped",
    "lovia.compaction.kind",
    "lovia.handoff.to_agent",
    "gen_ai.conversation.compacted",
    "lovia.checkpoint.kind",
    "lovia.run.resumed",
    "lovia.tool.started",
)


class CountingIds(IdGenerator):
    """Deterministic ids: span ids 1, 2, 3…, trace ids 1, 2…"""

    def __init__(self) -> None:
        self._spans = itertools.count(1)
        self._traces = itertools.count(1)

    def generate_span_id(self) -> int:
        return next(self._spans)

    def generate_trace_id(self) -> int:
        return next(self._traces)


@dataclass
class Otel:
    tp: TracerProvider
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    mp: MeterProvider
    log_exporter: InMemoryLogRecordExporter | None = None

    def logs(self) -> tuple[ReadableLogRecord, ...]:
        """The log records (log-based events) the runs emitted."""
        return self.log_exporter.get_finished_logs() if self.log_exporter is not None else ()

    def spans(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    def tree(self, keep: Sequence[str] = KEEP, *, events: bool = False) -> list[dict[str, Any]]:
        return span_tree(self.spans(), keep, events=events)

    def metrics(self) -> dict[str, Any]:
        """name → metric (with data points) from the in-memory reader."""
        out: dict[str, Any] = {}
        data = self.reader.get_metrics_data()
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    out[m.name] = m
        return out


def span_tree(
    spans: Sequence[ReadableSpan], keep: Sequence[str] = KEEP, *, events: bool = False
) -> list[dict[str, Any]]:
    """Nested dicts of name/kind/status/selected attributes, children in creation order."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans}
    for s in spans:
        parent = s.parent.span_id if s.parent is not None and s.parent.span_id in ids else None
        by_parent.setdefault(parent, []).append(s)

    def node(s: ReadableSpan) -> dict[str, Any]:
        attrs = s.attributes or {}
        out: dict[str, Any] = {"name": s.name}
        if s.kind.name != "INTERNAL":
            out["kind"] = s.kind.name
        if s.status.status_code.name == "ERROR":
            out["status"] = "ERROR"
        picked = {
            k: (list(v) if isinstance(v, tuple) else v)
            for k in keep
            if (v := attrs.get(k)) is not None
        }
        if picked:
            out["attrs"] = picked
        if events and s.events:
            out["events"] = [e.name for e in s.events]
        kids = sorted(by_parent.get(s.context.span_id, []), key=lambda c: c.context.span_id)
        if kids:
            out["children"] = [node(c) for c in kids]
        return out

    roots = sorted(by_parent.get(None, []), key=lambda c: c.context.span_id)
    return [node(r) for r in roots]


REBUILT = (
    ev.RunCompleted,
    ev.RunFailed,
    ev.TurnEnded,
    ev.ViewBuilt,
    ev.ModelCallCompleted,
    ev.ModelCallFailed,
    ev.ToolCallCompleted,
    ev.GuardrailCompleted,
    ev.GuardrailTriggered,
    ev.HandoffOccurred,
    ev.CompactionApplied,
    ev.CheckpointSaved,
    ev.SessionWritten,
    ev.PluginSetup,
    ev.PluginClosed,
)
"""The events a finished span stands for (what hooks fed from spans and
``event_from_span`` give back)."""


class Hanging(ScriptedModel):
    """A model that streams a little text, then never answers (a run to cancel)."""

    async def stream(self, request: ModelRequest) -> Any:
        self.requests.append(request)
        yield TextChunk("thinking")
        await asyncio.Event().wait()
