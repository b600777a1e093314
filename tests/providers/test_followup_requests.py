"""Follow-up turns: the request lovia builds from a transcript matches the recorded one.

Where possible the transcript is the adapter's own parse of the recorded first turn plus
tool results, so this is a real round trip (answer → entries → next request).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lovia.providers.base import ModelRequest, ModelSettings, ToolSpec
from lovia.transcript import (
    InputEntry,
    ReasoningEntry,
    TextEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)

from .wire import case, collect, provider_for, replay_client


def _chat_tools(body: dict[str, Any]) -> list[ToolSpec]:
    return [
        ToolSpec(
            name=t["function"]["name"],
            description=t["function"].get("description", ""),
            parameters=t["function"]["parameters"],
            strict=bool(t["function"].get("strict")),
        )
        for t in body.get("tools", [])
    ]


def _chat_shape(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Roles, texts and tool-call pairing; assistant text is not compared when calls exist."""
    out: list[tuple[Any, ...]] = []
    for m in messages:
        calls = tuple(
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in m.get("tool_calls") or []
        )
        content = None if (calls and m["role"] == "assistant") else m.get("content")
        out.append((m["role"], content, calls, m.get("tool_call_id")))
    return out


async def _first_turn(case_id: str) -> list[TranscriptEntry]:
    c = case(case_id)
    async with provider_for(c, replay_client(c)) as provider:
        _, response = await collect(provider.stream(ModelRequest(system="", messages=())))
    return list(response.entries)


def _results(calls: list[TranscriptEntry], outputs: list[str]) -> list[TranscriptEntry]:
    tool_calls = [e for e in calls if isinstance(e, ToolCallEntry)]
    return [
        ToolResultEntry(call_id=c.call_id, name=c.name, content=o)
        for c, o in zip(tool_calls, outputs, strict=True)
    ]


@pytest.mark.parametrize(
    ("first", "followup", "outputs"),
    [
        (
            "openai_chat/nonstream_parallel_tool_calls",
            "openai_chat/nonstream_after_tool_results",
            ["Welcome to Moria!", "Life before Death"],
        ),
        (
            "openai_chat/stream_single_tool_call_usage",
            "openai_chat/stream_after_tool_result",
            ["London"],
        ),
    ],
)
async def test_chat_tool_round_trip(first: str, followup: str, outputs: list[str]) -> None:
    c = case(followup)
    recorded = c.request
    system = next((m["content"] for m in recorded["messages"] if m["role"] == "system"), "")
    user = next(m["content"] for m in recorded["messages"] if m["role"] == "user")
    answer = await _first_turn(first)
    entries = [InputEntry(content=user), *answer, *_results(answer, outputs)]
    settings = ModelSettings(tool_choice=recorded.get("tool_choice"))
    request = ModelRequest(
        system=system, messages=entries, tools=_chat_tools(recorded), settings=settings
    )
    async with provider_for(c, replay_client(c)) as provider:
        body = provider.render_request(request)
    assert _chat_shape(body["messages"]) == _chat_shape(recorded["messages"])
    assert body["tools"] == [
        {**t, "function": {k: v for k, v in t["function"].items() if k != "strict" or v}}
        for t in recorded["tools"]
    ]
    assert body.get("stream", False) == recorded.get("stream", False)
    assert body.get("stream_options") == recorded.get("stream_options")


async def test_compat_followup_groq_shape() -> None:
    c = case("openai_compat/groq_stream_tool_call")
    recorded = c.request
    msgs = recorded["messages"]
    call = msgs[2]["tool_calls"][0]
    entries: list[TranscriptEntry] = [
        InputEntry(content=msgs[1]["content"]),
        ReasoningEntry(text="We need to call the tool", provider="groq", message_id="m1"),
        ToolCallEntry(
            call_id=call["id"],
            name=call["function"]["name"],
            arguments=call["function"]["arguments"],
            message_id="m1",
        ),
        ToolResultEntry(
            call_id=call["id"],
            name=call["function"]["name"],
            content=msgs[3]["content"],
            is_error=True,
        ),
    ]
    request = ModelRequest(system=msgs[0]["content"], messages=entries, tools=_chat_tools(recorded))
    async with provider_for(c, replay_client(c), name="groq") as provider:
        body = provider.render_request(request)
    assert _chat_shape(body["messages"]) == _chat_shape(msgs)
    # reasoning never goes back over Chat Completions (DeepSeek rejects reasoning_content)
    assert all("reasoning_content" not in m and "reasoning" not in m for m in body["messages"])


async def test_responses_function_output_round_trip() -> None:
    c = case("openai_responses/nonstream_after_function_outputs")
    recorded = c.request
    answer = await _first_turn("openai_responses/nonstream_parallel_function_calls")
    system = recorded["input"][0]["content"]
    entries = [
        InputEntry(content=recorded["input"][1]["content"]),
        *answer,
        *_results(answer, ["Welcome to Moria!", "Life before Death"]),
    ]
    tools = [
        ToolSpec(name=t["name"], description=t["description"], parameters=t["parameters"])
        for t in recorded["tools"]
    ]
    async with provider_for(c, replay_client(c)) as provider:
        body = provider.render_request(ModelRequest(system=system, messages=entries, tools=tools))

    def shape(items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [
            (
                i.get("type", "message"),
                i.get("role"),
                i.get("content"),
                i.get("call_id"),
                i.get("name"),
                json.loads(i["arguments"]) if "arguments" in i else None,
                i.get("output"),
            )
            for i in items
            if i.get("role") not in ("developer", "system")
        ]

    assert body["instructions"] == system
    assert shape(body["input"]) == shape(recorded["input"])
    assert body["tools"] == recorded["tools"]


async def test_responses_reasoning_round_trip() -> None:
    c = case("openai_responses/nonstream_reasoning")
    recorded = c.request
    user1, reasoning, message, user2 = recorded["input"]
    summary = [s["text"] for s in reasoning["summary"]]
    entries: list[TranscriptEntry] = [
        InputEntry(content=user1["content"]),
        ReasoningEntry(
            text="\n\n".join(summary),
            provider="openai",
            message_id="resp_1",
            details={"id": reasoning["id"], "summary": summary},
        ),
        TextEntry(text=message["content"][0]["text"], message_id="resp_1"),
        InputEntry(content=user2["content"]),
        # reasoning from another provider is dropped, not sent
        ReasoningEntry(text="other", provider="anthropic", signature="sig", message_id="x"),
        TextEntry(text="ok", message_id="x"),
    ]
    request = ModelRequest(
        system="", messages=entries, settings=ModelSettings(reasoning_effort="minimal")
    )
    async with provider_for(c, replay_client(c)) as provider:
        body = provider.render_request(request)
    items = body["input"]
    assert items[1] == {"type": "reasoning", "id": reasoning["id"], "summary": reasoning["summary"]}
    assert [i.get("type", "message") for i in items[:4]] == [
        "message",
        "reasoning",
        "message",
        "message",
    ]
    assert items[2]["content"][0]["text"] == "3"
    assert items[2]["role"] == "assistant"
    assert [i for i in items if i.get("type") == "reasoning"] == [items[1]]
    assert body["reasoning"] == recorded["reasoning"]


async def test_anthropic_tool_result_round_trip() -> None:
    c = case("anthropic/nonstream_after_tool_results")
    recorded = c.request
    answer = await _first_turn("anthropic/nonstream_parallel_tool_use")
    user = recorded["messages"][0]["content"]
    entries = [
        InputEntry(content=user),
        *answer,
        *_results(answer, ["Welcome to Moria!", "Life before Death"]),
    ]
    tools = [
        ToolSpec(name=t["name"], description=t["description"], parameters=t["input_schema"])
        for t in recorded["tools"]
    ]
    request = ModelRequest(
        system="Use parallel tool calling.",
        messages=entries,
        tools=tools,
        settings=ModelSettings(max_tokens=16000),
    )
    async with provider_for(c, replay_client(c)) as provider:
        body = provider.render_request(request)

    def strip(blocks: Any) -> Any:
        if isinstance(blocks, str):
            return blocks
        return [
            {k: v for k, v in b.items() if k not in ("cache_control", "citations")} for b in blocks
        ]

    assert [(m["role"], strip(m["content"])) for m in body["messages"]] == [
        (m["role"], strip(m["content"])) for m in recorded["messages"]
    ]
    assert body["system"] == recorded["system"][0]["text"]
    assert body["max_tokens"] == recorded["max_tokens"]
    assert [
        {k: v for k, v in t.items() if k != "cache_control"} for t in recorded["tools"]
    ] == body["tools"]


async def test_anthropic_thinking_round_trip() -> None:
    c = case("anthropic/nonstream_thinking")
    recorded = c.request
    user1, assistant, user2 = recorded["messages"]
    thinking, text = assistant["content"]
    entries: list[TranscriptEntry] = [
        InputEntry(content=user1["content"]),
        ReasoningEntry(
            text=thinking["thinking"],
            signature=thinking["signature"],
            provider="anthropic",
            message_id="m",
        ),
        ReasoningEntry(
            redacted=True, encrypted="opaque", provider="openai", message_id="m"
        ),  # dropped
        TextEntry(text=text["text"], message_id="m"),
        InputEntry(content=user2["content"][0]["text"]),
    ]
    request = ModelRequest(
        system="",
        messages=entries,
        settings=ModelSettings(max_tokens=16000, extra={"thinking": recorded["thinking"]}),
    )
    async with provider_for(c, replay_client(c)) as provider:
        body = provider.render_request(request)
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": thinking["thinking"], "signature": thinking["signature"]},
        {"type": "text", "text": text["text"]},
    ]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["thinking"] == recorded["thinking"]
    assert body["max_tokens"] == recorded["max_tokens"]


def test_anthropic_redacted_thinking_and_errors_map() -> None:
    from lovia.providers.anthropic import Anthropic

    p = Anthropic("claude-sonnet-4-0", api_key="k")
    entries: list[TranscriptEntry] = [
        InputEntry(content="hi"),
        ReasoningEntry(redacted=True, encrypted="EncData", provider="anthropic", message_id="m"),
        ToolCallEntry(call_id="toolu_1", name="f", arguments='{"a": 1}', message_id="m"),
        ToolResultEntry(call_id="toolu_1", name="f", content="boom", is_error=True),
        InputEntry(content="and now?"),
    ]
    body = p.render_request(ModelRequest(system="sys", messages=entries))
    assert body["messages"] == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": [
                {"type": "redacted_thinking", "data": "EncData"},
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "boom",
                    "is_error": True,
                },
                {"type": "text", "text": "and now?"},
            ],
        },
    ]
    assert body["system"] == "sys"
