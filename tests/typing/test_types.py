# pyright: strict
"""Types that follow through, checked by pyright (strict) in CI: ``make typecheck``.

Each ``assert_type`` fails the type check when the inferred type differs. The functions
also run under pytest, so the file stays importable and its examples stay true.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_type

from pydantic import BaseModel

from lovia import Agent, Handoff, RunContext, Runner, RunResult, tool
from lovia.testing import AutoModel


class City(BaseModel):
    name: str
    population: int


@dataclass
class Shop:
    name: str


def stock(ctx: RunContext[Shop], item: str) -> str:
    """How many of ``item`` the shop has."""
    assert_type(ctx.deps, Shop)
    return f"{ctx.deps.name}: 3 {item}"


@tool(concurrency_safe=True)
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def test_output_and_deps_types_are_inferred() -> None:
    city_agent = Agent(name="geo", output_type=City, deps_type=Shop, model=AutoModel())
    assert_type(city_agent, Agent[Shop, City])
    text_agent = Agent(name="chat", model=AutoModel())
    assert_type(text_agent, Agent[None, str])
    union_agent = Agent(name="u", output_type=int, model=AutoModel())
    assert_type(union_agent, Agent[None, int])
    clone = city_agent.clone(name="geo2")
    assert_type(clone, Agent[Shop, City])


def test_results_carry_the_output_type() -> None:
    agent = Agent(
        name="geo",
        output_type=City,
        deps_type=Shop,
        tools=[stock, weather],
        model=AutoModel(),
    )
    result = Runner.run_sync(agent, "largest city?", deps=Shop("corner"))
    assert_type(result, RunResult[City])
    assert_type(result.output, City)
    assert isinstance(result.output, City)
    text = Runner.run_sync(Agent(name="chat", model=AutoModel(text="hi")), "hello")
    assert_type(text.output, str)
    assert text.output == "hi"


async def test_streams_carry_the_output_type() -> None:
    agent = Agent(name="geo", output_type=City, model=AutoModel())
    stream = Runner.stream(agent, "largest city?")
    async for _ in stream:
        pass
    result = await stream.result()
    assert_type(result.output, City)
    assert result.output.population >= 0


def test_handoffs_accept_agents_of_any_types_and_lazy_references() -> None:
    geo = Agent(name="geo", output_type=City, model=AutoModel())
    triage = Agent(
        name="triage",
        model=AutoModel(),
        handoffs=[geo, Handoff(agent=geo, tool_name="geo2"), lambda: Handoff(agent=geo)],
    )
    assert len(triage.handoff_targets()) == 3


def test_the_bundled_stores_type_as_each_store_protocol() -> None:
    from lovia.stores import (
        Checkpointer,
        Checkpoints,
        Leases,
        MemoryStore,
        ReadOnlyStore,
        RunQueries,
        Store,
    )

    db = MemoryStore()
    writes: Checkpoints = db
    leases: Leases = db
    queries: RunQueries = db
    reader: ReadOnlyStore = db
    union: Checkpointer = db
    store: Store = db
    assert {id(x) for x in (writes, leases, queries, reader, union, store)} == {id(db)}
