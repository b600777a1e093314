"""Fencing for real: a worker frozen (SIGSTOP) mid-tool past its lease, a second worker
takes the run over, then the first wakes (SIGCONT) — after the takeover completed, or
while it is still running. The stale worker must write nothing and run nothing more.

Each non-idempotent call runs once (the frozen one is not re-run: its outcome is
unknown to the new worker, which tells the model so), the completed run's stored rows
are byte-identical before and after the stale worker woke, and the stale worker ends
with one RunFailed carrying LeaseLost. Runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lovia.stores import store

PG_URL = os.environ.get("LOVIA_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
STALL = Path(__file__).with_name("stall_worker.py")
TTL = 1.0
HOLD_A, HOLD_B = 3, 5
TABLES = ("runs", "records", "sessions", "leases")


def _wait(check: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _spawn(url: str, run_id: str, log: Path, hold: int, marker: Path, go: Path) -> Any:
    env = {**os.environ, "LOVIA_LEASE_TTL_S": str(TTL)}
    args = [sys.executable, str(STALL), url, run_id, str(log), str(hold), str(marker), str(go)]
    return subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _spawn_successor(url: str, run_id: str, log: Path, marker: Path, go: Path) -> Any:
    """Start the second worker once the frozen one's lease has expired (retried while
    the store still says it is held)."""
    for _ in range(40):
        proc = _spawn(url, run_id, log, HOLD_B, marker, go)
        _wait(lambda p=proc: marker.exists() or p.poll() is not None, "the second worker")
        if not marker.exists() and proc.returncode == 4:  # RunLeaseHeld: not expired yet
            time.sleep(0.25)
            continue
        return proc
    raise AssertionError("the frozen worker's lease never expired")


def _dump(url: str) -> list[list[tuple[Any, ...]]]:
    """Every row of every lovia table, as stored."""
    if url.startswith("sqlite:"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            return [conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in TABLES]
        finally:
            conn.close()
    import asyncpg  # type: ignore[import-untyped]

    schema = url.rsplit("schema=", 1)[1]

    async def fetch() -> list[list[tuple[Any, ...]]]:
        conn = await asyncpg.connect(PG_URL, timeout=5)
        try:
            return [
                [
                    tuple(r)
                    for r in await conn.fetch(f'SELECT * FROM "{schema}".lovia_{t} ORDER BY 1, 2')
                ]
                for t in TABLES
            ]
        finally:
            await conn.close()

    return asyncio.run(fetch())


async def _stored(url: str, run_id: str) -> tuple[str, list[tuple[str, str]], int, list[Any]]:
    db = store(url)
    try:
        snap = await db.load(run_id)
        assert snap is not None
        results = [(e.call_id, e.content) for e in snap.entries() if e.type == "tool_result"]
        answers = sum(1 for e in snap.entries() if e.type == "text")
        history = await db.load_session("stall-session")
        return snap.info.status, results, answers, history
    finally:
        await db.aclose()


def _finish(proc: Any) -> tuple[str, str]:
    out, err = proc.communicate(timeout=60)
    return out, err


@pytest.mark.parametrize("wake", ["after_takeover", "during_takeover"])
def test_a_worker_stalled_past_its_lease_writes_nothing(
    store_url: str, wake: str, tmp_path: Path
) -> None:
    run_id, log = f"stall-{wake}", tmp_path / "effects.log"
    a_marker, a_go = tmp_path / "a_in_tool", tmp_path / "a_go"
    b_marker, b_go = tmp_path / "b_in_tool", tmp_path / "b_go"
    if wake == "after_takeover":
        b_go.touch()  # the second worker does not wait: it completes the run first
    first = _spawn(store_url, run_id, log, HOLD_A, a_marker, a_go)
    second: Any = None
    try:
        _wait(a_marker.exists, "the first worker to enter call 3")
        os.kill(first.pid, signal.SIGSTOP)
        time.sleep(TTL + 0.2)  # its lease expires while it is frozen mid-tool
        second = _spawn_successor(store_url, run_id, log, b_marker, b_go)
        before: list[list[tuple[Any, ...]]] = []
        if wake == "after_takeover":
            out_b, err_b = _finish(second)
            assert second.returncode == 0, err_b
            before = _dump(store_url)
        a_go.touch()
        os.kill(first.pid, signal.SIGCONT)  # wakes after, or while the second works
        out_a, err_a = _finish(first)
        if wake == "after_takeover":
            assert _dump(store_url) == before, "the stale worker changed the completed run"
        else:
            assert second.poll() is None, "the second worker was still running"
            b_go.touch()
            out_b, err_b = _finish(second)
            assert second.returncode == 0, err_b
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)
                proc.kill()
                proc.wait()

    # the stale worker stopped with the typed error: one RunFailed, no tool started after
    assert first.returncode == 3, err_a
    summary = json.loads(out_a.strip().splitlines()[-1])
    assert summary["type"] == "RunFailed" and summary["error"] == "LeaseLost"
    assert summary["events"].count("ToolCallStarted") == HOLD_A
    assert summary["events"].count("RunFailed") == 1 and summary["events"][-1] == "RunFailed"
    assert "RunCompleted" not in summary["events"]
    assert json.loads(out_b.strip().splitlines()[-1])["type"] == "RunCompleted"

    # every call ran exactly once: 1-3 in the first worker, 4-6 in the second
    effects = [line.split() for line in log.read_text().splitlines()]
    assert [int(n) for n, _ in effects] == [1, 2, 3, 4, 5, 6], effects
    assert len({pid for n, pid in effects if int(n) <= 3}) == 1
    assert {pid for n, pid in effects if int(n) > 3} == {str(second.pid)}

    status, results, answers, history = asyncio.run(_stored(store_url, run_id))
    assert status == "completed"
    assert [call_id for call_id, _ in results] == [f"c{n}" for n in range(1, 7)]
    assert "unknown" in results[2][1]  # the frozen call: not re-run, the model was told
    assert answers == 1  # one final answer
    assert {e.run_id for e in history} == {run_id}  # one session segment, no duplicates
    assert len({e.id for e in history}) == len(history)
    assert sum(1 for e in history if e.type == "tool_result") == 6
