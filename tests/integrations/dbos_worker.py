"""A DBOS worker process for the engine crash tests.

Usage: python dbos_worker.py PG_URL SCHEMA RUN_ID MODE HANG_AT LOG_PATH
MODE: start (start the run's workflow, then wait for it) | recover (launch DBOS with the
same executor id, whose recovery runs the workflow again, then wait for it).
HANG_AT: tool | model — where the first process hangs (and is SIGKILLed by the test);
it writes ``hanging`` to the log first.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from dbos import DBOS, DBOSConfig

from lovia import Agent, RunContext, tool
from lovia.integrations.dbos import DBOSRuns
from lovia.testing import FunctionModel, call

PG_URL, SCHEMA, RUN_ID, MODE, HANG_AT, LOG = sys.argv[1:7]


def note(line: str) -> None:
    with open(LOG, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


@tool
async def charge(ctx: RunContext[Any], amount: int) -> str:
    """Charge a card (not idempotent)."""
    note(f"charged {amount} key={ctx.idempotency_key}")
    if MODE == "start" and HANG_AT == "tool":
        note("hanging")
        await asyncio.sleep(120)
    return f"charged {amount}"


async def decide(request: Any, info: Any) -> Any:
    results = [m for m in request.messages if m.type == "tool_result"]
    note(f"model call {len(results)} results")
    if MODE == "start" and HANG_AT == "model":
        note("hanging")
        await asyncio.sleep(120)
    if not results:
        return [call("charge", amount=5, id="c1")]
    return "done: " + results[0].content[:40]


runs = DBOSRuns(
    f"{PG_URL}?schema={SCHEMA}",
    agents={"payer": Agent(name="payer", model=FunctionModel(decide), tools=[charge])},
)


async def main() -> None:
    config = DBOSConfig(
        name="lovia-engine-test",
        system_database_url=PG_URL,
        dbos_system_schema=f"{SCHEMA}_dbos",
        executor_id=f"worker-{RUN_ID}",
        application_version="test",
        log_level="WARNING",
    )
    DBOS(config=config)
    DBOS.launch()  # in "recover" mode this re-runs the pending workflow
    if MODE == "start":
        await runs.start("payer", "pay 5", run_id=RUN_ID)
    snap = await runs.result(RUN_ID, timeout_s=60)
    status = await DBOS.get_workflow_status_async(RUN_ID)
    output = (snap.result or {}).get("output")
    print(f"run={snap.info.status} workflow={status.status if status else None} output={output}")
    await runs.aclose()
    DBOS.destroy()


asyncio.run(main())
