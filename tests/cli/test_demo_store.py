"""``make demo`` (examples/01_quickstart.py) records where a plain ``lovia runs`` reads,
and every run starts a fresh session."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from .conftest import ROOT, lovia

QUICKSTART = ROOT / "examples" / "01_quickstart.py"


def _demo(cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("LOVIA_STORE", "LOVIA_MODEL")}
    env["PYTHONPATH"] = str(ROOT / "src")
    proc = subprocess.run(
        [sys.executable, str(QUICKSTART)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_demo_runs_show_in_a_plain_lovia_runs(tmp_path: Path) -> None:
    first, second = _demo(tmp_path), _demo(tmp_path)
    sessions = [re.search(r"\(session (\S+)\)", out) for out in (first, second)]
    assert sessions[0] and sessions[1]
    assert sessions[0][1] != sessions[1][1]  # a fresh session each time
    assert "  lovia runs\n" in first  # the printed command needs no --store
    listed = lovia("runs", "--json", cwd=tmp_path)  # no --store, no $LOVIA_STORE
    assert listed.code == 0, listed.err
    rows = json.loads(listed.out)
    assert {row["session_id"] for row in rows} == {sessions[0][1], sessions[1][1]}


def test_demo_prints_the_store_it_used_when_it_is_not_the_default(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("LOVIA_STORE", "LOVIA_MODEL")}
    env["PYTHONPATH"] = str(ROOT / "src")
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    proc = subprocess.run(
        [sys.executable, str(QUICKSTART), "--store", url],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"  lovia --store {url} runs\n" in proc.stdout
