"""The web app shows a dead-lettered run as such, with its deliveries and last error."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from lovia.stores import store
from lovia.web import create_app
from lovia.workers.marks import mark_dead_lettered

from .conftest import run_async

LOCAL = "http://127.0.0.1:8765"


def test_a_dead_lettered_run_in_the_list_and_on_its_page(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dead.db'}"

    async def mark() -> None:
        db = store(url)
        task = {"run_id": "dead-1", "agent": "support", "session_id": None}
        await mark_dead_lettered(
            db, task, deliveries=11, reason="max_deliveries",
            last_error="ProviderError: 503 <overloaded>", queue="lovia:runs",
        )  # fmt: skip
        await db.aclose()

    run_async(mark)
    detail = "dead-lettered after 11 deliveries: ProviderError: 503 &lt;overloaded&gt;"
    with TestClient(create_app(url), base_url=LOCAL) as client:
        listed = client.get("/").text
        assert 'data-state="dead_lettered"' in listed
        assert 'class="badge status-dead_lettered"' in listed and detail in listed
        page = client.get("/runs/dead-1").text
        assert 'id="run-dead-lettered"' in page and detail in page
        api = client.get("/api/runs?status=dead_lettered").json()["runs"]
        assert [(r["run_id"], r["state"]) for r in api] == [("dead-1", "dead_lettered")]
