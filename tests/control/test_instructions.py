"""Dynamic instructions: the system prompt is assembled in a fixed order — static
instructions, @agent.instruction fragments, extra_instructions, plugin instructions,
then the structured-output contract."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from lovia import Agent, ModelProfile, PluginInstance, RunContext
from lovia.testing import ScriptedModel

from .helpers import Scenario, both


class Answer(BaseModel):
    value: int


class Notes:
    name = "notes"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        return PluginInstance(instructions="PLUGIN: keep notes.")


def build(native: bool = False) -> Scenario:
    model = ScriptedModel(['{"value": 1}'], profile=ModelProfile(native_json_schema=native))
    agent = Agent(
        name="a",
        instructions="STATIC: be helpful.",
        model=model,
        output_type=Answer,
        plugins=[Notes()],
    )

    @agent.instruction
    def user_name(ctx: RunContext[dict[str, str]]) -> str:
        return f"SYNC: the user is {ctx.deps['user']}."

    @agent.instruction
    def nothing(ctx: RunContext[Any]) -> None:
        return None

    @agent.instruction
    async def today(ctx: RunContext[Any]) -> str:
        return f"ASYNC: run {ctx.agent.name}."

    return Scenario(
        agent,
        "hi",
        {"deps": {"user": "Ann"}, "extra_instructions": "EXTRA: answer in French."},
        extra=model,
    )


async def test_system_prompt_order_with_prompted_contract() -> None:
    a, b = await both(build)
    for out in (a, b):
        system = out.scenario.extra.requests[0].system
        markers = [
            "STATIC:",
            "SYNC: the user is Ann.",
            "ASYNC: run a.",
            "EXTRA:",
            "PLUGIN:",
            "JSON Schema",
        ]
        positions = [system.index(m) for m in markers]
        assert positions == sorted(positions), system
        assert "None" not in system
        assert system.split("\n\n")[:5] == [
            "STATIC: be helpful.",
            "SYNC: the user is Ann.",
            "ASYNC: run a.",
            "EXTRA: answer in French.",
            "PLUGIN: keep notes.",
        ]
        # the rendered prompt is the run's first (system) entry
        assert out.result is not None
        assert out.result.entries[0].type == "system"
        assert out.result.entries[0].content == system  # type: ignore[union-attr]


async def test_native_schema_leaves_the_contract_out() -> None:
    a, _ = await both(lambda: build(native=True))
    request = a.scenario.extra.requests[0]
    assert request.system.endswith("PLUGIN: keep notes.")
    assert request.output_schema is not None


async def test_fragments_are_rendered_per_run() -> None:
    counter = {"n": 0}
    model = ScriptedModel(["one", "two"])
    agent = Agent(name="a", model=model)

    @agent.instruction
    def nth(ctx: RunContext[Any]) -> str:
        counter["n"] += 1
        return f"run number {counter['n']}"

    from lovia import Runner

    await Runner.run(agent, "x")
    await Runner.run(agent, "y")
    assert [r.system for r in model.requests] == ["run number 1", "run number 2"]
    # clone carries the fragments over
    clone = agent.clone(model=ScriptedModel(["three"]))
    await Runner.run(clone, "z")
    assert clone.model.requests[0].system == "run number 3"  # type: ignore[union-attr]
