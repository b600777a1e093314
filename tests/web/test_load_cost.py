"""A long run's pages resolve only the views they show: its run page resolves none (the
list of turns, the trace and the links need the records' turns and attempts only), a
view page the one it shows and the one before it. Resolving every view of a run is
quadratic in its length (each holds the whole transcript so far)."""

from __future__ import annotations

from typing import ClassVar

import pytest
from starlette.testclient import TestClient

from lovia.view import ResolvedRecords, ViewRecord
from lovia.web import create_app

from .conftest import LONG_TURNS, Recorded

LOCAL = "http://127.0.0.1:8765"


class Counting(ResolvedRecords):
    """Counts the records resolved (the fold's materialization of a whole view)."""

    resolved: ClassVar[list[int]] = []

    def _resolve(self, at: int) -> ViewRecord:
        Counting.resolved.append(at)
        return super()._resolve(at)


def test_a_long_runs_pages_resolve_only_the_views_they_show(
    recorded: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lovia.replay._load as load

    Counting.resolved = []
    monkeypatch.setattr(load, "ResolvedRecords", Counting)
    with TestClient(create_app(recorded.url), base_url=LOCAL) as client:
        page = client.get("/runs/run-long")
        assert page.status_code == 200 and "page 1 of" in page.text
        view_turns = client.get("/api/runs/run-long").json()["view_turns"]
        assert view_turns == list(range(1, LONG_TURNS + 1))  # one model call per turn
        assert Counting.resolved == []
        last = client.get(f"/runs/run-long/turns/{LONG_TURNS}")
        assert last.status_code == 200 and "verified" in last.text
        assert sorted(set(Counting.resolved)) == [LONG_TURNS - 2, LONG_TURNS - 1]
