"""MCP: the npm reference server over stdio, an SDK server over streamable HTTP, crashes."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lovia import Agent, RunContext, Runner, UserError, tool
from lovia.plugins.mcp import MCP
from lovia.testing import ScriptedModel, call

from .conftest import REPO, results

SERVER = Path(__file__).with_name("mcp_test_server.py")
EVERYTHING = (
    REPO / ".mcp-servers/node_modules/@modelcontextprotocol/server-everything" / "dist/index.js"
)


def everything() -> MCP:
    if not EVERYTHING.is_file() or (
        not os.path.exists("/usr/bin/node")
        and not any((Path(p) / "node").exists() for p in os.environ.get("PATH", "").split(":"))
    ):
        if os.environ.get("CI") == "true":
            pytest.fail("server-everything missing in CI: run scripts/ci-install-mcp.sh")
        pytest.skip("server-everything not installed (scripts/ci-install-mcp.sh)")
    return MCP.stdio(
        "node",
        [str(EVERYTHING), "stdio"],
        env={"LOVIA_TEST": "1"},
        name="everything",
        allow=["echo", "get-sum", "get-env"],
        errlog=open(os.devnull, "w"),
    )


def python_server(**options: object) -> MCP:
    return MCP.stdio(
        sys.executable,
        [str(SERVER), "stdio"],
        name="pyserver",
        errlog=open(os.devnull, "w"),
        **options,
    )  # type: ignore[arg-type]


async def test_everything_echo_and_sum_through_a_run() -> None:
    model = ScriptedModel(
        [
            [
                call("echo", message="hello"),
                call("get-sum", a=2, b=40),
                call("get-env"),
                call("echo", {"msg": "wrong"}),
            ],
            "done",
        ]
    )
    agent = Agent(name="a", model=model, plugins=[everything()])
    result = await Runner.run(agent, "go")
    echo, total, env, bad = results(result.entries)
    assert (echo.is_error, echo.content) == (False, "Echo: hello")
    assert (total.is_error, total.content) == (False, "The sum of 2 and 40 is 42.")
    # Only the given env plus a minimal PATH reach the child (no HOME, no API keys).
    assert '"LOVIA_TEST": "1"' in env.content and "HOME" not in env.content
    assert bad.is_error and "'message' is a required property" in bad.content
    names = {t.name for t in model.requests[0].tools}
    assert names == {"echo", "get-sum", "get-env"}
    echo_spec = next(t for t in model.requests[0].tools if t.name == "echo")
    assert echo_spec.parameters["required"] == ["message"]
    assert "$schema" not in echo_spec.parameters


async def test_prefix_and_deny() -> None:
    plugin = python_server(prefix="py.", deny=["env", "traceparent"])
    model = ScriptedModel([call("py_add", a=1, b=2), "done"])
    result = await Runner.run(Agent(name="a", model=model, plugins=[plugin]), "go")
    assert {t.name for t in model.requests[0].tools} == {"py_add", "py_fail", "py_pid"}
    assert results(result.entries)[0].content == "3"


async def test_error_results_and_a_server_killed_mid_run() -> None:
    pids: list[int] = []

    @tool
    def kill_server(ctx: RunContext[None]) -> str:
        """Kill the MCP server (test helper)."""
        os.kill(pids[0], signal.SIGKILL)
        return "killed"

    def note_pid(text: str) -> None:
        pids.append(int(text))

    model = ScriptedModel(
        [
            call("pid"),
            call("fail", reason="because"),
            call("kill_server"),
            call("add", a=1, b=1),
            "the run went on",
        ]
    )
    agent = Agent(name="a", model=model, tools=[kill_server], plugins=[python_server()])

    async def run() -> object:
        stream = Runner.stream(agent, "go")
        async for event in stream:
            result = getattr(event, "result", None)
            if (
                getattr(event, "call", None) is not None
                and getattr(event.call, "name", "") == "pid"
                and result is not None
            ):
                note_pid(result.content)
        return await stream.result()

    result = await asyncio.wait_for(run(), timeout=30)
    outs = results(result.entries)  # type: ignore[attr-defined]
    assert outs[1].is_error and "failed on purpose: because" in outs[1].content
    assert not outs[2].is_error
    assert outs[3].is_error and "pyserver" in outs[3].content
    assert result.output == "the run went on"  # type: ignore[attr-defined]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("the MCP HTTP test server did not start")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_streamable_http(http_server: str) -> None:
    plugin = MCP.http(http_server, headers={"X-Test": "1"}, name="http", allow=["add", "fail"])
    model = ScriptedModel([[call("add", a=20, b=22), call("fail", reason="x")], "done"])
    result = await Runner.run(Agent(name="a", model=model, plugins=[plugin]), "go")
    added, failed = results(result.entries)
    assert (added.is_error, added.content) == (False, "42")
    assert failed.is_error and "failed on purpose" in failed.content


async def test_concurrent_runs_get_their_own_connections(http_server: str) -> None:
    plugin = MCP.http(http_server, name="http")

    async def one(k: int) -> str:
        model = ScriptedModel([call("add", a=k, b=1000), "done"])
        result = await Runner.run(Agent(name="a", model=model, plugins=[plugin]), "go")
        return results(result.entries)[0].content

    assert await asyncio.gather(*(one(k) for k in range(4))) == ["1000", "1001", "1002", "1003"]


async def test_connect_failure_is_a_clear_error() -> None:
    plugin = MCP.http(f"http://127.0.0.1:{_free_port()}/mcp", name="down", connect_timeout=5)
    with pytest.raises(UserError, match="could not connect to MCP server down"):
        await Runner.run(Agent(name="a", model=ScriptedModel([]), plugins=[plugin]), "go")
    with pytest.raises(UserError, match="not found"):
        await Runner.run(
            Agent(name="a", model=ScriptedModel([]), plugins=[MCP.stdio("no-such-command-xyz")]),
            "go",
        )


async def test_missing_sdk_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    agent = Agent(name="a", model=ScriptedModel([]), plugins=[MCP.http("http://127.0.0.1:1/x")])
    with pytest.raises(UserError) as info:
        await Runner.run(agent, "go")
    assert info.value.hint == "pip install 'lovia[mcp]'"


async def test_streamable_http_calls_carry_the_session_on_the_tool_span(http_server: str) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    tp, spans = TracerProvider(), InMemorySpanExporter()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    plugin = MCP.http(http_server, name="http", allow=["add", "traceparent"])
    model = ScriptedModel([[call("add", a=1, b=1), call("traceparent")], "done"])
    result = await Runner.run(
        Agent(name="a", model=model, plugins=[plugin]), "go", tracer_provider=tp
    )
    tools = [s for s in spans.get_finished_spans() if s.name.startswith("execute_tool ")]
    assert len(tools) == 2
    port = int(http_server.rsplit(":", 1)[1].split("/")[0])
    for span in tools:
        attrs = span.attributes or {}
        assert attrs["network.transport"] == "tcp" and attrs["network.protocol.name"] == "http"
        assert attrs["server.address"] == "127.0.0.1" and attrs["server.port"] == port
        assert 0 < len(str(attrs["mcp.session.id"])) <= 128
    sent = results(result.entries)[1].content
    traced = next(s for s in tools if s.name == "execute_tool traceparent").context
    assert sent.split("-")[1:3] == [f"{traced.trace_id:032x}", f"{traced.span_id:016x}"]
