"""Compatible servers' quirks, handled by the provider profile, checked on recorded traffic.

The tool loop's second request carries the assistant's ``tool_calls``. OpenAI's own form puts
``"content": null`` beside them; llama.cpp's server answers that with HTTP 500, while it,
vLLM, Ollama and LM Studio all accept ``""`` (Ollama itself answers with ``"content": ""``
beside its tool calls). lovia sends ``""`` to any server but api.openai.com.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from lovia import Agent, Runner, tool
from lovia.model import ModelProfile
from lovia.providers.base import ModelRequest
from lovia.providers.openai_chat import OpenAIChat
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry

from .wire import FAKE_KEY, NO_RETRY, case, collect, provider_for, replay_client

LOCAL = "http://127.0.0.1:8080/v1"
# a server-error answer to an assistant message whose content is null (what the tool loop
# met on llama.cpp's server)
LLAMA_500 = {"error": {"code": 500, "message": "Invalid 'content' type", "type": "server_error"}}


async def _tool_round(case_id: str, **kwargs: Any) -> dict[str, Any]:
    """The follow-up request lovia builds after the recorded tool-call answer of ``case_id``."""
    c = case(case_id)
    async with provider_for(c, replay_client(c), **kwargs) as provider:
        _, answer = await collect(provider.stream(ModelRequest(system="", messages=())))
        calls = [e for e in answer.entries if isinstance(e, ToolCallEntry)]
        assert calls, case_id
        entries: list[TranscriptEntry] = [
            InputEntry(content="go"),
            *answer.entries,
            *(ToolResultEntry(call_id=e.call_id, name=e.name, content="ok") for e in calls),
        ]
        return provider.render_request(ModelRequest(system="", messages=entries))


def _assistant(body: dict[str, Any]) -> dict[str, Any]:
    return next(m for m in body["messages"] if m["role"] == "assistant")


@pytest.mark.parametrize(
    "case_id",
    [
        "openai_compat/ollama_local_tool_call",
        "openai_compat/gpustack_tool_call",
        "openai_compat/groq_stream_tool_call",
        "openai_chat/nonstream_parallel_tool_calls",
    ],
)
async def test_compatible_server_gets_empty_content_beside_tool_calls(case_id: str) -> None:
    body = await _tool_round(case_id, base_url=LOCAL)
    message = _assistant(body)
    assert message["tool_calls"]
    assert message["content"] == ""
    assert "null" not in json.dumps(body["messages"])


@pytest.mark.parametrize(
    "case_id",
    ["openai_chat/nonstream_parallel_tool_calls", "openai_chat/stream_parallel_tool_calls"],
)
async def test_openai_keeps_its_exact_body(case_id: str) -> None:
    body = await _tool_round(case_id, base_url="https://api.openai.com/v1")
    message = _assistant(body)
    assert message["tool_calls"]
    assert message["content"] is None
    assert list(message) == ["role", "content", "tool_calls"]


async def test_profile_overrides_the_choice_either_way() -> None:
    to_local = await _tool_round(
        "openai_compat/ollama_local_tool_call",
        base_url=LOCAL,
        profile=ModelProfile(null_content_with_tool_calls=True),
    )
    assert _assistant(to_local)["content"] is None
    to_openai = await _tool_round(
        "openai_chat/nonstream_parallel_tool_calls",
        base_url="https://api.openai.com/v1",
        profile=ModelProfile(null_content_with_tool_calls=False),
    )
    assert _assistant(to_openai)["content"] == ""
    # a profile given for other reasons leaves the server-based choice alone
    custom = await _tool_round(
        "openai_compat/ollama_local_tool_call",
        base_url=LOCAL,
        profile=ModelProfile(native_json_schema=True),
    )
    assert _assistant(custom)["content"] == ""


async def test_text_beside_tool_calls_is_kept_for_every_server() -> None:
    c = case("openai_compat/groq_stream_tool_call")
    call = c.request["messages"][2]["tool_calls"][0]
    entries: list[TranscriptEntry] = [
        InputEntry(content="go"),
        *(await _first_entries_with_text(call)),
    ]
    for url, expected in ((LOCAL, "Let me check."), ("https://api.openai.com/v1", "Let me check.")):
        async with OpenAIChat("m", base_url=url, api_key=FAKE_KEY) as provider:
            body = provider.render_request(ModelRequest(system="", messages=entries))
        assert _assistant(body)["content"] == expected


async def _first_entries_with_text(call: dict[str, Any]) -> list[TranscriptEntry]:
    from lovia.transcript import TextEntry

    return [
        TextEntry(text="Let me check.", message_id="m1"),
        ToolCallEntry(
            call_id=call["id"],
            name=call["function"]["name"],
            arguments=call["function"]["arguments"],
            message_id="m1",
        ),
    ]


@tool
def object_params(window: dict[str, str]) -> str:
    """Report the window.

    Args:
        window: start and end dates.
    """
    return f"{window['start']}..{window['end']}"


async def test_tool_loop_completes_on_a_server_that_rejects_null_content() -> None:
    """A llama.cpp-like server: the recorded Ollama tool call, then a 500 for a null content."""
    first = case("openai_compat/ollama_local_tool_call")
    final = case("openai_compat/ollama_local_nonstream_text")
    seen: list[dict[str, Any]] = []

    def server(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        if any(m.get("content", "") is None for m in body["messages"]):
            return httpx.Response(500, json=LLAMA_500)
        answer = first if len(seen) == 1 else final
        return httpx.Response(
            200, content=answer.body, headers={"content-type": "application/json"}
        )

    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as client:
        model = OpenAIChat(
            "qwen3", base_url=LOCAL, http_client=client, stream=False, retry=NO_RETRY, name="ollama"
        )
        agent = Agent(name="a", model=model, tools=[object_params])
        result = await Runner.run(agent, "call it")
    assert len(seen) == 2
    assert seen[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_xkku8u2c",
        "content": "2025-01-01..2025-01-02",
    }
    assert result.output == json.loads(final.body)["choices"][0]["message"]["content"]
