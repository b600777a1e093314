"""``lovia resume`` is traced when the store holds local spans; ``lovia trace`` shows every
attempt, and says plainly when an attempt's spans died with its process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent, ApprovalPending, Runner, tool
from lovia.cli._telemetry import has_span_table
from lovia.cli._trace import _no_spans, attempt_parts  # pyright: ignore[reportPrivateUsage]
from lovia.replay._spans import SpanRow
from lovia.stores import store
from lovia.stores.lifecycle import Attempt
from lovia.telemetry.local import load_spans, path_from_url
from lovia.testing import FunctionModel, call

from . import lives
from .test_lives import lovia

HERE = Path(__file__).parent


def _make_span_table(url: str) -> None:
    """What ``configure(exporter="local")`` leaves in a store: the span table."""
    from lovia.telemetry.local import _connect  # pyright: ignore[reportPrivateUsage]

    _connect(path_from_url(url)).close()


async def _pause(url: str, run_id: str) -> None:
    db = store(url)
    try:
        with pytest.raises(ApprovalPending):
            await Runner.run(lives.approver(), "refund B2", run_id=run_id, checkpointer=db)
    finally:
        await db.aclose()


def test_a_cli_resume_is_traced_into_the_stores_local_spans(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    asyncio.run(_pause(url, "r-traced"))
    assert not has_span_table(url)
    _make_span_table(url)
    assert has_span_table(url)
    res = lovia("resume", "r-traced", "--agent", "lives:approver", "--approve", "c_refund",
                "--store", url)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "run r-traced: completed" in res.stdout
    spans = load_spans(url, run_id="r-traced")
    (root,) = [s for s in spans if s["name"].startswith("invoke_agent")]
    assert root["attributes"]["lovia.run.attempt"] == 2
    approvals = [e for s in spans for e in s["events"] if e["name"] == "lovia.approval"]
    assert [e["attributes"]["lovia.approval.decision"] for e in approvals] == ["approved"]
    assert approvals[0]["attributes"]["lovia.approval.actor"].startswith("cli:")
    trace = lovia("trace", "r-traced", "--store", url, "--json")
    assert trace.returncode == 0, trace.stderr
    parts = json.loads(trace.stdout)["attempts"]
    # attempt 1 ran untraced (no trace id): its spans are not looked for
    assert [(p["attempt"], p["how"], p["note"]) for p in parts] == [(2, "finished", None)]
    assert parts[0]["trace_id"] == root["trace_id"]


def _span(trace: str, span: str, parent: str | None = None) -> SpanRow:
    return SpanRow(name=f"s{span}", span_id=span, parent_id=parent, trace_id=trace, start=1.0)


def test_trace_parts_say_when_spans_died_with_their_process() -> None:
    t1, t2, t3 = "1" * 32, "2" * 32, "3" * 32
    attempts = [
        Attempt(attempt=1, started_at=1, how="killed", trace_id=t1, span_id="a" * 16),
        Attempt(attempt=2, started_at=2, how="lease_lost", trace_id=t2, span_id="b" * 16),
        Attempt(attempt=3, started_at=3, how="finished", trace_id=t3, span_id="c" * 16),
    ]
    spans = [
        _span(t2, "d" * 16, parent="b" * 16),  # a child exported before its root died
        _span(t3, "c" * 16),
        _span(t3, "e" * 16, parent="c" * 16),
    ]
    parts = attempt_parts(attempts, spans)
    assert [(p.attempt, len(p.roots)) for p in parts] == [(1, 0), (2, 1), (3, 1)]
    assert "lost with its process" in parts[0].note
    assert "root span was lost with its process" in parts[1].note
    assert parts[2].note == "" and [c.span_id for c in parts[2].roots[0].children] == ["e" * 16]


def test_no_spans_never_tells_a_local_exporter_user_to_configure_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    asyncio.run(_pause(url, "r-quiet"))
    killed = [Attempt(attempt=1, started_at=1, how="killed")]
    bare = _no_spans(url, "r-quiet", None, killed)
    assert "configure" in (bare.hint or "")  # no span table: telling how to record is right
    _make_span_table(url)
    told = _no_spans(url, "r-quiet", None, killed)
    assert "configure" not in told.message + (told.hint or "")
    assert "lost with their process" in told.message
    res = subprocess.run(
        [sys.executable, "-m", "lovia.cli", "trace", "r-quiet", "--store", url],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert res.returncode == 2 and "configure(" not in res.stderr
    assert "the local span store has no spans for run r-quiet" in res.stderr


async def _two_traced_attempts(url: str) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from lovia.telemetry.local import SQLiteSpanExporter

    lost = TracerProvider()  # exports nothing: its spans are gone
    kept = TracerProvider()
    kept.add_span_processor(SimpleSpanProcessor(SQLiteSpanExporter(path_from_url(url))))
    db = store(url)
    try:
        with pytest.raises(ApprovalPending):
            await Runner.run(
                lives.approver(), "refund B2", run_id="r-two", checkpointer=db, tracer_provider=lost
            )
        await Runner.run(
            lives.approver(), None, run_id="r-two", checkpointer=db, tracer_provider=kept,
            approvals={"c_refund": True},
        )  # fmt: skip
    finally:
        await db.aclose()
        kept.shutdown()


def test_the_web_run_page_says_which_attempt_has_no_spans(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from lovia.web import create_app

    url = f"sqlite:///{tmp_path / 'l.db'}"
    asyncio.run(_two_traced_attempts(url))
    with TestClient(create_app(url), base_url="http://127.0.0.1") as client:
        data = client.get("/api/runs/r-two").json()
        assert data["span_source"] == "span store"
        assert data["span_notes"] == [
            {"attempt": 1, "how": "paused", "note": "no spans stored for this attempt"}
        ]
        assert [a["how"] for a in data["run"]["attempts"]] == ["paused", "finished"]
        page = client.get("/runs/r-two").text
        assert 'class="banner warn span-note" data-attempt="1"' in page
        assert 'id="attempts"' in page


_TORN = {"down": True}


@tool(idempotent=True)  # safe to run again after the teardown
async def flaky_step() -> str:
    """Torn down the first time (as if its process went away), fine after."""
    if _TORN["down"]:
        _TORN["down"] = False
        raise asyncio.CancelledError  # not the run's own cancellation: nothing is recorded
    return "step done"


def torn_agent() -> Agent[Any, str]:
    def decide(request: Any, info: Any) -> Any:
        done = [m for m in request.messages if m.type == "tool_result"]
        return "finished: " + done[-1].content if done else call("flaky_step", id="c_step")

    return Agent(name="torn", model=FunctionModel(decide), tools=[flaky_step])


async def _torn_down(url: str) -> None:
    """A run whose worker is torn down in its tool: the row says running, nobody holds it."""
    _TORN["down"] = True
    db = store(url)
    try:
        with pytest.raises(asyncio.CancelledError):
            await Runner.run(torn_agent(), "go", run_id="r-torn", checkpointer=db)
    finally:
        await db.aclose()


def test_the_web_resumes_an_interrupted_run(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from lovia.web import create_app

    from .test_lives import _csrf  # pyright: ignore[reportPrivateUsage]

    url = f"sqlite:///{tmp_path / 'l.db'}"
    asyncio.run(_torn_down(url))
    with TestClient(create_app(url), base_url="http://127.0.0.1") as client:
        page = client.get("/runs/r-torn").text
        assert 'id="run-interrupted"' in page and "lovia resume r-torn" in page
        assert 'class="resume"' not in page  # no agent: the page says how instead
    with TestClient(create_app(url, agent=torn_agent), base_url="http://127.0.0.1") as client:
        assert 'class="resume"' in client.get("/runs/r-torn").text
        done = client.post(
            "/api/runs/r-torn/resume", json={}, headers={"x-lovia-csrf": _csrf(client)}
        ).json()
        assert done == {"run_id": "r-torn", "status": "completed", "output": "finished: step done"}
        again = client.post(
            "/api/runs/r-torn/resume", json={}, headers={"x-lovia-csrf": _csrf(client)}
        )
        assert again.status_code == 400 and "completed" in again.json()["error"]
        run = client.get("/api/runs/r-torn").json()["run"]
        assert run["state"] == "completed"
        assert [a["how"] for a in run["attempts"]] == ["lease_lost", "finished"]


async def test_a_resume_keeps_the_runs_first_trace_and_start(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    db = store(f"sqlite:///{tmp_path / 'l.db'}")
    try:
        with pytest.raises(ApprovalPending):
            await Runner.run(
                lives.approver(), "go", run_id="r-keep", checkpointer=db,
                tracer_provider=TracerProvider(),
            )  # fmt: skip
        first = await db.load("r-keep")
        assert first is not None and first.info.trace_id is not None
        await Runner.run(
            lives.approver(), None, run_id="r-keep", checkpointer=db, approvals={"c_refund": True}
        )
        done = await db.load("r-keep")
        assert done is not None and done.info.status == "completed"
        assert (done.info.trace_id, done.info.span_id) == (first.info.trace_id, first.info.span_id)
        assert done.info.started_at == first.info.started_at
        assert done.info.ended_at is not None and done.info.ended_at > first.info.ended_at  # type: ignore[operator]
    finally:
        await db.aclose()
