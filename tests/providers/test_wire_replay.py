"""Every recorded exchange in tests/fixtures/wire replayed through the adapters."""

from __future__ import annotations

import importlib
import json
from typing import Any

import pytest

from lovia.errors import (
    AuthenticationError,
    BadRequest,
    ContextOverflow,
    ModelNotFound,
    ProviderError,
    RateLimited,
    StreamInterrupted,
)
from lovia.providers.base import (
    ModelRequest,
    ModelResponse,
    ReasoningChunk,
    TextChunk,
    ToolCallChunk,
)
from lovia.transcript import EntryStamp, ReasoningEntry, TextEntry, ToolCallEntry

from .wire import FAKE_KEY, SIMPLE, all_cases, collect, provider_for, replay_client

U = tuple[int, int, int, int, int]  # input, output, cache read, cache write, reasoning

# Per case: text (prefix of the joined answer), tool calls (id, name, parsed args),
# usage (None = missing), finish reason, raw finish reason, reasoning expectations.
OK: dict[str, dict[str, Any]] = {
    "openai_chat/azure_content_filter_finish": {
        "text": "",
        "usage": (15, 19, 0, 0, 0),
        "finish": "content_filter",
    },
    "openai_chat/nonstream_after_tool_results": {
        "text": "The secrets associated with the passwords are as follows:",
        "usage": (149, 32, 0, 0, 0),
        "finish": "stop",
    },
    "openai_chat/nonstream_parallel_tool_calls": {
        "calls": [
            ("call_v6LacIrChvs6ITVpIZqy5tFc", "secret_retrieval_tool", {"password": "mellon"}),
            ("call_onyWzk4mLTGKzW9cthmf4Llq", "secret_retrieval_tool", {"password": "radiance"}),
        ],
        "usage": (75, 53, 0, 0, 0),
        "finish": "tool_calls",
    },
    "openai_chat/nonstream_refusal_structured_output": {
        "refusal": "I'm very sorry, but I can't assist with that request.",
        "usage": (64, 13, 0, 0, 0),
        "finish": "refusal",
        "raw": "stop",
    },
    "openai_chat/nonstream_text": {
        "text": "\\(4200 + 42 = 4242\\).",
        "usage": (16, 12, 0, 0, 0),
        "finish": "stop",
    },
    "openai_chat/stream_after_tool_result": {
        "text": "The capital of the UK is London.",
        "usage": (78, 9, 0, 0, 0),
        "finish": "stop",
    },
    "openai_chat/stream_finish_length_reasoning_model": {
        "text": "",
        "usage": (13, 50, 0, 0, 50),
        "finish": "length",
    },
    "openai_chat/stream_legacy_no_usage": {
        "text": "Langsmith can help with testing",
        "usage": None,
        "finish": "stop",
    },
    "openai_chat/stream_parallel_tool_calls": {
        "calls": [
            ("call_M26z19sncd7b4LBgzKRRbaUE", "secret_retrieval_tool", {"password": "mellon"}),
            ("call_KPXe5NX7IcKkaBUhc6dto2QV", "secret_retrieval_tool", {"password": "radiance"}),
        ],
        "usage": (75, 53, 0, 0, 0),
        "finish": "tool_calls",
    },
    "openai_chat/stream_single_tool_call_usage": {
        "calls": [("call_ZR5UUuTt3pf61kjwAJIYdVMj", "get_capital", {"country": "UK"})],
        "usage": (53, 15, 0, 0, 0),
        "finish": "tool_calls",
    },
    "openai_chat/stream_text_include_usage": {
        "text": "4200 + 42 equals 4242.",
        "usage": (16, 10, 0, 0, 0),
        "finish": "stop",
    },
    "openai_compat/deepseek_stream_reasoning_content": {
        "text": "Hello there!",
        "reasoning": "Hmm, the user just s",
        "usage": (6, 212, 0, 0, 198),
        "finish": "stop",
    },
    "openai_compat/gpustack_tool_call": {
        "calls": [
            ("call-tgExFAsPlzouSmHvquvivMPy7HEQRGer", "array_params", {"tags": ["red", "blue"]})
        ],
        "reasoning": "\nOkay, the user wants",
        "usage": (237, 250, 0, 0, 225),
        "finish": "tool_calls",
    },
    "openai_compat/groq_stream_tool_call": {
        "calls": [
            (
                "fc_bfb39741-3748-4def-9886-a93fc9c64a90",
                "get_something_by_name",
                {"name": "example"},
            )
        ],
        "reasoning": "We need to call",
        "usage": (304, 49, 0, 0, 23),
        "finish": "tool_calls",
    },
    "openai_compat/ollama_local_json_schema": {
        "text": '{ "city": "Paris", "country": "France" }',
        "reasoning": "Okay, the user is asking",
        "usage": (136, 15, 0, 0, 0),
        "finish": "stop",
    },
    "openai_compat/ollama_local_nonstream_text": {
        "text": "4200 + 42 = 4242\n",
        "usage": (21, 16, 0, 0, 0),
        "finish": "stop",
    },
    "openai_compat/ollama_local_stream_reasoning": {
        "text": "1  \n2  \n3",
        "reasoning": "Okay, the user wants",
        "usage": (17, 289, 0, 0, 0),
        "finish": "stop",
    },
    "openai_compat/ollama_local_tool_call": {
        "calls": [
            (
                "call_xkku8u2c",
                "object_params",
                {"window": {"start": "2025-01-01", "end": "2025-01-02"}},
            )
        ],
        "reasoning": "Okay, let's see.",
        "usage": (204, 242, 0, 0, 0),
        "finish": "tool_calls",
    },
    "openai_compat/openrouter_stream_text": {
        "text": "Hello!",
        "usage": (12, 2, 0, 0, 0),
        "finish": "stop",
    },
    "openai_responses/nonstream_after_function_outputs": {
        "text": "Here are the secrets:",
        "usage": (136, 30, 0, 0, 0),
        "finish": "stop",
        "raw": "completed",
    },
    "openai_responses/nonstream_parallel_function_calls": {
        "calls": [
            ("call_bzXaB1HDWsWy7n6bMrxJzNNa", "secret_retrieval_tool", {"password": "mellon"}),
            ("call_Dd4wvykCr6NttXKxRK0BFH96", "secret_retrieval_tool", {"password": "radiance"}),
        ],
        "usage": (36, 54, 0, 0, 0),
        "finish": "tool_calls",
    },
    "openai_responses/nonstream_reasoning": {
        "text": "I don\u2019t remember.",
        "reasoning_id": "rs_0c6fe76bfb6817d700696afa2274948197b94d9f86f30a6422",
        "usage": (62, 11, 0, 0, 0),
        "finish": "stop",
    },
    "openai_responses/nonstream_text": {
        "text": "4200 + 42 equals 4242.",
        "usage": (16, 11, 0, 0, 0),
        "finish": "stop",
    },
    "openai_responses/stream_function_call": {
        "calls": [("call_kL0PCQV7M2WMoVX8V8OtYSAL", "get_capital", {"country": "France"})],
        "usage": (255, 16, 0, 0, 0),
        "finish": "tool_calls",
    },
    "openai_responses/stream_incomplete_max_output_tokens": {
        "text": "Sure! Here is a list of all 50 U.S. states:",
        "usage": (14, 50, 0, 0, 0),
        "finish": "length",
        "raw": "max_output_tokens",
    },
    "openai_responses/stream_reasoning_summary": {
        "text": "The number is 9",
        "reasoning": "**Solving for the number**",
        "usage": (20, 166, 0, 0, 128),
        "finish": "stop",
    },
    "openai_responses/stream_reasoning_then_function_call": {
        "calls": [("call_CWXgs68YprAjp6t0371hiPOI", "final_result", {"result": 6666})],
        "encrypted": "gAAAAABoyXvynDJ_",
        "usage": (53, 469, 0, 0, 448),
        "finish": "tool_calls",
    },
    "openai_responses/stream_text": {
        "text": "4200 + 42 equals 4242.",
        "usage": (16, 11, 0, 0, 0),
        "finish": "stop",
    },
    "anthropic/nonstream_after_tool_results": {
        "text": "Here are the secrets retrieved",
        "usage": (602, 39, 0, 0, 0),
        "finish": "stop",
        "raw": "end_turn",
    },
    "anthropic/nonstream_parallel_tool_use": {
        "text": "I'll retrieve the secrets for both passwords you provided.",
        "calls": [
            ("toolu_01BUvqBj8Yb34pNAbCJJY1oc", "secret_retrieval_tool", {"password": "mellon"}),
            ("toolu_01VPuQJ1LonDBYXrr8pqPkqQ", "secret_retrieval_tool", {"password": "radiance"}),
        ],
        "usage": (416, 109, 0, 0, 0),
        "finish": "tool_calls",
        "raw": "tool_use",
    },
    "anthropic/nonstream_text": {
        "text": "4200 + 42 = 4242",
        "usage": (17, 15, 0, 0, 0),
        "finish": "stop",
        "raw": "end_turn",
    },
    "anthropic/nonstream_thinking": {
        "text": "The primes were: 79, 179, and 379.",
        "reasoning": "I need to think about primes",
        "signature": "EoEICkYICxgCKkAWNUdy",
        "usage": (97, 391, 0, 0, 0),
        "finish": "stop",
    },
    "anthropic/stream_text": {
        "text": "4200 + 42 = 4242",
        "usage": (17, 15, 0, 0, 0),
        "finish": "stop",
    },
    "anthropic/stream_thinking": {
        "text": '{"integer_a": 2',
        "reasoning": "The user is asking me",
        "signature": "Eo4ECkYICxgCKkCzGEyr",
        "usage": (293, 146, 0, 0, 0),
        "finish": "stop",
    },
    "anthropic/stream_thinking_long": {
        "text": "Looking at numbers below 400",
        "reasoning": "I need to find all prime numbers below",
        "signature": "Eq0TCkYICxgCKkAHavVp",
        "usage": (67, 1193, 0, 0, 0),
        "finish": "stop",
    },
    "anthropic/stream_tool_use_2024": {
        "text": "<thinking>\nThe get_weather tool",
        "calls": [
            ("toolu_01DYJo37oETVsCdLTTcCWcdq", "get_weather", {"location": "San Francisco, CA"})
        ],
        "usage": (599, 135, 0, 0, 0),
        "finish": "tool_calls",
    },
    "anthropic/stream_two_tool_use_with_text": {
        "text": "Certainly! I can help you",
        "calls": [
            (
                "toolu_014x5X91kx3fvdhpLvwXZWE2",
                "get_weather",
                {"location": "San Francisco, CA", "unit": "celsius"},
            ),
            ("toolu_0121kXsENLvoDZ72LCuAnCCz", "get_time", {"timezone": "America/Los_Angeles"}),
        ],
        "usage": (506, 153, 0, 0, 0),
        "finish": "tool_calls",
    },
    "anthropic/stream_web_search_citations": {
        "text": "The latest stable Ruby version is 4.0.6",
        "usage": (9447, 114, 0, 0, 0),
        "finish": "stop",
    },
}

# Per error case: exception type, retryable, retry_after, extra attributes.
ERRORS: dict[str, dict[str, Any]] = {
    "openai_chat/error_400_context_length_exceeded_observed": {
        "type": ContextOverflow,
        "status": 400,
        "tokens": 4120,
        "limit": 4097,
        "code": "context_length_exceeded",
    },
    "openai_chat/error_400_invalid_image_url": {
        "type": BadRequest,
        "status": 400,
        "code": "invalid_image_url",
    },
    "openai_chat/error_401_invalid_api_key": {
        "type": AuthenticationError,
        "status": 401,
        "code": "invalid_api_key",
    },
    "openai_chat/error_404_model_not_found": {
        "type": ModelNotFound,
        "status": 404,
        "code": "model_not_found",
    },
    "openai_chat/error_429_rate_limit_tokens_observed": {
        "type": RateLimited,
        "status": 429,
        "retryable": True,
        "retry_after": 0.006,
    },
    "openai_compat/deepseek_error_400_context": {
        "type": ContextOverflow,
        "status": 400,
        "tokens": 1250025,
        "limit": 1048565,
    },
    "openai_responses/error_400_model_not_found": {
        "type": ModelNotFound,
        "status": 400,
        "code": "model_not_found",
    },
    "openai_responses/error_401_invalid_api_key": {"type": AuthenticationError, "status": 401},
    "anthropic/error_400_invalid_request": {
        "type": BadRequest,
        "status": 400,
        "code": "invalid_request_error",
    },
    "anthropic/error_401_authentication": {
        "type": AuthenticationError,
        "status": 401,
        "code": "authentication_error",
    },
    "anthropic/error_404_not_found_model": {
        "type": ModelNotFound,
        "status": 404,
        "code": "not_found_error",
    },
    "anthropic/error_429_rate_limit_observed": {
        "type": RateLimited,
        "status": 429,
        "retryable": True,
    },
    "anthropic/stream_midstream_error_fragment_observed": {
        "type": StreamInterrupted,
        "code": "api_error",
        "partial_text": "d with a replacement character",
    },
}

CASES = all_cases()


def test_every_recorded_case_is_covered() -> None:
    assert len(CASES) >= 51
    assert {c.id for c in CASES} == set(OK) | set(ERRORS)


def _usage(r: ModelResponse) -> tuple[int, ...]:
    u = r.usage
    return (
        u.input_tokens,
        u.output_tokens,
        u.cache_read_tokens,
        u.cache_write_tokens,
        u.reasoning_tokens,
    )


def _check_entries(r: ModelResponse, want: dict[str, Any], provider: str) -> None:
    texts = [e for e in r.entries if isinstance(e, TextEntry)]
    text = "".join(e.text for e in texts if not e.refusal)
    assert text.startswith(want.get("text", "")), text
    if "refusal" in want:
        assert [e.text for e in texts if e.refusal] == [want["refusal"]]
    calls = [e for e in r.entries if isinstance(e, ToolCallEntry)]
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in calls] == want.get("calls", [])
    reasoning = [e for e in r.entries if isinstance(e, ReasoningEntry)]
    assert all(e.provider == provider for e in reasoning)
    if "reasoning" in want:
        assert reasoning
        assert reasoning[0].text.startswith(want["reasoning"])
    if "signature" in want:
        assert reasoning[0].signature
        assert reasoning[0].signature.startswith(want["signature"])
    if "encrypted" in want:
        assert reasoning[0].encrypted
        assert reasoning[0].encrypted.startswith(want["encrypted"])
        assert reasoning[0].details
        assert str(reasoning[0].details["id"]).startswith("rs_")
    if "reasoning_id" in want:
        assert reasoning[0].details == {"id": want["reasoning_id"], "summary": []}
    ids = {e.message_id for e in r.entries}
    assert len(ids) <= 1
    assert "" not in ids
    for e in r.entries:
        assert e.run_id == ""
        assert e.turn == 0


def _check_chunks(items: list[Any], r: ModelResponse) -> None:
    """What streamed adds up to what the final response holds."""
    text = "".join(i.text for i in items if isinstance(i, TextChunk))
    assert text == "".join(e.text for e in r.entries if isinstance(e, TextEntry))
    reasoning = "".join(i.text for i in items if isinstance(i, ReasoningChunk))
    assert reasoning.replace("\n", "") == "".join(
        e.text for e in r.entries if isinstance(e, ReasoningEntry)
    ).replace("\n", "")
    calls: dict[int, list[ToolCallChunk]] = {}
    for i in items:
        if isinstance(i, ToolCallChunk):
            calls.setdefault(i.index, []).append(i)
    entries = [e for e in r.entries if isinstance(e, ToolCallEntry)]
    assert len(calls) == len(entries)
    for (_, chunks), entry in zip(sorted(calls.items()), entries, strict=True):
        assert next(c.call_id for c in chunks if c.call_id) == entry.call_id
        assert next(c.name for c in chunks if c.name) == entry.name
        assert json.loads("".join(c.arguments for c in chunks)) == json.loads(entry.arguments)


@pytest.fixture(params=["httpx", "httpx2"])
def http(request: pytest.FixtureRequest) -> Any:
    """Parity: every recorded exchange replays through both clients a provider may use
    (httpx2 is the default when the ``fast`` extra is installed)."""
    return importlib.import_module(request.param)


@pytest.mark.parametrize("c", [c for c in CASES if c.id in OK], ids=lambda c: c.id)
async def test_recorded_answer(c: Any, http: Any) -> None:
    want = OK[c.id]
    async with provider_for(c, replay_client(c, http=http)) as provider:
        items, r = await collect(provider.stream(SIMPLE))
    _check_entries(r, want, provider.name)
    if want["usage"] is None:
        assert r.usage.missing
        assert r.usage.requests == 1
    else:
        assert _usage(r) == want["usage"]
        assert not r.usage.missing
        assert r.usage.requests == 1
    assert r.finish_reason == want["finish"]
    assert r.raw_finish_reason == want.get("raw", r.raw_finish_reason)
    assert r.raw_finish_reason is not None
    _check_chunks(items, r)


@pytest.mark.parametrize("c", [c for c in CASES if c.id in ERRORS], ids=lambda c: c.id)
async def test_recorded_error(c: Any, http: Any) -> None:
    want = ERRORS[c.id]
    seen: list[Any] = []
    async with provider_for(c, replay_client(c, seen, http)) as provider:
        with pytest.raises(ProviderError) as info:
            await collect(provider.stream(SIMPLE))
    err = info.value
    assert type(err) is want["type"]
    assert len(seen) == 1  # NO_RETRY policy: exactly one request
    assert err.provider == provider.name
    assert err.retryable is want.get("retryable", False)
    assert err.hint  # says what to do
    assert err.status == want.get("status")
    for attr in ("retry_after", "tokens", "limit", "code"):
        if attr in want:
            assert getattr(err, attr) == want[attr]
    if "partial_text" in want:
        assert isinstance(err, StreamInterrupted)
        assert isinstance(err.__cause__, ProviderError)
        partial = err.partial
        assert isinstance(partial, ModelResponse)
        text = "".join(e.text for e in partial.entries if isinstance(e, TextEntry))
        assert text.startswith(want["partial_text"])
    assert FAKE_KEY not in str(err)


STAMP = EntryStamp(run_id="run-7", turn=3, agent="triage")


def _unstamped(r: ModelResponse) -> list[dict[str, Any]]:
    """The entries as data, without what differs by construction (id, time) or stamp."""
    skip = {"id", "ts", "run_id", "turn", "agent"}
    return [{k: v for k, v in e.model_dump().items() if k not in skip} for e in r.entries]


@pytest.mark.parametrize("c", [c for c in CASES if c.id in OK], ids=lambda c: c.id)
async def test_entries_are_built_with_the_requests_stamp(c: Any) -> None:
    """The loop records an answer's entries as the provider built them: with the stamp
    its request carries (run, turn, agent), and otherwise the same entries as without."""
    stamped_request = ModelRequest(system="", messages=(), stamp=STAMP)
    async with provider_for(c, replay_client(c)) as provider:
        _, plain = await collect(provider.stream(SIMPLE))
        _, r = await collect(provider.stream(stamped_request))
    assert _unstamped(r) == _unstamped(plain)
    stamps = {(e.run_id, e.turn, e.agent) for e in r.entries}
    defaults = {(e.run_id, e.turn, e.agent) for e in plain.entries}
    if plain.entries:  # some recorded answers are empty (a filter, a length cut)
        assert (stamps, defaults) == ({("run-7", 3, "triage")}, {("", 0, "")})
    else:
        assert not r.entries


@pytest.mark.parametrize(
    "c", [c for c in CASES if "partial_text" in ERRORS.get(c.id, {})], ids=lambda c: c.id
)
async def test_a_broken_streams_partial_answer_carries_the_stamp(c: Any) -> None:
    async with provider_for(c, replay_client(c)) as provider:
        with pytest.raises(StreamInterrupted) as info:
            await collect(provider.stream(ModelRequest(system="", messages=(), stamp=STAMP)))
    partial = info.value.partial
    assert isinstance(partial, ModelResponse) and partial.entries
    assert {(e.run_id, e.turn, e.agent) for e in partial.entries} == {("run-7", 3, "triage")}
