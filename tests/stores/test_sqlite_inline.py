"""The SQLite store's inline writes: small writes on the event loop's thread, on a
connection that never waits for a lock; the worker thread when another writer holds it."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from lovia.errors import LeaseLost, StoreError
from lovia.stores import CheckpointRecord, RunInfo
from lovia.stores.sqlite import SQLiteStore
from lovia.transcript import InputEntry


def rec(i: int, **extra: Any) -> CheckpointRecord:
    return CheckpointRecord(kind="state", data={"i": i, **extra})


@pytest.fixture
async def opened(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    """A file store whose worker has opened the file (inline writes are possible)."""
    db = SQLiteStore(f"sqlite:///{tmp_path}/lovia.db", timeout_s=60)
    await db.begin(RunInfo(run_id="r1", agent="a"))
    yield db
    await db.aclose()


def no_worker(db: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if a write reaches the worker thread (it must run inline)."""

    def refuse(*args: Any) -> Any:
        raise AssertionError("this write went to the worker thread")

    monkeypatch.setattr(db._worker, "submit", refuse)  # pyright: ignore[reportPrivateUsage]


async def ticking_until(done: Callable[[], bool], ticks: list[int], at_least: int) -> None:
    """Let the loop run another coroutine until it ticked ``at_least`` times."""

    async def tick() -> None:
        while not done():
            ticks[0] += 1
            await asyncio.sleep(0.001)

    ticker = asyncio.create_task(tick())
    while ticks[0] < at_least:
        await asyncio.sleep(0.001)
    assert not ticker.done()
    ticker.cancel()


async def test_small_writes_run_on_the_loop_thread_large_ones_on_the_worker(
    opened: SQLiteStore,
) -> None:
    seen: list[str] = []

    def spy(conn: sqlite3.Connection) -> None:
        seen.append(threading.current_thread().name)

    await opened._write(spy, size=100)  # pyright: ignore[reportPrivateUsage]
    await opened._write(spy, size=opened.inline_max_bytes + 1)  # pyright: ignore[reportPrivateUsage]
    assert seen == [threading.current_thread().name, "lovia-sqlite"]
    big = "x" * (opened.inline_max_bytes + 1)
    await opened.append("r1", [rec(1), rec(2, blob=big), rec(3)])
    await opened.append("r1", [rec(4)])
    snap = await opened.load("r1")
    assert snap is not None
    assert [r.data["i"] for r in snap.records] == [1, 2, 3, 4]
    assert snap.records[1].data["blob"] == big


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "worker"])
async def test_a_stale_fence_is_refused_and_writes_nothing(
    opened: SQLiteStore, inline: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = await opened.acquire("r1", "w1", 60)
    await opened.release("r1", "w1")
    new = await opened.acquire("r1", "w2", 60)
    assert old is not None and new is not None and new > old
    if inline:
        no_worker(opened, monkeypatch)
    else:
        opened.inline_max_bytes = -1
    with pytest.raises(LeaseLost):
        await opened.append("r1", [rec(1)], fence=old)
    await opened.append("r1", [rec(2)], fence=new)
    with pytest.raises(LeaseLost):
        await opened.append_segment("s1", "r1", [InputEntry(content="hi")], fence=old)
    with pytest.raises(LeaseLost):
        await opened.finish(RunInfo(run_id="r1", agent="a", status="completed"), {}, fence=old)
    assert await opened.renew("r1", "w2", new, 60)
    assert not await opened.renew("r1", "w1", old, 60)
    monkeypatch.undo()
    snap = await opened.load("r1")
    assert snap is not None
    assert [r.data["i"] for r in snap.records] == [2]
    assert snap.info.status == "running"
    assert await opened.load_session("s1") == []


async def test_a_held_write_lock_sends_writes_to_the_worker_and_the_loop_keeps_running(
    opened: SQLiteStore, tmp_path: Path
) -> None:
    blocker = sqlite3.connect(tmp_path / "lovia.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    blocker.execute("INSERT INTO meta (key, value) VALUES ('held', 'yes')")
    first = asyncio.create_task(opened.append("r1", [rec(1)]))
    ticks = [0]
    await ticking_until(first.done, ticks, 20)
    # called later, the lock meanwhile free for it: it still queues behind the first
    second = asyncio.create_task(opened.append("r1", [rec(2)]))
    await ticking_until(second.done, ticks, 40)
    assert not first.done() and not second.done()
    blocker.execute("COMMIT")
    blocker.close()
    await asyncio.gather(first, second)
    await opened.append("r1", [rec(3)])
    snap = await opened.load("r1")
    assert snap is not None
    assert [r.data["i"] for r in snap.records] == [1, 2, 3]


HOLDER = textwrap.dedent(
    """
    import sqlite3, sys
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO meta (key, value) VALUES ('held', 'yes')")
    print("held", flush=True)
    sys.stdin.readline()
    conn.execute("COMMIT")
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP")
async def test_a_stalled_writer_process_never_stalls_the_event_loop(
    opened: SQLiteStore, tmp_path: Path
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path / "lovia.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert await asyncio.to_thread(proc.stdout.readline) == "held\n"
        os.kill(proc.pid, signal.SIGSTOP)
        writes = asyncio.ensure_future(
            asyncio.gather(
                opened.append("r1", [rec(1)]),
                opened.append_segment("s1", "r1", [InputEntry(content="hi")]),
                opened.finish(RunInfo(run_id="r1", agent="a", status="completed"), {"ok": 1}),
            )
        )
        ticks = [0]
        await ticking_until(writes.done, ticks, 30)
        assert not writes.done()
        os.kill(proc.pid, signal.SIGCONT)
        proc.stdin.write("\n")
        proc.stdin.flush()
        await writes
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.kill() if proc.poll() is None else None
        proc.wait()
    snap = await opened.load("r1")
    assert snap is not None
    assert [r.data["i"] for r in snap.records] == [1]
    assert snap.info.status == "completed" and snap.result == {"ok": 1}
    assert [e.content for e in await opened.load_session("s1")] == ["hi"]


async def test_inline_writes_ask_the_worker_for_wal_checkpoints(
    opened: SQLiteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(opened._inline, "checkpoint_every", 10)  # pyright: ignore[reportPrivateUsage]
    for i in range(600):
        await opened.append("r1", [rec(i, pad="p" * 500)])
    wal = tmp_path / "lovia.db-wal"
    # without checkpoints the WAL holds every commit's pages (600 x 2+ pages of 4 KiB)
    assert wal.stat().st_size < 600 * 4096
    snap = await opened.load("r1")
    assert snap is not None
    assert [r.data["i"] for r in snap.records] == list(range(600))


async def test_hostile_text_round_trips_on_the_inline_path(
    opened: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    hostile = 'nul\x00 ls\u2028 ps\u2029 bom\ufeff astral\U0001f600 \\ud800 quote" end'
    no_worker(opened, monkeypatch)
    await opened.append("r1", [rec(1, text=hostile)])
    await opened.append_segment("s1", "r1", [InputEntry(content=hostile)])
    with pytest.raises(StoreError, match="surrogates"):
        await opened.append("r1", [rec(2), rec(3, note="bad \ud800")])
    monkeypatch.undo()
    snap = await opened.load("r1")
    assert snap is not None
    assert [r.data["i"] for r in snap.records] == [1]
    assert snap.records[0].data["text"] == hostile
    assert [e.content for e in await opened.load_session("s1")] == [hostile]


async def test_concurrent_runs_in_two_processes_keep_every_record_in_order(
    opened: SQLiteStore, tmp_path: Path
) -> None:
    writer = textwrap.dedent(
        """
        import asyncio, sys
        from lovia.stores.sqlite import SQLiteStore
        from lovia.stores.base import CheckpointRecord, RunInfo

        async def one(s, run, n):
            await s.begin(RunInfo(run_id=run, agent="p"))
            for i in range(n):
                await s.append(run, [CheckpointRecord(kind="state", data={"i": i})])

        async def main(path, w):
            s = SQLiteStore("sqlite:///" + path, timeout_s=60)
            await asyncio.gather(*(one(s, f"p{w}r{k}", 100) for k in range(5)))
            await s.aclose()

        asyncio.run(main(sys.argv[1], sys.argv[2]))
        """
    )
    path = str(tmp_path / "lovia.db")
    procs = [
        await asyncio.create_subprocess_exec(sys.executable, "-c", writer, path, str(w))
        for w in range(2)
    ]
    assert [await p.wait() for p in procs] == [0, 0]
    for w in range(2):
        for k in range(5):
            snap = await opened.load(f"p{w}r{k}")
            assert snap is not None
            assert [r.data["i"] for r in snap.records] == list(range(100))
