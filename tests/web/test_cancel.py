"""Stopping a run from the web app: ``POST /api/runs/{id}/cancel`` stores the cancel
request ``lovia cancel`` stores, named with the web app's identity; the worker running
the run (here another process, no queue) stops it at its next lease renewal. Only an
app started with ``--agent`` acts (its store is writable); every POST needs the CSRF
header."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from lovia.stores import RunInfo, store
from lovia.stores.base import CANCEL_REQUEST_KEY, RunSnapshot
from lovia.testing import ScriptedModel
from lovia.web import create_app

from .conftest import run_async
from .test_app import LOCAL, csrf

WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from lovia import Agent, RunCancelled, Runner, tool
    from lovia.stores import store
    from lovia.testing import ScriptedModel, call

    @tool
    async def crawl(site: str) -> str:
        '''Crawl a site (a runaway job).'''
        print("crawling", flush=True)
        await asyncio.sleep(60)
        return "crawled"

    async def main() -> None:
        agent = Agent(name="crawler", model=ScriptedModel([call("crawl", site="x"), "done"]),
                      tools=[crawl])
        try:
            await Runner.run(agent, "go", run_id="crawl-1", checkpointer=store(sys.argv[1]))
        except RunCancelled as exc:
            print("cancelled:", exc.message, flush=True)

    asyncio.run(main())
    """
)


@contextmanager
def crawling(url: str) -> Iterator[subprocess.Popen[str]]:
    """Another process running run ``crawl-1`` on ``url`` (lease TTL 0.6 s), in its tool."""
    env = {**os.environ, "LOVIA_LEASE_TTL_S": "0.6"}
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, url], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert worker.stdout is not None and worker.stdout.readline() == "crawling\n"
        yield worker
    finally:
        worker.kill()
        worker.wait()


def _agent() -> object:
    from lovia import Agent

    return Agent(name="crawler", model=ScriptedModel([]))


def _load(url: str, run_id: str) -> RunSnapshot:
    async def load() -> RunSnapshot:
        db = store(url)
        try:
            snap = await db.load(run_id)
        finally:
            await db.aclose()
        assert snap is not None
        return snap

    snap: RunSnapshot = run_async(load)
    return snap


def test_stop_reaches_a_run_another_process_is_running(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'live.db'}"
    with (
        crawling(url) as worker,
        TestClient(create_app(url, agent=_agent), base_url=LOCAL) as client,
    ):
        page = client.get("/runs/crawl-1").text
        assert 'class="cancel-run" data-run="crawl-1"' in page
        refused = client.post("/api/runs/crawl-1/cancel", json={})
        assert refused.status_code == 403  # no CSRF header: a web page cannot do this
        t0 = time.monotonic()
        done = client.post(
            "/api/runs/crawl-1/cancel",
            json={"reason": "runaway crawler"},
            headers={"x-lovia-csrf": csrf(client)},
        ).json()
        assert done["was"] == "running" and done["cancelled"] is True
        assert "next lease renewal" in done["said"]
        out, _ = worker.communicate(timeout=20)
        assert time.monotonic() - t0 < 10  # not the tool's 60 s
        assert out.startswith("cancelled:") and "web:local: runaway crawler" in out
        page = client.get("/runs/crawl-1").text
        assert 'id="run-cancelled"' in page and 'class="cancel-run"' not in page
    row = _load(url, "crawl-1").info
    assert (row.status, row.extra["cancelled_by"]) == ("cancelled", "web:local: runaway crawler")
    assert row.extra[CANCEL_REQUEST_KEY]["reason"] == "web:local: runaway crawler"


def _seed(url: str, status: str) -> None:
    async def seed() -> None:
        db = store(url)
        await db.begin(RunInfo(run_id="r-1", agent="crawler", started_at=time.time()))
        if status != "running":
            snap = await db.load("r-1")
            assert snap is not None
            await db.finish(replace(snap.info, status=status, ended_at=time.time()), None)
        await db.aclose()

    run_async(seed)


def test_an_ended_run_is_left_as_it_is(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'done.db'}"
    _seed(url, "completed")
    with TestClient(create_app(url, agent=_agent), base_url=LOCAL) as client:
        assert 'class="cancel-run"' not in client.get("/runs/r-1").text
        done = client.post(
            "/api/runs/r-1/cancel", json={}, headers={"x-lovia-csrf": csrf(client)}
        ).json()
    assert done == {
        "run_id": "r-1",
        "was": "ended",
        "cancelled": False,
        "said": "already finished: nothing to cancel",
    }
    assert _load(url, "r-1").info.status == "completed"


def test_without_an_agent_the_app_does_not_act(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ro.db'}"
    _seed(url, "running")
    with TestClient(create_app(url), base_url=LOCAL) as client:
        assert 'class="cancel-run"' not in client.get("/runs/r-1").text
        refused = client.post(
            "/api/runs/r-1/cancel", json={}, headers={"x-lovia-csrf": csrf(client)}
        )
    assert refused.status_code == 400 and "--agent" in refused.json()["hint"]
    assert _load(url, "r-1").info.status == "running"


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("\ud800 lone", "web:local: \\ud800 lone"),  # a lone surrogate, kept visibly
        ("\x1b]0;pwned\x07 esc", "web:local: \x1b]0;pwned\x07 esc"),  # stored as given
        ("x" * 2000, "web:local: " + "x" * 500),  # cut
    ],
)
def test_a_hostile_reason_is_stored_safely(tmp_path: Path, given: str, stored: str) -> None:
    url = f"sqlite:///{tmp_path / 'hostile.db'}"
    _seed(url, "running")
    with TestClient(create_app(url, agent=_agent), base_url=LOCAL) as client:
        body = json.dumps({"reason": given})  # ASCII: a lone surrogate travels as \ud800
        done = client.post(
            "/api/runs/r-1/cancel",
            content=body,
            headers={"x-lovia-csrf": csrf(client), "content-type": "application/json"},
        )
        assert done.status_code == 200, done.text
        page = client.get("/runs/r-1").text
    assert "\x1b" not in page and "\x07" not in page  # shown visibly on the page
    assert _load(url, "r-1").info.extra["cancelled_by"] == stored


def test_the_stop_button_in_a_browser(page: Any, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    from .conftest import serve

    url = f"sqlite:///{tmp_path / 'browser.db'}"
    with crawling(url) as worker, serve(create_app(url, agent=_agent)) as base:
        page.goto(base + "/runs/crawl-1")
        assert page.locator("#run-status").inner_text() == "running"
        page.locator("button.cancel-run").click()
        expect(page.locator("#cancel-result")).to_contain_text("next lease renewal")
        out, _ = worker.communicate(timeout=20)
        assert out.startswith("cancelled:")
        page.goto(base + "/runs/crawl-1")
        assert page.locator("#run-status").inner_text() == "cancelled"
        assert "web:local: stopped from the web app" in page.locator("#run-cancelled").inner_text()
        assert page.locator("button.cancel-run").count() == 0
        assert page.js_errors == []
