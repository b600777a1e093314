"""The SQLite store sends every large write to its worker thread, so the event loop never
waits on disk for it: appends, outcomes, session segments, renewals and a run's end,
whichever part of the write is large."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from lovia.stores import CheckpointRecord, RunInfo
from lovia.stores.base import RunEnd, end_run, start_run
from lovia.stores.sqlite import SQLiteStore
from lovia.transcript import TextEntry


@pytest.fixture
async def opened(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    db = SQLiteStore(f"sqlite:///{tmp_path}/lovia.db", timeout_s=60)
    await db.begin(RunInfo(run_id="r1", agent="a"))
    yield db
    await db.aclose()


@pytest.fixture
def threads(opened: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread each of the store's statement functions ran on, in order."""
    seen: list[str] = []
    worker = opened._worker  # pyright: ignore[reportPrivateUsage]
    submit = worker.submit

    def spying(fn: Any, args: tuple[Any, ...], write: bool) -> Any:
        def noted(*a: Any) -> Any:
            seen.append(threading.current_thread().name)
            return fn(*a)

        return submit(noted, args, write)

    inline = opened._inline  # pyright: ignore[reportPrivateUsage]
    run = inline.run

    def inline_spying(fn: Any, args: tuple[Any, ...]) -> Any:
        def noted(*a: Any) -> Any:
            seen.append(threading.current_thread().name)
            return fn(*a)

        return run(noted, args)

    monkeypatch.setattr(worker, "submit", spying)
    monkeypatch.setattr(inline, "run", inline_spying)
    return seen


BIG = "x" * (SQLiteStore.inline_max_bytes + 1)
LOOP = threading.current_thread().name
WORKER = "lovia-sqlite"


def _done(**kw: Any) -> RunInfo:
    return RunInfo(run_id="r1", agent="a", status="completed", **kw)


async def test_a_large_append_or_segment_runs_on_the_worker(
    opened: SQLiteStore, threads: list[str]
) -> None:
    await opened.append("r1", [CheckpointRecord(kind="state", data={"blob": BIG})])
    await opened.append("r1", [CheckpointRecord(kind="state", data={"small": 1})])
    assert await opened.append_segment("s1", "r1", [TextEntry(id="e1", text=BIG)])
    assert await opened.append_segment("s2", "r1", [TextEntry(id="e1", text="hi")])
    assert threads == [WORKER, LOOP, WORKER, LOOP]


async def test_a_large_outcome_runs_on_the_worker(opened: SQLiteStore, threads: list[str]) -> None:
    await opened.finish(_done(), {"output": BIG})
    await opened.finish(_done(extra={"note": BIG}), None)
    await opened.finish(_done(), {"output": "small"})
    assert threads == [WORKER, WORKER, LOOP]


async def test_a_run_end_with_any_large_part_runs_on_the_worker(
    opened: SQLiteStore, threads: list[str]
) -> None:
    ends = [
        RunEnd(info=_done(), result=None, records=[CheckpointRecord(kind="state", data={"": BIG})]),
        RunEnd(info=_done(), result={"output": BIG}),
        RunEnd(info=_done(), result=None, session_id="s1", entries=[TextEntry(id="e", text=BIG)]),
        RunEnd(info=_done(extra={"note": BIG}), result=None),
        RunEnd(info=_done(), result={"output": "small"}),
    ]  # fmt: skip
    for end in ends:
        await end_run(opened, end)
    assert threads == [WORKER, WORKER, WORKER, WORKER, LOOP]


async def test_renewing_many_leases_at_once_runs_on_the_worker(
    opened: SQLiteStore, threads: list[str]
) -> None:
    few = [(f"r{i}", "w1", 1) for i in range(3)]
    many = [(f"r{i}", "w1", 1) for i in range(SQLiteStore.inline_max_bytes // 64 + 1)]
    assert await opened.renew_many(few, 30) == {r for r, _, _ in few}
    assert await opened.renew_many(many, 30) == {r for r, _, _ in many}
    assert threads == [LOOP, WORKER]


async def test_a_large_start_runs_on_the_worker(opened: SQLiteStore, threads: list[str]) -> None:
    """A new run's row with its first records: large records or a large row go to the
    worker thread, a small start commits inline."""
    big_record = [CheckpointRecord(kind="state", data={"blob": BIG})]
    await start_run(opened, RunInfo(run_id="n1", agent="a"), big_record)
    await start_run(opened, RunInfo(run_id="n2", agent="a", extra={"note": BIG}), [])
    small = [CheckpointRecord(kind="state", data={"small": 1})]
    await start_run(opened, RunInfo(run_id="n3", agent="a"), small)
    assert threads == [WORKER, WORKER, LOOP]
