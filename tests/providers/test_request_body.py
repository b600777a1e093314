"""The exact bytes OpenAI Chat sends: pinned, whatever the provider caches between calls.

The provider renders a run's tool specs and an agent's settings once and reuses them (and
the turns it rendered before); the body on the wire must stay what a fresh rendering gives,
key order included (replay compares what the server received).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from lovia.errors import ProviderError
from lovia.model import ModelRequest, ModelSettings, ToolSpec
from lovia.providers import StreamLimits
from lovia.providers.openai_chat import OpenAIChat
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry

PARAMS = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}
ADD = ToolSpec(name="add", description="Add two integers.", parameters=PARAMS)
SETTINGS = ModelSettings(
    temperature=0.25,
    max_tokens=64,
    stop=("END",),
    parallel_tool_calls=False,
    tool_choice="add",
    extra={"temperature": 0.5, "user": "u1"},  # overrides in place, adds at the end
)
TOOLS = [
    {
        "type": "function",
        "function": {"name": "add", "description": "Add two integers.", "parameters": PARAMS},
    }
]
SETTINGS_PART = {
    "temperature": 0.5,
    "max_completion_tokens": 64,
    "stop": ["END"],
    "parallel_tool_calls": False,
    "tool_choice": {"type": "function", "function": {"name": "add"}},
    "user": "u1",
}
FIRST = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
SECOND = [
    *FIRST,
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a":1,"b":2}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "3"},
]
SSE = (
    b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\n'
)
REPLY = {
    "id": "chatcmpl-1",
    "choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "stop"}],
}


def _wire(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _expected(messages: list[dict[str, Any]], stream: bool, settings: bool) -> bytes:
    body: dict[str, Any] = {"model": "gpt-4o", "messages": messages, "tools": TOOLS}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    if settings:
        body.update(SETTINGS_PART)
    return _wire(body)


def _client(sent: list[bytes], stream: bool) -> httpx.AsyncClient:
    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        if stream:
            return httpx.Response(200, content=SSE + b"data: [DONE]\n\n")
        return httpx.Response(200, json=REPLY)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


@pytest.mark.parametrize("stream", [False, True])
async def test_request_bodies_are_pinned_across_cached_calls(stream: bool) -> None:
    sent: list[bytes] = []
    first: list[TranscriptEntry] = [InputEntry(content="go")]
    call = ToolCallEntry(call_id="call_1", name="add", arguments='{"a":1,"b":2}', message_id="m")
    second = [*first, call, ToolResultEntry(call_id="call_1", name="add", content="3")]
    tools = (ADD,)
    async with _client(sent, stream) as client:
        provider = OpenAIChat("gpt-4o", api_key="sk-test", http_client=client, stream=stream)
        for messages, settings in (
            (first, SETTINGS),
            (second, SETTINGS),
            (second, ModelSettings()),
        ):
            request = ModelRequest(system="sys", messages=messages, tools=tools, settings=settings)
            async for _ in provider.stream(request):
                pass
    assert sent == [
        _expected(FIRST, stream, settings=True),
        _expected(SECOND, stream, settings=True),  # tools and settings reused: same bytes
        _expected(SECOND, stream, settings=False),  # another settings object: its own part
    ]


async def test_each_call_is_held_to_its_own_deadline() -> None:
    """A fast call and then a slow one on the same provider: the slow call fails at its
    own deadline, counted from its own start, not the first call's and not never."""
    calls = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls > 1:
            await asyncio.sleep(5)  # the second call hangs
        return httpx.Response(200, json=REPLY)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    limits = StreamLimits(call_timeout=0.4)
    async with client:
        provider = OpenAIChat(
            "gpt-4o", api_key="sk-test", http_client=client, stream=False, limits=limits
        )
        request = ModelRequest(system="", messages=())
        async for _ in provider.stream(request):
            pass
        await asyncio.sleep(0.2)  # the first call's deadline would pass 0.2 s into the next
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(ProviderError) as caught:
            async for _ in provider.stream(request):
                pass
        elapsed = loop.time() - started
    assert caught.value.code == "call_timeout"
    assert 0.4 <= elapsed < 2.0
