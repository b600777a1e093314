"""Resume keeps the system prompt the run recorded (seed: instructions are rendered once
per run). A counter-based instruction and plugin instructions would otherwise render
differently on resume, so the resumed views would disagree with the transcript."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent, PluginInstance, RunContext, Runner, tool
from lovia.errors import ProviderServerError
from lovia.replay import verify_run
from lovia.stores import Store, store
from lovia.testing import ScriptedModel, call
from lovia.transcript import SystemEntry

counter = itertools.count(1)
setups = itertools.count(1)


def render_count(ctx: RunContext[Any]) -> str:
    return f"instruction rendered {next(counter)} time(s)"


class Stamped:
    """A plugin whose instructions change every time it is set up."""

    name = "stamped"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        return PluginInstance(instructions=f"plugin set up {next(setups)} time(s)")


@tool
def look(item: str) -> str:
    """Look an item up."""
    return f"{item}: found"


def _agents(model: Any, target_model: Any) -> Agent[Any, Any]:
    billing = Agent(name="billing", instructions="You bill.", model=target_model)
    billing.instruction(render_count)
    support = Agent(
        name="support",
        instructions="You help.",
        model=model,
        tools=[look],
        plugins=[Stamped()],
        handoffs=[billing],
    )
    support.instruction(render_count)
    return support


def _systems(entries: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for entry in entries:
        if isinstance(entry, SystemEntry):
            out.setdefault(entry.agent or "", []).append(entry.content)
    return out


@pytest.fixture
async def db(tmp_path: Path) -> Any:
    opened = store(f"sqlite:///{tmp_path / 'lovia.db'}")
    yield opened
    await opened.aclose()


async def _crash(db: Store, first: list[Any]) -> None:
    """Run until the model API fails: what an interrupted worker leaves (resumable)."""
    global counter, setups
    counter, setups = itertools.count(1), itertools.count(1)
    model = ScriptedModel([*first, ProviderServerError("upstream 502", status=502)])
    with pytest.raises(ProviderServerError):
        await Runner.run(_agents(model, model), "help", run_id="r1", checkpointer=db)


async def test_resume_sends_the_recorded_system_prompt(db: Store) -> None:
    await _crash(db, [call("look", item="a"), call("look", item="b")])
    fresh = ScriptedModel([call("look", item="c"), "done"])
    result = await Runner.run(_agents(fresh, fresh), None, run_id="r1", checkpointer=db)
    assert result.output == "done"
    (recorded,) = _systems(result.entries)["support"]
    assert "instruction rendered 1 time(s)" in recorded
    assert "plugin set up 1 time(s)" in recorded
    assert [r.system for r in fresh.requests] == [recorded, recorded]
    report = await verify_run("r1", db)
    assert report.ok and len(report.views) == 5


async def test_handoff_after_resume_records_the_targets_new_prompt(db: Store) -> None:
    await _crash(db, [call("look", item="a")])
    support_model = ScriptedModel([call("transfer_to_billing")])
    billing_model = ScriptedModel(["billed"])
    result = await Runner.run(
        _agents(support_model, billing_model), None, run_id="r1", checkpointer=db
    )
    systems = _systems(result.entries)
    assert support_model.requests[0].system == systems["support"][0]
    (billing,) = systems["billing"]  # first activated after the resume: rendered, recorded
    assert billing_model.requests[0].system == billing
    assert (await verify_run("r1", db)).ok


async def test_resume_after_a_handoff_keeps_the_targets_recorded_prompt(db: Store) -> None:
    await _crash(db, [call("transfer_to_billing")])
    billing_model = ScriptedModel(["billed"])
    result = await Runner.run(
        _agents(ScriptedModel([]), billing_model), None, run_id="r1", checkpointer=db
    )
    (billing,) = _systems(result.entries)["billing"]
    assert billing_model.requests[0].system == billing
    assert (await verify_run("r1", db)).ok
