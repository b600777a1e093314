"""Unknown is not zero, in ``lovia runs``/``show`` and ``lovia web`` alike: a run with
unpriced calls shows its cost as ``?`` (or ``$x+?`` when part of it is priced), a
provider that sent no usage shows ``?`` tokens, and a running run's in-flight tool call
is "running" under a header that says which turn it is in — never "0 turns"."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from lovia import Agent, Runner, tool
from lovia.stores import store
from lovia.telemetry import clear_prices, set_price
from lovia.testing import FunctionModel, ScriptedModel, call, reply
from lovia.usage import Usage
from lovia.web import create_app

LOCAL = "http://127.0.0.1:8765"


def lovia(*args: str) -> Any:
    """``python -m lovia.cli ARGS``, plain output (piped)."""
    env = {**os.environ, "NO_COLOR": "1", "TZ": "UTC"}
    env.pop("LOVIA_STORE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "lovia.cli", *args], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def priced() -> Iterator[None]:
    set_price("fake", "priced", input_per_mtok=1000.0, output_per_mtok=1000.0)
    yield
    clear_prices()


async def _unknowns(url: str) -> None:
    db = store(url)
    silent = Agent(
        name="silent",
        model=FunctionModel(
            lambda r, i: reply("hi", usage=Usage(missing=True)), provider="fake", model="nop"
        ),
    )
    helper = Agent(
        name="helper",
        model=FunctionModel(
            lambda r, i: reply("ok", usage=Usage(input_tokens=5, output_tokens=5)),
            provider="fake",
            model="nop",
        ),
    )

    def boss(request: Any, info: Any) -> Any:
        if not any(m.type == "tool_result" for m in request.messages):
            return reply(tool_calls=[call("ask", input="x")], usage=Usage(input_tokens=10))
        return reply("done", usage=Usage(input_tokens=10, output_tokens=2))

    partly = Agent(
        name="partly",
        model=FunctionModel(boss, provider="fake", model="priced"),
        tools=[helper.as_tool(name="ask")],
    )
    try:
        await Runner.run(silent, "go", run_id="silent-1", checkpointer=db)
        await Runner.run(partly, "go", run_id="partly-1", checkpointer=db)
    finally:
        await db.aclose()


def test_unpriced_and_missing_usage_read_as_unknown(tmp_path: Path, priced: None) -> None:
    url = f"sqlite:///{tmp_path / 'u.db'}"
    asyncio.run(_unknowns(url))
    with TestClient(create_app(url), base_url=LOCAL) as client:
        silent = client.get("/runs/silent-1").text
        partly = client.get("/runs/partly-1").text
        listing = client.get("/").text
        data = client.get("/api/runs/silent-1").json()
    assert '<span id="run-tokens">?</span>' in silent
    assert '<span id="run-cost">?</span>' in silent
    assert "0+0" not in silent
    cost = re.search(r'<span id="run-cost">([^<]*)</span>', partly)
    assert cost and re.fullmatch(r"\$0\.\d{2,}\+\?", cost.group(1)), cost  # adaptive decimals
    assert data["run"]["usage_missing"] is True and data["run"]["unpriced"] == 1
    row = re.search(r'data-run-id="silent-1"[^>]*>(.*?)</tr>', listing, re.S)
    unknown = re.findall(r'<td class="num[^"]*"[^>]*>\?</td>', row.group(1)) if row else []
    assert len(unknown) == 2  # tokens and cost

    runs = lovia("runs", "--store", url)
    line = next(x for x in runs.stdout.splitlines() if x.startswith("silent-1"))
    assert line.split()[-6:-3] == ["1", "?", "?"]  # turns, tokens, cost (then date time dur)
    shown = lovia("show", "silent-1", "--store", url).stdout.splitlines()[1]
    assert "· ? tokens · ? ·" in shown
    partly_line = lovia("show", "partly-1", "--store", url).stdout.splitlines()[1]
    assert re.search(r"· \$0\.\d{4}\+\? ·", partly_line), partly_line


def test_an_in_flight_tool_is_running_not_failed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    seen: dict[str, Any] = {}

    @tool
    async def slow() -> str:
        """Takes a while: the pages are read while it runs."""
        with TestClient(create_app(url), base_url=LOCAL) as client:
            seen["page"] = client.get("/runs/busy-1").text
            seen["runs"] = client.get("/").text
        seen["show"] = lovia("show", "busy-1", "--store", url).stdout
        return "done"

    async def main() -> None:
        db = store(url)
        agent = Agent(name="busy", model=ScriptedModel([call("slow", id="c1"), "ok"]), tools=[slow])
        try:
            await Runner.run(agent, "go", run_id="busy-1", checkpointer=db)
        finally:
            await db.aclose()

    asyncio.run(main())
    page = seen["page"]
    assert '<div class="result running">running</div>' in page
    assert "no result" not in page
    assert '<span id="run-turns">in turn 1</span>' in page
    assert "0 turns" not in page
    assert "in turn 1" in seen["runs"]
    header, transcript = seen["show"].splitlines()[1], seen["show"]
    assert "running · in turn 1 ·" in header
    assert "-> (running)" in transcript and "(no result)" not in transcript
