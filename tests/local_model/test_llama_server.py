"""lovia against a real llama.cpp server (Gemma 3 270M): the paths a newcomer takes first.

Answers are the model's own (greedy decoding, so repeatable on one build), so the tests
check what lovia guarantees around them: the wire shape the server accepts, usage, tool
results going back, output validation with repair, and resume after SIGKILL.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from lovia import Agent, ModelSettings, OpenAIChat, OutputValidationError, Runner, events
from lovia.model import ModelRequest, ModelResponse, ToolSpec
from lovia.stores import store
from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry

from .conftest import MODEL, LlamaServer

pytestmark = pytest.mark.timeout(600)
GREEDY = ModelSettings(temperature=0, max_tokens=48)


def provider(llama: LlamaServer, *, stream: bool, client: Any = None) -> OpenAIChat:
    return OpenAIChat(
        MODEL, base_url=llama.base_url, stream=stream, name="llama.cpp", http_client=client
    )


async def test_plain_run(llama: LlamaServer) -> None:
    agent = Agent(name="local", model=provider(llama, stream=False), model_settings=GREEDY)
    result = await Runner.run(agent, "What is the capital of France? One word.")
    assert isinstance(result.output, str)
    assert result.usage.input_tokens > 5  # a non-streamed answer carries its usage
    assert not result.usage.missing
    assert result.finish_reason in ("stop", "length")
    assert result.turns == 1


async def test_streamed_run(llama: LlamaServer) -> None:
    agent = Agent(name="local", model=provider(llama, stream=True), model_settings=GREEDY)
    handle = Runner.stream(agent, "Say hello in French.")
    deltas: list[str] = []
    completed: list[events.ModelCallCompleted] = []
    async for event in handle:
        if isinstance(event, events.TextDelta):
            deltas.append(event.text)
        elif isinstance(event, events.ModelCallCompleted):
            completed.append(event)
    result = await handle.result()
    assert "".join(deltas) == result.output
    assert len(completed) == 1
    usage = result.usage
    if usage.missing:  # the server sent no usage chunk: unknown, never a count of 0
        assert usage.input_tokens == 0 and usage.output_tokens == 0
    else:
        assert usage.input_tokens > 0 and usage.output_tokens > 0


CITY_TOOL = ToolSpec(
    name="lookup_city",
    description="Look a city up by name.",
    parameters={
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
)


async def test_forced_tool_call_result_goes_back_and_is_accepted(llama: LlamaServer) -> None:
    sent: list[dict[str, Any]] = []

    async def record(request: httpx.Request) -> None:
        sent.append(json.loads(request.content))

    async with httpx.AsyncClient(event_hooks={"request": [record]}, timeout=120) as client:
        model = provider(llama, stream=False, client=client)
        forced = ModelSettings(temperature=0, max_tokens=64, tool_choice="lookup_city")
        first = await _call(model, [InputEntry(content="Tell me about Paris.")], forced)
        calls = [e for e in first.entries if isinstance(e, ToolCallEntry)]
        assert [c.name for c in calls] == ["lookup_city"]
        assert "name" in json.loads(calls[0].arguments)
        entries = [
            InputEntry(content="Tell me about Paris."),
            *first.entries,
            ToolResultEntry(call_id=calls[0].call_id, name="lookup_city", content="Paris: 2.1M"),
        ]
        second = await _call(model, entries, GREEDY)
    assert not any(isinstance(e, ToolCallEntry) for e in second.entries)  # tool_choice unset
    assert second.finish_reason in ("stop", "length")
    assistant = next(m for m in sent[1]["messages"] if m["role"] == "assistant")
    assert assistant["content"] == "" and assistant["tool_calls"]
    assert sent[1]["messages"][-1]["role"] == "tool"


async def _call(model: OpenAIChat, entries: list[Any], settings: ModelSettings) -> ModelResponse:
    request = ModelRequest(system="", messages=entries, tools=(CITY_TOOL,), settings=settings)
    final = None
    async for item in model.stream(request):
        final = item
    assert isinstance(final, ModelResponse)
    return final


class Capital(BaseModel):
    country: str
    capital: str


async def test_prompted_structured_output_with_repair(llama: LlamaServer) -> None:
    agent = Agent(
        name="geo",
        model=provider(llama, stream=False),
        model_settings=ModelSettings(temperature=0, max_tokens=40),
        output_type=Capital,
        output_repairs=1,
    )
    handle = Runner.stream(agent, 'Give the capital of Japan as JSON: {"country", "capital"}.')
    calls = 0
    async for event in handle:
        calls += isinstance(event, events.ModelCallCompleted)
    outcome: Capital | OutputValidationError
    try:
        outcome = (await handle.result()).output
    except OutputValidationError as exc:
        outcome = exc
    if isinstance(outcome, OutputValidationError):
        # a 270M model may never produce the object: then the repair turn was spent,
        # and the error keeps the last answer
        assert calls == 2 and isinstance(outcome.raw, str)
    else:
        assert isinstance(outcome, Capital)
        assert 1 <= calls <= 2  # the answer, and at most one repair turn


async def test_resume_after_sigkill(llama: LlamaServer, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    worker = Path(__file__).with_name("worker.py")
    died = subprocess.run(
        [sys.executable, str(worker), llama.base_url, url, "local-1"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert died.returncode == -9, died.stderr[-2000:]
    from .worker import PROMPT, agent

    result = await Runner.run(
        agent(llama.base_url, False), PROMPT, run_id="local-1", checkpointer=store(url)
    )
    assert result.run_id == "local-1" and result.output.strip()
    assert sum(isinstance(e, InputEntry) for e in result.entries) == 1
    snapshot = await store(url).load("local-1")
    assert snapshot is not None and snapshot.info.status == "completed"
