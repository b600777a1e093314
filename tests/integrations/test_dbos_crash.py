"""A lovia run as a DBOS workflow survives SIGKILL of its worker: DBOS's recovery runs
the workflow again, lovia resumes the run from its checkpoint, and a non-idempotent
tool that was running when the worker died is not run again (its outcome is reported
unknown). Real DBOS, real PostgreSQL, real worker processes."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_pg import PG_URL, pg_schema

pytest.importorskip("dbos")

__all__ = ["pg_schema"]

WORKER = Path(__file__).with_name("dbos_worker.py")
pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(240)]


def _spawn(schema: str, run_id: str, mode: str, hang_at: str, log: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    args = [sys.executable, str(WORKER), PG_URL, schema, run_id, mode, hang_at, str(log)]
    return subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _wait_for(log: Path, line: str, proc: subprocess.Popen[str], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and line in log.read_text().splitlines():
            return
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"the worker exited with {proc.returncode} before {line!r}:\n{err}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"the worker never wrote {line!r}")


def _kill_then_recover(schema: str, hang_at: str, tmp_path: Path) -> tuple[str, str, list[str]]:
    """Start the run in a worker, SIGKILL it where it hangs, start a worker with the same
    executor id; return the run id, the second worker's summary line and the effects."""
    run_id = f"dbos-{hang_at}-{secrets.token_hex(4)}"
    log = tmp_path / "effects.log"
    first = _spawn(schema, run_id, "start", hang_at, log)
    _wait_for(log, "hanging", first)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    assert first.returncode == -signal.SIGKILL
    second = _spawn(schema, run_id, "recover", hang_at, log)
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err[-3000:]
    return run_id, out.strip().splitlines()[-1], log.read_text().splitlines()


def test_sigkill_during_a_tool_resumes_and_the_tool_runs_once(
    pg_schema: str, tmp_path: Path
) -> None:
    run_id, last, effects = _kill_then_recover(pg_schema, "tool", tmp_path)
    assert (
        last
        == "run=completed workflow=SUCCESS output=done: The outcome of this tool call is unknown"
    )
    assert effects == [
        "model call 0 results",
        f"charged 5 key={run_id}:c1",
        "hanging",
        "model call 1 results",  # recovered: the model is told the outcome; no second charge
    ]


def test_sigkill_during_a_model_call_resumes_and_calls_the_model_again(
    pg_schema: str, tmp_path: Path
) -> None:
    run_id, last, effects = _kill_then_recover(pg_schema, "model", tmp_path)
    assert last == "run=completed workflow=SUCCESS output=done: charged 5"
    assert effects == [
        "model call 0 results",
        "hanging",
        "model call 0 results",  # recovered: the cut call is made again, nothing was lost
        f"charged 5 key={run_id}:c1",
        "model call 1 results",
    ]
