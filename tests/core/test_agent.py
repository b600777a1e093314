from __future__ import annotations

import dataclasses

import pytest

from lovia import Agent, RunContext, Runner, UserError, tool
from lovia.testing import ScriptedModel


def test_agent_is_frozen_and_keyword_only() -> None:
    agent = Agent(name="a", instructions="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        agent.name = "b"  # type: ignore[misc]
    with pytest.raises(UserError, match="keyword"):
        Agent("a")  # type: ignore[misc]


def test_unknown_option_is_an_error_with_a_suggestion() -> None:
    with pytest.raises(UserError) as info:
        Agent(name="a", instruction="typo")  # type: ignore[call-arg]
    assert "instruction" in str(info.value)
    assert info.value.hint and "instructions" in info.value.hint


def test_empty_name_and_non_tools_are_rejected() -> None:
    with pytest.raises(UserError):
        Agent(name=" ")
    with pytest.raises(UserError, match="not a tool"):
        Agent(name="a", tools=[1])  # type: ignore[list-item]
    with pytest.raises(UserError, match="invalid tool name '<lambda>'"):
        Agent(name="a", tools=[lambda: 1])  # a plain function is a tool: this one has no name


def test_clone_derives_without_sharing_mutable_state() -> None:
    agent = Agent(name="a", instructions="x")

    @agent.instruction
    def frag(ctx: RunContext[None]) -> str:
        return "dynamic"

    clone = agent.clone(name="b")
    assert clone.name == "b" and clone.instructions == "x"
    assert clone.instruction_fragments == (frag,)

    @clone.instruction
    def only_clone(ctx: RunContext[None]) -> None:
        return None

    assert agent.instruction_fragments == (frag,)


async def test_instruction_order_sync_async_and_none() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(name="a", instructions="static", model=model)

    @agent.instruction
    def one(ctx: RunContext[None]) -> str:
        return f"run {ctx.run_id[:0]}one"

    @agent.instruction
    async def two(ctx: RunContext[None]) -> str | None:
        return None

    @agent.instruction
    async def three(ctx: RunContext[None]) -> str:
        return "three"

    await Runner.run(agent, "hi", extra_instructions="extra")
    assert model.requests[0].system == "static\n\nrun one\n\nthree\n\nextra"


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_tool_name_clash_names_both_sources() -> None:
    @tool(name="same")
    def a() -> str:
        return "a"

    @tool(name="same")
    def b() -> str:
        return "b"

    agent = Agent(name="x", model=ScriptedModel(["ok"]), tools=[a, b])
    with pytest.raises(UserError, match="defined twice"):
        await Runner.run(agent, "hi")


async def test_missing_model_is_a_clear_error() -> None:
    with pytest.raises(UserError) as info:
        await Runner.run(Agent(name="a"), "hi")
    assert info.value.hint and "model=" in info.value.hint
