"""``lovia cancel`` stores a cancel request; ``lovia runs``/``show`` show dead letters."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from lovia.stores import store
from lovia.stores.lifecycle import cancel_request
from lovia.workers.marks import mark_dead_lettered

from .conftest import Recorded, lovia
from .test_prune import copy_store


def test_cancel_a_queued_run_then_a_finished_one(recorded: Recorded, tmp_path: Path) -> None:
    url = copy_store(recorded, tmp_path)
    out = lovia("cancel", "queued-7", "--store", url, "--reason", "duplicate order")
    assert out.code == 0, out.err
    assert out.out.strip() == "run queued-7: cancelled before it started: no worker will start it"

    async def stored() -> str | None:
        db = store(url)
        snap = await db.load("queued-7")
        await db.aclose()
        return None if snap is None else cancel_request(snap.info)

    assert asyncio.run(stored()) == "duplicate order"
    again = lovia("cancel", recorded.run_id, "--store", url, "--json")
    assert json.loads(again.out) == {"run_id": recorded.run_id, "was": "ended", "cancelled": False}
    shown = lovia("runs", "--store", url, "--status", "cancelled", "--json")
    assert [r["run_id"] for r in json.loads(shown.out)] == ["queued-7"]


def test_a_dead_lettered_run_is_listed_and_shown_with_its_last_error(
    recorded: Recorded, tmp_path: Path
) -> None:
    url = copy_store(recorded, tmp_path)

    async def mark() -> None:
        db = store(url)
        task = {"run_id": "dead-1", "agent": "support", "session_id": "s-9"}
        await mark_dead_lettered(
            db, task, deliveries=4, reason="poison", last_error="worker lost 3 times",
            queue="lovia:runs", kills=3,
        )  # fmt: skip
        await db.aclose()

    asyncio.run(mark())
    runs = lovia("runs", "--store", url, "--status", "dead_lettered")
    assert runs.code == 0, runs.err
    assert "dead-1" in runs.out and "dead_lettered" in runs.out
    assert recorded.run_id not in runs.out
    show = lovia("show", "dead-1", "--store", url)
    assert (
        "dead_lettered: dead-lettered after 4 deliveries, 3 lost workers: worker lost 3 times"
        in show.out
    )
    failed = lovia("runs", "--store", url, "--status", "failed", "--json")
    assert "dead-1" not in failed.out, "a dead letter is not listed as failed"
