"""What the SQLite store's writes cost in statements, and that the shortcuts behind them
never change what is stored.

A run's appends are its most frequent writes. The store keeps each run's record count as
it last wrote it, so the next append is one UPDATE (count, fence and advance at once)
and its INSERTs; a count that is wrong (another writer appended, a write rolled back)
costs one read and the records are still numbered after the run's last one. A run's end
checks its fence once, and a read that finds nothing answers without the worker.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from lovia.errors import LeaseLost
from lovia.stores import CheckpointRecord, RunInfo
from lovia.stores import _sqlite_sql as sql
from lovia.stores._codec import info_row
from lovia.stores.base import RunEnd, end_run, start_run
from lovia.stores.sqlite import SQLiteStore
from lovia.transcript import InputEntry


def _recs(*names: str) -> list[CheckpointRecord]:
    return [CheckpointRecord(kind="state", data={"name": n}) for n in names]


def _info(run_id: str = "r1", **kw: Any) -> RunInfo:
    return RunInfo(run_id=run_id, agent="a", started_at=1.0, **kw)


async def _names(db: SQLiteStore, run_id: str = "r1") -> list[str]:
    snap = await db.load(run_id)
    assert snap is not None
    return [r.data["name"] for r in snap.records]


async def _seqs(db: SQLiteStore, run_id: str = "r1") -> list[int]:
    query = "SELECT seq FROM records WHERE run_id = ? ORDER BY seq"
    return [row[0] for row in await db._run(sql.fetch, query, (run_id,))]  # pyright: ignore[reportPrivateUsage]


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    """A file store whose worker has opened the file (writes run inline)."""
    store = SQLiteStore(f"sqlite:///{tmp_path}/lovia.db", timeout_s=60)
    await store.begin(_info("warm"))  # the worker opens the file
    await store.begin(_info("warm"))  # and this runs inline
    yield store
    await store.aclose()


@pytest.fixture
def statements(db: SQLiteStore) -> Callable[[], list[str]]:
    """The first word of each statement the inline connection runs from now on (each
    row of an ``executemany`` counts), as a function that returns them and starts over."""
    conn = db._inline._conn  # pyright: ignore[reportPrivateUsage]
    assert conn is not None
    seen: list[str] = []
    conn.set_trace_callback(seen.append)

    def taken() -> list[str]:
        words = [" ".join(s.split()[:3]) for s in seen]
        seen.clear()
        return words

    return taken


BEGIN, COMMIT = "BEGIN IMMEDIATE", "COMMIT"
ADVANCE = "UPDATE runs SET"
READ = "SELECT (SELECT token"
INSERT = "INSERT INTO records"


async def test_an_append_after_this_stores_own_one_is_one_update_and_its_inserts(
    db: SQLiteStore, statements: Callable[[], list[str]]
) -> None:
    await db.begin(_info())
    fence = await db.acquire("r1", "w1", 30)
    statements()
    await db.append("r1", _recs("a"), fence=fence)
    assert statements() == [BEGIN, READ, ADVANCE, INSERT, COMMIT]  # the first: no count yet
    await db.append("r1", _recs("b", "c"), fence=fence)
    assert statements() == [BEGIN, ADVANCE, INSERT, INSERT, COMMIT]
    await db.append("r1", _recs("d"))
    assert statements() == [BEGIN, ADVANCE, INSERT, COMMIT]
    assert await _names(db) == ["a", "b", "c", "d"]
    assert await _seqs(db) == [1, 2, 3, 4]


async def test_a_new_runs_start_knows_it_has_no_records_yet(
    db: SQLiteStore, statements: Callable[[], list[str]]
) -> None:
    fence = await db.acquire("r1", "w1", 30)
    statements()
    await start_run(db, _info(), _recs("a", "b"), fence=fence)
    assert statements() == [BEGIN, "INSERT INTO runs", ADVANCE, INSERT, INSERT, COMMIT]
    await db.append("r1", _recs("c"), fence=fence)
    assert statements() == [BEGIN, ADVANCE, INSERT, COMMIT]
    assert await _seqs(db) == [1, 2, 3]


async def test_a_start_of_a_run_written_elsewhere_numbers_after_its_records(
    db: SQLiteStore, tmp_path: Path
) -> None:
    other = SQLiteStore(f"sqlite:///{tmp_path}/lovia.db", timeout_s=60)
    try:
        await start_run(other, _info(), _recs("a", "b"))
    finally:
        await other.aclose()
    await start_run(db, _info(), _recs("c"))
    await db.append("r1", _recs("d"))
    assert await _names(db) == ["a", "b", "c", "d"]
    assert await _seqs(db) == [1, 2, 3, 4]


async def test_records_another_writer_appended_between_two_appends_keep_the_order(
    db: SQLiteStore, tmp_path: Path, statements: Callable[[], list[str]]
) -> None:
    await db.begin(_info())
    await db.append("r1", _recs("a"))
    other = SQLiteStore(f"sqlite:///{tmp_path}/lovia.db", timeout_s=60)
    try:
        await other.append("r1", _recs("b", "c"))
    finally:
        await other.aclose()
    statements()
    await db.append("r1", _recs("d"))
    assert statements() == [BEGIN, ADVANCE, READ, "UPDATE runs SET", INSERT, COMMIT]
    await db.append("r1", _recs("e"))
    assert statements() == [BEGIN, ADVANCE, INSERT, COMMIT]
    assert await _names(db) == ["a", "b", "c", "d", "e"]
    assert await _seqs(db) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("hint", [0, 1, 2, 99])
async def test_a_wrong_count_hint_never_misnumbers_a_record(db: SQLiteStore, hint: int) -> None:
    await db.begin(_info())
    await db.append("r1", _recs("a", "b"))
    db._counts["r1"] = hint  # pyright: ignore[reportPrivateUsage]
    await db.append("r1", _recs("c"))
    assert await _seqs(db) == [1, 2, 3]
    assert db._counts == {"r1": 3}  # pyright: ignore[reportPrivateUsage]


async def test_a_stale_fence_is_refused_right_after_its_own_append(db: SQLiteStore) -> None:
    """The count this store wrote is right, so only the fence can refuse the write."""
    await db.begin(_info())
    stale = await db.acquire("r1", "w1", 30)
    await db.append("r1", _recs("mine"), fence=stale)
    await db.release("r1", "w1")
    fresh = await db.acquire("r1", "w2", 30)
    assert fresh != stale
    with pytest.raises(LeaseLost):
        await db.append("r1", _recs("late"), fence=stale)
    await db.append("r1", _recs("theirs"), fence=fresh)
    assert await _names(db) == ["mine", "theirs"]
    assert await _seqs(db) == [1, 2]


async def test_a_runs_end_checks_its_fence_once_and_forgets_the_runs_count(
    db: SQLiteStore, statements: Callable[[], list[str]]
) -> None:
    fence = await db.acquire("r1", "w1", 30)
    await start_run(db, _info(), _recs("a"), fence=fence)
    statements()
    end = RunEnd(
        info=_info(status="completed", ended_at=2.0), result={"output": "x"}, fence=fence,
        records=_recs("b"), session_id="s1", entries=[InputEntry(content="hi")], release="w1",
    )  # fmt: skip
    await end_run(db, end)
    assert statements() == [
        BEGIN, ADVANCE, INSERT, "INSERT INTO runs", "INSERT INTO sessions", "UPDATE leases SET",
        COMMIT,
    ]  # fmt: skip
    assert db._counts == {}  # pyright: ignore[reportPrivateUsage]
    assert await _names(db) == ["a", "b"]


async def test_an_end_without_records_still_checks_its_fence(
    db: SQLiteStore, statements: Callable[[], list[str]]
) -> None:
    await db.begin(_info())
    stale = await db.acquire("r1", "w1", 30)
    fresh = await db.acquire("r1", "w1", 30)
    statements()
    with pytest.raises(LeaseLost):
        await end_run(
            db, RunEnd(info=_info(status="failed", ended_at=2.0), result=None, fence=stale)
        )
    assert statements() == [BEGIN, "SELECT token FROM", "ROLLBACK"]
    await end_run(db, RunEnd(info=_info(status="failed", ended_at=2.0), result=None, fence=fresh))
    snap = await db.load("r1")
    assert snap is not None and snap.info.status == "failed"


async def test_the_counts_of_runs_that_never_end_are_dropped_past_a_bound(
    db: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql, "COUNTS_KEPT", 3)
    for n in range(1, 4):
        await db.begin(_info(f"r{n}"))
        await db.append(f"r{n}", _recs("a"))
    assert db._counts == {"r1": 1, "r2": 1, "r3": 1}  # pyright: ignore[reportPrivateUsage]
    await db.begin(_info("r4"))
    await db.append("r4", _recs("a", "b"))
    assert db._counts == {"r4": 2}  # pyright: ignore[reportPrivateUsage]
    await db.append("r1", _recs("b"))
    assert await _seqs(db, "r1") == [1, 2]


# -- reads answered inline ------------------------------------------------------------


@pytest.fixture
def worker_calls(db: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the statement functions the worker thread ran from now on."""
    seen: list[str] = []
    worker = db._worker  # pyright: ignore[reportPrivateUsage]
    submit = worker.submit

    def spying(fn: Any, args: tuple[Any, ...], write: bool) -> Any:
        seen.append(fn.__name__)
        return submit(fn, args, write)

    monkeypatch.setattr(worker, "submit", spying)
    return seen


async def test_an_unknown_run_or_session_is_answered_without_the_worker(
    db: SQLiteStore, worker_calls: list[str]
) -> None:
    assert await db.load("nope") is None
    assert await db.load_session("nope") == []
    assert await db.session_labels("nope") == {}
    assert worker_calls == []


async def test_a_known_run_session_or_labels_read_back_whole(
    db: SQLiteStore, worker_calls: list[str]
) -> None:
    await db.begin(_info(session_id="s1"))
    await db.append("r1", _recs("a"))
    entries = [InputEntry(id="e1", content="hi")]
    assert await db.append_segment("s1", "r1", entries)
    assert await db.session_labels("s1", {"tenant": "acme"}) == {"tenant": "acme"}
    assert await _names(db) == ["a"]
    assert await db.load_session("s1") == entries
    assert await db.session_labels("s1") == {"tenant": "acme"}
    assert worker_calls == ["load", "fetch"]  # the labels are one lookup: read inline


async def test_reads_go_to_the_worker_while_it_has_jobs_called_before_them(
    db: SQLiteStore, worker_calls: list[str]
) -> None:
    """A read never overtakes a write this store was asked for first: while that write
    waits on the worker, the read of the run it creates queues behind it."""
    held, release = threading.Event(), threading.Event()

    def hold(conn: Any) -> None:
        held.set()
        release.wait(5)

    blocker = db._run(hold, write=True)  # pyright: ignore[reportPrivateUsage]
    try:
        assert held.wait(5)
        queued = db._run(sql.begin, info_row(_info("late")), write=True)  # pyright: ignore[reportPrivateUsage]
        loading = asyncio.create_task(db.load("late"))
        await asyncio.sleep(0.01)
        assert not loading.done()
    finally:
        release.set()
    await blocker
    await queued
    snap = await loading
    assert snap is not None and snap.info.run_id == "late"
    assert worker_calls == ["hold", "begin", "load"]
