"""Agents and helpers shared by the task-queue tests and their worker subprocess."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lovia import Agent, tool
from lovia.testing import FunctionModel, call
from lovia.workers import Worker

Start = Callable[[Worker], asyncio.Task[None]]
"""The ``start`` fixture: run a worker in the background until the test ends."""


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


async def eventually(check: Callable[[], object], timeout_s: float = 15.0) -> None:
    """Poll ``check`` (sync or async) until it is truthy."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if loop.time() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        await asyncio.sleep(0.05)


def counting_agent(counts: Counter[str], name: str = "counter") -> Agent[Any, Any]:
    """Calls ``bump(key=<its input>)`` once, then answers; ``counts`` sees each side effect."""

    @tool
    def bump(key: str) -> str:
        """Count a side effect."""
        counts[key] += 1
        return f"bumped {key}"

    def decide(request: Any, info: Any) -> Any:
        last = request.messages[-1]  # the session's earlier runs come before it
        if last.type == "input":
            return call("bump", key=last.content)
        return f"done: {last.content}"

    return Agent(name=name, model=FunctionModel(decide), tools=[bump])


def crashy_agent(log: Path, kill_at: str = "none") -> Agent[Any, Any]:
    """Calls record(1) and record(2) (not idempotent); SIGKILLs its process at ``kill_at``.

    ``tool``: inside record(2), after its side effect; ``model``: in the first model call.
    """

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    @tool
    def record(n: int) -> str:
        """Record a side effect (not idempotent)."""
        with log.open("a") as f:
            f.write(f"{n}\n")
        if kill_at == "tool" and n == 2:
            die()
        return f"recorded {n}"

    def decide(request: Any, info: Any) -> Any:
        results = [m for m in request.messages if m.type == "tool_result"]
        if kill_at == "model" and not results:
            die()
        if not results:
            return [call("record", n=1, id="c1"), call("record", n=2, id="c2")]
        return "done: " + ", ".join(r.content for r in results)

    return Agent(name="crashy", model=FunctionModel(decide), tools=[record])
