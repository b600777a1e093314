"""The web run list filters and totals by an attribution label; a repriced run says so."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lovia import Agent, Runner, Usage, pricing
from lovia.stores import store
from lovia.testing import ScriptedModel, reply
from lovia.web import create_app

LOCAL = "http://127.0.0.1:8765"


async def _record(url: str) -> None:
    pricing.set_price("test", "lbl-m", input_per_mtok=1000.0, output_per_mtok=1000.0)
    db = store(url)
    try:
        for run_id, tenant, tokens in (
            ("a1", "acme", 100),
            ("g1", "globex", 50),
            ("a2", "acme", 300),
        ):
            model = ScriptedModel([reply("ok", usage=Usage(input_tokens=tokens))], model="lbl-m")
            await Runner.run(
                Agent(name="bot", model=model), "hi", store=db, run_id=run_id,
                labels={"tenant": tenant},
            )  # fmt: skip
    finally:
        await db.aclose()
        pricing.clear_prices()


def test_the_run_list_filters_and_totals_by_label(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    asyncio.run(_record(url))
    with TestClient(create_app(url), base_url=LOCAL) as client:
        data = client.get("/api/runs?label=tenant=acme").json()
        assert sorted(r["run_id"] for r in data["runs"]) == ["a1", "a2"]
        assert data["totals"]["count"] == 2
        assert data["totals"]["cost_usd"] == pytest.approx(0.4)  # 400 tokens at $1,000 per million
        assert data["runs"][0]["labels"] == {"tenant": "acme"}
        assert client.get("/api/runs").json()["totals"]["count"] == 3
        bad = client.get("/api/runs?label=tenant")
        assert bad.status_code == 400 and "KEY=VALUE" in bad.text
        page = client.get("/?label=tenant%3Dacme")
        assert page.status_code == 200 and "a2" in page.text and "g1" not in page.text
