"""The trace of a resumed run, grouped by attempt (each under a heading saying how it
ended), and the minimap a long trace gets."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lovia._display import safe_name
from lovia.replay._spans import SpanRow
from lovia.stores.lifecycle import Attempt
from lovia.testing import ScriptedModel
from lovia.web import create_app
from lovia.web._trace import MINIMAP_ROWS, by_attempt, minimap, waterfall

from .conftest import run_async

LOCAL = "http://127.0.0.1:8765"
T1, T2 = "1" * 32, "2" * 32


def _span(span_id: str, parent: str | None, start: float, trace: str = "", **kw: object) -> SpanRow:
    return SpanRow(
        name=f"s {span_id}",
        span_id=span_id,
        parent_id=parent,
        trace_id=trace,
        start=start,
        end=start + 1.0,
        **kw,  # type: ignore[arg-type]
    )


ATTEMPTS = [
    Attempt(attempt=1, started_at=0.0, ended_at=4.0, how="killed", host="h", pid=7, trace_id=T1),
    Attempt(attempt=2, started_at=5.0, ended_at=9.0, how="finished", trace_id=T2),
]


def test_rows_are_grouped_by_the_attempt_whose_trace_they_are_in() -> None:
    spans = [
        _span("a", None, 0.0, T1),
        _span("a1", "a", 1.0, T1),
        _span("b", None, 5.0, T2),
        _span("b1", "b", 6.0, T2),
        _span("late", None, 9.5, T1),  # exported late, still attempt 1's by its trace
    ]
    bars = waterfall(spans, None, ATTEMPTS)
    assert [(b.span.span_id, b.attempt) for b in bars] == [
        ("a", 1),
        ("a1", 1),
        ("b", 2),
        ("b1", 2),
        ("late", 1),
    ]
    groups = by_attempt(bars, ATTEMPTS)
    assert [(g.title, [b.span.span_id for b in g.bars]) for g in groups] == [
        ("attempt 1 · killed on h (pid 7)", ["a", "a1"]),
        ("attempt 2 · finished", ["b", "b1"]),
        ("attempt 1 · killed on h (pid 7)", ["late"]),
    ]
    assert groups[1].left == pytest.approx(5.0 / 10.5 * 1000)  # on the 0-1000 axis (0-10.5 s)


def test_spans_without_a_trace_id_go_to_the_attempt_running_when_they_started() -> None:
    spans = [
        _span("run", None, 0.0),
        _span("turn-1", "run", 0.0),
        _span("turn-2", "run", 4.99),
        _span("turn-3", "run", 5.0),
    ]
    bars = waterfall(spans, None, ATTEMPTS)
    assert [(b.span.span_id, b.attempt) for b in bars] == [
        ("run", 1),
        ("turn-1", 1),
        ("turn-2", 1),
        ("turn-3", 2),
    ]
    one = waterfall(spans, None, ATTEMPTS[:1])  # one attempt: nothing to group
    assert {b.attempt for b in one} == {None}
    assert [(g.attempt, len(g.bars)) for g in by_attempt(one, ATTEMPTS[:1])] == [(None, 4)]


@pytest.mark.parametrize("rows", [MINIMAP_ROWS, MINIMAP_ROWS + 1])
def test_a_long_trace_gets_a_minimap_of_every_row_but_bookkeeping(rows: int) -> None:
    spans = [_span("root", None, 0.0)]
    spans += [_span(f"c{i}", "root", float(i) / 10, error="boom" if i == 3 else None)
              for i in range(rows - 1)]  # fmt: skip
    spans.append(SpanRow(name="lovia.checkpoint.write", span_id="w", parent_id="root", start=0.5))
    marks = minimap(waterfall(spans))
    if rows == MINIMAP_ROWS:
        assert marks == []
        return
    assert len(marks) == rows and [m["span_id"] for m in marks[:2]] == ["root", "c0"]
    assert [m["span_id"] for m in marks if m["error"]] == ["c3"]
    step = 1000.0 / rows
    assert [m["y"] for m in marks[:3]] == [0.0, round(step, 1), round(2 * step, 1)]
    assert marks[0]["x"] == 0.0 and marks[-1]["h"] == round(step, 1)


HOSTILE_HOST = "<img src=x onerror=alert(1)>\x1b[31m\u202ehost"


@pytest.mark.parametrize("host", ["", HOSTILE_HOST])
def test_a_resumed_runs_page_shows_its_attempts(
    tmp_path: Path, host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lovia import Runner
    from lovia.stores import store

    from .scenarios import record_paused, support_agent

    url = f"sqlite:///{tmp_path / 'resumed.db'}"
    run_async(lambda: record_paused(url))

    async def resume() -> None:
        db = store(url)
        agent = support_agent(ScriptedModel(["Refunded."]))
        decided = {"c_refund": True}
        await Runner.run(agent, None, run_id="run-paused", checkpointer=db, approvals=decided)
        await db.aclose()

    if host:  # a worker's host name is stored data: it reaches the page only as text
        import lovia._loop.attempts as attempts

        monkeypatch.setattr(attempts, "HOST", host)
    run_async(resume)
    with TestClient(create_app(url), base_url=LOCAL) as client:
        page = client.get("/runs/run-paused").text
        data = client.get("/api/runs/run-paused").json()
    groups = data["groups"]
    where = [f"on {g['attempt']['host']} (pid {g['attempt']['pid']})" for g in groups]
    assert [g["title"] for g in groups] == [
        f"attempt 1 · paused {where[0]}",
        f"attempt 2 · finished {where[1]}",
    ]
    heads = re.findall(r'<tr class="attempt-head"><th scope="rowgroup" colspan="4">([^<]*)', page)
    shown = [h.split(" · started ")[0] for h in heads]
    assert shown == [html.escape(safe_name(g["title"]), quote=True) for g in groups]
    assert page.count('<tbody class="attempt-group" id="attempt-') == 2
    if host:
        assert groups[1]["attempt"]["host"] == host  # the JSON twin keeps it as stored
        assert "<img" not in page and "\x1b" not in page and "\u202e" not in page
        assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert [g["attempt"]["attempt"] for g in data["groups"]] == [1, 2]
    spans = [s for g in data["groups"] for s in g["spans"]]
    assert sorted(spans) == sorted(b["span_id"] for b in data["bars"])
    by_id = {b["span_id"]: b["attempt"] for b in data["bars"]}
    # the calls were made (and their spans start) in attempt 1; turn 2 is attempt 2's
    assert {k: v for k, v in by_id.items() if v == 2} == {"turn-2": 2, "chat-2": 2}
    assert by_id["run"] == by_id["chat-1"] == by_id["tool-c_refund"] == 1
