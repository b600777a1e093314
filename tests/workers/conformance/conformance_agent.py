"""The agent every conformance worker runs, whatever the queue back-end.

Imported by the worker processes (``conformance_agent:agent``). Its model is the bench
fake OpenAI-compatible server at ``$LOVIA_CONFORMANCE_MODEL_URL`` (one turn of two
parallel ``add`` calls, then ``sum=<total>``). Everything a test checks is appended to
files under ``$LOVIA_CONFORMANCE_DIR`` (one line per event, ``O_APPEND``, so several
processes can write at once):

- ``tools.log``: ``<run_id> <a> <b>`` per ``add`` side effect (a tool run twice shows up)
- ``completed.log``: ``<run_id>`` per run that completed (not replayed)
- ``deps.log``: ``<deps_key>`` per call of :func:`deps` (a worker started with it)

Traps, each firing once per test (a marker file made with ``O_EXCL``):
- a run whose id starts with ``die-in-tool`` SIGKILLs its worker inside ``add``, after
  the side effect;
- a run whose id starts with ``slow-`` notes it in ``started.log`` and waits a minute
  in ``add`` (something to cancel); one whose id starts with ``stall-`` does so once
  per test (the first ``add`` call: something to stall a worker in);
- a run whose input contains ``die-in-model`` SIGKILLs its worker in the middle of its
  first model call (the response headers arrived, the body was not read); one whose
  input contains ``always-die`` does so in every model call (a poison run).
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import httpx

from lovia import Agent, AgentHooks, RunContext, events, tool
from lovia.providers.openai_chat import OpenAIChat

DIR = Path(os.environ["LOVIA_CONFORMANCE_DIR"])
MODEL_URL = os.environ["LOVIA_CONFORMANCE_MODEL_URL"]


def _append(name: str, line: str) -> None:
    fd = os.open(DIR / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


def _trap(name: str) -> bool:
    """True the first time ``name`` is sprung in this test (across processes)."""
    try:
        os.close(os.open(DIR / f"trap-{name}", os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@tool
async def add(ctx: RunContext[Any], a: int, b: int) -> int:
    """Add two integers (a side effect that must not happen twice)."""
    _append("tools.log", f"{ctx.run_id} {a} {b}")
    if ctx.run_id.startswith("die-in-tool") and _trap("tool"):
        _die()
    if ctx.run_id.startswith("slow-") or (ctx.run_id.startswith("stall-") and _trap("stall")):
        _append("started.log", ctx.run_id)
        await asyncio.sleep(60)
    return a + b


async def _model_trap(response: httpx.Response) -> None:
    sent = response.request.content
    if b"always-die" in sent or (b"die-in-model" in sent and _trap("model")):
        _die()


hooks = AgentHooks()


@hooks.on(events.RunCompleted)
def _completed(event: events.RunCompleted, ctx: Any) -> None:
    if not event.replayed:
        _append("completed.log", event.run_id)


def _model() -> OpenAIChat:
    client = httpx.AsyncClient(event_hooks={"response": [_model_trap]}, timeout=30.0)
    return OpenAIChat("bench-t1-c2", base_url=MODEL_URL, api_key="x", http_client=client)


agent = Agent(name="adder", model=_model(), tools=[add], hooks=hooks)


def deps(deps_key: str | None) -> dict[str, str | None]:
    """The ``deps`` factory of a worker started with deps: notes each key it is given."""
    _append("deps.log", str(deps_key))
    return {"tenant": deps_key}
