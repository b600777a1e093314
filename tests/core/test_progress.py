"""A run's progress is what its records say: what a resumed run folds back from the store
equals what the running worker held, at every point where a tool could be killed."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lovia import Agent, Runner, tool
from lovia._loop.checkpoint import restore
from lovia._loop.state import Progress, current_run
from lovia.stores import MemoryStore
from lovia.testing import ScriptedModel, call, reply
from lovia.usage import Usage

pytestmark = pytest.mark.asyncio

DB = MemoryStore()
SEEN: list[tuple[Progress, Progress]] = []
"""(the worker's progress, what the store folds back) while each tool ran."""


@tool
async def look(n: int) -> int:
    """A tool that is not idempotent: it starts only once its ledger entry is stored."""
    state = current_run.get()
    assert state is not None
    snapshot = await DB.load(state.run_id)
    assert snapshot is not None
    SEEN.append((copy.deepcopy(state.progress), restore(snapshot)))
    return n


@pytest.fixture(autouse=True)
def _fresh() -> None:
    SEEN.clear()


def _steps() -> list[Any]:
    return [
        reply(tool_calls=[call("look", n=1)], usage=Usage(input_tokens=10, output_tokens=2)),
        reply(tool_calls=[call("look", n=2)], usage=Usage(input_tokens=25, output_tokens=3)),
        reply("done", usage=Usage(input_tokens=40, output_tokens=1)),
    ]


async def test_what_a_resume_folds_back_is_what_the_worker_held_while_a_tool_ran() -> None:
    agent = Agent(name="a", model=ScriptedModel(_steps()), tools=[look])
    result = await Runner.run(agent, "go", checkpointer=DB, run_id="progress-1")
    assert result.output == "done"
    assert len(SEEN) == 2
    for live, folded in SEEN:
        assert folded == live
    first, second = (live for live, _ in SEEN)
    assert (first.turn, second.turn) == (1, 2)
    assert second.usage.input_tokens == 35 and second.usage.output_tokens == 5
    assert second.last_input_tokens == 25
    assert second.agent == "a"
    assert list(second.ledger.values()) == ["completed", "started"]  # this call: started


async def test_a_finished_run_folds_back_to_its_final_turn_usage_and_ledger() -> None:
    agent = Agent(name="a", model=ScriptedModel(_steps()), tools=[look])
    result = await Runner.run(agent, "go", checkpointer=DB, run_id="progress-2")
    snapshot = await DB.load("progress-2")
    assert snapshot is not None
    folded = restore(snapshot)
    assert folded.turn == result.turns == 3
    assert folded.usage.input_tokens == result.usage.input_tokens
    assert folded.usage.output_tokens == result.usage.output_tokens
    assert sorted(folded.ledger.values()) == ["completed", "completed"]
    assert folded.children == {}
