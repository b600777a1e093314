"""Tool approvals: a human (or a policy) decides before a sensitive tool runs.

``@tool(requires_approval=True)`` (or a callable ``(ctx, call) -> bool`` deciding per
call) marks a tool. With an approval policy (``Runner.run(..., approval=fn)`` or
``Agent(approval=fn)``) the decision is made in process; a denied call reaches the model
as an error result carrying the reason. Without a policy the run PAUSES: ``result()``
raises ``ApprovalPending`` listing the waiting calls, the checkpoint keeps the run, and
``Runner.run(agent, None, run_id=..., approvals={call_id: True | False | "reason"})``
continues exactly where it stopped — in another process if you like (the SQLite file
below is all that is shared). No tool of that turn runs before every call is decided.

Offline by default; set ``LOVIA_MODEL`` (e.g. ``openai:gpt-4.1-mini``) for a real model.

Run: python examples/13_approvals.py
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from lovia import Agent, ApprovalPending, RunContext, Runner, tool
from lovia.stores import store
from lovia.testing import ScriptedModel, call
from lovia.transcript import ToolCallEntry


@tool
def order_status(order_id: str) -> str:
    """Look up an order (no approval needed)."""
    return f"{order_id}: delivered"


def large(ctx: RunContext[Any], c: ToolCallEntry) -> bool:
    return json.loads(c.arguments)["amount"] > 50


@tool(requires_approval=large)
def refund(order_id: str, amount: float) -> str:
    """Refund an order; more than 50 needs a human's approval."""
    return f"refunded {amount:.2f} for {order_id}"


def agent(steps: list[Any]) -> Agent[Any, str]:
    model = os.environ.get("LOVIA_MODEL") or ScriptedModel(steps)
    return Agent(
        name="refunds", instructions="Help with refunds.", model=model, tools=[order_status, refund]
    )


async def main() -> None:
    # 1. a policy decides in process
    def policy(ctx: RunContext[Any], c: ToolCallEntry) -> bool | str:
        return (
            "refunds over 500 need a manager" if json.loads(c.arguments)["amount"] > 500 else True
        )

    first = agent([call("refund", order_id="A1", amount=900), "A manager must approve it."])
    result = await Runner.run(first, "Refund 900 for A1", approval=policy)
    print("with a policy:", result.output)

    # 2. no policy: the run pauses and is resumed later, from a new store object
    db = Path(tempfile.mkdtemp()) / "lovia.db"
    steps = [
        [
            call("order_status", order_id="A2", id="c1"),
            call("refund", order_id="A2", amount=80, id="c2"),
        ]
    ]
    first_store = store(f"sqlite:///{db}")
    try:
        await Runner.run(agent(steps), "Refund A2 (80)", run_id="run-a2", checkpointer=first_store)
    except ApprovalPending as pending:
        await first_store.aclose()  # as if this process ended here
        for c in pending.pending:
            print(f"waiting for approval: {c.name}({c.arguments}) [{c.call_id}]")
        decisions = {c.call_id: True for c in pending.pending}

        # ...later, maybe in another process: same run_id, same store file
        later = store(f"sqlite:///{db}")
        resumed = await Runner.run(
            agent(["Refunded 80.00 for A2."]),
            None,
            run_id="run-a2",
            checkpointer=later,
            approvals=decisions,
        )
        await later.aclose()
        print("after approval:", resumed.output)
        print("tool results:", [e.content for e in resumed.entries if e.type == "tool_result"])


if __name__ == "__main__":
    asyncio.run(main())
