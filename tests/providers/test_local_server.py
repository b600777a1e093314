# ruff: noqa: E501
"""End to end over real sockets: a fake server on 127.0.0.1 speaking each wire format.

A 2-turn tool exchange is driven by hand from entries (turn 1: the model calls a tool;
turn 2: after the tool result it answers), streaming and not, for all three adapters.
Plus an opt-in check against a real OpenAI-compatible server (``LOVIA_LLAMA_CPP_URL``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from lovia.providers.anthropic import Anthropic
from lovia.providers.base import ModelRequest, ToolSpec
from lovia.providers.openai_chat import OpenAIChat
from lovia.providers.openai_responses import OpenAIResponses
from lovia.transcript import InputEntry, TextEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry

from .wire import collect

ARGS = '{"city": "Paris"}'


def _sse(events: list[dict[str, Any]], done: bool) -> bytes:
    text = "".join(f"event: {e.get('type', 'message')}\ndata: {json.dumps(e)}\n\n" for e in events)
    return (text + ("data: [DONE]\n\n" if done else "")).encode()


def _chat(body: dict[str, Any], has_result: bool) -> tuple[bytes, str]:
    if has_result:
        message: dict[str, Any] = {"role": "assistant", "content": "Sunny in Paris."}
        finish = "stop"
    else:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": ARGS},
                }
            ],
        }
        finish = "tool_calls"
    usage = {"prompt_tokens": 10, "completion_tokens": 5}
    if not body.get("stream"):
        full = {
            "id": "c1",
            "model": "fake",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
        return json.dumps(full).encode(), "application/json"
    delta = {k: v for k, v in message.items() if v is not None}
    for i, call in enumerate(delta.get("tool_calls", [])):
        call["index"] = i
    chunks = [
        {"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        {"id": "c1", "choices": [], "usage": usage},
    ]
    return _sse(chunks, done=True).replace(b"event: message\n", b""), "text/event-stream"


def _responses(body: dict[str, Any], has_result: bool) -> tuple[bytes, str]:
    if has_result:
        item: dict[str, Any] = {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Sunny in Paris."}],
        }
        delta = {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "delta": "Sunny in Paris.",
        }
    else:
        item = {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "weather",
            "arguments": ARGS,
        }
        delta = {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": ARGS}
    response = {
        "id": "resp_1",
        "model": "fake",
        "status": "completed",
        "output": [item],
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    if not body.get("stream"):
        return json.dumps(response).encode(), "application/json"
    added = (
        {**item, "arguments": ""} if item["type"] == "function_call" else {**item, "content": []}
    )
    events = [
        {
            "type": "response.created",
            "response": {**response, "status": "in_progress", "output": []},
        },
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        delta,
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": response},
    ]
    return _sse(events, done=False), "text/event-stream"


def _anthropic(body: dict[str, Any], has_result: bool) -> tuple[bytes, str]:
    if has_result:
        block: dict[str, Any] = {"type": "text", "text": "Sunny in Paris."}
        stop = "end_turn"
    else:
        block = {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": json.loads(ARGS)}
        stop = "tool_use"
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "fake",
        "content": [block],
        "stop_reason": stop,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    if not body.get("stream"):
        return json.dumps(message).encode(), "application/json"
    start = {**block, "text": ""} if block["type"] == "text" else {**block, "input": {}}
    delta = (
        {"type": "text_delta", "text": block["text"]}
        if block["type"] == "text"
        else {"type": "input_json_delta", "partial_json": ARGS}
    )
    events = [
        {
            "type": "message_start",
            "message": {
                **message,
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": start},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]
    return _sse(events, done=False), "text/event-stream"


ROUTES = {"/v1/chat/completions": _chat, "/v1/responses": _responses, "/v1/messages": _anthropic}


def _has_tool_result(body: dict[str, Any]) -> bool:
    text = json.dumps(body)
    return any(
        marker in text for marker in ('"role": "tool"', "function_call_output", "tool_result")
    )


async def _handle(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, log: list[dict[str, Any]]
) -> None:
    head = (await reader.readuntil(b"\r\n\r\n")).decode()
    request_line, *header_lines = head.split("\r\n")
    path = request_line.split()[1]
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
    body = json.loads(await reader.readexactly(int(headers.get("content-length", "0"))))
    log.append({"path": path, "body": body, "headers": headers})
    payload, ctype = ROUTES[path](body, _has_tool_result(body))
    writer.write(
        f"HTTP/1.1 200 OK\r\ncontent-type: {ctype}\r\ncontent-length: {len(payload)}\r\n\r\n".encode()
        + payload
    )
    await writer.drain()
    writer.close()


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    log: list[dict[str, Any]] = []
    srv = await asyncio.start_server(lambda r, w: _handle(r, w, log), "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    async with srv:
        yield f"http://127.0.0.1:{port}", log


TOOL = ToolSpec(
    name="weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def _make(kind: str, url: str, stream: bool) -> Any:
    if kind == "chat":
        return OpenAIChat("fake", base_url=f"{url}/v1", stream=stream)
    if kind == "responses":
        return OpenAIResponses("fake", base_url=f"{url}/v1", stream=stream)
    return Anthropic("fake", base_url=url, stream=stream)


@pytest.fixture(params=["httpx2", "httpx"])
def default_http(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Parity over real sockets: the client providers create is httpx2 when it is
    installed (extra ``fast``), httpx when it is not (simulated by hiding httpx2)."""
    if request.param == "httpx":
        monkeypatch.setitem(sys.modules, "httpx2", None)
    return str(request.param)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "nonstream"])
@pytest.mark.parametrize("kind", ["chat", "responses", "anthropic"])
async def test_two_turn_tool_exchange(
    server: tuple[str, list[dict[str, Any]]], kind: str, stream: bool, default_http: str
) -> None:
    url, log = server
    async with _make(kind, url, stream) as provider:
        assert type(provider._seam._client).__module__.split(".")[0] == default_http
        entries: list[TranscriptEntry] = [InputEntry(content="Weather in Paris?")]
        _, first = await collect(
            provider.stream(ModelRequest(system="Be brief.", messages=entries, tools=[TOOL]))
        )
        calls = [e for e in first.entries if isinstance(e, ToolCallEntry)]
        assert first.finish_reason == "tool_calls"
        assert [(c.name, json.loads(c.arguments)) for c in calls] == [
            ("weather", {"city": "Paris"})
        ]
        entries += [
            *first.entries,
            ToolResultEntry(call_id=calls[0].call_id, name="weather", content="sunny"),
        ]
        _, second = await collect(
            provider.stream(ModelRequest(system="Be brief.", messages=entries, tools=[TOOL]))
        )
    assert [e.text for e in second.entries if isinstance(e, TextEntry)] == ["Sunny in Paris."]
    assert second.finish_reason == "stop"
    assert second.usage.input_tokens == 10
    assert second.usage.output_tokens == 5
    assert len(log) == 2
    assert log[1]["body"].get("stream", False) is stream
    assert "authorization" not in log[0]["headers"]
    assert "x-api-key" not in log[0]["headers"]


@pytest.mark.skipif(
    not os.environ.get("LOVIA_LLAMA_CPP_URL"), reason="set LOVIA_LLAMA_CPP_URL to run"
)
@pytest.mark.parametrize("stream", [True, False])
async def test_real_openai_compatible_server(stream: bool) -> None:
    url = os.environ["LOVIA_LLAMA_CPP_URL"].rstrip("/")
    model = os.environ.get("LOVIA_LLAMA_CPP_MODEL", "default")
    async with OpenAIChat(model, base_url=url, stream=stream, name="llama.cpp") as provider:
        request = ModelRequest(
            system="Answer in one word.", messages=[InputEntry(content="Capital of France?")]
        )
        _, response = await collect(provider.stream(request))
    assert any(isinstance(e, TextEntry) and e.text.strip() for e in response.entries)
    assert response.finish_reason in ("stop", "length")


async def test_runner_end_to_end_over_local_server(
    server: tuple[str, list[dict[str, Any]]],
) -> None:
    lovia = pytest.importorskip("lovia.runner")
    from lovia.agent import Agent
    from lovia.tools import tool

    @tool
    def weather(city: str) -> str:
        """Weather for a city."""
        return f"sunny in {city}"

    url, log = server
    async with OpenAIChat("fake", base_url=f"{url}/v1") as provider:
        agent = Agent(name="weather", instructions="Be brief.", model=provider, tools=[weather])
        result = await lovia.Runner.run(agent, "Weather in Paris?")
    assert result.output == "Sunny in Paris."
    assert len(log) == 2
    assert log[1]["body"]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "sunny in Paris",
    }


class _ImportSpy:
    """A ``sys.meta_path`` finder that only writes down what the import system looks for:
    a module already imported is never looked for again, so anything here is an import
    that failed (looked for again every time) or a first import."""

    def __init__(self) -> None:
        self.looked_for: list[str] = []

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        self.looked_for.append(name)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "nonstream"])
async def test_a_warm_run_imports_nothing(
    server: tuple[str, list[dict[str, Any]]], default_http: str, stream: bool
) -> None:
    """The second run of an agent over real sockets searches ``sys.path`` for no module.

    httpcore 1.x runs ``import sniffio`` a few times per request: where sniffio is not
    installed, each is a failed import that walks ``sys.path`` (about a fifth of a model
    round-trip's CPU on httpx). lovia's install brings sniffio; a failed import per call
    anywhere on the path (ours or a dependency's) fails this test."""
    from lovia.agent import Agent
    from lovia.runner import Runner
    from lovia.tools import tool

    @tool
    async def weather(city: str) -> str:
        """Weather for a city."""
        return f"sunny in {city}"

    url, log = server
    async with OpenAIChat("fake", base_url=f"{url}/v1", stream=stream) as provider:
        assert type(provider._seam._client).__module__.split(".")[0] == default_http
        agent = Agent(name="weather", instructions="Be brief.", model=provider, tools=[weather])
        first = await Runner.run(agent, "Weather in Paris?")
        spy = _ImportSpy()
        sys.meta_path.insert(0, spy)
        try:
            second = await Runner.run(agent, "Weather in Paris?")
        finally:
            sys.meta_path.remove(spy)
    assert first.output == second.output == "Sunny in Paris."
    assert len(log) == 4  # two model round-trips per run, each on the wire
    assert spy.looked_for == []
