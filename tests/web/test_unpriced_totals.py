"""A total with unpriced model calls in it is a lower bound, and every web surface that
adds costs up says so: ``$x+?`` (``?`` when nothing in it had a price)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lovia.web import create_app

from .conftest import run_async

LOCAL = "http://127.0.0.1:8765"


def record(url: str) -> None:
    from lovia.stores import RunInfo, store

    now = time.time() - 100

    def info(run_id: str, cost: float, unpriced: int, **kw: object) -> RunInfo:
        return RunInfo(
            run_id=run_id,
            agent="a",
            session_id="s-1",
            status="completed",
            input_tokens=100,
            output_tokens=10,
            cost_usd=cost,
            started_at=now + len(run_id),
            ended_at=now + 50,
            extra={"unpriced": unpriced} if unpriced else {},
            **kw,  # type: ignore[arg-type]
        )

    rows = [
        info("priced", 0.01, 0),
        # the parent's usage includes its child's: one unpriced call, made by the child
        info("parent", 0.0123, 1),
        info("parent-kid", 0.0023, 1, parent_run_id="parent", parent_call_id="c1"),
        info("free", 0.0, 2),  # a local model: nothing priced
    ]

    async def go() -> None:
        db = store(url)
        for row in rows:
            await db.begin(row)
            await db.finish(row, None)
        await db.aclose()

    run_async(go)


def text_of(html: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</', html, re.S)
    assert found, element_id
    return found.group(1).strip()


def test_totals_with_unpriced_calls_read_as_a_lower_bound(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'unpriced.db'}"
    record(url)
    with TestClient(create_app(url), base_url=LOCAL) as client:
        assert text_of(client.get("/").text, "total-cost") == "$0.025+?"
        assert text_of(client.get("/?q=priced").text, "total-cost") == "$0.010"
        assert text_of(client.get("/?q=free").text, "total-cost") == "?"
        totals = client.get("/api/runs").json()["totals"]
        assert totals["unpriced"] == 4 and totals["cost_usd"] == pytest.approx(0.0246)
        assert text_of(client.get("/sessions/s-1").text, "total-cost") == "$0.025+?"
        run = client.get("/runs/parent").text
        assert text_of(run, "run-cost") == "$0.012+?"
        split = re.sub(r"\s+", " ", text_of(run, "cost-split"))
        assert split == "(own $0.010 + 1 child run $0.0023+?)"
        child = r'class="child-link".*?</a> <span class="badge[^>]*>completed</span> · ([^ <]*)'
        assert re.findall(child, run) == ["$0.0023+?"]
        listing = client.get("/?q=parent").text
        assert 'title="own $0.010 + child runs $0.0023+?"' in listing
        compare = client.get("/compare?a=priced&b=free").text
        costs = re.findall(r'<td class="cost">([^<]*)</td>', compare)
        assert costs == ["$0.010", "?"]
