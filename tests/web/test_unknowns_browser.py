"""In real headless Chromium: a running run's in-flight tool call reads "running" under
an "in turn 1" header, and a run whose provider sent no usage and whose model has no
price shows ``?`` tokens and a ``?`` cost — never ``0+0`` or $0."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from lovia import Agent, Runner, tool
from lovia.stores import store
from lovia.testing import FunctionModel, ScriptedModel, call, reply
from lovia.usage import Usage
from lovia.web import create_app

from .conftest import serve


def test_running_and_unknown_in_chromium(page: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    started, release = threading.Event(), threading.Event()

    @tool
    async def slow() -> str:
        """Runs until the test has looked at the pages."""
        started.set()
        await asyncio.to_thread(release.wait, 60)
        return "done"

    async def work() -> None:
        db = store(url)
        silent = Agent(
            name="silent",
            model=FunctionModel(
                lambda r, i: reply("hi", usage=Usage(missing=True)), provider="x", model="nop"
            ),
        )
        busy = Agent(name="busy", model=ScriptedModel([call("slow", id="c1"), "ok"]), tools=[slow])
        try:
            await Runner.run(silent, "go", run_id="silent-1", checkpointer=db)
            await Runner.run(busy, "go", run_id="busy-1", checkpointer=db)
        finally:
            await db.aclose()

    worker = threading.Thread(target=lambda: asyncio.run(work()))
    worker.start()
    try:
        assert started.wait(60), "the busy run never reached its tool"
        with serve(create_app(url)) as base:
            page.goto(f"{base}/runs/busy-1")
            call_item = page.locator("#transcript .item.kind-tool_call")
            assert call_item.locator(".result").inner_text() == "running"
            assert page.locator("#run-turns").inner_text() == "in turn 1"
            assert "no result" not in page.locator("#transcript").inner_text()
            page.goto(f"{base}/runs/silent-1")
            assert page.locator("#run-tokens").inner_text() == "?"
            assert page.locator("#run-cost").inner_text() == "?"
            page.goto(f"{base}/")
            row = page.locator('tr.run[data-run-id="silent-1"]').inner_text()
            assert "0+0" not in row and "$0" not in row and "?" in row
    finally:
        release.set()
        worker.join(60)
