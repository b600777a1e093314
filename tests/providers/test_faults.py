# ruff: noqa: E501
"""Faults: retries, overflow, resets, cuts, malformed SSE, keys, SSE decoding, registry."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from lovia.errors import (
    ContextOverflow,
    ProviderError,
    ProviderOverloaded,
    RateLimited,
    StreamInterrupted,
    UserError,
)
from lovia.providers._http import (
    RetryPolicy,
    error_from_response,
    parse_duration,
    parse_retry_after,
)
from lovia.providers._sse import SSEDecoder, iter_sse
from lovia.providers.anthropic import Anthropic
from lovia.providers.base import ModelRequest, ModelResponse, RetryNotice, TextChunk
from lovia.providers.openai_chat import OpenAIChat
from lovia.providers.openai_responses import OpenAIResponses
from lovia.providers.registry import register_provider, resolve_model
from lovia.transcript import InputEntry, TextEntry

from .wire import FAKE_KEY, collect

REQ = ModelRequest(system="be brief", messages=(InputEntry(content="hi"),))


def _chunk(text: str | None = None, finish: str | None = None) -> str:
    delta = {"content": text} if text is not None else {}
    data = {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(data)}\n\n"


GOOD_SSE = _chunk("Hel") + _chunk("lo") + _chunk(finish="stop") + "data: [DONE]\n\n"


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def _sequenced(
    *responses: Callable[[httpx.Request], httpx.Response],
) -> tuple[httpx.AsyncClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return responses[min(len(seen), len(responses)) - 1](request)

    return httpx.AsyncClient(transport=httpx.MockTransport(handler)), seen


def _ok(body: str = GOOD_SSE) -> Callable[[httpx.Request], httpx.Response]:
    return lambda r: httpx.Response(
        200, headers={"content-type": "text/event-stream"}, content=body
    )


def _status(
    code: int, body: Any, headers: dict[str, str] | None = None
) -> Callable[[httpx.Request], httpx.Response]:
    return lambda r: httpx.Response(code, headers=headers or {}, json=body)


def _chat(client: httpx.AsyncClient, sleeps: Sleeps | None = None, **kw: Any) -> OpenAIChat:
    retry = RetryPolicy(initial_delay=0.01, sleep=sleeps or Sleeps())
    return OpenAIChat("gpt-4o", api_key=FAKE_KEY, http_client=client, retry=retry, **kw)


async def test_429_with_retry_after_is_retried_then_succeeds() -> None:
    client, seen = _sequenced(
        _status(
            429,
            {"error": {"message": "slow down", "code": "rate_limit_exceeded"}},
            {"retry-after": "2"},
        ),
        _ok(),
    )
    sleeps = Sleeps()
    items, final = await collect(_chat(client, sleeps).stream(REQ))
    notices = [i for i in items if isinstance(i, RetryNotice)]
    assert len(notices) == 1
    assert notices[0].attempt == 1
    assert notices[0].delay == 2.0
    assert isinstance(notices[0].error, RateLimited)
    assert notices[0].error.retry_after == 2.0
    assert items.index(notices[0]) == 0  # before any content
    assert sleeps.delays == [2.0]
    assert len(seen) == 2
    assert "".join(e.text for e in final.entries if isinstance(e, TextEntry)) == "Hello"


async def test_529_overloaded_is_retried_with_backoff() -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    body = (
        'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"c","usage":{"input_tokens":3,"output_tokens":1}}}\n\n'
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}\n\n'
        'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}\n\n'
        'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    client, seen = _sequenced(_status(529, overloaded), _status(529, overloaded), _ok(body))
    sleeps = Sleeps()
    provider = Anthropic(
        "claude-sonnet-4-0",
        api_key=FAKE_KEY,
        http_client=client,
        retry=RetryPolicy(initial_delay=0.5, jitter=False, sleep=sleeps),
    )
    items, final = await collect(provider.stream(REQ))
    notices = [i for i in items if isinstance(i, RetryNotice)]
    assert [type(n.error) for n in notices] == [ProviderOverloaded, ProviderOverloaded]
    assert sleeps.delays == [0.5, 1.0]
    assert len(seen) == 3
    assert final.usage.input_tokens == 3
    assert final.usage.output_tokens == 2


async def test_retries_give_up_after_max() -> None:
    client, seen = _sequenced(_status(500, {"error": {"message": "boom"}}))
    provider = (
        _chat(client, retry=None)
        if False
        else OpenAIChat(
            "gpt-4o",
            api_key=FAKE_KEY,
            http_client=client,
            retry=RetryPolicy(max_retries=2, initial_delay=0, sleep=Sleeps()),
        )
    )
    with pytest.raises(ProviderError) as info:
        await collect(provider.stream(REQ))
    assert info.value.status == 500
    assert info.value.retryable
    assert len(seen) == 3


async def test_context_overflow_is_not_retried() -> None:
    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 208310 tokens > 200000 maximum",
        },
    }
    client, seen = _sequenced(_status(400, body))
    provider = Anthropic(
        "claude-sonnet-4-0", api_key=FAKE_KEY, http_client=client, retry=RetryPolicy(sleep=Sleeps())
    )
    with pytest.raises(ContextOverflow) as info:
        await collect(provider.stream(REQ))
    assert (info.value.tokens, info.value.limit) == (208310, 200000)
    assert not info.value.retryable
    assert len(seen) == 1


async def test_connection_reset_before_content_is_retried() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise httpx.ReadError("connection reset by peer", request=request)
        return _ok()(request)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    items, final = await collect(_chat(client).stream(REQ))
    notices = [i for i in items if isinstance(i, RetryNotice)]
    assert len(notices) == 1
    assert isinstance(notices[0].error, StreamInterrupted)
    assert final.finish_reason == "stop"
    assert calls == 2


async def test_connect_error_is_retried_as_provider_error() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise httpx.ConnectError("refused", request=request)
        return _ok()(request)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    items, _ = await collect(_chat(client).stream(REQ))
    notice = next(i for i in items if isinstance(i, RetryNotice))
    assert notice.error.code == "connect_error"  # type: ignore[attr-defined]


class _CutStream(httpx.AsyncByteStream):
    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            yield part
        raise httpx.RemoteProtocolError(
            "peer closed connection without sending complete message body"
        )


async def test_cut_after_partial_content_raises_stream_interrupted_with_partial() -> None:
    parts = [_chunk("Hello ").encode(), _chunk("wor").encode()]
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_CutStream(parts)
        )

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    received: list[Any] = []
    with pytest.raises(StreamInterrupted) as info:
        async for item in _chat(client).stream(REQ):
            received.append(item)
    assert [i.text for i in received if isinstance(i, TextChunk)] == ["Hello ", "wor"]
    partial = info.value.partial
    assert isinstance(partial, ModelResponse)
    assert partial.finish_reason == "error"
    assert [e.text for e in partial.entries if isinstance(e, TextEntry)] == ["Hello wor"]
    assert not info.value.retryable
    assert len(seen) == 1


async def test_cut_without_finish_after_content() -> None:
    client, seen = _sequenced(_ok(_chunk("partial")))  # ends: no finish_reason, no [DONE]
    with pytest.raises(StreamInterrupted) as info:
        await collect(_chat(client).stream(REQ))
    assert info.value.code == "stream_ended_early"
    assert len(seen) == 1


async def test_malformed_sse_line_is_a_clear_error() -> None:
    client, _ = _sequenced(_ok("data: {not json\n\n"))
    with pytest.raises(StreamInterrupted) as info:
        await collect(_chat(client).stream(REQ))
    assert "malformed" in info.value.message
    assert info.value.code == "malformed_event"


async def test_stream_without_done_ends_fine() -> None:
    client, _ = _sequenced(_ok(_chunk("Hi") + _chunk(finish="stop")))
    _, final = await collect(_chat(client).stream(REQ))
    assert final.finish_reason == "stop"
    assert final.usage.missing


async def test_error_event_before_content_is_mapped_and_retried() -> None:
    err = 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    ok = (
        'data: {"type":"message_start","message":{"id":"m","usage":{"input_tokens":1,"output_tokens":1}}}\n\n'
        'data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}\n\n'
    )
    client, seen = _sequenced(_ok(err), _ok(ok))
    provider = Anthropic(
        "claude-x",
        api_key=FAKE_KEY,
        http_client=client,
        retry=RetryPolicy(initial_delay=0, sleep=Sleeps()),
    )
    items, _ = await collect(provider.stream(REQ))
    assert isinstance(
        next(i for i in items if isinstance(i, RetryNotice)).error, ProviderOverloaded
    )
    assert len(seen) == 2


async def test_stream_false_is_a_one_shot_stream() -> None:
    body = {
        "id": "c9",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "content": "Hi",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2},
    }
    client, seen = _sequenced(_status(200, body))
    provider = _chat(client, stream=False)
    items, final = await collect(provider.stream(REQ))
    assert "stream" not in json.loads(seen[0].content)
    assert [type(i).__name__ for i in items] == ["TextChunk", "ToolCallChunk", "ModelResponse"]
    assert final.finish_reason == "tool_calls"
    assert final.usage.input_tokens == 5


async def test_a_one_shot_call_is_retried_like_a_stream() -> None:
    """stream=False goes through the same retry loop: a 429 before the answer is waited
    out (one notice, first), then the whole answer arrives as one-shot items."""
    rate_limited = {"error": {"message": "slow down", "code": "rate_limit_exceeded"}}
    body = {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "message": {"content": "Hi"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1},
    }
    client, seen = _sequenced(_status(429, rate_limited, {"retry-after": "1"}), _status(200, body))
    sleeps = Sleeps()
    items, final = await collect(_chat(client, sleeps, stream=False).stream(REQ))
    assert [type(i).__name__ for i in items] == ["RetryNotice", "TextChunk", "ModelResponse"]
    assert sleeps.delays == [1.0] and len(seen) == 2
    assert final.finish_reason == "stop"


async def test_a_one_shot_call_gives_up_after_its_retries() -> None:
    overloaded = {"error": {"message": "busy", "type": "server_error"}}
    client, seen = _sequenced(*[_status(503, overloaded)] * 4)
    retry = RetryPolicy(max_retries=2, initial_delay=0.01, sleep=Sleeps())
    provider = OpenAIChat("m", api_key=FAKE_KEY, http_client=client, retry=retry, stream=False)
    with pytest.raises(ProviderError):
        await collect(provider.stream(REQ))
    assert len(seen) == 3  # the first try and two retries


# --------------------------------------------------------------------------- keys


async def test_key_never_leaks() -> None:
    body = {
        "error": {"message": f"Incorrect API key provided: {FAKE_KEY}.", "code": "invalid_api_key"}
    }
    client, seen = _sequenced(_status(401, body))
    provider = _chat(client)
    assert FAKE_KEY not in repr(provider)
    assert FAKE_KEY not in json.dumps(provider.render_request(REQ))
    with pytest.raises(ProviderError) as info:
        await collect(provider.stream(REQ))
    assert FAKE_KEY not in str(info.value)
    assert FAKE_KEY not in repr(info.value.args)
    assert seen[0].headers["authorization"] == f"Bearer {FAKE_KEY}"
    anthropic = Anthropic("claude-x", api_key=FAKE_KEY)
    assert FAKE_KEY not in repr(anthropic)
    await anthropic.aclose()


def test_missing_key_names_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(UserError) as info:
        OpenAIChat("gpt-4o")
    assert "OPENAI_API_KEY" in (info.value.hint or "")
    with pytest.raises(UserError) as info2:
        Anthropic("claude-x")
    assert "ANTHROPIC_API_KEY" in (info2.value.hint or "")
    local = OpenAIChat("llama", base_url="http://127.0.0.1:8080/v1")  # local servers need no key
    assert (local.server_address, local.server_port) == ("127.0.0.1", 8080)


def test_env_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://example.test/v1/")
    p = OpenAIResponses("gpt-5")
    assert p.base_url == "https://example.test/v1"
    assert p.server_port == 443
    assert p.name == "openai"
    assert not p.profile.native_json_schema
    monkeypatch.delenv("OPENAI_BASE_URL")
    q = OpenAIChat("gpt-4.1")
    assert q.profile.context_window == 1_047_576
    assert q.profile.native_json_schema
    assert q.server_address == "api.openai.com"


async def test_httpx2_client_works() -> None:
    httpx2 = pytest.importorskip("httpx2")

    def handler(request: Any) -> Any:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=GOOD_SSE)

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    _, final = await collect(_chat(client).stream(REQ))  # type: ignore[arg-type]
    assert "".join(e.text for e in final.entries if isinstance(e, TextEntry)) == "Hello"
    await client.aclose()


# --------------------------------------------------------------------------- parsing units


def test_sse_decoder_tolerance() -> None:
    raw = ': comment\r\nevent: x\r\ndata: {"a":\r\ndata:  1}\r\n\r\nid: 7\ndata:[DONE]'
    events = iter_sse([raw[:5].encode(), raw[5:17].encode(), raw[17:].encode()])
    assert [(e.event, e.data) for e in events] == [("x", '{"a":\n 1}'), ("message", "[DONE]")]
    d = SSEDecoder()
    assert d.feed("data: a\r") == []
    assert [e.data for e in d.feed("\n\r\n")] == ["a"]
    snowman = "data: ☃\n\n".encode()
    assert [e.data for e in iter_sse([snowman[:7], snowman[7:]])] == ["☃"]


@pytest.mark.parametrize(
    ("headers", "message", "expected"),
    [
        ({"retry-after": "3"}, "", 3.0),
        ({"retry-after-ms": "250"}, "", 0.25),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, "", 0.0),
        ({}, "Please try again in 6ms.", 0.006),
        ({}, "Please try again in 1.5s.", 1.5),
        ({"x-ratelimit-reset-requests": "2m0s", "x-ratelimit-reset-tokens": "1s"}, "", 120.0),
        ({}, "no hint", None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], message: str, expected: float | None) -> None:
    assert parse_retry_after(headers, message) == expected


def test_parse_duration() -> None:
    assert parse_duration("1h2m3.5s") == 3723.5
    assert parse_duration("bogus") is None


@pytest.mark.parametrize(
    ("status", "body", "tokens", "limit"),
    [
        (
            400,
            {
                "error": {
                    "message": "Your input exceeds the context window of this model.",
                    "code": "context_length_exceeded",
                }
            },
            None,
            None,
        ),
        (
            400,
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 5000,
                    "n_ctx": 4096,
                }
            },
            5000,
            4096,
        ),
        (
            400,
            {
                "object": "error",
                "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens in the messages.",
                "type": "BadRequestError",
                "code": 400,
            },
            5000,
            4096,
        ),
        (400, {"error": "prompt too long; exceeded max context length by 12 tokens"}, None, None),
    ],
)
def test_context_overflow_wordings(
    status: int, body: Any, tokens: int | None, limit: int | None
) -> None:
    err = error_from_response(status, {}, json.dumps(body), "openai")
    assert isinstance(err, ContextOverflow)
    assert (err.tokens, err.limit) == (tokens, limit)


def test_should_retry_header_and_quota() -> None:
    err = error_from_response(
        429, {}, json.dumps({"error": {"message": "quota", "code": "insufficient_quota"}}), "openai"
    )
    assert isinstance(err, RateLimited)
    assert not err.retryable
    err2 = error_from_response(500, {"x-should-retry": "false"}, "oops", "openai")
    assert not err2.retryable
    assert "oops" in err2.message


# --------------------------------------------------------------------------- registry


def test_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    a = resolve_model("openai:gpt-4o-mini")
    assert isinstance(a, OpenAIChat)
    assert a is resolve_model("openai:gpt-4o-mini")
    assert isinstance(resolve_model("openai-responses:gpt-5"), OpenAIResponses)
    assert isinstance(resolve_model("anthropic:claude-sonnet-4-0"), Anthropic)
    assert resolve_model(a) is a
    with pytest.raises(UserError) as info:
        resolve_model("nope:model")
    assert "openai-responses" in (info.value.hint or "")
    with pytest.raises(UserError):
        resolve_model("gpt-4o")
    register_provider(
        "mine", lambda model: OpenAIChat(model, base_url="http://localhost:1/v1"), replace=True
    )
    assert resolve_model("mine:x").model == "x"
