"""The baseline re-runs pinned cases through the loop with recorded answers only."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from lovia import Agent, ModelProfile, Runner, evals
from lovia.errors import SchemaVersionError
from lovia.stores import store
from lovia.testing import ScriptedModel, block_network

from .conftest import (
    LIVE,
    record_compacted,
    record_handoff,
    record_nested,
    record_parallel,
    record_tools,
)


async def test_hundred_runs_reproduce_every_view_with_no_live_calls(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lovia.db'}"
    db = store(url)
    ids = [await record_compacted(db, pages=6 + i % 4) for i in range(10)]
    ids += [await record_nested(db, i) for i in range(40)]
    ids += [await record_handoff(db, i) for i in range(10)]
    ids += [await record_tools(db, i) for i in range(40)]
    await db.aclose()
    for i, run_id in enumerate(ids):
        await evals.pin(run_id, url, to=tmp_path / "cases", name=f"case-{i:03}")
    LIVE.clear()
    with block_network():
        report = await evals.evaluate(tmp_path / "cases", baseline=True)
    assert len(report.cases) == 100 and report.ok() and report.pass_rate == 1.0
    samples = [c.samples[0] for c in report.cases]
    assert all(s.execution.views_reproduced == len(s.sample.case.views) for s in samples)
    assert sum(s.execution.views_checked for s in samples) > 300
    assert all(h["recorded"] == h["rerun"] for s in samples for h in s.execution.hashes)
    compacted = [s for s in samples if s.sample.case.start_agent == "reader"]
    assert any(v.compacted for s in compacted for v in s.sample.case.views)
    assert LIVE == []  # no tool ran, nested agents included
    assert all(s.execution.live_tool_calls == 0 for s in samples)
    assert all(s.execution.live_model_calls == 0 for s in samples)


async def test_a_turn_pin_starts_at_that_turn(tmp_path: Path) -> None:
    db = store(f"sqlite:///{tmp_path / 'lovia.db'}")
    run_id = await record_compacted(db)
    case = await evals.pin(f"{run_id[:10]}:7", db)
    await db.aclose()
    assert case.start_turn == 7 and case.views[0].turn == 7
    assert case.source["run_id"] == run_id and case.source["turn"] == 7
    report = await evals.evaluate([case], baseline=True)
    assert report.ok(), report.cases[0].diff()
    assert report.cases[0].samples[0].execution.views_reproduced == len(case.views)


async def test_a_changed_tool_result_is_named_as_the_divergence(tmp_path: Path) -> None:
    db = store(f"sqlite:///{tmp_path / 'lovia.db'}")
    case = await evals.pin(await record_tools(db), db, to=tmp_path)
    await db.aclose()
    tools = (tmp_path / case.name / "tools.jsonl").read_text()
    (tmp_path / case.name / "tools.jsonl").write_text(tools.replace("B0: shipped", "B0: lost"))
    report = await evals.evaluate(tmp_path / case.name, baseline=True)
    assert not report.ok()
    div = report.cases[0].samples[0].execution.divergence
    assert div is not None and div.turn == 3
    assert "tool_result" in div.where and "content" in div.where
    assert div.recorded == "B0: shipped" and div.rerun == "B0: lost"
    assert "turn 3" in report.cases[0].diff()


async def test_a_missing_response_ends_the_baseline_as_diverged(tmp_path: Path) -> None:
    db = store(f"sqlite:///{tmp_path / 'lovia.db'}")
    case = await evals.pin(await record_tools(db), db)
    await db.aclose()
    case.views.pop()
    case.responses.pop()
    report = await evals.evaluate([case], baseline=True)
    div = report.cases[0].samples[0].execution.divergence
    assert div is not None and div.where == "model calls"


async def test_case_folder_round_trips_and_refuses_newer_versions(tmp_path: Path) -> None:
    db = store(f"sqlite:///{tmp_path / 'lovia.db'}")
    case = await evals.pin(await record_tools(db), db, to=tmp_path, name="c1")
    await db.aclose()
    loaded = evals.load_case(tmp_path / "c1")
    assert loaded.transcript == case.transcript and loaded.views == case.views
    assert loaded.responses == case.responses and loaded.tool_results == case.tool_results
    head = (tmp_path / "c1" / "case.json").read_text()
    (tmp_path / "c1" / "case.json").write_text(
        head.replace('"format_version": 1', '"format_version": 99')
    )
    with pytest.raises(SchemaVersionError, match="format_version 99"):
        evals.load_case(tmp_path / "c1")
    (tmp_path / "c1" / "case.json").write_text(head)
    views = (tmp_path / "c1" / "views.jsonl").read_text()
    (tmp_path / "c1" / "views.jsonl").write_text("{not json\n")
    with pytest.raises(evals.CaseError, match="line 1 is not valid JSON"):
        evals.load_case(tmp_path / "c1")
    (tmp_path / "c1" / "views.jsonl").write_text("")
    with pytest.raises(evals.CaseError, match="has 0 view"):
        evals.load_case(tmp_path / "c1")
    (tmp_path / "c1" / "views.jsonl").write_text(views)
    responses = (tmp_path / "c1" / "responses.jsonl").read_text()
    first_id = case.responses[0].entry_ids[0]
    (tmp_path / "c1" / "responses.jsonl").write_text(responses.replace(first_id, "bogus", 1))
    with pytest.raises(evals.CaseError, match=r"names entries not in transcript\.jsonl"):
        evals.load_case(tmp_path / "c1")


async def test_secrets_are_masked_in_the_case_and_the_store_url(tmp_path: Path) -> None:
    from lovia.evals._pin import mask_url

    db = store(f"sqlite:///{tmp_path / 'lovia.db'}")
    agent = Agent(name="a", model=ScriptedModel(["ok"]))
    run = await Runner.run(agent, "my key is sk-proj-abcdefghijklmnop1234", checkpointer=db)
    case = await evals.pin(run.run_id, db, to=tmp_path, name="s")
    await db.aclose()
    text = "".join(p.read_text() for p in (tmp_path / "s").iterdir())
    assert "abcdefghijklmnop1234" not in text and "***" in text
    assert case.notes and "masked" in case.notes[0]
    assert mask_url("postgresql://bob:hunter2@db:5432/x") == "postgresql://bob:***@db:5432/x"


async def test_a_run_with_a_handoff_reproduces(tmp_path: Path) -> None:
    db = store(f"sqlite:///{tmp_path / 'lovia.db'}")
    case = await evals.pin(await record_handoff(db), db)
    await db.aclose()
    assert {v.agent for v in case.views} == {"triage", "billing"}
    LIVE.clear()
    report = await evals.evaluate([case], baseline=True)
    assert report.ok(), report.cases[0].diff()
    assert report.cases[0].samples[0].execution.views_reproduced == 3 and LIVE == []


class Total(BaseModel):
    vendor: str
    total: float


class Line(BaseModel):
    sku: str


class Invoice(BaseModel):
    lines: list[Line]


async def test_structured_output_runs_reproduce_native_and_prompted() -> None:
    db = store("memory://")
    native = ModelProfile(native_json_schema=True)
    agents = [
        Agent(
            name="n",
            model=ScriptedModel(['{"vendor": "A", "total": 1.5}'], profile=native),
            output_type=Total,
        ),
        Agent(
            name="w",
            model=ScriptedModel(['{"result": [1, 2]}'], profile=native),
            output_type=list[int],
        ),
        Agent(name="p", model=ScriptedModel(['{"vendor": "A", "total": 1.5}']), output_type=Total),
    ]
    cases = [
        await evals.pin((await Runner.run(a, "go", checkpointer=db)).run_id, db) for a in agents
    ]
    assert cases[0].agent["output_schema"]["name"] == "Total"
    assert cases[2].agent["output_schema"] is None and "JSON Schema" in cases[2].agent["system"]
    report = await evals.evaluate(cases, baseline=True)
    assert report.ok(), [c.diff() for c in report.cases]
    nested = Agent(
        name="i", model=ScriptedModel(['{"lines": []}'], profile=native), output_type=Invoice
    )
    case = await evals.pin((await Runner.run(nested, "go", checkpointer=db)).run_id, db)
    report = await evals.evaluate([case], baseline=True)
    div = report.cases[0].samples[0].execution.divergence
    assert div is not None and div.where == "output_schema" and div.rerun == "null"


async def test_parallel_results_reproduce_in_their_recorded_order() -> None:
    from lovia.transcript import ToolResultEntry

    db = store("memory://")
    case = await evals.pin(await record_parallel(db), db)
    order = [e.content for e in case.transcript if isinstance(e, ToolResultEntry)]
    assert order == ["slow 2 done", "slow 1 done", "slow 0 done"]  # completion order
    LIVE.clear()
    report = await evals.evaluate([case], baseline=True)
    assert report.ok(), report.cases[0].diff()
    assert LIVE == []
