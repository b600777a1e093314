"""The run-time side of typed agents: plain functions as tools, deps_type checked,
handoff cycles through lazy references (no mutation of a frozen Agent)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from lovia import Agent, Handoff, RunContext, Runner, UserError
from lovia.testing import ScriptedModel, call


@dataclass
class Shop:
    name: str


def stock(ctx: RunContext[Shop], item: str, count: int = 1) -> str:
    """Tell how many of an item the shop has.

    Args:
        item: What to look for.
        count: How many are wanted.
    """
    return f"{ctx.deps.name} has {count} {item}"


async def test_plain_function_is_a_tool_with_schema_from_signature_and_docstring() -> None:
    model = ScriptedModel([call("stock", item="pens", count=2), "ok"])
    agent = Agent(name="a", model=model, tools=[stock], deps_type=Shop)
    result = await Runner.run(agent, "go", deps=Shop("Corner"))
    (spec,) = model.requests[0].tools
    assert spec.name == "stock"
    assert spec.description.startswith("Tell how many of an item the shop has.")
    assert spec.parameters["required"] == ["item"]
    assert spec.parameters["properties"]["item"]["description"] == "What to look for."
    assert "ctx" not in spec.parameters["properties"]
    assert model.requests[1].messages[-1].content == "Corner has 2 pens"
    assert result.output == "ok"


@pytest.mark.parametrize("bad", [42, "not a function", Shop])
def test_non_callables_and_classes_are_refused_as_tools(bad: object) -> None:
    with pytest.raises(UserError) as info:
        Agent(name="a", tools=[bad])  # pyright: ignore[reportArgumentType]
    assert info.value.hint and "tools=[...]" in info.value.hint


async def test_deps_of_the_wrong_type_are_a_clear_error() -> None:
    agent = Agent(name="a", model=ScriptedModel([]), deps_type=Shop)
    with pytest.raises(UserError) as info:
        await Runner.run(agent, "go", deps="Corner")
    assert "expects deps of type Shop, got str" in info.value.message
    assert info.value.hint and "deps=Shop(...)" in info.value.hint


async def test_handoff_cycle_through_lazy_references() -> None:
    model = ScriptedModel([call("transfer_to_billing"), call("back"), "done"])
    billing = Agent(
        name="billing",
        model=model,
        handoffs=[lambda: Handoff(agent=triage, tool_name="back")],
    )
    triage = Agent(name="triage", model=model, handoffs=[lambda: billing])
    result = await Runner.run(triage, "help")
    assert result.final_agent is triage
    assert [t.name for t in model.requests[1].tools] == ["back"]
    assert callable(billing.handoffs[0])  # the lazy reference is kept as given


async def test_a_lazy_reference_returning_no_agent_is_a_clear_error() -> None:
    triage = Agent(name="triage", model=ScriptedModel([]), handoffs=[lambda: None])
    with pytest.raises(UserError) as info:
        await Runner.run(triage, "help")
    assert "returned None, not an Agent" in info.value.message


def test_a_handoff_that_is_not_an_agent_is_refused() -> None:
    with pytest.raises(UserError) as info:
        Agent(name="a", handoffs=["billing"])  # pyright: ignore[reportArgumentType]
    assert "is not an agent" in info.value.message


def test_the_type_checkers_view_of_agent_init_matches_the_fields() -> None:
    """``Agent.__init__`` as a type checker sees it lists exactly the dataclass fields."""
    import ast
    import inspect
    from dataclasses import fields

    import lovia.agent

    tree = ast.parse(inspect.getsource(lovia.agent))
    agent_class = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Agent")
    init = next(
        f
        for block in agent_class.body
        if isinstance(block, ast.If)
        for f in block.body
        if isinstance(f, ast.FunctionDef) and f.name == "__init__"
    )
    declared = [a.arg for a in init.args.kwonlyargs]
    assert declared == [f.name for f in fields(Agent) if f.name != "_fragments"]
