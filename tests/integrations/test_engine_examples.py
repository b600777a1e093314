"""The durable-engine examples run offline and print what they promise (their own file:
DBOS and two worker processes take longer than the control examples' bound)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXPECT = {
    "64_dbos.py": [
        "worker 1: ship_order is running",
        "worker 1: killed (exit -9)",
        "worker 2: run completed: Done: order A1 shipped.",
        "shipping API: 2 requests, 1 shipment (key ship-",
    ],
    "65_temporal.py": [
        "activity returned 'completed'",
        "heartbeat: turn 0, checkpoint start\nheartbeat: turn 1, checkpoint ledger\n"
        "heartbeat: turn 1, checkpoint tool_result\nheartbeat: turn 2, checkpoint complete\n",
        "activity cancelled\nrun cancelled (cancelled_by: host: CancelledError)",
    ],
}


@pytest.mark.slow
@pytest.mark.timeout(200)
@pytest.mark.parametrize("name", sorted(EXPECT))
def test_engine_example_runs_offline(name: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LOVIA_MODEL"}
    env["LOVIA_STORE"] = f"sqlite:///{tmp_path / 'lovia.db'}"
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for needle in EXPECT[name]:
        assert needle in proc.stdout, proc.stdout
