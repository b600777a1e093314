"""A lovia run as a DBOS workflow survives SIGKILL of its worker.

A worker process (this file, with ``--worker``) launches DBOS and starts one run as a
workflow (workflow id = run id). The model asks for ``ship_order``; the worker is
SIGKILLed while that tool runs. A second worker with the same DBOS executor id
launches DBOS, whose recovery runs the workflow again: lovia resumes the run from its
checkpoint. ``ship_order`` hands ``ctx.idempotency_key`` to the (fake) shipping API and
is declared ``idempotent=True``, so the resume runs it again with the same key and the
API ships the order once. DBOS and lovia both keep their tables in SQLite files here,
so this runs anywhere; in production both share your PostgreSQL. The model is scripted.

Run: python examples/64_dbos.py
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(".lovia")
LOG = HERE / "dbos-example-shipping.log"
"""The fake shipping API: one line per request, with its idempotency key."""


def ship(key: str) -> None:
    with LOG.open("a") as f:
        f.write(json.dumps({"key": key}) + "\n")


def worker(mode: str, run_id: str) -> None:
    from dbos import DBOS, DBOSConfig

    from lovia import Agent, RunContext, tool
    from lovia.integrations.dbos import DBOSRuns
    from lovia.testing import FunctionModel, call

    @tool(idempotent=True)  # safe to repeat: the shipping API applies a key once
    async def ship_order(ctx: RunContext[Any], order: str) -> str:
        """Ship an order."""
        ship(ctx.idempotency_key or "")
        if mode == "start":
            print("worker 1: ship_order is running", flush=True)
            await asyncio.sleep(60)  # killed here
        return f"order {order} shipped"

    def decide(request: Any, info: Any) -> Any:
        results = [m for m in request.messages if m.type == "tool_result"]
        if not results:
            return [call("ship_order", order="A1", id="c1")]
        return f"Done: {results[0].content}."

    agent = Agent(name="shipper", model=FunctionModel(decide), tools=[ship_order])
    store = os.environ.get("LOVIA_STORE", f"sqlite:///{HERE / 'lovia.db'}")
    runs = DBOSRuns(store, agents={"shipper": agent})  # before DBOS.launch()

    async def main() -> None:
        DBOS(
            config=DBOSConfig(
                name="lovia-example",
                system_database_url=f"sqlite:///{HERE / 'dbos-example.sqlite'}",
                executor_id="worker-a",  # recovery runs this executor's workflows
                application_version="example",
                log_level="ERROR",
            )
        )
        DBOS.launch()
        if mode == "start":
            await runs.start("shipper", "Ship order A1", run_id=run_id)
        snap = await runs.result(run_id, timeout_s=60)
        print(f"worker 2: run {snap.info.status}: {(snap.result or {}).get('output')}")
        await runs.aclose()
        DBOS.destroy()

    asyncio.run(main())


def main() -> None:
    HERE.mkdir(exist_ok=True)
    for stale in (LOG, HERE / "dbos-example.sqlite"):
        stale.unlink(missing_ok=True)
    run_id = f"ship-{os.getpid()}"
    cmd = [sys.executable, __file__, "--worker"]
    first = subprocess.Popen([*cmd, "start", run_id], stdout=subprocess.PIPE, text=True)
    assert first.stdout is not None
    print(first.stdout.readline().strip())
    time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
    print(f"worker 1: killed (exit {first.returncode})")
    second = subprocess.run([*cmd, "recover", run_id], capture_output=True, text=True, check=True)
    print(second.stdout.strip())
    keys = [json.loads(line)["key"] for line in LOG.read_text().splitlines()]
    print(f"shipping API: {len(keys)} requests, {len(set(keys))} shipment (key {keys[0]})")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
