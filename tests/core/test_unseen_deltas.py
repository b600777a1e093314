"""A streamed answer's chunks become events only where someone sees them.

``Runner.run``'s caller awaits only the result, so without a hook or an observer the
loop does not build an event per chunk; a stream's consumer, a hook and an observer
each still get every chunk, in order, and the result is the same either way.
"""

from __future__ import annotations

from typing import Any

import pytest

from lovia import Agent, AgentHooks, Runner, events, tool
from lovia._loop import call as call_module
from lovia.testing import ScriptedModel, call, capture_events, reply

TEXT = "a streamed answer long enough to come in several chunks of text"


@tool(concurrency_safe=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script() -> list[Any]:
    return [
        reply("adding first", tool_calls=[call("add", a=1, b=2)], reasoning="let me add"),
        TEXT,
    ]


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[type]:
    """The type of every chunk the loop turned into an event."""
    made: list[type] = []
    real = call_module._delta  # pyright: ignore[reportPrivateUsage]

    def counting(*args: Any) -> events.Event:
        event = real(*args)
        made.append(type(event))
        return event

    monkeypatch.setattr(call_module, "_delta", counting)
    return made


async def test_run_makes_no_event_of_a_chunk_nobody_sees(built: list[type]) -> None:
    result = await Runner.run(Agent(name="a", model=ScriptedModel(script()), tools=[add]))
    assert result.output == TEXT
    assert built == []


async def test_the_stream_still_gets_every_chunk(built: list[type]) -> None:
    agent = Agent(name="a", model=ScriptedModel(script()), tools=[add])
    stream = Runner.stream(agent)
    text = [e.text async for e in stream if isinstance(e, events.TextDelta)]
    assert "".join(text) == "adding first" + TEXT
    assert (await stream.result()).output == TEXT
    kinds = set(built)
    assert kinds == {events.TextDelta, events.ReasoningDelta, events.ToolCallDelta}


async def test_a_hook_on_chunks_still_gets_every_one_under_run(built: list[type]) -> None:
    hooks = AgentHooks()
    text: list[str] = []

    @hooks.on(events.TextDelta)
    def on_text(event: events.TextDelta, ctx: Any) -> None:
        text.append(event.text)

    agent = Agent(name="a", model=ScriptedModel(script()), tools=[add], hooks=hooks)
    result = await Runner.run(agent)
    assert result.output == TEXT
    assert "".join(text) == "adding first" + TEXT


async def test_an_observer_still_sees_every_chunk_under_run() -> None:
    with capture_events() as seen:
        result = await Runner.run(Agent(name="a", model=ScriptedModel(script()), tools=[add]))
    text = "".join(e.text for e in seen if isinstance(e, events.TextDelta))
    assert text == "adding first" + TEXT
    assert any(isinstance(e, events.ToolCallDelta) for e in seen)
    assert result.output == TEXT
