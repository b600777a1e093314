"""A lovia run as one Temporal activity, under ``temporalio.testing.ActivityEnvironment``
(no Temporal server): it heartbeats on every checkpoint and on a timer while a long
model call writes none, a cancelled activity ends the run *cancelled* in the store (not
``running``), the workflow's id is the run id, and a request naming an unknown agent
fails for good (no retry can fix it)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from lovia import Agent, tool
from lovia.integrations.temporal import RunRequest, TemporalRuns, run_request
from lovia.stores import store
from lovia.testing import ScriptedModel, call, reply

pytestmark = pytest.mark.lovia_unconsumed  # some runs are cancelled before their script ends

started = asyncio.Event()


@tool
async def lookup(order: str) -> str:
    """Look an order up."""
    return f"{order}: shipped"


@tool
async def wait_for_bank(ref: str) -> str:
    """Wait for the bank (slow)."""
    started.set()
    await asyncio.sleep(60)
    return "paid"


def _env(info: dict[str, Any] | None = None) -> tuple[ActivityEnvironment, list[Any]]:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(ActivityEnvironment.default_info(), **(info or {}))
    beats: list[Any] = []
    env.on_heartbeat = lambda *details: beats.append(details[0] if details else None)
    return env, beats


def _runs(tmp_path: Path, agent: Agent[Any, Any], **options: Any) -> TemporalRuns:
    return TemporalRuns(f"sqlite:///{tmp_path / 'runs.db'}", agents={"a": agent}, **options)


async def test_the_run_heartbeats_on_every_checkpoint_and_the_workflow_id_is_the_run_id(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([call("lookup", order="A1", id="c1"), "A1 is shipped"])
    runs = _runs(tmp_path, Agent(name="a", model=model, tools=[lookup]))
    env, beats = _env({"workflow_id": "wf-42"})
    outcome = await env.run(runs.activity, run_request("a", "where is A1?"))
    assert outcome == "completed"
    assert beats == [
        {"run_id": "wf-42", "turn": 0, "checkpoint": "start"},
        {"run_id": "wf-42", "turn": 1, "checkpoint": "ledger"},
        {"run_id": "wf-42", "turn": 1, "checkpoint": "tool_result"},
        {"run_id": "wf-42", "turn": 2, "checkpoint": "complete"},  # with the final answer
    ]
    snap = await runs.store().load("wf-42")
    assert snap is not None and (snap.result or {}).get("output") == "A1 is shipped"
    await runs.aclose()


async def test_a_long_model_call_still_heartbeats_on_the_timer(tmp_path: Path) -> None:
    model = ScriptedModel([reply("thought hard", delay=1.0)])
    runs = _runs(tmp_path, Agent(name="a", model=model), heartbeat_s=60.0)
    env, beats = _env({"workflow_id": "wf-slow", "heartbeat_timeout": timedelta(seconds=0.6)})
    assert await env.run(runs.activity, run_request("a", "think")) == "completed"
    timer = [b for b in beats if b == {"run_id": "wf-slow", "alive": True}]
    assert len(timer) >= 3  # every 0.2 s (a third of the timeout) during a 1 s call
    assert beats[-1] == {"run_id": "wf-slow", "turn": 1, "checkpoint": "complete"}
    await runs.aclose()


async def test_cancelling_the_activity_ends_the_run_cancelled(tmp_path: Path) -> None:
    started.clear()
    model = ScriptedModel([call("wait_for_bank", ref="r1", id="c1"), "never"])
    runs = _runs(tmp_path, Agent(name="a", model=model, tools=[wait_for_bank]))
    env, _ = _env({"workflow_id": "wf-cancel"})
    task = asyncio.ensure_future(env.run(runs.activity, run_request("a", "pay")))
    await asyncio.wait_for(started.wait(), 10)
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    snap = await store(runs.store_url).load("wf-cancel")
    assert snap is not None
    assert (snap.info.status, snap.info.extra["cancelled_by"]) == (
        "cancelled",
        "host: CancelledError",
    )
    assert [e for e in snap.entries() if e.type == "tool_result"] == []
    await runs.aclose()


async def test_an_unknown_agent_fails_without_retry(tmp_path: Path) -> None:
    runs = _runs(tmp_path, Agent(name="a", model=ScriptedModel([])))
    env, _ = _env()
    with pytest.raises(ApplicationError) as info:
        await env.run(runs.activity, RunRequest(agent="stranger", input="x", run_id="r9"))
    assert (info.value.type, info.value.non_retryable) == ("UnknownAgent", True)
    assert "no agent named 'stranger'" in info.value.message


async def test_the_activity_is_registered_under_its_name(tmp_path: Path) -> None:
    runs = _runs(tmp_path, Agent(name="a", model=ScriptedModel([])), name="billing.run")
    defn = activity._Definition.from_callable(runs.activity)  # type: ignore[attr-defined]
    assert defn is not None and defn.name == "billing.run"
