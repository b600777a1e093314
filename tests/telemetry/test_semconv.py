"""Every ``gen_ai.*`` / ``mcp.*`` attribute, event and metric lovia emits is checked against
the GenAI registry's model files vendored in tests/fixtures/semconv-genai: name, type,
unit, instrument, span kind, requirement level. A rename or a type change fails CI."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from semconv_registry import CONTENT_SCHEMAS, Registry, check_content, decode, load
from telemetry_helpers import Otel

from lovia import Agent, Runner, tool
from lovia.model import ModelRequest, ModelSettings
from lovia.providers.base import ModelProfile
from lovia.stores import MemoryStore
from lovia.telemetry import attributes as A
from lovia.telemetry import clear_prices, content, semconv, set_price
from lovia.telemetry.mapping import span_base
from lovia.testing import FunctionModel, call, reply
from lovia.testing._models import CallInfo
from lovia.usage import Usage
from lovia.view import DEFAULT_SUMMARY_PROMPT, Compaction

LATEST_ONLY = {
    semconv.M_USAGE_INPUT,
    semconv.M_USAGE_OUTPUT,
    semconv.M_USAGE_CACHE_READ,
    semconv.M_USAGE_CACHE_WRITE,
    semconv.M_USAGE_REASONING,
    semconv.M_OP_INPUT,
    semconv.M_OP_OUTPUT,
}


@pytest.fixture(autouse=True)
def _prices_and_policy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    set_price("test", "function", input_per_mtok=1.0, output_per_mtok=2.0)
    monkeypatch.delenv(semconv.STABILITY_ENV, raising=False)
    content.set_policy(None, None)
    yield
    content.set_policy(None, None)
    clear_prices()


async def _rich_run(otel: Otel) -> None:
    """Tools, a summary, cache reads and writes, reasoning, a failing tool, a server
    address, settings and a description: every attribute lovia has appears."""

    @tool
    def fetch(n: int) -> str:
        """Fetch page n."""
        if n == 3:
            raise ValueError("page 3 is gone")
        return "x" * 1_500

    usage = Usage(
        input_tokens=100,
        output_tokens=20,
        cache_read_tokens=10,
        cache_write_tokens=5,
        reasoning_tokens=3,
    )

    def answer(req: ModelRequest, info: CallInfo) -> Any:
        if req.system == DEFAULT_SUMMARY_PROMPT:
            return "summary"
        k = sum(r.system != DEFAULT_SUMMARY_PROMPT for r in info.requests)
        return reply(tool_calls=[call("fetch", n=k)], usage=usage) if k < 12 else "done"

    model = FunctionModel(answer, profile=ModelProfile(context_window=4_000))
    model.server_address = "models.example.test"
    model.server_port = 8443
    agent = Agent(
        name="a",
        model=model,
        tools=[fetch],
        context=Compaction(),
        description="Reads pages.",
        instructions="Be brief.",
    )
    await Runner.run(
        agent,
        "go",
        max_turns=20,
        session=MemoryStore(),
        session_id="s1",
        settings=ModelSettings(temperature=1, top_p=1, max_tokens=50, stop=["END"]),
        tracer_provider=otel.tp,
    )


def _span_problems(reg: Registry, otel: Otel) -> list[str]:
    problems: list[str] = []
    for span in otel.spans():
        attrs = dict(span.attributes or {})
        where = f"span {span.name!r}"
        known = semconv.SPAN_TYPES.get(span_base(span.name))
        if known is not None:
            span_type, kind = known
            expected = reg.spans[span_type][0]
            if span.kind.name.lower() != expected:
                problems.append(f"{where}: kind {span.kind.name}, the convention says {expected}")
            if kind != span.kind:
                problems.append(f"{where}: semconv.SPAN_TYPES says {kind}")
            allowed = reg.span_attributes(span_type)
            if "mcp.method.name" in attrs:  # an MCP call enriches the tool span it ran in
                allowed = {**reg.span_attributes("mcp.client"), **allowed}
            problems += reg.check_attributes(attrs, allowed, where, semconv.SPAN_EXTENSIONS)
            if span.status.status_code.name == "ERROR" and A.ERROR_TYPE not in attrs:
                problems.append(f"{where}: failed without error.type (conditionally required)")
        else:
            for key, value in attrs.items():
                if key not in semconv.EXTENSIONS:
                    problems += reg.check_value(key, value, where)
        for event in span.events:
            if event.name.startswith(("gen_ai.", "mcp.")):
                problems.append(f"{where}: span event {event.name} (events go on the Logs API)")
    return problems


def _log_problems(reg: Registry, otel: Otel) -> list[str]:
    problems: list[str] = []
    for record in otel.logs():
        name = str(record.log_record.event_name)
        attrs = dict(record.log_record.attributes or {})
        where = f"event {name!r}"
        if record.log_record.span_id == 0:
            problems.append(f"{where}: no trace context")
        if name.startswith(("gen_ai.", "mcp.")):
            if name not in reg.events:
                problems.append(f"{where} is not in the registry")
                continue
            allowed = reg.event_attributes(name)
            problems += reg.check_attributes(attrs, allowed, where, ())
            for key in (A.INPUT_MESSAGES, A.OUTPUT_MESSAGES, A.SYSTEM_INSTRUCTIONS):
                if key in attrs and isinstance(attrs[key], str):
                    problems.append(f"{where}: {key} must be structured on events")
        else:
            for key, value in attrs.items():
                problems += reg.check_value(key, value, where)
    return problems


def _metric_problems(reg: Registry, otel: Otel) -> list[str]:
    problems: list[str] = []
    for name, metric in otel.metrics().items():
        points = list(metric.data.data_points)
        where = f"metric {name}"
        if not name.startswith(("gen_ai.", "mcp.")):
            for point in points:
                for key, value in point.attributes.items():
                    problems += reg.check_value(key, value, where)
            continue
        if name not in reg.raw_metrics:
            problems.append(f"{where} is not in the registry")
            continue
        spec = reg.metric(name)
        kind = type(metric.data).__name__
        if {"histogram": "Histogram", "counter": "Sum"}[spec.instrument] != kind:
            problems.append(f"{where}: {kind}, the convention says {spec.instrument}")
        if kind == "Sum" and not metric.data.is_monotonic:
            problems.append(f"{where}: a counter must be monotonic")
        if metric.unit != spec.unit:
            problems.append(f"{where}: unit {metric.unit!r}, the convention says {spec.unit!r}")
        for point in points:
            value = point.sum if kind == "Histogram" else point.value
            if spec.value_type == "int" and not isinstance(value, int):
                problems.append(f"{where}: value {value!r} is not an int")
            problems += reg.check_attributes(
                dict(point.attributes), spec.attributes, where, semconv.METRIC_EXTENSIONS
            )
    return problems


def _all_problems(otel: Otel) -> list[str]:
    reg = load()
    return _span_problems(reg, otel) + _log_problems(reg, otel) + _metric_problems(reg, otel)


async def test_default_emission_conforms_to_the_registry(otel: Otel) -> None:
    await _rich_run(otel)
    assert not _all_problems(otel)
    emitted = set(otel.metrics())
    assert {A.M_TOKEN_USAGE, A.M_OPERATION_DURATION, A.M_TOOL_DURATION} <= emitted
    assert not emitted & LATEST_ONLY  # the newest names only when opted in
    # no opt-in attribute without the opt-in
    reg = load()
    opt_in = {k for k, v in reg.span_attributes("gen_ai.inference.client").items() if v == "opt_in"}
    assert opt_in >= {A.INPUT_MESSAGES, A.TOOL_DEFINITIONS}
    assert not {k for s in otel.spans() for k in (s.attributes or {})} & opt_in


async def test_content_capture_conforms_on_spans_and_log_events(otel: Otel) -> None:
    content.set_policy("SPAN_AND_EVENT", None)
    await _rich_run(otel)
    assert not _all_problems(otel)
    names = {str(r.log_record.event_name) for r in otel.logs()}
    assert names == {A.EVENT_DETAILS, A.EVENT_TOOL_ARGUMENTS, A.EVENT_TOOL_RESULT}
    chat = next(s for s in otel.spans() if s.name.startswith("chat "))
    assert decode((chat.attributes or {})[A.TOOL_DEFINITIONS]) == [
        {"type": "function", "name": "fetch"}
    ]
    found: set[str] = set()
    problems: list[str] = []
    carriers = [(s.name, dict(s.attributes or {})) for s in otel.spans()]
    carriers += [
        (str(r.log_record.event_name), dict(r.log_record.attributes or {})) for r in otel.logs()
    ]
    for where, attrs in carriers:
        for key in set(attrs) & set(CONTENT_SCHEMAS):
            found.add(key)
            problems += check_content(key, attrs[key], where)
    assert found == set(CONTENT_SCHEMAS) and not problems
    # the summary of the compacted conversation is the schema's compaction part
    parts = [
        part
        for s in otel.spans()
        if s.name.startswith("chat ") and A.INPUT_MESSAGES in (s.attributes or {})
        for message in decode((s.attributes or {})[A.INPUT_MESSAGES])
        for part in message["parts"]
    ]
    compactions = [p for p in parts if p["type"] == "compaction"]
    assert compactions and compactions[0]["content"] == "summary"
    assert not [p for p in parts if p["type"] == "text" and "<summary>" in p["content"]]


def test_the_content_check_rejects_a_malformed_message() -> None:
    assert check_content(A.INPUT_MESSAGES, [{"role": "user", "parts": "hi"}], "x")
    assert check_content(A.INPUT_MESSAGES, [{"parts": []}], "x")
    assert check_content(A.TOOL_DEFINITIONS, '[{"type": "function"}]', "x")
    assert not check_content(A.TOOL_DEFINITIONS, '[{"type": "function", "name": "f"}]', "x")


async def test_latest_experimental_emission_conforms(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(semconv.STABILITY_ENV, "http, gen_ai_latest_experimental")
    await _rich_run(otel)
    assert not _all_problems(otel)
    metrics = otel.metrics()
    assert A.M_TOKEN_USAGE not in metrics
    assert set(metrics) >= LATEST_ONLY
    (point,) = [
        p
        for p in metrics[semconv.M_USAGE_CACHE_WRITE].data.data_points
        if p.attributes[A.CALL_PURPOSE] == "main"
    ]
    assert point.attributes[semconv.TOKEN_MODALITY] == "unknown"
    assert point.value == 5 * 11  # 11 main calls reported 5 cache-write tokens each


def test_the_opt_in_switch_parses_the_comma_list() -> None:
    assert semconv.latest_experimental({semconv.STABILITY_ENV: " Gen_AI_Latest_Experimental "})
    assert semconv.latest_experimental({semconv.STABILITY_ENV: "http,gen_ai_latest_experimental"})
    assert not semconv.latest_experimental({semconv.STABILITY_ENV: "http"})
    assert not semconv.latest_experimental({semconv.STABILITY_ENV: "gen_ai_latest"})
    assert not semconv.latest_experimental({})


async def test_the_attributes_the_registry_asks_for(otel: Otel) -> None:
    await _rich_run(otel)
    spans = otel.spans()
    run = next(s for s in spans if s.name == "invoke_agent a")
    assert (run.attributes or {})[A.AGENT_DESCRIPTION] == "Reads pages."
    chat = next(s for s in spans if s.name.startswith("chat "))
    assert (chat.attributes or {})[A.REQUEST_TEMPERATURE] == 1.0
    assert isinstance((chat.attributes or {})[A.REQUEST_TEMPERATURE], float)
    metrics = otel.metrics()
    for name in (A.M_TOKEN_USAGE, A.M_OPERATION_DURATION):
        for point in metrics[name].data.data_points:
            assert point.attributes[A.SERVER_ADDRESS] == "models.example.test"
            assert point.attributes[A.SERVER_PORT] == 8443
    tool_points = list(metrics[A.M_TOOL_DURATION].data.data_points)
    assert {p.attributes[A.OPERATION_NAME] for p in tool_points} == {"execute_tool"}
    assert {p.attributes.get(A.ERROR_TYPE) for p in tool_points} == {None, "ValueError"}
    agent_points = list(metrics[A.M_AGENT_DURATION].data.data_points)
    assert {p.attributes[A.PROVIDER_NAME] for p in agent_points} == {"test"}


def test_the_checker_catches_what_it_checks() -> None:
    """Guard against a check that cannot fail: each kind of defect is reported."""
    reg = load()
    allowed = reg.span_attributes("gen_ai.execute_tool.internal")
    assert reg.check_attributes({A.TOOL_NAME: "x"}, allowed, "s", ())  # required one missing
    # below: fine; wrong type; unknown name; an attribute of another convention
    ok = {A.TOOL_NAME: "x", A.OPERATION_NAME: "execute_tool"}
    assert not reg.check_attributes(ok, allowed, "s", ())
    assert reg.check_attributes({**ok, A.TOOL_CALL_ID: 7}, allowed, "s", ())
    assert reg.check_attributes({**ok, "gen_ai.tool.colour": "red"}, allowed, "s", ())
    assert reg.check_attributes({**ok, A.REQUEST_MODEL: "m"}, allowed, "s", ())
    assert not reg.check_attributes({**ok, A.REQUEST_MODEL: "m"}, allowed, "s", {A.REQUEST_MODEL})
    spec = reg.metric(A.M_TOKEN_USAGE)
    assert (spec.instrument, spec.unit, spec.value_type) == ("histogram", "{token}", "int")
    assert spec.attributes[A.TOKEN_TYPE] == "required"
    assert reg.metric(A.M_TOOL_DURATION).attributes[A.OPERATION_NAME] == "required"
    assert reg.spans["gen_ai.inference.client"][0] == "client"


async def test_mcp_tool_calls_enrich_the_tool_span_and_carry_the_trace(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the official SDK's server: one ``execute_tool`` span per MCP call (no second
    span), MCP attributes on it, the server sees its trace context in ``params._meta``."""
    import os
    import sys
    from pathlib import Path

    from lovia.plugins.mcp import MCP
    from lovia.telemetry import mcp as mcp_telemetry
    from lovia.testing import ScriptedModel

    server = Path(__file__).resolve().parents[1] / "plugins" / "mcp_test_server.py"
    monkeypatch.setattr(mcp_telemetry.metrics, "get_meter_provider", lambda: otel.mp)
    calls = [call("add", a=1, b=2), call("fail", reason="r"), call("traceparent")]
    model = ScriptedModel([calls, "done"])
    with open(os.devnull, "w") as errlog:
        plugin = MCP.stdio(sys.executable, [str(server), "stdio"], errlog=errlog)
        result = await Runner.run(Agent(name="m", model=model, plugins=[plugin]), "go")
    tools = {s.name: s for s in otel.spans() if s.name.startswith("execute_tool ")}
    assert set(tools) == {"execute_tool add", "execute_tool fail", "execute_tool traceparent"}
    # a call enriches its execute_tool span (no second span); the plugin's setup
    # requests are CLIENT spans of their own, under the run's span
    (run,) = [s for s in otel.spans() if s.name == "invoke_agent m"]
    setup = sorted(
        (s for s in otel.spans() if s.name.startswith(("tools/", "initialize"))),
        key=lambda s: s.start_time or 0,
    )
    assert [s.name for s in setup] == ["initialize", "tools/list"]
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in setup)
    for span in tools.values():
        attrs = span.attributes or {}
        assert attrs["mcp.method.name"] == "tools/call"
        assert attrs[A.TOOL_TYPE] == "extension"
        assert attrs["network.transport"] == "pipe"
        assert str(attrs["mcp.protocol.version"])
    traced = tools["execute_tool traceparent"].context
    sent = next(e for e in result.entries if e.type == "tool_result" and e.name == "traceparent")
    _version, trace_id, parent_id, _flags = sent.content.split("-")
    assert int(trace_id, 16) == traced.trace_id  # the server joined the run's trace
    assert int(parent_id, 16) == traced.span_id  # under the execute_tool span
    points = list(otel.metrics()["mcp.client.operation.duration"].data.data_points)
    methods = {(p.attributes["mcp.method.name"], p.attributes.get(A.ERROR_TYPE)) for p in points}
    assert methods >= {("initialize", None), ("tools/list", None), ("tools/call", None)}
    assert ("tools/call", "tool_error") in methods  # the failing tool's isError result
    assert "mcp.client.session.duration" in otel.metrics()
    assert not _all_problems(otel)


def test_an_mcp_request_outside_a_tool_span_is_a_client_span(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry import trace

    from lovia.telemetry import mcp as mcp_telemetry

    tracer = otel.tp.get_tracer("user")
    monkeypatch.setattr(mcp_telemetry.trace, "get_tracer", lambda *_a, **_k: tracer)
    tel = mcp_telemetry.McpClientTelemetry("mcp.example.test", 443, "tcp", session_id="s-1")
    with tel.operation("tools/list") as op:  # no trace around it: no span, no meta
        assert op.span is None and op.meta == {}
    with (
        tracer.start_as_current_span("user work"),
        pytest.raises(ConnectionError),
        tel.operation("tools/call", tool="add") as op,
    ):
        raise ConnectionError("down")
    (span,) = [s for s in otel.spans() if s.name == "tools/call add"]
    parent = next(s for s in otel.spans() if s.name == "user work")
    assert span.kind == trace.SpanKind.CLIENT and span.parent is not None
    assert span.parent.span_id == parent.context.span_id
    assert op.meta["traceparent"].split("-")[2] == f"{span.context.span_id:016x}"
    attrs = span.attributes or {}
    assert attrs["mcp.session.id"] == "s-1" and attrs[A.SERVER_ADDRESS] == "mcp.example.test"
    assert attrs[A.ERROR_TYPE] == "ConnectionError" and span.status.status_code.name == "ERROR"
    assert not _all_problems(otel)
