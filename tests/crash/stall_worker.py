"""A worker process for the stall (fencing) tests: runs six non-idempotent tool calls,
one per turn, and can block inside one of them until a file appears.

Usage: python stall_worker.py STORE_URL RUN_ID LOG_PATH HOLD_AT MARKER GO
HOLD_AT: the call (1-6) that writes MARKER, then waits for the file GO before returning;
0: never wait. The test SIGSTOPs the process while it waits.

Prints one JSON line: the terminal event's type and error, and what the stream held.
Exit code 0 when the run completed, 3 on LeaseLost, 4 on RunLeaseHeld, 1 otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from lovia import Agent, Runner, events, tool
from lovia.errors import LeaseLost, RunLeaseHeld
from lovia.stores import store
from lovia.testing import FunctionModel, call

STORE_URL, RUN_ID, LOG = sys.argv[1:4]
HOLD_AT = int(sys.argv[4])
MARKER, GO = Path(sys.argv[5]), Path(sys.argv[6])
CALLS = 6


@tool
async def record(n: int) -> str:
    """Record a side effect (not idempotent)."""
    with open(LOG, "a") as f:
        f.write(f"{n} {os.getpid()}\n")
    if n == HOLD_AT:
        MARKER.write_text(str(os.getpid()))
        while not GO.exists():
            await asyncio.sleep(0.02)
    return f"recorded {n}"


def decide(request: Any, info: Any) -> Any:
    done = [m for m in request.messages if m.type == "tool_result"]
    if len(done) < CALLS:
        n = len(done) + 1
        return call("record", n=n, id=f"c{n}")
    return "done: " + " | ".join(r.content for r in done)


async def main() -> int:
    db = store(STORE_URL)
    agent = Agent(name="stally", model=FunctionModel(decide), tools=[record])
    handle = Runner.stream(
        agent, "go", run_id=RUN_ID, checkpointer=db, session=db, session_id="stall-session"
    )
    kinds: list[str] = []
    terminal: dict[str, Any] = {}
    async for event in handle:
        kinds.append(type(event).__name__)
        if isinstance(event, events.RunFailed):
            terminal = {"type": "RunFailed", "error": event.error_type}
        elif isinstance(event, events.RunCompleted):
            terminal = {"type": "RunCompleted", "output": event.output}
    code = 1
    try:
        await handle.result()
        code = 0
    except LeaseLost:
        code = 3
    except RunLeaseHeld:
        code = 4
    finally:
        await db.aclose()
    print(json.dumps({**terminal, "events": kinds}))
    return code


sys.exit(asyncio.run(main()))
