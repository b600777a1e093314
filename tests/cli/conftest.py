"""A recorded run for the CLI tests: tools, an eviction + summary, a reminder, a handoff.

The run is stored in a SQLite file; the CLI is run as a subprocess against it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent, Runner, tool
from lovia.errors import ProviderServerError
from lovia.plugins import PluginInstance
from lovia.stores import store
from lovia.testing import ScriptedModel, call
from lovia.transcript import InputEntry, SystemEntry, ToolResultEntry
from lovia.view import BuiltView, ViewInput

ROOT = Path(__file__).resolve().parents[2]


@tool
async def lookup_order(order_id: str) -> str:
    """Look up an order by id."""
    return f"{order_id}: shipped"


class Reminders:
    """A tiny plugin whose view injector adds a reminder to every view."""

    name = "reminders"

    async def setup(self, ctx: Any) -> PluginInstance:
        return PluginInstance(view_injectors=[lambda c: ["<reminder>be brief</reminder>"]])


class StubAndSummarize:
    """A user-defined strategy: stubs every tool result but the newest, summarizes the
    turn-0 input. Replay must work for any ContextStrategy, not only the built-in one
    (the built-in Compaction is replayed in ``test_replay_compaction.py``).
    """

    def new_state(self) -> None:
        return None

    async def build(self, inp: ViewInput, state: Any, summarize: Any) -> BuiltView:
        entries = [e for e in inp.entries if not isinstance(e, SystemEntry)]
        results = [e for e in entries if isinstance(e, ToolResultEntry)]
        stale = {e.id for e in results[:-1]}
        messages: list[Any] = []
        order: list[str] = []
        replaced: dict[str, Any] = {}
        summary = None
        first_input = next((e.id for e in entries if isinstance(e, InputEntry)), None)
        for entry in entries:
            if entry.id in stale:
                stub = entry.model_copy(update={"content": f"[evicted: recall {entry.id}]"})
                replaced[entry.id] = stub
                messages.append(stub)
            elif inp.turn >= 3 and entry.id == first_input:
                summary = "Earlier, the user greeted the agent."
                stub = InputEntry(
                    id=f"sum_{entry.id}",
                    content=summary,
                    origin="summary",
                    run_id=entry.run_id,
                    turn=inp.turn,
                    agent=inp.agent_name,
                    ts=entry.ts,
                )
                replaced[stub.id] = stub
                messages.append(stub)
                order.append(stub.id)
                continue
            else:
                messages.append(entry)
            order.append(entry.id)
        return BuiltView(
            messages=messages,
            order=order,
            replaced=replaced,
            summary=summary,
            compactions=[("evict", tuple(sorted(stale)))] if stale else (),
        )


def compaction_strategy() -> Any:
    """The scenario's strategy: a custom one (see StubAndSummarize)."""
    return StubAndSummarize()


@dataclass
class Recorded:
    url: str
    path: Path
    run_id: str
    first_run_id: str
    hashes: list[str] = field(default_factory=list[str])
    """view hashes the loop reported (ViewBuilt events), in call order."""


async def record_scenario(url: str) -> tuple[str, str, list[str]]:
    """Two runs in one session; the second is the interesting one. Returns ids + hashes."""
    db = store(url)
    billing = Agent(
        name="billing",
        instructions="You handle refunds.",
        model=ScriptedModel(["Refund issued for B2."]),
    )
    support = Agent(
        name="support",
        instructions="You help with orders.",
        tools=[lookup_order],
        plugins=[Reminders()],
        handoffs=[billing],
        context=compaction_strategy(),
        model=ScriptedModel(
            [
                call("lookup_order", order_id="A1", id="call_a1"),
                call("lookup_order", order_id="B2", id="call_b2"),
                call("transfer_to_billing", id="call_tx"),
            ]
        ),
    )
    opts: dict[str, Any] = {"checkpointer": db, "session": db, "session_id": "sess-1"}
    first = await Runner.run(
        support.clone(model=ScriptedModel(["Hello! How can I help?"])), "hi", **opts
    )
    stream = Runner.stream(support, "where are A1 and B2? refund B2", **opts)
    hashes = [e.view_hash async for e in stream if type(e).__name__ == "ViewBuilt"]
    result = await stream.result()
    broken = support.clone(model=ScriptedModel([ProviderServerError("upstream 502")]))
    with contextlib.suppress(ProviderServerError):
        await Runner.run(
            broken,
            "status?",
            checkpointer=db,
            session=db,
            session_id="sess-2",
            run_id="run-failed-1",
        )
    await db.aclose()
    return str(first.run_id), str(result.run_id), hashes


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    path = tmp_path_factory.mktemp("cli") / "lovia.db"
    url = f"sqlite:///{path}"
    first, run_id, hashes = asyncio.run(record_scenario(url))
    return Recorded(url=url, path=path, run_id=run_id, first_run_id=first, hashes=hashes)


@dataclass
class Result:
    code: int
    out: str
    err: str


def lovia(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> Result:
    """Run ``python -m lovia.cli ARGS`` (stdout piped, so plain output)."""
    full_env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "NO_COLOR": "1",
        "TZ": "UTC",
        **(env or {}),
    }
    full_env.pop("LOVIA_STORE", None) if env is None or "LOVIA_STORE" not in env else None
    proc = subprocess.run(
        [sys.executable, "-m", "lovia.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=60,
        check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def normalize(text: str, ids: Sequence[str] = ()) -> str:
    """Make output deterministic: run ids, entry ids, hashes, times, durations."""
    for i, run_id in enumerate(ids):
        text = text.replace(run_id, f"<run{i}>")
    text = re.sub(r"\b[0-9a-f]{64}\b", "<hash>", text)
    text = re.sub(r"\b[0-9a-f]{32}\b", "<id32>", text)
    text = re.sub(r"\b(e|msg|sum_e)_[0-9a-f]{16}\b", r"<\1>", text)
    text = re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", "<time>", text)
    text = re.sub(r"\b\d+(\.\d+)?(ms|s)\b", "<dur>", text)
    text = re.sub(r"(?<=\S) {2,}", "  ", text)
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


@pytest.fixture
def no_store_env() -> Iterator[None]:
    old = os.environ.pop("LOVIA_STORE", None)
    yield
    if old is not None:
        os.environ["LOVIA_STORE"] = old
