"""Crash recovery for real: a worker process takes a run from the queue and is SIGKILLed
mid-tool or mid model call; another worker takes the task over and finishes the run.

Nothing completed runs twice, the in-flight non-idempotent tool is reported to the model
as "outcome unknown", the session gets exactly one segment, the task is acknowledged.
SQLite (one file shared by both processes) and PostgreSQL (skipped locally when
unreachable; fails in CI).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import sys
from pathlib import Path

import pytest
from worker_helpers import Start, crashy_agent, eventually, in_ci

from lovia.stores import store
from lovia.workers import RunQueue, Worker

SCRIPT = Path(__file__).with_name("queue_worker.py")
PG_URL = os.environ.get("LOVIA_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


async def _pg_available() -> bool:
    try:
        import asyncpg  # type: ignore[import-untyped]

        conn = await asyncpg.connect(PG_URL, timeout=3)  # type: ignore[reportUnknownMemberType]
        await conn.close()  # type: ignore[reportUnknownMemberType]
        return True
    except Exception:
        return False


@pytest.fixture(params=["sqlite", "postgres"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'crash.db'}"
    if not await _pg_available():
        if in_ci():
            pytest.fail(f"PostgreSQL unreachable at {PG_URL}")
        pytest.skip("PostgreSQL unreachable")
    return f"{PG_URL}?schema=lovia_queue_{secrets.token_hex(4)}"


@pytest.mark.parametrize("kill_at", ["tool", "model"])
async def test_killed_worker_is_finished_by_another(
    queue: RunQueue,
    store_url: str,
    kill_at: str,
    tmp_path: Path,
    start: Start,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOVIA_LEASE_TTL_S", "2")
    log = tmp_path / "side_effects.log"
    run_id = await queue.submit("crashy", "go", session_id="crash-session")
    args = [queue.url, queue.stream, queue.group, store_url, kill_at, str(log)]
    doomed = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), *args, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(doomed.communicate(), 30)
    assert doomed.returncode == -signal.SIGKILL, err.decode()
    assert await queue.pending() == 1, "the dead worker's task is still pending"

    rescuer = Worker(queue, {"crashy": crashy_agent(log)}, store_url, claim_idle_s=0.5)
    start(rescuer)
    db = store(store_url)
    try:
        snap = await queue.result(run_id, db, timeout_s=20)
        assert snap.info.status == "completed"
        await eventually(lambda: rescuer.stats["completed"] == 1)
        await eventually(lambda: _acked(queue))
        results = [
            e["call_id"]
            for r in snap.records
            if r.kind == "entries"
            for e in r.data["entries"]
            if e["type"] == "tool_result"
        ]
        history = await db.load_session("crash-session")
    finally:
        await db.aclose()
    effects = log.read_text().split() if log.exists() else []
    assert sorted(results) == ["c1", "c2"], "each call has exactly one result"
    assert len({e.run_id for e in history}) == 1, "exactly one session segment"
    assert snap.result is not None
    output = str(snap.result["output"])
    if kill_at == "tool":
        assert effects == ["1", "2"], "no completed (or in-flight) tool ran again"
        assert "unknown" in output
    else:
        assert effects == ["1", "2"] and "unknown" not in output


async def _acked(queue: RunQueue) -> bool:
    return await queue.pending() == 0
