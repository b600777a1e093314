"""A run's end in one transaction (``end_run``), on every store: its last records, the
completed row, the session segment and the lease release land together, or — when the
fence is refused — not at all."""

from __future__ import annotations

from typing import Any

import pytest

from lovia.errors import LeaseLost, StoreError
from lovia.stores import CheckpointRecord, RunInfo, Store
from lovia.stores.base import RunEnd, end_run
from lovia.transcript import InputEntry, TextEntry


def _info(run_id: str, status: Any = "completed") -> RunInfo:
    return RunInfo(run_id=run_id, agent="writer", status=status, started_at=1.0, turns=1)


def _records(*names: str) -> list[CheckpointRecord]:
    return [CheckpointRecord(kind="state", data={"name": n}) for n in names]


_SEGMENT = [InputEntry(id="e00001", content="hi"), TextEntry(id="e00002", text="hello")]


async def _started(db: Store, run_id: str) -> int:
    await db.begin(RunInfo(run_id=run_id, agent="writer"))
    token = await db.acquire(run_id, "w1", 30)
    assert token is not None
    await db.append(run_id, _records("start"), fence=token)
    return token


async def test_the_end_writes_records_row_segment_and_frees_the_lease(db: Store) -> None:
    token = await _started(db, "r1")
    end = RunEnd(
        info=_info("r1"), result={"output": "ok"}, fence=token, records=_records("a", "b"),
        session_id="s1", entries=_SEGMENT, release="w1",
    )  # fmt: skip
    written = await end_run(db, end)
    assert written > 0
    snap = await db.load("r1")
    assert snap is not None and snap.info.status == "completed"
    assert [r.data["name"] for r in snap.records] == ["start", "a", "b"]
    assert snap.result == {"output": "ok"}
    assert [e.id for e in await db.load_session("s1")] == ["e00001", "e00002"]
    assert await db.lease_holder("r1") is None
    assert await db.acquire("r1", "w2", 30) is None  # a completed run is never leased again


async def test_a_refused_fence_writes_nothing_of_the_end(db: Store) -> None:
    token = await _started(db, "r2")
    assert await db.acquire("r2", "w1", 30) == token + 1  # a later grant: token is stale
    end = RunEnd(
        info=_info("r2"), result={"output": "late"}, fence=token, records=_records("x"),
        session_id="s2", entries=_SEGMENT, release="w1",
    )  # fmt: skip
    with pytest.raises(LeaseLost):
        await end_run(db, end)
    snap = await db.load("r2")
    assert snap is not None and snap.info.status == "running" and snap.result is None
    assert [r.data["name"] for r in snap.records] == ["start"]
    assert await db.load_session("s2") == []
    assert await db.lease_holder("r2") == "w1"  # the newer grant keeps its lease


async def test_a_failed_end_keeps_the_session_and_the_lease_when_asked(db: Store) -> None:
    token = await _started(db, "r3")
    end = RunEnd(info=_info("r3", "failed"), result=None, fence=token, records=_records("f"))
    await end_run(db, end)
    snap = await db.load("r3")
    assert snap is not None and snap.info.status == "failed"
    assert [r.data["name"] for r in snap.records] == ["start", "f"]
    assert await db.lease_holder("r3") == "w1"  # release=None: the lease is kept
    await db.release("r3", "w1")
    assert await db.lease_holder("r3") is None


async def test_the_segment_of_an_ended_run_is_written_once(db: Store) -> None:
    token = await _started(db, "r4")
    await db.append_segment("s4", "r4", _SEGMENT[:1], fence=token)
    end = RunEnd(
        info=_info("r4"), result={"output": "ok"}, fence=token, session_id="s4",
        entries=_SEGMENT,
    )  # fmt: skip
    await end_run(db, end)
    assert [e.id for e in await db.load_session("s4")] == ["e00001"]  # the first one stays


async def test_an_end_that_cannot_be_stored_writes_none_of_it(db: Store) -> None:
    """A lone surrogate in the result (entries clean their own text; a tool's structured
    output may not): a clear StoreError, and not a record, the row, the segment or the
    lease of the end is written."""
    token = await _started(db, "r5")
    end = RunEnd(
        info=_info("r5"), result={"output": "half a pair: \ud800"}, fence=token,
        records=_records("x"), session_id="s5", entries=_SEGMENT, release="w1",
    )  # fmt: skip
    with pytest.raises(StoreError) as info:
        await end_run(db, end)
    assert info.value.hint and "surrogate" in info.value.hint
    snap = await db.load("r5")
    assert snap is not None and snap.info.status == "running" and snap.result is None
    assert [r.data["name"] for r in snap.records] == ["start"]
    assert await db.load_session("s5") == []
    assert await db.lease_holder("r5") == "w1"
