"""Five everyday tasks: two tools, structured output, streaming, a handoff, kill and resume.

The code the migration guides (from the OpenAI Agents SDK and from Pydantic AI) put beside
each peer's version. Offline by default: scripted models play the model's part (set
``LOVIA_MODEL``, e.g. ``openai:gpt-4.1-mini``, to use a real one). The fifth task starts a
copy of this script that SIGKILLs itself inside a tool, then resumes the run from its
checkpoint in this process.

Run: python examples/80_five_tasks.py
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from lovia import Agent, Runner, events
from lovia.stores import store
from lovia.testing import ScriptedModel, call


def model(*steps: Any) -> Any:
    return os.environ.get("LOVIA_MODEL") or ScriptedModel(list(steps))


# 1. Two tools: plain functions; the schema comes from the signature and the docstring.
def get_weather(city: str) -> str:
    """The current weather in a city.

    Args:
        city: The city's name.
    """
    return f"{city}: 18 °C, light rain"


def get_time(city: str) -> str:
    """The local time in a city."""
    return f"{city}: 14:05"


async def two_tools() -> str:
    agent = Agent(
        name="assistant",
        instructions="Answer with the tools.",
        model=model(
            [call("get_weather", city="Lisbon"), call("get_time", city="Lisbon")],
            "In Lisbon it is 14:05, 18 °C with light rain.",
        ),
        tools=[get_weather, get_time],
    )
    result = await Runner.run(agent, "Weather and time in Lisbon?")
    return result.output


# 2. Structured output: result.output is a validated City (and typed as one).
class City(BaseModel):
    name: str
    country: str
    population: int


async def structured_output() -> City:
    agent = Agent(
        name="geo",
        model=model('{"name": "Tokyo", "country": "Japan", "population": 37400000}'),
        output_type=City,
    )
    result = await Runner.run(agent, "The largest city in the world?")
    return result.output


# 3. Streaming: typed events as they happen, then the result.
async def streaming() -> str:
    agent = Agent(name="poet", model=model("Rain on the river, light on the hill."))
    handle = Runner.stream(agent, "A one-line poem about Lisbon.")
    async for event in handle:
        if isinstance(event, events.TextDelta):
            print(event.text, end="", flush=True)
    print()
    return (await handle.result()).output


# 4. Handoff: triage transfers the conversation to billing.
async def handoff() -> str:
    shared = model(call("transfer_to_billing"), "Your refund for invoice 42 is on its way.")
    billing = Agent(
        name="billing",
        instructions="You handle refunds.",
        description="Invoices and refunds.",
        model=shared,
    )
    triage = Agent(name="triage", instructions="Route the user.", model=shared, handoffs=[billing])
    result = await Runner.run(triage, "Refund invoice 42, it was charged twice.")
    return f"{result.final_agent.name}: {result.output}"


# 5. Kill and resume: a worker dies (SIGKILL) inside a tool; the run resumes from its
#    checkpoint. The completed tool is not run again; the interrupted one is.
CRASH = "--crash" in sys.argv


def reserve_seat(flight: str) -> str:
    """Reserve a seat on a flight."""
    return f"seat 14C on {flight}"


def book(flight: str) -> str:
    """Book the reserved seat."""
    if CRASH:
        os.kill(os.getpid(), signal.SIGKILL)  # the worker dies mid-tool
    return f"booked {flight}"


def booking_agent(*steps: Any) -> Agent:
    return Agent(name="booker", model=model(*steps), tools=[reserve_seat, book])


async def crashing_worker(url: str, run_id: str) -> None:
    agent = booking_agent(
        call("reserve_seat", flight="LX 318"), call("book", flight="LX 318"), "unreachable"
    )
    await Runner.run(agent, "Book LX 318.", run_id=run_id, checkpointer=store(url))


async def kill_and_resume(url: str) -> str:
    run_id = "booking-1"
    worker = [sys.executable, __file__, "--crash", url, run_id]
    died = await asyncio.create_subprocess_exec(*worker, stderr=asyncio.subprocess.PIPE)
    _, stderr = await died.communicate()
    assert died.returncode == -signal.SIGKILL, stderr.decode()
    agent = booking_agent("Booked LX 318, seat 14C.")  # only the final answer is left
    result = await Runner.run(agent, "Book LX 318.", run_id=run_id, checkpointer=store(url))
    tools_run = [e.name for e in result.entries if e.type == "tool_result"]
    assert tools_run == ["reserve_seat", "book"], tools_run  # each ran to completion once
    return f"{result.output} (resumed after SIGKILL, {result.turns} turns)"


async def main() -> None:
    print("1.", await two_tools())
    print("2.", repr(await structured_output()))
    print("3.", await streaming())
    print("4.", await handoff())
    with tempfile.TemporaryDirectory() as tmp:
        print("5.", await kill_and_resume(f"sqlite:///{Path(tmp) / 'runs.db'}"))


if __name__ == "__main__":
    if CRASH:
        asyncio.run(crashing_worker(sys.argv[2], sys.argv[3]))
    else:
        asyncio.run(main())
