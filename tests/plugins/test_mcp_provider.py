"""MCP client spans are made on the run's own tracer provider (the one passed to
``Runner.run``), never the global one; those of a plugin's setup (``initialize``,
``tools/list``), which runs between the run's phases, are children of the run's span."""

from __future__ import annotations

from lovia import MCP, Agent, Runner
from lovia.telemetry.attributes import SCOPE_NAME
from lovia.telemetry.tracer import run_span
from lovia.testing import ScriptedModel, call

from .test_mcp import http_server  # noqa: F401  (the module's MCP server fixture)


async def test_mcp_setup_spans_use_the_runs_tracer_provider(
    http_server: str,  # noqa: F811
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    tp, spans = TracerProvider(), InMemorySpanExporter()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    plugin = MCP.http(http_server, name="http", allow=["add"])
    model = ScriptedModel([[call("add", a=1, b=1)], "done"])
    await Runner.run(Agent(name="a", model=model, plugins=[plugin]), "go", tracer_provider=tp)
    assert run_span() is None  # the run's span is not left as this task's once it ended
    finished = spans.get_finished_spans()
    (run,) = [s for s in finished if s.name == "invoke_agent a"]
    setup = [s for s in finished if s.name in ("initialize", "tools/list")]
    assert sorted(s.name for s in setup) == ["initialize", "tools/list"]
    for span in setup:
        assert span.parent is not None and span.parent.span_id == run.context.span_id
        assert span.context.trace_id == run.context.trace_id
        assert span.kind.name == "CLIENT"
        assert (span.attributes or {})["mcp.method.name"] == span.name
    # made by lovia on the run's provider (the global one here is the API's no-op: a
    # span made there would be lost, as these were)
    assert {s.instrumentation_scope.name for s in finished} == {SCOPE_NAME}


async def test_outside_a_run_a_request_is_traced_only_under_a_current_span() -> None:
    from lovia.telemetry.mcp import McpClientTelemetry

    assert run_span() is None
    with McpClientTelemetry().operation("tools/list") as op:
        assert op.span is None  # nothing to hang it under: no span, no broken trace
