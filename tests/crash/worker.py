"""A worker process for the crash tests: runs one agent and SIGKILLs itself at a chosen phase.

Usage: python worker.py STORE_URL RUN_ID KILL_AT LOG_PATH
KILL_AT: model | between_tools | tool | before_session | none
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from lovia import Agent, AgentHooks, Runner, events, tool
from lovia.stores import store
from lovia.testing import FunctionModel, call

STORE_URL, RUN_ID, KILL_AT, LOG = sys.argv[1:5]


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@tool
def record(n: int) -> str:
    """Record a side effect (not idempotent)."""
    with open(LOG, "a") as f:
        f.write(f"{n}\n")
    if KILL_AT == "tool" and n == 2:
        die()
    return f"recorded {n}"


def decide(request: Any, info: Any) -> Any:
    results = [m for m in request.messages if m.type == "tool_result"]
    if KILL_AT == "model" and not results:
        die()  # the model stream of the first turn is in flight
    if not results:
        return [call("record", n=1, id="c1"), call("record", n=2, id="c2")]
    return "done: " + ", ".join(r.content for r in results)


hooks = AgentHooks()


@hooks.on(events.CheckpointSaved)
def maybe_die(ev: events.CheckpointSaved, ctx: Any) -> None:
    if KILL_AT == "between_tools" and ev.kind == "tool_result":
        die()  # the first result is checkpointed, the second tool has not run
    if KILL_AT == "before_session" and ev.kind == "complete":
        die()  # output guardrail passed, checkpoint complete, session not written


def passes(ctx: Any, output: Any) -> None:
    return None


async def main() -> None:
    db = store(STORE_URL)
    agent = Agent(
        name="crashy",
        model=FunctionModel(decide),
        tools=[record],
        hooks=hooks,
        output_guardrails=[passes],
    )
    # differs in every process: a resumed run must still send the recorded prompt
    agent.instruction(lambda ctx: f"You run in worker process {os.getpid()}.")
    result = await Runner.run(
        agent, "go", run_id=RUN_ID, checkpointer=db, session=db, session_id="crash-session"
    )
    print(result.output)
    await db.aclose()


asyncio.run(main())
