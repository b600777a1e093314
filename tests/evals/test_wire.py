"""Evaluation events on the OTLP/HTTP wire, in the evaluated run's trace."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from lovia import evals
from lovia.stores import store
from lovia.testing import FunctionModel

from .conftest import record_tools


@pytest.fixture
def collector() -> Iterator[tuple[str, dict[str, list[bytes]]]]:
    bodies: dict[str, list[bytes]] = {"/v1/logs": [], "/v1/traces": []}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.setdefault(self.path, []).append(
                self.rfile.read(int(self.headers["Content-Length"]))
            )
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    server.shutdown()
    server.server_close()


async def test_evaluation_results_arrive_parented_to_the_run_span(
    tmp_path: Path, collector: tuple[str, dict[str, list[bytes]]]
) -> None:
    url, bodies = collector
    db = store(f"sqlite:///{tmp_path / 'lovia.db'}")
    case = await evals.pin(await record_tools(db), db)
    await db.aclose()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces")))
    lp = LoggerProvider()
    lp.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{url}/v1/logs"))
    )
    await evals.evaluate(
        [case],
        model=FunctionModel(lambda r, i: "Both shipped (0)."),
        evaluators=[evals.Equals(), evals.Matches("lost")],
        tracer_provider=tp,
        logger_provider=lp,
    )
    tp.shutdown()
    lp.shutdown()
    spans = [
        s
        for body in bodies["/v1/traces"]
        for rs in ExportTraceServiceRequest.FromString(body).resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    ]
    run = [s for s in spans if s.name.startswith("invoke_agent")]
    assert len(run) == 1
    records = [
        r
        for body in bodies["/v1/logs"]
        for rl in ExportLogsServiceRequest.FromString(body).resource_logs
        for sl in rl.scope_logs
        for r in sl.log_records
    ]
    assert [r.event_name for r in records] == ["gen_ai.evaluation.result"] * 2
    assert all(r.trace_id == run[0].trace_id and r.span_id == run[0].span_id for r in records)
    attrs = [{a.key: a.value for a in r.attributes} for r in records]
    assert attrs[0]["gen_ai.evaluation.name"].string_value == "equals"
    assert attrs[0]["gen_ai.evaluation.score.value"].double_value == 1.0
    assert attrs[1]["gen_ai.evaluation.score.label"].string_value == "fail"
    assert attrs[1]["gen_ai.evaluation.explanation"].string_value == "/lost/ did not match"
