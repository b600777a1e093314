"""A run's life: killed, interrupted, resumed at once on the same host; cancelled (offline).

A worker process runs an agent and is SIGKILLed in the middle of its second tool call.
Nothing can write "I died", yet the store says what happened: the run is
``interrupted`` (its lease holder's process is gone), ``lovia runs --status
interrupted`` would list it, and resuming it on this host takes over at once instead of
waiting out the lease. The resumed run keeps its first start time; its attempts say
how each one ended. Then a second run is cancelled by its caller: ``cancelled``, with
who cancelled it, never ``failed``.

Run: python examples/63_lifecycle.py
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lovia import Agent, CancelToken, RunCancelled, RunContext, Runner, tool
from lovia.stores import store
from lovia.stores.lifecycle import life_of, list_lives
from lovia.testing import FunctionModel, call


@tool
def ship(parcel: int) -> str:
    """Ship a parcel (the worker dies while shipping the second one)."""
    if parcel == 2 and os.environ.get("DIE_IN_TOOL"):
        os.kill(os.getpid(), signal.SIGKILL)
    return f"shipped {parcel}"


def decide(request: Any, info: Any) -> Any:
    # In your code: model="openai:gpt-4.1-mini". The function model keeps this offline.
    results = [m for m in request.messages if m.type == "tool_result"]
    if not results:
        return [call("ship", parcel=1, id="c1"), call("ship", parcel=2, id="c2")]
    return "; ".join(r.content for r in results)


def shipper() -> Agent[Any, str]:
    return Agent(name="shipper", model=FunctionModel(decide), tools=[ship])


async def worker(url: str) -> None:
    db = store(url)
    await Runner.run(shipper(), "ship both", run_id="ship-1", checkpointer=db)


async def main(url: str) -> None:
    db = store(url)
    for info, life in await list_lives(db, state="interrupted"):
        print(f"{info.run_id}: {life.state} — {life.detail}")
    t0 = time.monotonic()
    result = await Runner.run(shipper(), None, run_id="ship-1", checkpointer=db)
    print(f"resumed in {time.monotonic() - t0:.2f} s (no wait for the 60 s lease):")
    print("  output:", result.output)
    snapshot = await db.load("ship-1")
    assert snapshot is not None
    life = await life_of(db, snapshot.info, snapshot)
    print(f"  {life.state}; wall {life.wall_s:.2f} s, active {life.active_s:.2f} s")
    for a in life.attempts:
        print(f"  attempt {a.attempt}: pid {a.pid}, ended {a.how}")

    @tool
    def long_job(ctx: RunContext[Any]) -> str:
        """A job the user stops."""
        ctx.cancel_token.cancel("the user pressed stop")
        return "stopping"

    stopper = Agent(
        name="stopper", model=FunctionModel(lambda r, i: call("long_job")), tools=[long_job]
    )
    try:
        await Runner.run(
            stopper, "go", run_id="stop-1", checkpointer=db, cancel_token=CancelToken()
        )
    except RunCancelled:
        pass
    info = (await db.load("stop-1")).info  # type: ignore[union-attr]
    life = await life_of(db, info)
    print(f"stop-1: stored {info.status!r}; {life.state} — {life.detail}")
    await db.aclose()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "worker":
        asyncio.run(worker(sys.argv[2]))
        sys.exit(0)
    url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'lovia.db'}"
    env = {**os.environ, "DIE_IN_TOOL": "1"}
    proc = subprocess.run([sys.executable, __file__, "worker", url], env=env, check=False)
    print(f"worker exited with signal {-proc.returncode} (SIGKILL) in its second tool call")
    asyncio.run(main(url))
