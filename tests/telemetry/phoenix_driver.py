"""Run lovia agents against a real Arize Phoenix and print what Phoenix stored, as JSON.

``python phoenix_driver.py PHOENIX_EXECUTABLE`` (run by ``test_phoenix.py`` inside a private
network namespace: Phoenix's OTLP gRPC server listens on every interface). It starts
Phoenix on loopback with a throw-away SQLite store, then, once per content-capture mode,
runs a two-turn agent with a tool call (once where the tool works, once where it raises)
exporting its spans over OTLP/HTTP to Phoenix
(content events go to a small in-process OTLP/HTTP logs sink instead: Phoenix takes
traces only), reads the spans back from Phoenix's REST API and prints one JSON document:
per mode and run, lovia's own spans (from an in-memory exporter on the same provider), the
run's usage totals, the content keys of the log events, and Phoenix's spans as returned.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lovia import Agent, Runner, tool
from lovia.telemetry import configure
from lovia.testing import ScriptedModel, call, reply
from lovia.usage import Usage

MODES = ("SPAN_ONLY", "EVENT_ONLY", "REFERENCE", "NO_CONTENT")
PROMPT = "Where is order ZQ-4471?"
INSTRUCTIONS = "Answer as Captain Wombat."
ARGUMENT = "ZQ-4471"
TOOL_RESULT = "order ZQ-4471: parked at dock Marmalade"
ANSWER = "Your parcel waits at dock Marmalade."
LOST = "ZQ-0000"
FAILURE = "no order ZQ-0000; last scanned at Quokka Pier"
APOLOGY = "I cannot find that parcel."
CONTENT = (PROMPT, INSTRUCTIONS, ARGUMENT, TOOL_RESULT, ANSWER, LOST, FAILURE, APOLOGY)
"""Every piece of content the runs have: none may reach Phoenix unless content goes on spans."""
RUNS = ("found", "failed")
"""Per mode: the tool finds the order; the tool raises (its error text is content too)."""
USAGES = (
    Usage(input_tokens=120, output_tokens=30),
    Usage(input_tokens=210, output_tokens=14, cache_read_tokens=64),
)
START_TIMEOUT_S = 180.0
INGEST_TIMEOUT_S = 60.0


def project(mode: str, run: str) -> str:
    return f"lovia-{mode.lower().replace('_', '-')}-{run}"


@tool
async def track(order_id: str) -> str:
    """Where an order is."""
    if order_id != ARGUMENT:
        raise LookupError(FAILURE)
    return TOOL_RESULT


def script(run: str) -> list[Any]:
    if run == "found":
        first = reply(tool_calls=[call("track", order_id=ARGUMENT)], usage=USAGES[0])
        return [first, reply(ANSWER, usage=USAGES[1])]
    return [call("track", order_id=LOST), APOLOGY]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = resp.read()
    return json.loads(body) if body.strip().startswith((b"{", b"[")) else body.decode()


@contextmanager
def phoenix(executable: str, workdir: Path) -> Iterator[str]:
    """A running Phoenix on 127.0.0.1 (its base URL); stopped on exit."""
    port = _free_port()
    env = {  # Phoenix's own venv: none of lovia's path or OpenTelemetry settings
        **{k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("OTEL_")},
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (workdir / "phoenix.log").open("wb")
    proc = subprocess.Popen([executable, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"Phoenix exited with {proc.returncode}: {_tail(workdir)}")
            try:
                _get(f"{base}/healthz")
                break
            except (urllib.error.URLError, ConnectionError) as exc:
                if time.monotonic() > deadline:
                    late = f"Phoenix not up in {START_TIMEOUT_S}s: {_tail(workdir)}"
                    raise RuntimeError(late) from exc
                time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _tail(workdir: Path) -> str:
    return (workdir / "phoenix.log").read_text(errors="replace")[-3000:]


@contextmanager
def logs_sink() -> Iterator[tuple[str, list[ExportLogsServiceRequest]]]:
    """An OTLP/HTTP logs endpoint on 127.0.0.1 keeping what it receives."""
    received: list[ExportLogsServiceRequest] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append(ExportLogsServiceRequest.FromString(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/logs", received
    finally:
        server.shutdown()
        server.server_close()


def _event_keys(received: list[ExportLogsServiceRequest]) -> list[list[str]]:
    """The attribute keys of each log record (content events carry content keys)."""
    return [
        sorted({a.key for a in rec.attributes} | {a.key for a in rec.body.kvlist_value.values})
        for req in received
        for rl in req.resource_logs
        for sl in rl.scope_logs
        for rec in sl.log_records
    ]


def _span_json(span: Any) -> dict[str, Any]:
    return {
        "name": span.name,
        "span_id": f"{span.context.span_id:016x}",
        "trace_id": f"{span.context.trace_id:032x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent is not None else None,
        "attributes": dict(span.attributes or {}),
    }


async def run_mode(mode: str, run: str, received: list[ExportLogsServiceRequest]) -> dict[str, Any]:
    handle = configure(
        "lovia-phoenix-test",
        "otlp",
        capture_content=mode,
        metrics=False,
        set_global=False,
        resource_attributes={"openinference.project.name": project(mode, run)},
    )
    mirror = InMemorySpanExporter()
    handle.tracer_provider.add_span_processor(SimpleSpanProcessor(mirror))
    model = ScriptedModel(script(run))
    agent = Agent(name="courier", model=model, tools=[track], instructions=INSTRUCTIONS)
    before = len(received)
    result = await Runner.run(agent, PROMPT, tracer_provider=handle.tracer_provider)
    flushed = handle.force_flush()
    handle.shutdown()
    return {
        "flushed": flushed,
        "output": result.output,
        "usage": {
            "input": result.usage.input_tokens,
            "output": result.usage.output_tokens,
            "cache_read": result.usage.cache_read_tokens,
        },
        "spans": [_span_json(s) for s in mirror.get_finished_spans()],
        "event_keys": _event_keys(received[before:]),
    }


def phoenix_spans(base: str, name: str, expected: int) -> list[dict[str, Any]]:
    """Phoenix's spans of project ``name`` once all ``expected`` are stored (it inserts in
    the background, so poll)."""
    deadline = time.monotonic() + INGEST_TIMEOUT_S
    url = f"{base}/v1/projects/{name}/spans?limit=1000"
    while True:
        try:
            spans: list[dict[str, Any]] = _get(url)["data"]
        except urllib.error.HTTPError as exc:  # 404 until the project exists
            if exc.code != 404:
                raise
            spans = []
        if len(spans) >= expected or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def main(executable: str) -> None:
    out: dict[str, Any] = {"modes": {}}
    sink = logs_sink()
    with tempfile.TemporaryDirectory(prefix="lovia-phoenix-") as tmp, sink as (url, received):
        started = time.monotonic()
        with phoenix(executable, Path(tmp)) as base:
            out["start_s"] = round(time.monotonic() - started, 1)
            os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"{base}/v1/traces"
            os.environ["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"] = url
            for mode in MODES:
                for run in RUNS:
                    lovia = asyncio.run(run_mode(mode, run, received))
                    stored = phoenix_spans(base, project(mode, run), len(lovia["spans"]))
                    out["modes"].setdefault(mode, {})[run] = {"lovia": lovia, "phoenix": stored}
            out["projects"] = _get(f"{base}/v1/projects")
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
