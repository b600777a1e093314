"""A run whose lease holder died before its lease expired: the list and the run page
show it interrupted at once and stop asking for updates (nothing will change it)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from starlette.testclient import TestClient

from lovia.stores.lifecycle import HOST, owner_id
from lovia.web import create_app

from .conftest import run_async

LOCAL = "http://127.0.0.1:8765"


def dead_owner() -> str:
    """The owner id of a process of this host that has exited (reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return f"{HOST}:{proc.pid}:1:dead"  # a start time no live process has


def record(url: str, owners: dict[str, str]) -> None:
    from lovia.stores import RunInfo, store

    async def go() -> None:
        db = store(url)
        now = time.time()
        for at, (run_id, owner) in enumerate(owners.items()):
            await db.begin(RunInfo(run_id=run_id, agent="a", started_at=now + at))
            assert await db.acquire(run_id, owner, 600.0) is not None  # far from expiring
        await db.aclose()

    run_async(go)


def test_a_dead_holders_run_is_interrupted_and_not_polled(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dead.db'}"
    owner = dead_owner()
    record(url, {"dead-1": owner})
    with TestClient(create_app(url), base_url=LOCAL) as client:
        listing = client.get("/").text
        assert 'id="results" data-live="off"' in listing
        assert 'data-run-id="dead-1" data-state="interrupted"' in listing
        assert "in flight" not in listing
        page = client.get("/runs/dead-1").text
        assert "data-live-url" not in page and 'id="run-status"' in page
        live = client.get("/api/runs/dead-1/live").json()
    assert live == {
        "status": "interrupted",
        "detail": f"its worker {owner} is gone (the process no longer runs)",
        "turns": 0,
        "version": 0,
        "holder": None,
        "orphaned": True,
        "live": False,
    }


def test_a_live_holders_run_next_to_a_dead_one_keeps_the_list_updating(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'mixed.db'}"
    me = owner_id()
    record(url, {"dead-1": dead_owner(), "live-1": me})
    with TestClient(create_app(url), base_url=LOCAL) as client:
        listing = client.get("/").text
        runs = {r["run_id"]: r["state"] for r in client.get("/api/runs").json()["runs"]}
        live = client.get("/api/runs/live-1/live").json()
        dead = client.get("/api/runs/dead-1/live").json()
    assert runs == {"dead-1": "interrupted", "live-1": "running"}
    assert 'id="results" data-live="on"' in listing and "1 in flight" in listing
    assert live["live"] is True and live["holder"] == me and live["status"] == "running"
    assert dead["live"] is False and dead["holder"] is None
