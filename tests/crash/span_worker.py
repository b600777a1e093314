"""A worker for the recovered-span test: six tool calls (odd ones not idempotent), each
span written to a JSON-lines file the moment it ends, and a chosen way to die.

Usage: python span_worker.py STORE_URL RUN_ID LOG SPANS MODE
MODE: none | tool:N (SIGKILL inside call N, after its side effect) | after:N (SIGKILL once
call N's result is checkpointed) | model:N (SIGKILL in the model call after N results)
| stall:N (block the event loop inside call N, after its side effect, until the file
SPANS.go exists: the lease expires and another worker takes the run over meanwhile).

Prints one JSON line at the end: the run's end and this process's tool metrics.
Exit code 0 when the run completed, 3 on LeaseLost, 1 otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from lovia import Agent, AgentHooks, Runner, events, tool
from lovia.errors import LeaseLost, LoviaError, RunLeaseHeld
from lovia.stores import store
from lovia.testing import FunctionModel, call

STORE_URL, RUN_ID, LOG, SPANS, MODE = sys.argv[1:6]
KIND, _, AT = MODE.partition(":")
AT_N = int(AT or 0)
CALLS = 6
STALL_S = 60.0
GO = Path(SPANS + ".go")
"""A stalled worker wakes when the test creates this file (another worker has taken the
run over by then)."""
RUNNING = Path(SPANS + ".running")
"""The pid of the worker that last called the model (it holds the run's lease)."""
KEPT = (
    "gen_ai.tool.call.id",
    "lovia.tool.outcome",
    "lovia.tool.recovered",
    "lovia.run.outcome",
    "error.type",
)


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class Lines(SpanExporter):
    """Each finished span as one JSON line, flushed at once (a SIGKILL loses only the
    spans that had not ended)."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(SPANS, "a") as f:
            for span in spans:
                attrs = {k: v for k, v in (span.attributes or {}).items() if k in KEPT}
                f.write(json.dumps({"pid": os.getpid(), "name": span.name, "attrs": attrs}) + "\n")
        return SpanExportResult.SUCCESS


def effect(kind: str, n: int) -> None:
    with open(LOG, "a") as f:
        f.write(f"{kind} {n} {os.getpid()}\n")
    if KIND == "tool" and n == AT_N:
        die()
    if KIND == "stall" and n == AT_N:
        Path(SPANS + ".stalled").write_text(str(os.getpid()))
        deadline = time.monotonic() + STALL_S
        while not GO.exists() and time.monotonic() < deadline:
            time.sleep(0.02)  # blocks the loop: no lease renewal while another takes over


@tool
async def record(n: int) -> str:
    """Record a side effect (not idempotent)."""
    effect("record", n)
    return f"recorded {n}"


@tool(idempotent=True)
async def fetch(n: int) -> str:
    """Fetch something (idempotent: safe to run again)."""
    effect("fetch", n)
    return f"fetched {n}"


def decide(request: Any, info: Any) -> Any:
    RUNNING.write_text(str(os.getpid()))
    done = sum(1 for m in request.messages if m.type == "tool_result")
    if KIND == "model" and done == AT_N:
        die()
    if done < CALLS:
        n = done + 1
        return call("record" if n % 2 else "fetch", n=n, id=f"c{n}")
    return "done"


hooks = AgentHooks()
finished: set[str] = set()


@hooks.on(events.ToolCallCompleted)
def note(ev: events.ToolCallCompleted, ctx: Any) -> None:
    finished.add(ev.call.call_id)


@hooks.on(events.CheckpointSaved)
def maybe_die(ev: events.CheckpointSaved, ctx: Any) -> None:
    if KIND == "after" and ev.kind == "tool_result" and f"c{AT_N}" in finished:
        die()


def sums(reader: InMemoryMetricReader, name: str) -> dict[str, float]:
    out: dict[str, float] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == name:
                    for p in m.data.data_points:
                        tool_name = str(p.attributes.get("gen_ai.tool.name"))
                        out[tool_name] = out.get(tool_name, 0) + p.value
    return out


async def main() -> int:
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(Lines()))
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader])
    db = store(STORE_URL)
    agent = Agent(name="spanny", model=FunctionModel(decide), tools=[record, fetch], hooks=hooks)
    end, code = "?", 1
    try:
        for _ in range(50):  # the killed holder's lease expires within the short TTL
            try:
                await Runner.run(
                    agent,
                    "go",
                    run_id=RUN_ID,
                    checkpointer=db,
                    tracer_provider=tp,
                    meter_provider=mp,
                )
                end, code = "completed", 0
                break
            except LeaseLost:  # a subclass of RunLeaseHeld: this worker was fenced out
                end, code = "LeaseLost", 3
                break
            except RunLeaseHeld:
                await asyncio.sleep(0.2)
    except LoviaError as exc:
        end = type(exc).__name__
    finally:
        await db.aclose()
    metrics = {
        "calls": sums(reader, "lovia.tool.calls"),
        "recovered": sums(reader, "lovia.tool.recovered"),
    }
    print(json.dumps({"pid": os.getpid(), "end": end, "metrics": metrics}))
    tp.shutdown()
    mp.shutdown()
    return code


sys.exit(asyncio.run(main()))
