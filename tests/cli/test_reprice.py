"""``lovia reprice``: a store priced with an old table, repriced, matches a fresh run
priced with the new one — child runs included — and says what it changed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent, Runner, Usage, pricing
from lovia.stores import store
from lovia.stores.base import RunInfo
from lovia.stores.records import EntriesRecord, RepriceRecord, read_records
from lovia.testing import ScriptedModel, call, reply

from .conftest import lovia

OLD = "- {provider: test, model: rp-m, input_per_mtok: 1.0, output_per_mtok: 2.0}\n"
NEW = (
    "- {provider: test, model: rp-m, input_per_mtok: 3.0, output_per_mtok: 5.0,"
    " cache_read_per_mtok: 0.5}\n"
    "- {provider: test, model: rp-free, free: true}\n"
)


@pytest.fixture(autouse=True)
def _prices() -> Iterator[None]:
    pricing.clear_prices()
    yield
    pricing.clear_prices()


def _u(i: int, o: int, cache: int = 0) -> Usage:
    return Usage(input_tokens=i, output_tokens=o, cache_read_tokens=cache)


def _agents() -> Agent[Any, str]:
    helper = Agent(
        name="helper", model=ScriptedModel([reply("42", usage=_u(1000, 500))], model="rp-m")
    )
    steps = [
        reply(tool_calls=[call("helper", input="what?", id="c1")], usage=_u(2000, 100, 1500)),
        reply("the answer is 42", usage=_u(3000, 200, 2500)),
    ]
    return Agent(name="boss", model=ScriptedModel(steps, model="rp-m"), tools=[helper.as_tool()])


def _unpriced() -> Agent[Any, str]:
    return Agent(name="local", model=ScriptedModel([reply("hi", usage=_u(10, 5))], model="rp-free"))


async def _record(url: str, prices: Path) -> None:
    pricing.clear_prices()
    pricing.load_prices(prices)
    db = store(url)
    try:
        await Runner.run(_agents(), "go", store=db, run_id="boss-1", labels={"tenant": "acme"})
        await Runner.run(_unpriced(), "go", store=db, run_id="local-1")
    finally:
        await db.aclose()
    pricing.clear_prices()


async def _rows(url: str) -> dict[str, RunInfo]:
    db = store(url)
    try:
        return {r.run_id: r for r in await db.list_runs(limit=100)}
    finally:
        await db.aclose()


@pytest.fixture
def stores(tmp_path: Path) -> tuple[str, str, Path]:
    old, new = tmp_path / "old.yaml", tmp_path / "new.yaml"
    old.write_text(OLD)
    new.write_text(NEW)
    repriced, fresh = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    asyncio.run(_record(repriced, old))
    asyncio.run(_record(fresh, new))
    return repriced, fresh, new


def test_reprice_matches_a_fresh_run_priced_with_the_new_table(
    stores: tuple[str, str, Path],
) -> None:
    url, fresh_url, new = stores
    before, fresh = asyncio.run(_rows(url)), asyncio.run(_rows(fresh_url))
    assert len(before) == 3  # the two runs and the child run of boss-1
    assert before["local-1"].extra.get("unpriced") == 1  # no price in the old table
    env = {"LOVIA_PRICES": str(new)}

    dry = lovia("reprice", "--all", "--dry-run", "--store", url, env=env)
    assert dry.code == 0, dry.err
    assert "would change 2 of 3 runs" in dry.out
    assert asyncio.run(_rows(url)) == before  # a dry run writes nothing

    done = lovia("reprice", "--all", "--json", "--store", url, env=env)
    assert done.code == 0, done.err
    report = json.loads(done.out)
    assert report["changed"] == 2
    after = asyncio.run(_rows(url))
    for run_id, info in fresh.items():
        assert after[run_id].cost_usd == pytest.approx(info.cost_usd, rel=1e-12), run_id
        assert after[run_id].extra.get("unpriced") == info.extra.get("unpriced"), run_id
    total = sum(after[r].cost_usd - before[r].cost_usd for r in ("boss-1", "local-1"))
    assert report["total_change_usd"] == pytest.approx(total)
    note = after["boss-1"].extra["repriced"]
    assert note["original_usd"] == pytest.approx(before["boss-1"].cost_usd)
    assert note["prices"].startswith("genai-prices==") and "overrides@" in note["prices"]

    again = lovia("reprice", "--all", "--store", url, env=env)
    assert "changed 0 of 3 runs" in again.out  # repricing twice changes nothing more


def test_reprice_records_what_it_changed_and_keeps_the_transcript(
    stores: tuple[str, str, Path],
) -> None:
    url, _, new = stores

    async def snapshot() -> Any:
        db = store(url)
        try:
            return await db.load("boss-1")
        finally:
            await db.aclose()

    first = asyncio.run(snapshot())
    assert lovia("reprice", "boss-1", "--store", url, env={"LOVIA_PRICES": str(new)}).code == 0
    later = asyncio.run(snapshot())
    assert later.records[: len(first.records)] == first.records  # appended, never rewritten
    kinds = [r.kind for r in later.records[len(first.records) :]]
    assert kinds == ["reprice"]
    (record,) = [r for r in read_records(later, ("reprice",)) if isinstance(r, RepriceRecord)]
    assert record.cost_before == pytest.approx(first.info.cost_usd)
    assert record.cost_after == pytest.approx(later.info.cost_usd)
    assert record.own_after > record.own_before
    entries = [r for r in read_records(later, ("entries",)) if isinstance(r, EntriesRecord)]
    assert entries == [r for r in read_records(first, ("entries",)) if isinstance(r, EntriesRecord)]
    shown = lovia("show", "boss-1", "--store", url)
    assert "cost repriced" in shown.out and "(was $" in shown.out


def test_reprice_says_which_runs_and_skips_what_it_cannot(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"

    async def old_run() -> None:  # a run from before per-call usage was recorded
        db = store(url)
        try:
            legacy = RunInfo(run_id="legacy", agent="a", cost_usd=0.5, turns=1, started_at=1.7e9)
            await db.begin(legacy)
        finally:
            await db.aclose()

    asyncio.run(old_run())
    refused = lovia("reprice", "--store", url)
    assert refused.code == 2 and "say which runs" in refused.err
    bad = lovia("reprice", "--since", "yesterday-ish", "--store", url)
    assert bad.code == 2 and "neither a date nor an age" in bad.err
    shown = lovia("reprice", "--since", "2000-01-01", "--store", url)
    assert "skipped: no per-call usage recorded" in shown.out
    assert "changed 0 of 1 runs" in shown.out
    assert asyncio.run(_rows(url))["legacy"].cost_usd == 0.5
