"""A lovia run as one Temporal activity: heartbeats on every checkpoint, cancellation.

``TemporalRuns.activity`` is what a Temporal worker registers; ``AgentRun`` below is the
workflow that calls it (workflow id = run id). Without a Temporal server, this example
runs the activity under ``temporalio.testing.ActivityEnvironment``: it prints the
heartbeats of one run (one per checkpoint, with its turn and kind), then cancels a
second run while its tool waits, and shows that the run is recorded as cancelled in
lovia's store (resumable), not left running. The model is scripted, so it runs offline.

Run: python examples/65_temporal.py
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.testing import ActivityEnvironment

from lovia import Agent, tool
from lovia.integrations.temporal import RunRequest, TemporalRuns, run_request
from lovia.testing import ScriptedModel, call

waiting = asyncio.Event()


@workflow.defn
class AgentRun:
    """The workflow side, as it runs on a Temporal cluster (not run here)."""

    @workflow.run
    async def run(self, request: RunRequest) -> str:
        return await workflow.execute_activity(
            "lovia.run",
            request,
            result_type=str,
            start_to_close_timeout=timedelta(hours=2),
            heartbeat_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(non_retryable_error_types=["UnknownAgent"]),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )


@tool
async def track(order: str) -> str:
    """Track an order."""
    return f"{order}: out for delivery"


@tool
async def wait_for_courier(order: str) -> str:
    """Wait until a courier accepts the order (slow)."""
    waiting.set()
    await asyncio.sleep(3600)
    return "accepted"


def environment(workflow_id: str) -> tuple[ActivityEnvironment, list[Any]]:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(ActivityEnvironment.default_info(), workflow_id=workflow_id)
    beats: list[Any] = []
    env.on_heartbeat = lambda *details: beats.append(details[0])
    return env, beats


async def main() -> None:
    store = os.environ.get("LOVIA_STORE", "sqlite:///.lovia/lovia.db")
    tracker = Agent(
        name="tracker",
        model=ScriptedModel([call("track", order="A1", id="c1"), "A1 is out for delivery."]),
        tools=[track],
    )
    dispatcher = Agent(
        name="dispatcher",
        model=ScriptedModel([call("wait_for_courier", order="B2", id="c1"), "never"]),
        tools=[wait_for_courier],
    )
    runs = TemporalRuns(store, agents={"tracker": tracker, "dispatcher": dispatcher})

    env, beats = environment(f"track-{os.getpid()}")
    outcome = await env.run(runs.activity, run_request("tracker", "Where is A1?"))
    print(f"activity returned {outcome!r}")
    for beat in beats:
        print(f"heartbeat: turn {beat['turn']}, checkpoint {beat['checkpoint']}")

    run_id = f"dispatch-{os.getpid()}"
    env, _ = environment(run_id)
    task = asyncio.ensure_future(env.run(runs.activity, run_request("dispatcher", "Ship B2")))
    await waiting.wait()
    env.cancel()  # what Temporal does when the workflow is cancelled
    try:
        await task
    except asyncio.CancelledError:
        print("activity cancelled")
    snap = await runs.store().load(run_id)
    assert snap is not None
    print(f"run {snap.info.status} (cancelled_by: {snap.info.extra['cancelled_by']})")
    await runs.aclose()


asyncio.run(main())
