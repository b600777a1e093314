"""Replay of a run shaped by the real Compaction strategy: evictions, a summary, a
reminder injector and a handoff, stored in SQLite and replayed by the CLI subprocess."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

from lovia import Agent, Compaction, ModelProfile, PluginInstance, Runner, tool
from lovia.stores import store
from lovia.testing import FunctionModel, call
from lovia.view.compaction import DEFAULT_SUMMARY_PROMPT

from .conftest import lovia


@tool
async def fetch_page(n: int) -> str:
    """Fetch a page (even pages are long enough to be evicted)."""
    return f"page {n}: " + "lorem ipsum dolor " * (200 if n % 2 == 0 else 60)


class Reminder:
    name = "reminder"

    async def setup(self, ctx: Any) -> PluginInstance:
        return PluginInstance(view_injectors=[lambda c: ["<system-reminder>be brief"]])


FETCHED: list[int] = []


def decide(request: Any, info: Any) -> Any:
    if request.system == DEFAULT_SUMMARY_PROMPT or not request.tools:
        return "Summary: the user asked for pages; several were fetched."
    done = len(FETCHED)  # the view may no longer show every result (summaries)
    if "transfer_to_closer" in {t.name for t in request.tools} and done >= 12:
        return call("transfer_to_closer")
    if "transfer_to_closer" not in {t.name for t in request.tools}:
        return "All pages are in; closing."
    FETCHED.append(done)
    return call("fetch_page", n=done)


async def _record(url: str) -> tuple[str, int, list[str], list[str]]:
    FETCHED.clear()
    db = store(url)
    profile = ModelProfile(context_window=2_500)
    model = FunctionModel(decide, profile=profile)
    context = Compaction(max_result_tokens=400, keep_recent_turns=2)
    closer = Agent(name="closer", model=model, context=context)
    agent = Agent(
        name="reader",
        model=model,
        tools=[fetch_page],
        plugins=[Reminder()],
        handoffs=[closer],
        context=context,
    )
    stream = Runner.stream(
        agent,
        "fetch pages until you have twelve",
        checkpointer=db,
        session=db,
        session_id="s-compaction",
    )
    hashes: list[str] = []
    summaries: list[str] = []
    kinds: list[str] = []
    async for event in stream:
        name = type(event).__name__
        if name == "ViewBuilt":
            hashes.append(event.view_hash)  # type: ignore[attr-defined]
        if name == "ModelCallStarted" and event.purpose == "summary":  # type: ignore[attr-defined]
            summaries.append(event.view_hash)  # type: ignore[attr-defined]
        if name == "CompactionApplied":
            kinds.append(event.kind)  # type: ignore[attr-defined]
    result = await stream.result()
    await db.aclose()
    assert result.final_agent.name == "closer"
    assert "evict" in kinds and "summarize" in kinds, kinds
    return result.run_id, len(hashes), hashes, summaries


def test_cli_replays_a_compacted_run_with_matching_hashes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'compaction.db'}"
    run_id, views, hashes, summaries = asyncio.run(_record(url))
    res = lovia("replay", run_id, "--store", url)
    assert res.code == 0, res.out + res.err
    total = views + len(summaries)
    assert summaries and all(summaries)  # every summary call carries its view hash
    assert (
        f"{total}/{total} views rebuilt with the recorded hash, "
        f"{len(summaries)} of them summary calls (all verified)"
    ) in res.out
    for digest in hashes + summaries:
        assert digest in res.out
    assert "summary" in res.out.lower() and "reminder" in res.out


def test_a_tampered_entry_a_summarizer_saw_fails_its_summary_call(tmp_path: Path) -> None:
    """The summarizer saw page 1's result; the stored copy is changed afterwards: the
    summary call's view no longer hashes to what was sent, and replay says which."""
    path = tmp_path / "compaction.db"
    run_id, _views, _hashes, summaries = asyncio.run(_record(f"sqlite:///{path}"))
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT rowid, data FROM records WHERE kind = 'entries'").fetchall()
        (hit,) = [(rowid, data) for rowid, data in rows if "page 1: " in data]
        conn.execute(
            "UPDATE records SET data = ? WHERE rowid = ?",
            (hit[1].replace("page 1: ", "page 1! "), hit[0]),
        )
        conn.commit()
    finally:
        conn.close()
    res = lovia("replay", run_id, "--store", f"sqlite:///{path}", "--json")
    assert res.code == 1
    data = json.loads(res.out)
    checked = [s for v in data["views"] for s in v["summaries"]]
    assert [s["recorded_hash"] for s in checked] == summaries
    assert not checked[0]["ok"] and checked[0]["purpose"] == "summary"
    assert "summary does not match its recorded hash" in res.err
