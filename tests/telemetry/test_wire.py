"""The real OTLP/HTTP exporters (via configure) to an in-process receiver on 127.0.0.1;
the local SQLite store; the Prometheus endpoint."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

import lovia._loop as loop_module
from lovia import Agent, Runner, tool
from lovia.errors import UserError
from lovia.telemetry import attributes as A
from lovia.telemetry import clear_prices, configure, load_spans, set_price
from lovia.telemetry import tracer as tracer_module
from lovia.testing import ScriptedModel, call


class Sink:
    def __init__(self) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.logs: list[ExportLogsServiceRequest] = []


@pytest.fixture
def sink() -> Iterator[tuple[str, Sink]]:
    store = Sink()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path == "/v1/traces":
                store.traces.append(ExportTraceServiceRequest.FromString(body))
            elif self.path == "/v1/metrics":
                store.metrics.append(ExportMetricsServiceRequest.FromString(body))
            elif self.path == "/v1/logs":
                store.logs.append(ExportLogsServiceRequest.FromString(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", store
    server.shutdown()
    server.server_close()


def _bind(monkeypatch: pytest.MonkeyPatch, tp: Any, mp: Any) -> None:
    real = tracer_module.make_run_tracer
    monkeypatch.setattr(loop_module, "make_run_tracer", lambda *_a, **_k: real(tp, mp))


def spans_cost(store: Sink, exclude: bytes) -> float:
    """lovia.cost.usd of the chat spans other than ``exclude``."""
    return sum(
        a.value.double_value
        for req in store.traces
        for rs in req.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
        if s.name.startswith("chat ") and s.span_id != exclude
        for a in s.attributes
        if a.key == A.COST_USD
    )


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _agent() -> Agent[Any, Any]:
    return Agent(name="calc", model=ScriptedModel([call("add", a=1, b=2), "3"]), tools=[add])


async def test_otlp_http_wire(sink: tuple[str, Sink], monkeypatch: pytest.MonkeyPatch) -> None:
    url, store = sink
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    handle = configure("lovia-test", "otlp", set_global=False)
    _bind(monkeypatch, handle.tracer_provider, handle.meter_provider)
    set_price("test", "scripted", input_per_mtok=3.0, output_per_mtok=15.0)
    try:
        await Runner.run(_agent(), "1+2")
    finally:
        clear_prices()
    assert handle.force_flush()
    handle.shutdown()
    spans = {
        s.name: s
        for req in store.traces
        for rs in req.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    }
    assert set(spans) >= {"invoke_agent calc", "lovia.turn", "chat scripted", "execute_tool add"}
    run, chat, tool_span = (
        spans["invoke_agent calc"],
        spans["chat scripted"],
        spans["execute_tool add"],
    )
    assert run.parent_span_id == b""
    turn_ids = {
        s.span_id
        for req in store.traces
        for rs in req.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
        if s.name == "lovia.turn"
    }
    assert chat.parent_span_id in turn_ids and tool_span.parent_span_id in turn_ids
    assert chat.kind == 3  # SPAN_KIND_CLIENT
    chat_attrs = {a.key: a.value for a in chat.attributes}
    assert chat_attrs["gen_ai.operation.name"].string_value == "chat"
    assert chat_attrs["gen_ai.usage.input_tokens"].int_value > 0
    assert chat_attrs["lovia.telemetry.version"].string_value == A.TELEMETRY_VERSION
    resource = {
        a.key: a.value.string_value for a in store.traces[0].resource_spans[0].resource.attributes
    }
    assert resource["service.name"] == "lovia-test"
    assert resource[A.PRICE_TABLE_VERSION].startswith("genai-prices==")
    metrics = {
        m.name: m
        for req in store.metrics
        for rm in req.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    usage = metrics[A.M_TOKEN_USAGE]
    assert usage.unit == "{token}" and usage.WhichOneof("data") == "histogram"
    assert list(usage.histogram.data_points[0].explicit_bounds) == [
        float(b) for b in A.TOKEN_BUCKETS
    ]
    duration = metrics[A.M_AGENT_DURATION]
    assert duration.unit == "s"
    assert list(duration.histogram.data_points[0].explicit_bounds) == list(A.AGENT_BUCKETS)
    runs = metrics[A.M_RUNS]
    assert runs.unit == "{run}" and runs.WhichOneof("data") == "sum" and runs.sum.is_monotonic
    assert metrics[A.M_COST].unit == "{USD}"
    cost = metrics[A.M_COST].sum.data_points[0]
    assert cost.as_double == pytest.approx(
        chat_attrs[A.COST_USD].double_value + spans_cost(store, exclude=chat.span_id)
    )


async def test_local_store_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "lovia.db"
    handle = configure(exporter="local", local_path=db, metrics=False, set_global=False)
    _bind(monkeypatch, handle.tracer_provider, None)
    result = await Runner.run(_agent(), "1+2")
    handle.shutdown()
    spans = load_spans(f"sqlite:///{db}", run_id=result.run_id)
    names = [s["name"] for s in spans]
    assert names[0] == "invoke_agent calc"
    assert {"lovia.turn", "chat scripted", "execute_tool add"} <= set(names)
    by_id = {s["span_id"]: s for s in spans}
    tool_row = next(s for s in spans if s["name"] == "execute_tool add")
    assert by_id[tool_row["parent_id"]]["name"] == "lovia.turn"
    assert tool_row["attributes"]["gen_ai.tool.name"] == "add"
    assert all(s["run_id"] == result.run_id for s in spans)
    assert load_spans(db, trace_id=spans[0]["trace_id"]) == spans
    assert load_spans(db, run_id="nope") == []
    from lovia.cli._trace import build_tree, normalize

    (root,) = build_tree([normalize(s) for s in spans])
    assert root.name == "invoke_agent calc"
    assert root.duration is not None and root.duration > 0
    assert [c.name for c in root.children] == ["lovia.turn", "lovia.turn"]


async def test_prometheus_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    handle = configure(exporter="none", metrics="prometheus", prometheus_port=0, set_global=False)
    try:
        _bind(monkeypatch, handle.tracer_provider, handle.meter_provider)
        await Runner.run(_agent(), "1+2")
        port = handle.prometheus_server.server_port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    finally:
        handle.shutdown()
    assert "lovia_runs_total{" in text
    assert "gen_ai_client_token_usage_bucket" in text
    assert "gen_ai_invoke_agent_duration_seconds_bucket" in text


def test_configure_without_the_sdk_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)
    with pytest.raises(UserError) as info:
        configure(exporter="console", set_global=False)
    assert "lovia[otel]" in str(info.value.hint)


def _wire_spans(store: Sink) -> list[Any]:
    return [
        s
        for req in store.traces
        for rs in req.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    ]


def _any(value: Any) -> Any:
    """An OTLP AnyValue as plain Python data."""
    kind = value.WhichOneof("value")
    if kind == "kvlist_value":
        return {kv.key: _any(kv.value) for kv in value.kvlist_value.values}
    if kind == "array_value":
        return [_any(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


async def test_event_only_content_goes_to_the_logs_endpoint_not_the_traces(
    sink: tuple[str, Sink], monkeypatch: pytest.MonkeyPatch
) -> None:
    from lovia.telemetry import content

    url, store = sink
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    handle = configure("lovia-test", "otlp", set_global=False, capture_content="EVENT_ONLY")
    _bind(monkeypatch, handle.tracer_provider, handle.meter_provider)
    try:
        await Runner.run(_agent(), "secret question 1+2")
    finally:
        content.set_policy(None, None)
    assert handle.force_flush()
    handle.shutdown()
    spans = _wire_spans(store)
    wire = b"".join(req.SerializeToString() for req in store.traces)
    assert b"secret question" not in wire  # EVENT_ONLY: no content in the trace pipeline
    assert not any(e.name.startswith("gen_ai.") for s in spans for e in s.events)
    records = [
        r
        for req in store.logs
        for rl in req.resource_logs
        for sl in rl.scope_logs
        for r in sl.log_records
    ]
    by_name: dict[str, list[Any]] = {}
    for record in records:
        by_name.setdefault(record.event_name, []).append(record)
    assert set(by_name) == {A.EVENT_DETAILS, A.EVENT_TOOL_ARGUMENTS, A.EVENT_TOOL_RESULT}
    chats = {s.span_id: s for s in spans if s.name.startswith("chat ")}
    assert len(by_name[A.EVENT_DETAILS]) == len(chats) == 2
    for record in by_name[A.EVENT_DETAILS]:
        assert record.span_id in chats  # trace context: the chat span it describes
        assert record.trace_id == chats[record.span_id].trace_id
    first = {kv.key: _any(kv.value) for kv in by_name[A.EVENT_DETAILS][0].attributes}
    assert first[A.INPUT_MESSAGES] == [
        {"role": "user", "parts": [{"type": "text", "content": "secret question 1+2"}]}
    ]  # structured (an AnyValue list), not a JSON string
    assert first[A.OPERATION_NAME] == "chat" and first[A.REQUEST_MODEL] == "scripted"
    tool_span = next(s for s in spans if s.name == "execute_tool add")
    (args,) = by_name[A.EVENT_TOOL_ARGUMENTS]
    (result,) = by_name[A.EVENT_TOOL_RESULT]
    assert args.span_id == result.span_id == tool_span.span_id
    assert {kv.key: _any(kv.value) for kv in args.attributes}[A.TOOL_ARGUMENTS] == {"a": 1, "b": 2}
    assert {kv.key: _any(kv.value) for kv in result.attributes}[A.TOOL_RESULT] == "3"
