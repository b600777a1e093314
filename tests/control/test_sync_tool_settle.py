"""A sync tool runs in a thread, which cannot be stopped: when the run ends while it
runs (``max_seconds``, cancel), the end waits for the thread and records its outcome in
the ledger, so its side effect is never after the run's end and an idempotent resume
does not run it again."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from lovia import Agent, BudgetExceeded, RunBudget, RunCancelled, Runner, tool
from lovia import events as ev
from lovia.context import CancelToken
from lovia.stores import store
from lovia.stores.records import LedgerRecord, read_records
from lovia.testing import ScriptedModel, call

effects: list[str] = []
lock = threading.Lock()
BUDGET_S = 1.0
"""The run's max_seconds: room for the model turn on a loaded machine before the tool."""
TOOL_S = 1.8
"""The tool outlives the budget by far (its effect would land after the run's end)."""


@tool(idempotent=True)
def send_invoice(order: str) -> str:
    """Send an invoice (slow; the effect lands at the end)."""
    time.sleep(TOOL_S)
    with lock:
        effects.append(order)
    return f"invoice for {order} sent"


@tool(idempotent=True, concurrency_safe=True)
def notify(who: str) -> str:
    """Notify someone (slow; may run in parallel)."""
    time.sleep(TOOL_S)
    with lock:
        effects.append(who)
    return f"notified {who}"


async def _ledger(db: object, run_id: str) -> dict[str, str]:
    snapshot = await db.load(run_id)  # type: ignore[attr-defined]
    assert snapshot is not None
    status: dict[str, str] = {}
    for record in read_records(snapshot, ("ledger",)):
        assert isinstance(record, LedgerRecord)
        status[record.call_id] = record.status
    return status


@pytest.mark.parametrize("parallel", [False, True], ids=["one-call", "parallel-group"])
async def test_the_run_end_waits_for_the_thread_and_a_resume_does_not_rerun_it(
    tmp_path: Path, parallel: bool
) -> None:
    effects.clear()
    db = store(f"sqlite:///{tmp_path / 'l.db'}")
    calls = (
        [call("notify", who="ann", id="c1"), call("notify", who="bob", id="c2")]
        if parallel
        else [call("send_invoice", order="A1", id="c1")]
    )
    tools = [notify] if parallel else [send_invoice]
    first = Agent(name="billing", model=ScriptedModel([calls]), tools=tools)
    stream = Runner.stream(
        first, "bill", run_id="inv-1", checkpointer=db, budget=RunBudget(max_seconds=BUDGET_S)
    )
    seen = [e async for e in stream]
    with pytest.raises(BudgetExceeded):
        await stream.result()
    ended = sorted(effects)
    assert ended == (["ann", "bob"] if parallel else ["A1"])  # landed before the run ended
    assert isinstance(seen[-1], ev.RunFailed) and seen[-1].error_type == "BudgetExceeded"
    assert set((await _ledger(db, "inv-1")).values()) == {"completed"}
    await asyncio.sleep(TOOL_S)
    assert sorted(effects) == ended  # nothing lands after the end

    resumed = Agent(name="billing", model=ScriptedModel(["done"]), tools=tools)
    result = await Runner.run(resumed, "bill", run_id="inv-1", checkpointer=db)
    assert result.output == "done"
    assert sorted(effects) == ended  # the idempotent tool did not run again
    last_view = str(resumed.model.requests[0])  # type: ignore[union-attr]
    assert ("notified ann" if parallel else "invoice for A1 sent") in last_view
    await db.aclose()


TOKEN = CancelToken()


@tool
def refund(order: str) -> str:
    """Refund an order; the run is cancelled while it runs."""
    TOKEN.cancel()  # from the tool's thread, as an operator would, mid-call
    time.sleep(TOOL_S / 2)
    with lock:
        effects.append(order)
    return f"refunded {order}"


async def test_cancel_while_a_sync_tool_runs_records_its_outcome(tmp_path: Path) -> None:
    effects.clear()
    db = store(f"sqlite:///{tmp_path / 'l.db'}")
    token = TOKEN
    agent = Agent(
        name="billing",
        model=ScriptedModel([call("refund", order="B2", id="c1")]),
        tools=[refund],
    )
    with pytest.raises(RunCancelled):
        await Runner.run(agent, "bill", run_id="inv-2", checkpointer=db, cancel_token=token)
    assert effects == ["B2"]
    assert await _ledger(db, "inv-2") == {"c1": "completed"}
    await db.aclose()
