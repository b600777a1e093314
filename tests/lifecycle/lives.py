"""The agents of the lifecycle corpus, and a worker process that lives one life.

Importable as ``lives`` (``lovia resume --agent lives:crashy`` with this folder on
``PYTHONPATH``). As a script: ``python lives.py STORE_URL RUN_ID MODE LOG`` runs
``crashy`` and, by MODE, SIGKILLs itself in a tool (``tool``), during the first model
call (``model``), or SIGSTOPs itself in a tool so its lease expires (``stall``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from lovia import Agent, Runner, tool
from lovia.testing import FunctionModel, call

MODE = os.environ.get("LIFE_MODE", "")
LOG = os.environ.get("LIFE_LOG", os.devnull)


@tool
def record(n: int) -> str:
    """Record a side effect (not idempotent)."""
    with open(LOG, "a") as f:
        f.write(f"{os.getpid()} {n}\n")
    if n == 2 and MODE == "tool":
        os.kill(os.getpid(), signal.SIGKILL)
    if n == 2 and MODE == "stall":
        os.kill(os.getpid(), signal.SIGSTOP)  # frozen: its lease expires unrenewed
    return f"recorded {n}"


def _decide(request: Any, info: Any) -> Any:
    results = [m for m in request.messages if m.type == "tool_result"]
    if not results and MODE == "model":
        os.kill(os.getpid(), signal.SIGKILL)  # the first model call is in flight
    if not results:
        return [call("record", n=1, id="c1"), call("record", n=2, id="c2")]
    return "done: " + ", ".join(r.content for r in results)


def crashy() -> Agent[Any, str]:
    """A fresh agent (its model is a function, so any process can resume the run)."""
    return Agent(name="crashy", model=FunctionModel(_decide), tools=[record])


@tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def _refunder(request: Any, info: Any) -> Any:
    results = [m for m in request.messages if m.type == "tool_result"]
    if not results:
        return call("refund", order="B2", id="c_refund")
    return "after approval: " + results[-1].content


def approver() -> Agent[Any, str]:
    """An agent whose refund waits for a human."""
    return Agent(name="approver", model=FunctionModel(_refunder), tools=[refund])


async def _main(url: str, run_id: str) -> None:
    from lovia.stores import store

    db = store(url)
    result = await Runner.run(crashy(), "go", run_id=run_id, checkpointer=db)
    print(result.output)
    await db.aclose()


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], sys.argv[2]))
