"""``DBOSRuns`` in one process, on real DBOS and PostgreSQL: a run id starts once, a
cancelled workflow's run ends *cancelled* in lovia's store (not ``running``, not
``failed``) and resumes from its checkpoint, and bad input is refused before DBOS
records anything."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from engine_pg import PG_URL, drop_schemas, pg_schema

pytest.importorskip("dbos")

from dbos import DBOS, DBOSConfig

from lovia import Agent, UserError, tool
from lovia.integrations.dbos import DBOSRuns, RunAlreadyStarted
from lovia.testing import FunctionModel, call
from lovia.workers.registry import UnknownAgent

__all__ = ["pg_schema"]

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(120)]

waits: list[str] = []


@tool
async def wait_for_bank(ref: str) -> str:
    """Wait for the bank's answer (slow; not idempotent)."""
    waits.append(ref)
    if ref == "slow":
        await asyncio.sleep(60)
    return f"bank answered {ref}"


def decide(request: Any, info: Any) -> Any:
    results = [m for m in request.messages if m.type == "tool_result"]
    if not results:
        text = str(request.messages[-1].content)
        return [call("wait_for_bank", ref=text, id="c1")]
    return "done: " + results[0].content


AGENT = Agent(name="banker", model=FunctionModel(decide), tools=[wait_for_bank])


_SCHEMA = f"lovia_engines_runs_{secrets.token_hex(4)}"
"""lovia's tables for this module's runs (one DBOSRuns per process and workflow name)."""
RUNS = DBOSRuns(f"{PG_URL}?schema={_SCHEMA}", agents={"banker": AGENT}, name="test.run")
PATIENT = DBOSRuns(
    RUNS.store_url,
    agents={"banker": AGENT},
    name="test.patient",
    lease_retries=20,
    lease_retry_s=0.25,
)
"""Retries its step while another worker's lease is live."""


@pytest.fixture(scope="module", autouse=True)
def _drop_schema() -> Iterator[None]:
    yield
    asyncio.run(drop_schemas(_SCHEMA))


@pytest.fixture
async def runs(pg_schema: str) -> AsyncIterator[DBOSRuns]:
    config = DBOSConfig(
        name="lovia-engine-api",
        system_database_url=PG_URL,
        dbos_system_schema=f"{pg_schema}_dbos",
        executor_id=f"api-{secrets.token_hex(3)}",
        application_version="test",
        log_level="ERROR",
    )
    DBOS(config=config)
    await asyncio.to_thread(DBOS.launch)
    waits.clear()  # what the tool saw counts per test, in any order
    try:
        yield RUNS
    finally:
        await RUNS.aclose()
        await PATIENT.aclose()
        await asyncio.to_thread(DBOS.destroy)


async def test_a_run_id_starts_once_and_its_result_comes_from_the_store(runs: DBOSRuns) -> None:
    run_id = await runs.start("banker", "fast", run_id="api-1")
    with pytest.raises(RunAlreadyStarted) as info:
        await runs.start("banker", "fast", run_id="api-1")
    assert info.value.hint is not None and "runs.result(run_id)" in info.value.hint
    snap = await runs.result(run_id, timeout_s=60)
    assert (snap.info.status, (snap.result or {}).get("output")) == (
        "completed",
        "done: bank answered fast",
    )
    status = await DBOS.get_workflow_status_async(run_id)
    assert status is not None and (status.status, status.output) == ("SUCCESS", "completed")
    assert waits.count("fast") == 1


async def test_cancel_ends_the_run_cancelled_and_resume_continues_it(runs: DBOSRuns) -> None:
    run_id = await runs.start("banker", "slow", run_id="api-2")
    for _ in range(600):  # until the tool is running
        if "slow" in waits:
            break
        await asyncio.sleep(0.05)
    await runs.cancel(run_id)
    snap = await runs.result(run_id, timeout_s=60)
    assert (snap.info.status, snap.info.extra["cancelled_by"]) == (
        "cancelled",
        "host: CancelledError",
    )
    assert [e for e in snap.entries() if e.type == "tool_result"] == []
    status = await DBOS.get_workflow_status_async(run_id)
    assert status is not None and status.status == "CANCELLED"
    await runs.resume(run_id)  # the cut call is not run again: its outcome is unknown
    snap = await runs.result(run_id, timeout_s=60)
    output = (snap.result or {}).get("output", "")
    assert snap.info.status == "completed" and output.startswith("done: The outcome of this")
    assert waits.count("slow") == 1


async def test_bad_input_is_refused_before_dbos_records_a_workflow(runs: DBOSRuns) -> None:
    with pytest.raises(UnknownAgent):
        await runs.start("stranger", "x", run_id="api-3")
    with pytest.raises(UserError, match="registered name"):
        await runs.start(AGENT, "x", run_id="api-4")  # type: ignore[arg-type]
    assert await DBOS.get_workflow_status_async("api-3") is None
    with pytest.raises(UserError, match="already registered"):
        DBOSRuns(runs.store_url, agents={"banker": AGENT}, name="test.run")


async def test_a_workflow_started_behind_the_apis_back_runs_only_registered_agents(
    runs: DBOSRuns,
) -> None:
    """Whoever can start DBOS workflows (the system database, a DBOS client) names the
    agent: a name outside ``agents=`` fails the workflow, and nothing is imported."""
    import sys

    from dbos import SetWorkflowID

    assert "antigravity" not in sys.modules
    with SetWorkflowID("api-5"):
        handle = await DBOS.start_workflow_async(
            runs._workflow,  # type: ignore[reportPrivateUsage]
            "antigravity:fly",
            "x",
            None,
            None,
        )
    with pytest.raises(UnknownAgent, match="no agent named 'antigravity:fly'"):
        await handle.get_result()
    assert "antigravity" not in sys.modules
    status = await DBOS.get_workflow_status_async("api-5")
    assert status is not None and status.status == "ERROR"


async def test_a_lease_held_by_another_worker_retries_the_step_until_it_expires(
    runs: DBOSRuns,
) -> None:
    """lovia's lease stays the fence under DBOS: while a worker elsewhere holds the run,
    the step does not run it; DBOS retries the step, which runs it once the lease expired."""
    db = PATIENT.store()
    held_at = time.time()
    assert await db.acquire("api-6", "worker-on-another-host:4242:1", 1.5) is not None
    run_id = await PATIENT.start("banker", "fast", run_id="api-6")
    snap = await PATIENT.result(run_id, timeout_s=60)
    assert (snap.info.status, (snap.result or {}).get("output")) == (
        "completed",
        "done: bank answered fast",
    )
    assert snap.info.started_at is not None
    assert snap.info.started_at >= held_at + 1.5  # not before the other lease expired
    steps = await DBOS.list_workflow_steps_async(run_id)
    assert [s["function_name"] for s in steps] == ["test.patient.step"]
