"""A run's life: killed, interrupted, resumed at once on the same host; cancelled (offline).

A worker process runs an agent and is SIGKILLed in the middle of its second tool call.
Nothing can write "I died", yet the store says what happened: the run is
``interrupted`` (its lease holder's process is gone), ``lovia runs --status
interrupted`` would list it, and resuming it on this host takes over at once instead of
waiting out the lease. The resumed run keeps its first start time; its attempts say
how each one ended. Then a second run is cancelled by its caller: ``cancelled``, with
who cancelled it, never ``failed``. A third run is cancelled from outside while it runs,
as ``lovia cancel RUN --reason ...`` does from a shell: no queue runs it, and its own
worker's lease heartbeat reads the request and stops it.

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
from lovia.stores.lifecycle import life_of, list_lives, request_cancel
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
    await cancel_from_outside(db)
    await db.aclose()


async def cancel_from_outside(db: Any) -> None:
    """``lovia cancel`` on a run executing right now, in a process no queue manages."""
    os.environ["LOVIA_LEASE_TTL_S"] = "1.5"  # heartbeat every 0.5 s (default: 60 s, 20 s)
    started = asyncio.Event()

    @tool
    async def crawl(site: str) -> str:
        """Crawl a site (a runaway job)."""
        started.set()
        await asyncio.sleep(3600)
        return "crawled"

    crawler = Agent(
        name="crawler", model=FunctionModel(lambda r, i: call("crawl", site="x")), tools=[crawl]
    )
    run = asyncio.create_task(Runner.run(crawler, "go", run_id="crawl-1", checkpointer=db))
    await started.wait()
    t0 = time.monotonic()
    was = await request_cancel(db, "crawl-1", "ops: runaway crawler")  # = `lovia cancel`
    try:
        await run
    except RunCancelled as exc:
        print(f"crawl-1 was {was}; stopped {time.monotonic() - t0:.1f} s later: {exc.message}")
    info = (await db.load("crawl-1")).info  # type: ignore[union-attr]
    print(f"crawl-1: stored {info.status!r}, cancelled_by {info.extra['cancelled_by']!r}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "worker":
        asyncio.run(worker(sys.argv[2]))
        sys.exit(0)
    url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'lovia.db'}"
    env = {**os.environ, "DIE_IN_TOOL": "1"}
    proc = subprocess.run([sys.executable, __file__, "worker", url], env=env, check=False)
    print(f"worker exited with signal {-proc.returncode} (SIGKILL) in its second tool call")
    asyncio.run(main(url))
