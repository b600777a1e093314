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


async def test_non_streamed_calls_share_one_deadline_timer() -> None:
    """An attempt keeps the timer it set while waiting at the gate, and a finished call
    hands its timer to the next call instead of cancelling it (was: two timers per call,
    each left cancelled in the event loop's heap for the 30 minutes of the deadline)."""
    sent: list[bytes] = []
    loop = asyncio.get_running_loop()
    timers: list[float] = []
    call_at = loop.call_at

    def counting(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        if getattr(callback, "__qualname__", "") in ("_Alarm._ring", "Watchdog._fire"):
            timers.append(when)
        return call_at(when, callback, *args, **kwargs)

    async with _client(sent, stream=False) as client:
        provider = OpenAIChat(
            "gpt-4o",
            api_key="sk-test",
            http_client=client,
            stream=False,
            limits=StreamLimits(call_timeout=30.0),
        )
        loop.call_at = counting  # type: ignore[method-assign]
        try:
            for _ in range(3):
                async for _ in provider.stream(ModelRequest(system="", messages=())):
                    pass
        finally:
            del loop.call_at  # type: ignore[method-assign]
    assert len(sent) == 3
    assert len(timers) == 1


async def test_a_handed_on_timer_still_enforces_the_next_calls_deadline() -> None:
    """The timer a fast call leaves rings early for the next, slow, call: it re-arms, and
    that call still fails at its own deadline, not the first call's and not never."""
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
        await asyncio.sleep(0.2)  # the spare timer now rings 0.2 s into the next call
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(ProviderError) as caught:
            async for _ in provider.stream(request):
                pass
        elapsed = loop.time() - started
    assert caught.value.code == "call_timeout"
    assert 0.4 <= elapsed < 2.0
