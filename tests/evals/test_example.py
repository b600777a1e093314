"""The evaluation example prints the promised figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "51_eval_regression.py"


def test_example_proves_the_baseline_and_catches_the_regression(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "baseline: 3/3 view hashes reproduced, live tool calls 0, ok=True" in out
    assert "candidate: pass rate 0%, ok=False" in out
    assert "live tool calls 0 (answered from the pinned results)" in out
    assert "tool_called:refund_policy: refund_policy({}) called 0 time(s)" in out
    assert "+Sure, your refund for A-17 is on its way." in out
