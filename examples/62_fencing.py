"""Fencing: a worker that froze past its lease cannot write to the run (offline).

Worker A starts a checkout whose tool charges a card. Mid-charge its event loop freezes
(a blocking call standing in for SIGSTOP, a long GC pause or a suspended VM), so its
lease heartbeat stops too. Once the lease's TTL has passed, worker B takes the run over:
the frozen charge is not re-run (the tool is not idempotent, so the model is told its
outcome is unknown) and B completes the run. Then A wakes: the store refuses its first
write with ``LeaseLost`` and A stops, leaving the completed run untouched.

Run: python examples/62_fencing.py
"""

from __future__ import annotations

import asyncio
import os
import secrets
import threading
from typing import Any

from lovia import Agent, Runner, tool
from lovia.errors import LeaseLost
from lovia.stores.sqlite import SQLiteStore
from lovia.testing import FunctionModel, call

os.environ.setdefault("LOVIA_LEASE_TTL_S", "1")  # a short lease, for the demo (read per run)
URL = os.environ.get("LOVIA_STORE", "sqlite:///fencing-example.db")
RUN_ID = f"checkout-{secrets.token_hex(3)}"
frozen, wake = threading.Event(), threading.Event()
charges: list[str] = []


@tool
async def charge(amount: int) -> str:
    """Charge the customer's card (not idempotent)."""
    charges.append(threading.current_thread().name)
    if threading.current_thread().name == "worker-a":
        frozen.set()
        wake.wait()  # blocks worker A's whole event loop: it is frozen
    return f"charged {amount} EUR"


def scripted(request: Any, info: Any) -> Any:
    """Stands in for a real model: charge once, then report what the charge returned."""
    results = [m for m in request.messages if m.type == "tool_result"]
    if not results:
        return call("charge", amount=42, id="c1")
    return f"Checkout finished. Charge result: {results[-1].content}"


agent = Agent(name="checkout", model=FunctionModel(scripted), tools=[charge])


def worker_a(outcome: dict[str, BaseException]) -> None:
    async def run() -> None:
        db = SQLiteStore(URL)
        try:
            await Runner.run(agent, "Check out order 7", run_id=RUN_ID, checkpointer=db)
        except LeaseLost as exc:
            outcome["error"] = exc
        finally:
            await db.aclose()

    asyncio.run(run())


async def main() -> None:
    outcome: dict[str, BaseException] = {}
    a = threading.Thread(target=worker_a, args=(outcome,), name="worker-a")
    a.start()
    await asyncio.to_thread(frozen.wait)
    print("worker A froze in the middle of the charge")
    await asyncio.sleep(float(os.environ["LOVIA_LEASE_TTL_S"]) + 0.5)  # its lease expires

    db = SQLiteStore(URL)
    result = await Runner.run(agent, "Check out order 7", run_id=RUN_ID, checkpointer=db)
    print("worker B took the run over:", result.output[:90], "...")
    before = await db.load(RUN_ID)

    wake.set()  # worker A wakes up, still believing it holds the run
    await asyncio.to_thread(a.join)
    error = outcome["error"]
    print(f"worker A woke and stopped: {type(error).__name__}: {getattr(error, 'message', '')}")
    print("completed run unchanged:", await db.load(RUN_ID) == before)
    print("the card was charged", len(charges), "time(s)")
    await db.aclose()


asyncio.run(main())
