"""The on-call tools without a browser: the triage list (search, facets, sort, totals,
nesting, sessions, clean URLs), bounded pages of huge runs, one view rebuilt per view
page, span details, export, compare, cost formatting, chat history."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from lovia import Agent, Compaction, Runner, tool
from lovia.stores import RunInfo, store
from lovia.testing import ScriptedModel, call, reply
from lovia.web import create_app

from .conftest import Recorded, run_async

LOCAL = "http://127.0.0.1:8765"


async def _fillers(url: str) -> None:
    db = store(url)
    now = time.time()
    rows = [
        ("t-1", "triage", "completed", None, None, 0.002, now - 30),
        ("t-2", "triage", "failed", "ProviderTimeout", "read timed out after 30s", 0.0, now - 20),
        ("b-1", "billing", "failed", "ToolError", "card declined by the bank", 0.5, now - 10),
        ("b-2", "billing", "cancelled", None, None, 0.04, now - 5),
        ("old", "billing", "completed", None, None, 0.0, now - 10 * 86_400),
    ]
    for run_id, agent, status, error_type, error, cost, started in rows:
        info = RunInfo(
            run_id=run_id,
            agent=agent,
            session_id="sess-" + agent,
            status=status,  # type: ignore[arg-type]  # a status a newer lovia writes
            error_type=error_type,
            turns=2,
            input_tokens=100 if cost or run_id == "old" else 0,
            output_tokens=10,
            cost_usd=cost,
            started_at=started,
            ended_at=started + (3 if agent == "billing" else 1),
            extra={"model": f"openai:gpt-{agent}", **({"error": error} if error else {})},
        )
        await db.begin(info)
        await db.finish(info, None)
    await db.aclose()


@tool
async def lookup(order: str) -> str:
    """Look up an order."""
    return f"{order}: shipped"


async def _nested(url: str) -> str:
    db = store(url)
    child = Agent(name="researcher", instructions="Research.", model=ScriptedModel(["found it"]))
    parent = Agent(
        name="lead",
        instructions="Delegate.",
        tools=[child.as_tool("research")],
        model=ScriptedModel([call("research", input="dig", id="c_dig"), "done"]),
    )
    result = await Runner.run(parent, "go", checkpointer=db, run_id="run-parent")
    await db.aclose()
    return str(result.run_id)


@pytest.fixture(scope="module")
def triage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    url = f"sqlite:///{tmp_path_factory.mktemp('triage') / 'triage.db'}"
    run_async(lambda: _fillers(url))
    run_async(lambda: _nested(url))
    with TestClient(create_app(url), base_url=LOCAL) as client:
        yield client


def ids(client: TestClient, query: str) -> list[str]:
    return [r["run_id"] for r in client.get("/api/runs" + query).json()["runs"]]


def test_search_is_substring_on_agent_model_id_and_session(triage: TestClient) -> None:
    assert set(ids(triage, "?q=bill")) == {"b-1", "b-2", "old"}  # agent and model
    assert ids(triage, "?q=T-2") == ["t-2"]  # run id, any case
    assert set(ids(triage, "?q=sess-tri")) == {"t-1", "t-2"}  # session
    assert ids(triage, "?q=nothing-like-this") == []


def test_error_search_needs_every_word(triage: TestClient) -> None:
    assert ids(triage, "?error=timed+out") == ["t-2"]
    assert ids(triage, "?error=declined") == ["b-1"]
    assert ids(triage, "?error=tooLERROR") == ["b-1"]  # the error type too
    assert ids(triage, "?error=declined+timeout") == []


def test_facets_count_the_rest_of_the_filter(triage: TestClient) -> None:
    data = triage.get("/api/runs?agent=billing").json()
    facets = {k: dict(v) for k, v in data["facets"].items()}
    # status counts among billing runs; agent counts ignore the agent filter itself
    assert facets["status"] == {"failed": 1, "cancelled": 1, "completed": 1}
    assert facets["agent"]["billing"] == 3 and facets["agent"]["triage"] == 2
    assert facets["error_type"] == {"ToolError": 1}


def test_totals_and_failure_rate_of_the_filter(triage: TestClient) -> None:
    totals = triage.get("/api/runs?q=bill").json()["totals"]
    assert totals["count"] == 3
    assert totals["cost_usd"] == pytest.approx(0.54)
    assert totals["tokens"] == 100 + 10 + 100 + 10 + 100 + 10
    # failed and cancelled count as failures among the ended runs
    assert totals["failed"] == 2 and totals["failure_rate"] == pytest.approx(2 / 3)


def test_sorts(triage: TestClient) -> None:
    assert ids(triage, "?q=bill&sort=cost") == ["b-1", "b-2", "old"]
    assert ids(triage, "?q=bill&sort=cost&asc=1") == ["old", "b-2", "b-1"]
    longest = ids(triage, "?q=sess-&sort=duration")  # billing runs took 3 s, triage 1 s
    assert set(longest[:3]) == {"b-1", "b-2", "old"} and set(longest[3:]) == {"t-1", "t-2"}
    assert ids(triage, "?q=sess-&sort=tokens&asc=1")[0] == "t-2"  # 10 tokens
    assert ids(triage, "?agent=billing&sort=time") == ["b-2", "b-1", "old"]


def test_time_range_picker(triage: TestClient) -> None:
    assert "old" not in ids(triage, "?range=7d")
    assert "old" in ids(triage, "?range=30d")
    bad = triage.get("/api/runs?range=3y")
    assert bad.status_code == 400 and "24h" in bad.json()["hint"]


def test_children_nest_under_their_parent(triage: TestClient) -> None:
    runs = triage.get("/api/runs").json()["runs"]
    top = [r["run_id"] for r in runs]
    assert "run-parent" in top
    assert all(r["parent_run_id"] is None for r in runs)  # no child is a top-level row
    parent = next(r for r in runs if r["run_id"] == "run-parent")
    assert [c["agent"] for c in parent["children"]] == ["researcher"]
    page = triage.get("/").text
    child_id = parent["children"][0]["run_id"]
    assert f'class="run status-completed child" data-run-id="{child_id}"' in page


def test_child_run_links_to_its_parent_and_back(triage: TestClient) -> None:
    parent = triage.get("/api/runs/run-parent").json()
    child_id = parent["lineage"]["child_by_call"]["c_dig"]
    page = triage.get("/runs/run-parent").text
    # the parent's tool call links to the child run it started
    assert re.search(r'id="call-c_dig".*?class="child-run" href="/runs/[^"]+"', page, re.S)
    child_page = triage.get(f"/runs/{child_id}").text
    assert 'class="parent-link" href="/runs/run-parent"' in child_page
    # the parent's cost is its own plus its child's
    assert parent["lineage"]["children_cost_usd"] == pytest.approx(
        parent["run"]["cost_usd"] - parent["lineage"]["own_cost_usd"]
    )


def test_session_page_and_session_links(triage: TestClient) -> None:
    page = triage.get("/").text
    assert 'class="session-link" href="/sessions/sess-billing"' in page
    session = triage.get("/sessions/sess-billing")
    assert session.status_code == 200
    assert session.text.index('data-run-id="old"') < session.text.index('data-run-id="b-2"')
    missing = triage.get("/sessions/none-such")
    assert missing.status_code == 400 and "no runs in session" in missing.text


def test_links_carry_no_empty_parameters(triage: TestClient) -> None:
    page = triage.get("/?q=bill&status=&model=&since=&sort=time").text
    links = re.findall(r'href="(/\?[^"]*)"', page)
    assert links, "facet, sort and pager links"
    for link in links:
        assert not re.search(r"=(&|$)", link.replace("&amp;", "&")), link
    assert 'href="/?q=bill&amp;agent=billing"' in page  # a facet keeps the search
    assert 'href="/?q=bill&amp;asc=1"' in page  # the started column, the other way round


def test_unknown_statuses_render_as_their_own_badge(triage: TestClient) -> None:
    page = triage.get("/?q=b-2").text
    assert '<span class="badge status-cancelled">cancelled</span>' in page


def test_cost_is_adaptive_and_unknown_is_a_question_mark() -> None:
    from lovia.web._format import cost_text

    assert cost_text(0.000042, 10) == "$0.000042"
    assert cost_text(0.0123, 10) == "$0.012"
    assert cost_text(0.5, 10) == "$0.50"
    assert cost_text(12.345, 10) == "$12.35"
    assert cost_text(0.0, 1200) == "?"  # used tokens, no price known: never $0.0000
    assert cost_text(None, 0) == "?"
    assert cost_text(0.0, 0) == "-"


def test_list_shows_unknown_cost_for_unpriced_tokens(triage: TestClient) -> None:
    page = triage.get("/?q=old").text
    assert re.search(r'<td class="num cost"[^>]*>\?</td>', page)


# -- huge runs: bounded pages, one view rebuilt ---------------------------------------


BLOB = "y" * 300_000


@tool
async def blob(part: int) -> str:
    """A big tool result."""
    return BLOB


async def _big(url: str, turns: int) -> None:
    db = store(url)
    steps: list[Any] = [
        reply(f"part {i}", tool_calls=[call("blob", part=i, id=f"b{i}")]) for i in range(turns)
    ]
    agent = Agent(
        name="dumper",
        instructions="Dump.",
        tools=[blob],
        model=ScriptedModel([*steps, "ok"]),
        context=Compaction(max_result_tokens=None, summarize_at=None),  # keep them whole
    )
    await Runner.run(agent, "go", checkpointer=db, run_id="run-big", max_turns=turns + 2)
    await db.aclose()


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    url = f"sqlite:///{tmp_path_factory.mktemp('big') / 'big.db'}"
    run_async(lambda: _big(url, 12))
    with TestClient(create_app(url), base_url=LOCAL) as client:
        yield client


def test_huge_tool_results_are_clipped_with_a_way_to_the_rest(big: TestClient) -> None:
    # 12 results of 300 KB (3.6 MB) make pages far smaller than the run
    run_page = big.get("/runs/run-big")
    assert run_page.status_code == 200 and len(run_page.content) < 120_000
    assert "show all (300000 characters)" in run_page.text
    entry_id = re.search(r'class="more" data-entry="([^"]+)"', run_page.text)
    assert entry_id
    whole = big.get(f"/api/runs/run-big/entries/{entry_id.group(1)}").json()
    assert whole["content"] == BLOB
    view = big.get("/runs/run-big/turns/12")
    assert view.status_code == 200 and len(view.content) < 120_000
    last = big.get("/api/runs/run-big/turns/12/messages?start=24&count=10").json()
    clipped = next(m for m in last["messages"] if m["chars"] >= len(BLOB))
    assert len(clipped["text"]) == 2_000 and last["total"] > 20
    index = clipped["index"]
    full = big.get(f"/api/runs/run-big/turns/12/messages?start={index}&count=1&full=1").json()
    assert BLOB in full["messages"][0]["text"]


def test_a_view_page_rebuilds_only_its_views(
    big: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lovia.web._cache as cache

    built: list[int] = []
    real = cache.rebuild_view

    def counting(record: Any, by_id: Any, hasher: Any = None) -> Any:
        built.append(record.turn)
        return real(record, by_id, hasher)

    monkeypatch.setattr(cache, "rebuild_view", counting)
    big.app.state.runs.forget("run-big")  # type: ignore[attr-defined]
    page = big.get("/runs/run-big/turns/9")
    assert page.status_code == 200
    assert sorted(built) == [8, 9]  # the view and the previous one (the default diff)
    assert 'id="diff-title">turn 8 → turn 9<' in page.text
    big.get("/runs/run-big/turns/9")  # served again from the loaded run
    assert sorted(built) == [8, 9]


def test_view_page_navigates_by_turn(big: TestClient) -> None:
    page = big.get("/runs/run-big/turns/5").text
    assert 'id="prev-turn" href="/runs/run-big/turns/4"' in page
    assert 'id="next-turn" href="/runs/run-big/turns/6"' in page
    assert 'data-prev="4" data-next="6"' in page
    assert page.count("/runs/run-big/turns/") < 12  # no wall of links to every turn
    none = big.get("/runs/run-big/turns/5?diff=none").text
    assert 'id="diff"' not in none
    missing = big.get("/runs/run-big/turns/99")
    assert missing.status_code == 400 and "Turns with views: 1–13." in missing.text


def test_export_is_json_lines_of_the_whole_run(big: TestClient) -> None:
    resp = big.get("/api/runs/run-big/export.jsonl")
    assert resp.headers["content-disposition"] == 'attachment; filename="run-big.jsonl"'
    lines = [json.loads(line) for line in resp.text.splitlines()]
    assert lines[0]["kind"] == "run" and lines[0]["run_id"] == "run-big"
    kinds = {line["kind"] for line in lines}
    assert kinds >= {"run", "entry", "view", "state"}
    results = [e for e in lines if e["kind"] == "entry" and e["type"] == "tool_result"]
    assert len(results) == 12 and all(e["content"] == BLOB for e in results)


def test_compare_two_turns_side_by_side(big: TestClient) -> None:
    page = big.get("/compare?a=run-big&ta=3&b=run-big&tb=4")
    assert page.status_code == 200
    assert 'id="side-1"' in page.text and 'id="side-2"' in page.text
    assert "turn 3 → turn 4" in page.text  # the same run: what changed between them
    data = big.get("/api/compare?a=run-big&b=run-big").json()
    assert [s["run"]["run_id"] for s in data["sides"]] == ["run-big", "run-big"]
    assert big.get("/compare").status_code == 200  # the empty form


def test_span_panel_data(recorded: Recorded) -> None:
    with TestClient(create_app(recorded.url), base_url=LOCAL) as client:
        bars = client.get(f"/api/runs/{recorded.run_id}").json()["bars"]
        tool = next(b for b in bars if b["name"].startswith("execute_tool"))
        panel = client.get(f"/api/runs/{recorded.run_id}/spans/{tool['span_id']}").json()
        assert panel["call_url"].startswith(f"/runs/{recorded.run_id}?page=0#call-")
        assert panel["turn"] == tool["turn"] is not None
        chat = next(b for b in bars if b["name"] == "chat")
        panel = client.get(f"/api/runs/{recorded.run_id}/spans/{chat['span_id']}").json()
        assert panel["view_url"] == f"/runs/{recorded.run_id}/turns/{chat['turn']}"
        assert panel["purpose"] == "main"
        missing = client.get(f"/api/runs/{recorded.run_id}/spans/nope")
        assert missing.status_code == 400


def test_chat_history_survives_a_reload(recorded: Recorded, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"

    async def chat() -> None:
        db = store(url)
        agent = Agent(name="helper", model=ScriptedModel(["Hello there."]))
        await Runner.run(agent, "hi", checkpointer=db, session=db, session_id="s-1")
        await db.aclose()

    run_async(chat)
    with TestClient(create_app(url), base_url=LOCAL) as client:
        history = client.get("/api/chat/history?session_id=s-1").json()["messages"]
        bad = client.get("/api/chat/history?session_id=../x")
    assert history == [
        {"role": "user", "text": "hi"},
        {"role": "assistant", "text": "Hello there."},
    ]
    assert bad.status_code == 400
