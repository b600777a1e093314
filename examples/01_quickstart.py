"""Quickstart: an agent with two tools, traced and stored, ready for `lovia trace` and `lovia replay`.

Offline by default: a scripted demo model plays the model's part (clearly labelled), and
everything else is real — tools, the SQLite store, spans, metrics, replay. Set
``LOVIA_MODEL`` (e.g. ``openai:gpt-4.1-mini`` with ``OPENAI_API_KEY``, or any
OpenAI-compatible server via ``OPENAI_BASE_URL``) to use a real model.

Each run starts a fresh session (``--session`` to continue one), so an earlier run's
history never reaches the next one, and it prints the commands that show its trace.

Run: python examples/01_quickstart.py [--store sqlite:///.lovia/lovia.db] [--session ID]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import uuid
from typing import Any

from lovia import Agent, Runner, tool
from lovia.testing import ScriptedModel, call

ORDERS = {"A-1001": "shipped on 2026-11-27", "A-1002": "waiting for stock"}


@tool(concurrency_safe=True)
def lookup_order(order_id: str) -> str:
    """Look up an order's status by its id.

    Args:
        order_id: The order id, like A-1001.
    """
    return ORDERS.get(order_id, f"no order {order_id}")


@tool
def refund_policy(days_since_delivery: int) -> str:
    """Tell whether an order can still be refunded.

    Args:
        days_since_delivery: Days since the parcel arrived.
    """
    return "refundable" if days_since_delivery <= 30 else "not refundable (over 30 days)"


def demo_model() -> Any:
    model = os.environ.get("LOVIA_MODEL")
    if model:
        return model
    print("(no LOVIA_MODEL set: running offline on a scripted demo model)")
    return ScriptedModel(
        [
            [call("lookup_order", order_id="A-1001"), call("lookup_order", order_id="A-1002")],
            call("refund_policy", days_since_delivery=2),
            "A-1001 shipped on 2026-11-27 and can still be refunded; A-1002 is waiting for stock.",
        ],
        model="demo-scripted",
    )


DEFAULT_STORE = "sqlite:///.lovia/lovia.db"  # where the `lovia` command looks by default


async def main(store_url: str, session_id: str) -> None:
    from lovia.stores import store

    telemetry = None
    try:
        from lovia.telemetry import configure

        telemetry = configure(
            service_name="lovia-quickstart", exporter="local", local_path=store_url
        )
    except (ImportError, TypeError):
        pass
    agent = Agent(
        name="support",
        instructions="You answer questions about orders. Use the tools; be brief.",
        model=demo_model(),
        tools=[lookup_order, refund_policy],
    )
    db = store(store_url)
    result = await Runner.run(
        agent,
        "Where are my orders A-1001 and A-1002, and can I refund the first?",
        checkpointer=db,
        session=db,
        session_id=session_id,
    )
    if telemetry is not None:
        telemetry.shutdown()
    print(result.output)
    print(
        f"run {result.run_id} (session {session_id}): {result.turns} turns, "
        f"{result.usage.input_tokens} in / {result.usage.output_tokens} out tokens, "
        f"{result.usage.tool_calls} tool calls"
    )
    # the store the `lovia` command reads without options is $LOVIA_STORE, else the default
    reads = os.environ.get("LOVIA_STORE", DEFAULT_STORE)
    where = "" if store_url == reads else f" --store {shlex.quote(store_url)}"
    print("inspect it with:")
    for command in ("runs", f"trace {result.run_id}", f"replay {result.run_id}"):
        print(f"  lovia{where} {command}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=os.environ.get("LOVIA_STORE", DEFAULT_STORE))
    parser.add_argument(
        "--session",
        default=f"customer-42-{uuid.uuid4().hex[:8]}",
        help="session id (default: a fresh one each run)",
    )
    cli = parser.parse_args()
    asyncio.run(main(cli.store, cli.session))
