"""A worker that runs one agent against the local llama.cpp server and SIGKILLs itself
as its first model call starts (after the run's start was checkpointed).

Usage: python worker.py BASE_URL STORE_URL RUN_ID
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from lovia import Agent, AgentHooks, ModelSettings, OpenAIChat, Runner, events
from lovia.stores import store

PROMPT = "Name three colours of the rainbow."

hooks = AgentHooks()


@hooks.on(events.ModelCallStarted)
def die(ev: events.ModelCallStarted, ctx: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def agent(base_url: str, with_hooks: bool) -> Agent:
    model = OpenAIChat("gemma-3-270m", base_url=base_url, name="llama.cpp")
    settings = ModelSettings(temperature=0, max_tokens=32)
    return Agent(
        name="local", model=model, model_settings=settings, hooks=hooks if with_hooks else None
    )


async def main(base_url: str, store_url: str, run_id: str) -> None:
    await Runner.run(agent(base_url, True), PROMPT, run_id=run_id, checkpointer=store(store_url))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
