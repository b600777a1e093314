"""A new run's start in one write (``start_run``), on every store: its row and its first
records land together; a stale fence stores none of its records; a run that is already
there keeps its row and gets the records appended."""

from __future__ import annotations

from typing import Any

import pytest

from lovia.errors import LeaseLost
from lovia.stores import CheckpointRecord, RunInfo, Store
from lovia.stores.base import start_run


def _records(*names: str) -> list[CheckpointRecord]:
    return [CheckpointRecord(kind="state", data={"name": n}) for n in names]


def _info(run_id: str, **fields: Any) -> RunInfo:
    return RunInfo(run_id=run_id, agent="writer", started_at=5.0, **fields)


async def test_a_start_writes_the_row_and_the_first_records(db: Store) -> None:
    token = await db.acquire("s1", "w1", 30)
    assert token is not None
    written = await start_run(
        db, _info("s1", session_id="chat", history_len=2), _records("a", "b"), fence=token
    )
    assert written > 0
    snap = await db.load("s1")
    assert snap is not None
    assert snap.info.status == "running" and snap.info.agent == "writer"
    assert snap.info.session_id == "chat" and snap.info.history_len == 2
    assert [r.data["name"] for r in snap.records] == ["a", "b"]
    await db.append("s1", _records("c"), fence=token)  # the next append follows them
    again = await db.load("s1")
    assert again is not None and [r.data["name"] for r in again.records] == ["a", "b", "c"]


async def test_a_start_with_a_stale_fence_stores_none_of_its_records(db: Store) -> None:
    token = await db.acquire("s2", "w1", 30)
    assert token is not None
    await db.release("s2", "w1")
    assert await db.acquire("s2", "w2", 30) == token + 1  # taken over: token is stale
    with pytest.raises(LeaseLost, match=rf"^run s2: lease token {token} is stale"):
        await start_run(db, _info("s2"), _records("late"), fence=token)
    snap = await db.load("s2")
    assert snap is None or snap.records == []


async def test_a_start_of_a_run_that_exists_keeps_its_row_and_appends(db: Store) -> None:
    await db.begin(RunInfo(run_id="s3", agent="first"))
    token = await db.acquire("s3", "w1", 30)
    assert token is not None
    await db.append("s3", _records("w"), fence=token)
    await start_run(db, _info("s3"), _records("x", "y"), fence=token)
    snap = await db.load("s3")
    assert snap is not None and snap.info.agent == "first"  # the row was not replaced
    assert [r.data["name"] for r in snap.records] == ["w", "x", "y"]
    await db.append("s3", _records("z"), fence=token)  # numbered after them
    await db.release("s3", "w1")
    assert await db.acquire("s3", "w2", 30) == token + 1
    with pytest.raises(LeaseLost, match=rf"^run s3: lease token {token} is stale"):
        await start_run(db, _info("s3"), _records("late"), fence=token)
    again = await db.load("s3")
    assert again is not None and [r.data["name"] for r in again.records] == ["w", "x", "y", "z"]


async def test_a_start_without_records_writes_the_row(db: Store) -> None:
    assert await start_run(db, _info("s4"), []) == 0
    snap = await db.load("s4")
    assert snap is not None and snap.records == [] and snap.info.started_at == 5.0


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_a_start_refused_by_the_fence_leaves_no_row_where_it_is_one_write(
    db: Store,
) -> None:
    token = await db.acquire("s5", "w1", 30)
    assert token is not None
    await db.release("s5", "w1")
    await db.acquire("s5", "w2", 30)
    with pytest.raises(LeaseLost):
        await start_run(db, _info("s5"), _records("late"), fence=token)
    assert await db.load("s5") is None
