"""``lovia prune``: retention from the command line, and replay after it."""

from __future__ import annotations

import shutil
from pathlib import Path

from .conftest import Recorded, lovia


def copy_store(recorded: Recorded, tmp_path: Path) -> str:
    path = tmp_path / "lovia.db"
    shutil.copy(recorded.path, path)
    return f"sqlite:///{path}"


def test_prune_records_only_then_replay_explains(recorded: Recorded, tmp_path: Path) -> None:
    url = copy_store(recorded, tmp_path)
    out = lovia("prune", "--store", url, "--older-than", "0s", "--records-only", "--json")
    assert out.code == 0, out.err
    assert '"pruned": 3' in out.out  # the two completed runs and the failed one
    runs = lovia("runs", "--store", url, "--json")
    assert recorded.run_id in runs.out  # the summary row stays
    replay = lovia("replay", "--store", url, recorded.run_id)
    assert replay.code == 2
    assert "checkpoint records were dropped" in replay.err
    assert "hint:" in replay.err


def test_prune_by_status_and_age(recorded: Recorded, tmp_path: Path) -> None:
    url = copy_store(recorded, tmp_path)
    assert "pruned the 0 runs" in lovia("prune", "--store", url, "--older-than", "30d").out
    out = lovia("prune", "--store", url, "--older-than", "0", "--status", "failed")
    assert out.code == 0 and "pruned the 1 run " in out.out
    runs = lovia("runs", "--store", url, "--json").out
    assert "run-failed-1" not in runs and recorded.run_id in runs


def test_prune_rejects_a_bad_age_and_resumable_statuses(recorded: Recorded, tmp_path: Path) -> None:
    url = copy_store(recorded, tmp_path)
    bad = lovia("prune", "--store", url, "--older-than", "30x")
    assert bad.code == 2 and "30d, 12h" in bad.err
    paused = lovia("prune", "--store", url, "--older-than", "1d", "--status", "paused")
    assert paused.code == 2 and "invalid choice" in paused.err
