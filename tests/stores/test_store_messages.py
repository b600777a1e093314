"""What a store's errors say, on every store: each names the run (or session) and the
value it is about, so a user can tell which run to look at."""

from __future__ import annotations

from typing import Any

import pytest
from store_backends import Backend

from lovia.errors import RunNotFound, SchemaVersionError, StoreError
from lovia.stores import SCHEMA_VERSION, CheckpointRecord, RunInfo, Store
from lovia.stores.base import RunEnd, end_run, start_run
from lovia.stores.memory import MemoryStore
from lovia.transcript import TextEntry

NEWER = SCHEMA_VERSION + 1
_BAD = "bad \ud800"  # a lone surrogate: no store can hold it


def _info(run_id: str = "r1", **kw: Any) -> RunInfo:
    return RunInfo(run_id=run_id, agent="writer", started_at=1.0, **kw)


def _rec(**data: Any) -> CheckpointRecord:
    return CheckpointRecord(kind="state", data=data)


async def test_an_append_to_a_run_never_begun_names_it_and_says_to_begin_first(
    db: Store,
) -> None:
    with pytest.raises(RunNotFound) as caught:
        await db.append("ghost", [_rec(i=1)])
    assert caught.value.message == "no run 'ghost' to append to"
    assert caught.value.hint == "Call begin() first."
    end = RunEnd(info=_info("ghost", status="completed"), result=None, records=[_rec(i=1)])
    with pytest.raises(RunNotFound) as caught:
        await end_run(db, end)
    assert caught.value.message == "no run 'ghost' to append to"
    assert caught.value.hint == "Call begin() first."


async def test_a_value_that_cannot_be_stored_names_the_run_or_session_it_belongs_to(
    db: Store,
) -> None:
    await db.begin(_info())
    with pytest.raises(StoreError, match=r"^cannot store a state record of run r1: "):
        await db.append("r1", [_rec(note=_BAD)])
    with pytest.raises(StoreError, match=r"^cannot store result of run r1: "):
        await db.finish(_info(status="completed"), {"output": _BAD})
    end = RunEnd(info=_info(status="completed"), result={"output": _BAD})
    with pytest.raises(StoreError, match=r"^cannot store result of run r1: "):
        await end_run(db, end)
    end = RunEnd(info=_info(status="completed"), result=None, records=[_rec(note=_BAD)])
    with pytest.raises(StoreError, match=r"^cannot store a state record of run r1: "):
        await end_run(db, end)
    with pytest.raises(StoreError, match=r"^cannot store a state record of run r9: "):
        await start_run(db, _info(run_id="r9"), [_rec(note=_BAD)])
    forged = TextEntry.model_construct(id="e1", text=_BAD, turn=1, ts=1.5)
    with pytest.raises(StoreError, match=r"^cannot store a segment of session s1: "):
        await db.append_segment("s1", "r1", [forged])
    snap = await db.load("r1")
    assert snap is not None and snap.info.status == "running" and snap.records == []
    assert await db.load_session("s1") == []
    end = RunEnd(info=_info(status="completed"), result=None, session_id="s1", entries=[forged])
    with pytest.raises(StoreError, match=r"^cannot store a segment of session s1: "):
        await end_run(db, end)


async def test_a_run_of_a_newer_schema_version_is_refused_naming_it(
    backend: Backend, db: Store
) -> None:
    with pytest.raises(SchemaVersionError, match=rf"^run r3 has schema version {NEWER}; "):
        await db.finish(_info("r3", version=NEWER, status="completed"), None)
    await db.begin(_info())
    if isinstance(db, MemoryStore):
        db._runs["r1"].version = NEWER  # pyright: ignore[reportPrivateUsage]
    else:
        await backend.raw("UPDATE lovia_runs SET version = ?1 WHERE run_id = 'r1'", NEWER)
    with pytest.raises(SchemaVersionError, match=rf"^run r1 has schema version {NEWER}; "):
        await db.load("r1")


async def test_a_damaged_result_names_its_run(backend: Backend, db: Store) -> None:
    await db.finish(_info(status="completed"), {"output": "x"})
    if isinstance(db, MemoryStore):
        db._results["r1"] = "[1]"  # pyright: ignore[reportPrivateUsage]
    else:
        await backend.raw("UPDATE lovia_runs SET result = '[1]' WHERE run_id = 'r1'")
    with pytest.raises(StoreError, match=r"^the result of run r1 is damaged: "):
        await db.load("r1")


async def test_an_end_without_a_session_writes_no_segment_and_ignores_its_entries(
    db: Store,
) -> None:
    """``entries`` only matter with ``session_id``: without one nothing of them is
    encoded or written, even entries no store could hold."""
    await db.begin(_info())
    forged = TextEntry.model_construct(id="e1", text=_BAD, turn=1, ts=1.5)
    await end_run(db, RunEnd(info=_info(status="completed"), result=None, entries=[forged]))
    snap = await db.load("r1")
    assert snap is not None and snap.info.status == "completed"
