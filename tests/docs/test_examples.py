"""Every ``examples/*.py`` runs offline, exits 0 and prints something.

Each example runs as a subprocess in a fresh temporary directory, without
``LOVIA_MODEL`` (so it uses its scripted model) and with ``LOVIA_STORE`` pointing at a
SQLite file in that directory, so nothing is written to the repository.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("*.py"))
TIMEOUT_S = 60


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LOVIA_MODEL"}
    env["LOVIA_STORE"] = f"sqlite:///{tmp_path / 'lovia.db'}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def test_there_are_examples() -> None:
    assert SCRIPTS, f"no examples found in {EXAMPLES}"


@pytest.mark.timeout(TIMEOUT_S + 30)
@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_example_runs(script: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    detail = f"\n--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, f"{script.name} exited with {proc.returncode}{detail}"
    assert proc.stdout.strip(), f"{script.name} printed nothing{detail}"


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_example_docstring_ends_with_run_line(script: Path) -> None:
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8")))
    assert doc, f"{script.name} has no module docstring"
    last = doc.strip().splitlines()[-1].strip()
    expected = f"Run: python examples/{script.name}"
    assert last.startswith(expected), (
        f"{script.name}: the docstring's last line should be {expected!r}, got {last!r}"
    )
