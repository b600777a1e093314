"""Spans of a run's life: a resumed attempt's root span says which attempt it is and links
to the attempt before; an approval decision is a span event with who decided and why."""

from __future__ import annotations

import pytest
from telemetry_helpers import Otel

from lovia import Agent, ApprovalPending, Runner, tool
from lovia.stores import MemoryStore
from lovia.testing import ScriptedModel, call


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def _agent(*steps: object) -> Agent[None, str]:
    return Agent(name="support", model=ScriptedModel(list(steps)), tools=[refund])


async def test_a_resumed_attempt_links_back_and_records_the_decision(otel: Otel) -> None:
    db = MemoryStore()
    with pytest.raises(ApprovalPending):
        await Runner.run(
            _agent(call("refund", order="B2", id="c1")), "go", run_id="r", checkpointer=db
        )
    first = next(s for s in otel.spans() if s.name.startswith("invoke_agent"))
    assert first.attributes is not None and "lovia.run.attempt" not in first.attributes
    await Runner.run(
        _agent("done"),
        None,
        run_id="r",
        checkpointer=db,
        approvals={"c1": "not this customer"},
        approved_by="web:token-1234",
    )
    second = [s for s in otel.spans() if s.name.startswith("invoke_agent")][-1]
    assert second.attributes is not None and second.attributes["lovia.run.attempt"] == 2
    assert first.context is not None and second.context is not None
    assert [(lk.context.trace_id, lk.context.span_id) for lk in second.links] == [
        (first.context.trace_id, first.context.span_id)
    ]
    decided = [e for s in otel.spans() for e in s.events if e.name == "lovia.approval"]
    assert [dict(e.attributes or {}) for e in decided] == [
        {
            "lovia.approval.call_id": "c1",
            "lovia.approval.tool": "refund",
            "lovia.approval.decision": "denied",
            "lovia.approval.actor": "web:token-1234",
            "lovia.approval.reason": "not this customer",
        }
    ]
    snapshot = await db.load("r")
    assert snapshot is not None
    # the run's row keeps the first attempt's trace and start
    assert snapshot.info.trace_id == f"{first.context.trace_id:032x}"
    assert snapshot.info.started_at == pytest.approx(first.start_time / 1e9, abs=0.5)  # type: ignore[operator]
