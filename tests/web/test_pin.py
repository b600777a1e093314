"""The run page's "pin as eval case" action: CSRF-guarded, writes the case folder."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lovia import evals
from lovia.web import create_app

from .conftest import Recorded, run_async

LOCAL = "http://127.0.0.1:8765"


@pytest.fixture
def client(recorded: Recorded) -> Iterator[TestClient]:
    with TestClient(create_app(recorded.url), base_url=LOCAL) as opened:
        yield opened


def test_pin_from_the_run_page(
    client: TestClient, recorded: Recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOVIA_EVAL_DIR", str(tmp_path / "cases"))
    page = client.get(f"/runs/{recorded.run_id}").text
    assert f'id="pin-run" data-run="{recorded.run_id}"' in page
    token = re.search(r'name="lovia-csrf" content="([^"]+)"', page)
    assert token
    url = f"/api/runs/{recorded.run_id}/pin"
    assert client.post(url, json={}).status_code == 403  # no CSRF header
    assert not (tmp_path / "cases").exists()
    bad = client.post(url, json={"turn": "2; rm -rf"}, headers={"x-lovia-csrf": token.group(1)})
    assert bad.status_code == 400 and "positive integer" in bad.text
    done = client.post(url, json={"turn": 2}, headers={"x-lovia-csrf": token.group(1)})
    assert done.status_code == 200, done.text
    data = done.json()
    assert data["turn"] == 2 and data["path"] == str(tmp_path / "cases" / data["case"])
    case = evals.load_case(data["path"])
    assert case.source["run_id"] == recorded.run_id and case.start_turn == 2
    report = run_async(lambda: evals.evaluate([case], baseline=True))
    assert report.ok(), report.cases[0].diff()
