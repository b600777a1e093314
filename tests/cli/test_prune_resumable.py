"""Pruning never makes a resumable run run its tools again: a failed run that ran a tool
is kept by ``lovia prune`` (resubmitting it resumes without running the tool again)
unless ``--force``; a run pruned whole says "pruned" in replay, not "no run"; a run
whose records were pruned refuses to resume instead of starting over."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from lovia import Agent, Runner, UserError, tool
from lovia.errors import ProviderServerError
from lovia.stores import store
from lovia.testing import ScriptedModel, call

from .conftest import lovia

charged: list[str] = []


@tool
def charge(order: str) -> str:
    """Charge an order (a side effect that must happen once)."""
    charged.append(order)
    return f"charged {order}"


def agent(*steps: object) -> Agent:
    return Agent(name="billing", model=ScriptedModel(list(steps)), tools=[charge])


async def fail_after_the_tool(url: str) -> None:
    db = store(url)
    broken = agent(call("charge", order="A1", id="c1"), ProviderServerError("upstream 502"))
    with contextlib.suppress(ProviderServerError):
        await Runner.run(broken, "charge A1", run_id="pay-1", checkpointer=db)
    await db.aclose()


async def resubmit(url: str) -> str:
    """Resubmit the run; what the model saw first (a resume shows it the tool's result)."""
    db = store(url)
    resumed = agent("A1 is charged.")
    try:
        result = await Runner.run(resumed, "charge A1", run_id="pay-1", checkpointer=db)
    finally:
        await db.aclose()
    assert result.output == "A1 is charged."
    return str(resumed.model.requests[0])  # type: ignore[union-attr]


@pytest.fixture
def failed_run(tmp_path: Path) -> str:
    charged.clear()
    url = f"sqlite:///{tmp_path / 'lovia.db'}"
    asyncio.run(fail_after_the_tool(url))
    assert charged == ["A1"]
    return url


def test_prune_keeps_a_failed_run_that_ran_a_tool(failed_run: str) -> None:
    out = lovia("prune", "--store", failed_run, "--older-than", "0s")
    assert out.code == 0 and "pruned the 0 runs" in out.out and "--force" in out.out
    records = lovia("prune", "--store", failed_run, "--older-than", "0s", "--records-only")
    assert records.code == 0 and "pruned the records of 0 runs" in records.out
    first_view = asyncio.run(resubmit(failed_run))
    assert "charged A1" in first_view  # resumed: the model sees the tool's result
    assert charged == ["A1"]  # and the tool did not run again


def test_forced_prune_leaves_a_tombstone_replay_names(failed_run: str) -> None:
    out = lovia("prune", "--store", failed_run, "--older-than", "0s", "--force", "--json")
    assert out.code == 0 and '"pruned": 1' in out.out
    for command in ("replay", "show"):
        res = lovia(command, "pay-1", "--store", failed_run)
        assert res.code == 2
        error, hint = res.err.splitlines()
        assert error.startswith("error: run 'pay-1' was pruned at ")
        assert "(failed, ended " in error and "no run" not in error
        assert hint.startswith("hint: Its transcript, views and tool ledger were deleted")


@pytest.mark.lovia_unconsumed  # refused before any model call, on purpose
def test_a_run_whose_records_were_pruned_refuses_to_resume(failed_run: str) -> None:
    forced = lovia(
        "prune", "--store", failed_run, "--older-than", "0s", "--records-only", "--force"
    )
    assert forced.code == 0 and "pruned the records of 1 run " in forced.out
    with pytest.raises(UserError, match="cannot resume: its checkpoint records") as info:
        asyncio.run(resubmit(failed_run))
    assert info.value.hint is not None and "new run_id" in info.value.hint
    assert charged == ["A1"]
