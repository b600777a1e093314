"""The lifecycle derivation (``lovia.stores.lifecycle``) on every store: states from the
row and the lease, attempts, approvals and failed calls read back as written."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lovia.stores import RunInfo, Store
from lovia.stores.lifecycle import (
    HOST,
    build_life,
    holder_gone,
    life_of,
    list_lives,
    owner_id,
    process_gone,
    process_started,
    state_of,
)
from lovia.stores.records import (
    ApprovalRecord,
    AttemptRecord,
    FailedCallRecord,
    read_records,
    to_checkpoint,
)


def _info(run_id: str, **kw: object) -> RunInfo:
    kw.setdefault("agent", "a")
    kw.setdefault("started_at", time.time() - 10)
    return RunInfo(run_id=run_id, **kw)  # type: ignore[arg-type]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_live_process_is_not_gone_and_a_dead_or_reused_pid_is() -> None:
    me = os.getpid()
    assert not process_gone(HOST, me, process_started(me))
    assert process_gone(HOST, _dead_pid())
    # the same pid with another start time is another process: the holder is gone
    assert process_gone(HOST, me, "1")
    # another host's process is never judged from here
    assert not process_gone(HOST + "-elsewhere", _dead_pid())
    assert not holder_gone(f"{HOST}x:{me}:1:abcd")


def test_a_zombie_is_gone() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    stat = Path(f"/proc/{proc.pid}/stat")
    while stat.read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        assert process_gone(HOST, proc.pid, process_started(proc.pid))
    finally:
        proc.wait()


def test_owner_ids_old_and_new() -> None:
    mine = owner_id()
    host, pid, started, _ = mine.split(":")
    assert (host, int(pid), started) == (
        socket.gethostname(),
        os.getpid(),
        process_started(os.getpid()),
    )
    assert not holder_gone(mine)
    assert holder_gone(f"{HOST}:{_dead_pid()}:deadbeef")  # an owner id of an older lovia
    assert not holder_gone("not an owner id")


def test_state_of_every_stored_status() -> None:
    dead = f"{HOST}:{_dead_pid()}:-:x"
    assert state_of(_info("r", status="running"), owner_id())[0] == "running"
    assert state_of(_info("r", status="running"), None) == (
        "interrupted",
        "no worker holds its lease (it expired unrenewed)",
    )
    state, why = state_of(_info("r", status="running"), dead)
    assert state == "interrupted" and dead in why
    waits = {"waiting_on": [{"call_id": "c1", "tool": "refund"}]}
    assert state_of(_info("r", status="paused", extra=waits), None) == (
        "paused",
        "waiting for approval of refund (c1)",
    )
    cancelled = _info("r", status="cancelled", extra={"cancelled_by": "ops"})
    assert state_of(cancelled, None) == ("cancelled", "cancelled: ops")
    # stored as failed by an older lovia: still a cancellation
    old = _info("r", status="failed", error_type="RunCancelled")
    assert state_of(old, None)[0] == "cancelled"
    failed = _info("r", status="failed", error_type="ProviderError", extra={"error": "503"})
    assert state_of(failed, None) == ("failed", "ProviderError: 503")
    assert state_of(_info("r", status="completed", finish_reason="stop"), None)[0] == "completed"


def test_a_run_of_an_older_lovia_has_one_attempt_from_its_row() -> None:
    info = _info("r", status="completed", ended_at=time.time())
    life = build_life(info, None)
    assert [(a.attempt, a.how) for a in life.attempts] == [(1, "finished")]
    assert life.wall_s == pytest.approx(info.ended_at - info.started_at)  # type: ignore[operator]


async def test_records_read_back_from_every_store(db: Store) -> None:
    now = time.time()
    await db.begin(_info("life-1", started_at=now - 5))
    token = await db.acquire("life-1", owner_id(), 60)
    written = [
        AttemptRecord(attempt=1, at=now - 5, host=HOST, pid=1, pid_started="7", fence=token or 0),
        ApprovalRecord(
            call_id="c1", tool="t", decision="denied", actor="cli:x", at=now, reason="no"
        ),
        FailedCallRecord(
            turn=2,
            attempt=1,
            view_hash="h" * 64,
            error_type="E",
            message="m",
            status=503,
            retries=3,
        ),
        AttemptRecord(attempt=2, at=now - 1, host=HOST, pid=2, previous="killed"),
    ]
    await db.append("life-1", [to_checkpoint(r) for r in written], fence=token)
    snapshot = await db.load("life-1")
    assert snapshot is not None
    kinds = ("attempt", "approval", "failed_call")
    assert list(read_records(snapshot, kinds)) == written
    life = await life_of(db, snapshot.info, snapshot)
    assert life.state == "running"  # this process holds the lease
    assert [(a.attempt, a.how) for a in life.attempts] == [(1, "killed"), (2, None)]
    assert life.attempts[0].end_estimated and life.attempts[1].ended_at is None
    assert [a.reason for a in life.approvals] == ["no"]
    assert [f.retries for f in life.failed_calls] == [3]


async def test_list_lives_filters_on_the_derived_state(db: Store) -> None:
    await db.begin(_info("held", started_at=1.0))
    await db.acquire("held", owner_id(), 60)
    await db.begin(_info("orphan", started_at=2.0))  # begun, never leased: nobody is on it
    await db.finish(_info("stopped", status="cancelled", started_at=3.0, ended_at=4.0), None)
    await db.finish(_info("old", status="failed", error_type="RunCancelled", started_at=5.0), None)
    await db.finish(_info("broken", status="failed", error_type="E", started_at=6.0), None)

    async def ids(state: str | None, limit: int = 50) -> list[str]:
        return [i.run_id for i, _ in await list_lives(db, state=state, limit=limit)]

    assert await ids("interrupted") == ["orphan"]
    assert await ids("running") == ["held"]
    assert await ids("cancelled") == ["old", "stopped"]
    assert await ids("failed") == ["broken"]
    assert await ids(None, limit=2) == ["broken", "old"]
