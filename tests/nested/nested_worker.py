"""A worker process for the nested crash test: a manager runs a researcher agent as a tool.

Usage: python nested_worker.py STORE_URL RUN_ID KILL LOG_PATH
KILL=child_model: SIGKILL itself during the child's second model call (its first tool
call is done and checkpointed); KILL=child_done: right after the child run is stored as
completed, before the parent recorded the tool result; KILL=parent_final: during the
parent's final model call (both results recorded). Every tool side effect and model call
is logged.
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

STORE_URL, RUN_ID, KILL, LOG = sys.argv[1:5]


def log(line: str) -> None:
    with open(LOG, "a") as f:
        f.write(line + "\n")


@tool
def note(text: str) -> str:
    """Write a note (a side effect; not idempotent)."""
    log(f"tool:{text}")
    return f"noted {text}"


def child_model(request: Any, info: Any) -> Any:
    results = [m for m in request.messages if m.type == "tool_result"]
    log(f"model:child:{len(results)}")
    if not results:
        return call("note", text="child", id="k1")
    if KILL == "child_model":
        os.kill(os.getpid(), signal.SIGKILL)  # the child's second model call is in flight
    return "found: " + results[0].content


def parent_model(request: Any, info: Any) -> Any:
    results = [m for m in request.messages if m.type == "tool_result"]
    log(f"model:parent:{len(results)}")
    if results and KILL == "parent_final":
        os.kill(os.getpid(), signal.SIGKILL)
    if not results:
        return [call("note", text="parent", id="p1"), call("researcher", input="moths", id="p2")]
    return "report: " + " | ".join(r.content for r in results)


hooks = AgentHooks()


@hooks.on(events.CheckpointSaved)
def maybe_die(event: events.CheckpointSaved, ctx: Any) -> None:
    if KILL == "child_done" and event.kind == "complete":
        os.kill(os.getpid(), signal.SIGKILL)


async def main() -> None:
    db = store(STORE_URL)
    researcher = Agent(
        name="researcher", model=FunctionModel(child_model), tools=[note], hooks=hooks
    )
    manager = Agent(
        name="manager", model=FunctionModel(parent_model), tools=[note, researcher.as_tool()]
    )
    result = await Runner.run(manager, "go", run_id=RUN_ID, checkpointer=db)
    print(result.output)
    print(f"usage {result.usage.requests} {sorted(result.child_usage)}")
    await db.aclose()


asyncio.run(main())
