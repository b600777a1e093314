"""``lovia replay --format request`` prints the body the adapter actually sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia import Agent, Runner, replay
from lovia.providers.base import ModelSettings
from lovia.stores import store

from .conftest import Reminders, lookup_order, lovia

WIRE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "wire"


def _fixture(provider: str) -> dict[str, Any]:
    return json.loads((WIRE / provider / "nonstream_text" / "response.body").read_text())


def _openai_tool_call() -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_A1",
                            "type": "function",
                            "function": {"name": "lookup_order", "arguments": '{"order_id": "A1"}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39},
    }


def _anthropic_tool_call() -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-0",
        "content": [
            {"type": "text", "text": "Let me look."},
            {
                "type": "tool_use",
                "id": "toolu_A1",
                "name": "lookup_order",
                "input": {"order_id": "A1"},
            },
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 30, "output_tokens": 9},
    }


def _provider(kind: str, sent: list[dict[str, Any]]) -> Any:
    replies = (
        [_openai_tool_call(), _fixture("openai_chat")]
        if kind == "openai"
        else [_anthropic_tool_call(), _fixture("anthropic")]
    )

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=replies[len(sent) - 1])

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    if kind == "openai":
        from lovia.providers.openai_chat import OpenAIChat

        return OpenAIChat(
            "gpt-4o", api_key="sk-test-key-123456789", http_client=client, stream=False
        )
    from lovia.providers.anthropic import Anthropic

    return Anthropic(
        "claude-sonnet-4-0", api_key="sk-ant-test-123456789", http_client=client, stream=False
    )


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_format_request_equals_sent_body(kind: str, tmp_path: Path) -> None:
    sent: list[dict[str, Any]] = []
    url = f"sqlite:///{tmp_path / 'lovia.db'}"
    db = store(url)
    agent = Agent(
        name="support",
        instructions="You help with orders.",
        tools=[lookup_order],
        plugins=[Reminders()],
        model=_provider(kind, sent),
        model_settings=ModelSettings(temperature=0.2, max_tokens=300),
    )
    result = await Runner.run(agent, "where is A1?", checkpointer=db, session=db, session_id="s")
    await db.aclose()
    assert len(sent) == 2 and result.turns == 2
    for turn, body in enumerate(sent, 1):
        res = lovia(
            "replay",
            str(result.run_id),
            "--turn",
            str(turn),
            "--format",
            "request",
            "--no-stream",
            "--store",
            url,
        )
        assert res.code == 0, res.err
        assert json.loads(res.out) == body
        assert "sk-" not in res.out
    views = await replay.views(str(result.run_id), url)
    assert [replay.render_request(v, agent.model) for v in views] == sent  # type: ignore[arg-type]
    res = lovia("replay", str(result.run_id), "--format", "request", "--no-stream", "--store", url)
    assert [v["body"] for v in json.loads(res.out)] == sent
