"""AutoModel calls every tool with valid arguments and ends with a valid output;
``Agent.override(model=...)`` swaps an agent's model for the runs inside a block."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from enum import Enum
from typing import Any, Literal

import pydantic
import pytest
from pydantic import BaseModel, Field

from lovia import Agent, Runner, tool
from lovia.testing import AutoModel, ScriptedModel, ScriptError, example_value
from lovia.transcript import ToolCallEntry, ToolResultEntry

SEEN: list[tuple[str, Any]] = []


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str = Field(min_length=3)
    zip: int = Field(ge=10_000, le=99_999)


class City(BaseModel):
    name: str
    population: int = Field(gt=0)
    founded: dt.date
    tags: list[str] = Field(min_length=2)
    kind: Literal["town", "city"]
    color: Color
    mayor: Address | None
    ratio: float = Field(ge=0.5, le=0.5)


@tool
def lookup(city: str, limit: int = 3) -> str:
    """Look a city up.

    Args:
        city: The city's name.
        limit: At most this many results.
    """
    SEEN.append(("lookup", (city, limit)))
    return f"{city}: found"


def register(address: Address, colors: list[Color], when: dt.datetime) -> str:
    """Register an address (a plain function: no @tool)."""
    SEEN.append(("register", (address, colors, when)))
    return "registered"


def test_example_value_is_valid_for_rich_schemas() -> None:
    for model in (City, Address):
        value = example_value(model.model_json_schema())
        model.model_validate(value)  # raises if the value does not fit
    adapter = pydantic.TypeAdapter(dict[str, list[int]])
    adapter.validate_python(example_value(adapter.json_schema()))


async def test_calls_every_tool_then_answers_with_a_valid_output() -> None:
    SEEN.clear()
    agent = Agent(name="a", model=AutoModel(), tools=[lookup, register], output_type=City)
    result = await Runner.run(agent, "go")
    assert isinstance(result.output, City)
    assert result.output.population > 0 and len(result.output.tags) >= 2
    assert sorted(name for name, _ in SEEN) == ["lookup", "register"]
    errors = [e for e in result.entries if isinstance(e, ToolResultEntry) and e.is_error]
    assert errors == []
    assert result.turns == 2


async def test_text_output_names_the_results_and_call_tools_selects() -> None:
    SEEN.clear()
    model = AutoModel(call_tools=["lookup"])
    agent = Agent(name="a", model=model, tools=[lookup, register])
    result = await Runner.run(agent, "go")
    assert [name for name, _ in SEEN] == ["lookup"]
    assert json.loads(result.output) == {"lookup": "a: found"}
    calls = [e for e in result.entries if isinstance(e, ToolCallEntry)]
    assert [c.name for c in calls] == ["lookup"]
    assert len(model.requests) == 2


async def test_handoffs_are_not_called_unless_named() -> None:
    billing = Agent(name="billing", model=AutoModel(text="billing here"))
    triage = Agent(name="triage", model=AutoModel(text="triage here"), handoffs=[billing])
    assert (await Runner.run(triage, "hi")).output == "triage here"
    named = triage.clone(model=AutoModel(call_tools=["transfer_to_billing"]))
    result = await Runner.run(named, "hi")
    assert result.final_agent.name == "billing"
    assert result.output == "billing here"


def test_bad_call_tools_is_a_clear_error() -> None:
    with pytest.raises(ScriptError) as info:
        AutoModel(call_tools="lookup")
    assert info.value.hint and "list of tool names" in info.value.hint


async def test_override_swaps_the_model_inside_the_block_only() -> None:
    agent = Agent(name="a", model=ScriptedModel([]))
    with agent.override(model=AutoModel(text="overridden")):
        assert (await Runner.run(agent, "hi")).output == "overridden"
        other = agent.clone()  # another agent object: not overridden
        with pytest.raises(ScriptError):
            await Runner.run(other, "hi")
    with pytest.raises(ScriptError):  # the block is over: the scripted model is back
        await Runner.run(agent, "hi")


async def test_override_is_per_context_and_ends_on_error() -> None:
    agent = Agent(name="a", model=AutoModel(text="original"))

    async def overridden() -> str:
        with agent.override(model=AutoModel(text="inner")):
            await asyncio.sleep(0.01)
            return str((await Runner.run(agent, "x")).output)

    async def plain() -> str:
        await asyncio.sleep(0.005)
        return str((await Runner.run(agent, "x")).output)

    assert await asyncio.gather(overridden(), plain()) == ["inner", "original"]
    with pytest.raises(RuntimeError), agent.override(model=AutoModel(text="inner")):
        raise RuntimeError("boom")
    assert (await Runner.run(agent, "x")).output == "original"
    with agent.override(model=AutoModel(text="outer")):
        with agent.override(model=AutoModel(text="innermost")):
            assert (await Runner.run(agent, "x")).output == "innermost"
        assert (await Runner.run(agent, "x")).output == "outer"
