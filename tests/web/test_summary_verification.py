"""A view made with a summary shows whether each summary call's own view was rebuilt to
its recorded hash: verified, or a mismatch the page says plainly (what that summarizer
saw cannot be reproduced)."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from lovia import Agent, Compaction, ModelProfile, Runner, tool
from lovia.testing import FunctionModel, call
from lovia.view.compaction import DEFAULT_SUMMARY_PROMPT
from lovia.web import create_app

from .conftest import run_async

LOCAL = "http://127.0.0.1:8765"


@tool
async def fetch_page(n: int) -> str:
    """Fetch a page."""
    return f"page {n}: " + "lorem ipsum dolor " * 60


def record(url: str) -> None:
    from lovia.stores import store

    fetched: list[int] = []

    def decide(request: Any, info: Any) -> Any:
        if request.system == DEFAULT_SUMMARY_PROMPT or not request.tools:
            return "Summary: the user asked for pages; several were fetched."
        if len(fetched) >= 8:
            return "All pages are in."
        fetched.append(len(fetched))
        return call("fetch_page", n=len(fetched))

    async def go() -> None:
        db = store(url)
        model = FunctionModel(decide, profile=ModelProfile(context_window=2_500))
        agent = Agent(
            name="reader",
            model=model,
            tools=[fetch_page],
            context=Compaction(summarize_at=0.5, keep_recent_turns=2),
        )
        await Runner.run(agent, "fetch eight pages", checkpointer=db, run_id="run-sum")
        await db.aclose()

    run_async(go)


def summary_turns(path: Path) -> list[tuple[int, int, str]]:
    """(record seq, turn, data) of the stored view records with summary calls."""
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT seq, data FROM records WHERE run_id = 'run-sum' AND kind = 'view' ORDER BY seq"
    ).fetchall()
    conn.close()
    return [(seq, json.loads(d)["turn"], d) for seq, d in rows if "summary_views" in json.loads(d)]


def test_summary_calls_are_shown_verified_or_mismatched(tmp_path: Path) -> None:
    path = tmp_path / "sum.db"
    record(f"sqlite:///{path}")
    found = summary_turns(path)
    assert found, "the run made no summary call"
    seq, turn, data = found[0]
    with TestClient(create_app(f"sqlite:///{path}"), base_url=LOCAL) as client:
        page = client.get(f"/runs/run-sum/turns/{turn}").text
        view = client.get(f"/api/runs/run-sum/turns/{turn}").json()["view"]
    (summary,) = view["summaries"]
    assert summary["ok"] is True and summary["purpose"] == "summary"
    assert 'id="summary-call-1"' in page and 'id="summary-mismatch"' not in page
    assert "summary call verified too." in page
    call_html = re.search(r'id="summary-call-1">(.*?)</div>', page, re.S)
    assert call_html and '<span class="verified">verified</span>' in call_html.group(1)
    assert summary["rebuilt_hash"] in call_html.group(1)

    # the stored hash of the summary call no longer matches what its record rebuilds to
    tampered = tmp_path / "tampered.db"
    shutil.copy(path, tampered)
    record_data = json.loads(data)
    record_data["summary_views"][0]["hash"] = "0" * 64
    conn = sqlite3.connect(tampered)
    conn.execute(
        "UPDATE records SET data = ? WHERE run_id = 'run-sum' AND kind = 'view' AND seq = ?",
        (json.dumps(record_data), seq),
    )
    conn.commit()
    conn.close()
    with TestClient(create_app(f"sqlite:///{tampered}"), base_url=LOCAL) as client:
        page = client.get(f"/runs/run-sum/turns/{turn}").text
        view = client.get(f"/api/runs/run-sum/turns/{turn}").json()["view"]
    assert view["ok"] is True and view["summaries"][0]["ok"] is False
    assert 'id="verified"' in page and "verified too" not in page
    banner = re.search(r'id="summary-mismatch"><strong>([^<]*)</strong>', page)
    assert banner and banner.group(1) == (
        "1 of the 1 summary call made for this view does not match its recorded hash"
    )
    call_html = re.search(r'id="summary-call-1">(.*?)</div>', page, re.S)
    assert call_html and '<strong class="mismatch">mismatch</strong>' in call_html.group(1)
    assert "0" * 64 in call_html.group(1)
