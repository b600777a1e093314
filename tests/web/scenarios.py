"""Recorded runs for the web tests: the CLI's scenario, hostile strings, a tampered copy,
a paused approval, a long run."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from cli.conftest import record_scenario
from lovia import Agent, ApprovalPending, Runner, tool
from lovia.stores import store
from lovia.testing import ScriptedModel, call, reply

XSS = [
    "<script>window.__xss = 1</script>",
    '"><img src=x onerror="window.__xss = 2">',
    '<a href="javascript:window.__xss = 3">click me</a>',
    "javascript:window.__xss=4",
    '</pre><svg onload="window.__xss = 5"></svg>',
]


@tool
async def echo(text: str) -> str:
    """Echo text back (its output is attacker-controlled)."""
    return text


@tool
async def lookup(order: str) -> str:
    """Look up an order."""
    return f"{order}: shipped"


@tool(requires_approval=True)
async def refund(amount: int) -> str:
    """Refund money (needs a human)."""
    return f"refunded {amount}"


def support_agent(model: Any) -> Agent[Any, str]:
    return Agent(name="support", instructions="Help.", tools=[lookup, refund], model=model)


async def record_xss(url: str) -> str:
    db = store(url)
    agent = Agent(
        name="support",
        instructions="Answer. " + XSS[0],
        tools=[echo],
        model=ScriptedModel([call("echo", text=" ".join(XSS), id="c_x"), " ".join(XSS)]),
    )
    await Runner.run(
        agent, "hello " + XSS[1], checkpointer=db, session=db, session_id=XSS[3], run_id="run-xss"
    )
    await db.aclose()
    return "run-xss"


async def record_paused(url: str) -> str:
    db = store(url)
    model = ScriptedModel(
        [[call("lookup", order="A1", id="c_look"), call("refund", amount=80, id="c_refund")]]
    )
    with contextlib.suppress(ApprovalPending):
        await Runner.run(support_agent(model), "refund A1", checkpointer=db, run_id="run-paused")
    await db.aclose()
    return "run-paused"


async def record_long(url: str, turns: int) -> str:
    db = store(url)
    steps: list[Any] = [
        reply(f"step {i}", tool_calls=[call("lookup", order=f"O{i}", id=f"c{i}")])
        for i in range(turns - 1)
    ]
    steps.append("all done")
    agent = support_agent(ScriptedModel(steps))
    await Runner.run(agent, "go", checkpointer=db, run_id="run-long", max_turns=turns + 1)
    await db.aclose()
    return "run-long"


def tamper(src: Path, dst: Path, run_id: str) -> str:
    """Copy the store and change one tool result's bytes in the run's checkpoint."""
    shutil.copy(src, dst)
    conn = sqlite3.connect(dst)
    rows = conn.execute(
        "SELECT seq, data FROM records WHERE run_id = ? AND kind = 'entries' ORDER BY seq",
        (run_id,),
    ).fetchall()
    for seq, data in rows:
        payload = json.loads(data)
        for entry in payload["entries"]:
            if entry["type"] == "tool_result" and entry["call_id"] == "call_b2":
                entry["content"] = "B2: lost in transit"
                conn.execute(
                    "UPDATE records SET data = ? WHERE run_id = ? AND seq = ?",
                    (json.dumps(payload), run_id, seq),
                )
                conn.commit()
                conn.close()
                return str(entry["id"])
    conn.close()
    raise AssertionError("no tool result to tamper with")


__all__ = [
    "XSS",
    "record_long",
    "record_paused",
    "record_scenario",
    "record_xss",
    "support_agent",
    "tamper",
]
