"""Hostile stores on the command line: one ``error:`` line and a ``hint:``, exit 2 (never
1, which means "a view does not match its hash"), and read-only commands never change
the file they are pointed at."""

from __future__ import annotations

import argparse
import shutil
import sqlite3
from pathlib import Path

import pytest

from lovia.cli import _main, _runs

from .conftest import Recorded, lovia


def _damage_record(path: Path, run_id: str) -> int:
    """Make one of the run's records non-JSON; return its seq."""
    conn = sqlite3.connect(path)
    try:
        (seq,) = conn.execute(
            "SELECT min(seq) FROM records WHERE run_id = ? AND kind = 'view'", (run_id,)
        ).fetchone()
        conn.execute(
            "UPDATE records SET data = 'not json at all' WHERE run_id = ? AND seq = ?",
            (run_id, seq),
        )
        conn.commit()
    finally:
        conn.close()
    return int(seq)


@pytest.mark.parametrize("command", ["show", "replay", "trace"])
def test_damaged_record_is_one_error_line_and_exit_2(
    recorded: Recorded, tmp_path: Path, command: str
) -> None:
    copy = tmp_path / "damaged.db"
    shutil.copy(recorded.path, copy)
    seq = _damage_record(copy, recorded.run_id)
    res = lovia(command, recorded.run_id, "--store", f"sqlite:///{copy}")
    assert res.code == 2
    assert "Traceback" not in res.err
    error, hint = res.err.splitlines()
    assert error == (
        f"error: checkpoint record {seq} of run {recorded.run_id} is damaged: "
        "it is not valid JSON (expected ident at line 1 column 2)"
    )
    assert hint.startswith("hint: It was changed outside lovia")


def _foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices (total) VALUES (9.5)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("kind", ["foreign", "empty"])
@pytest.mark.parametrize("command", [["runs"], ["show", "last"], ["replay", "last"]])
def test_read_only_commands_leave_a_foreign_file_untouched(
    tmp_path: Path, kind: str, command: list[str]
) -> None:
    path = tmp_path / "app.db"
    if kind == "foreign":
        _foreign(path)
    else:
        path.touch()
    before = path.read_bytes()
    res = lovia(*command, "--store", f"sqlite:///{path}")
    assert res.code == 2, res.err
    assert res.err.splitlines() == [
        f"error: {path} is not a lovia store (it has no lovia tables)",
        "hint: Check the --store URL / $LOVIA_STORE; lovia opened it read-only and "
        "changed nothing.",
    ]
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


def test_garbage_file_is_called_damaged(tmp_path: Path) -> None:
    path = tmp_path / "lovia.db"
    path.write_bytes(b"\x00garbage" * 1000)
    res = lovia("runs", "--store", f"sqlite:///{path}")
    assert res.code == 2
    assert "is damaged or is not a database" in res.err and "long write" not in res.err


def test_read_only_commands_do_not_write_to_a_lovia_store(
    recorded: Recorded, tmp_path: Path
) -> None:
    copy = tmp_path / "lovia.db"
    shutil.copy(recorded.path, copy)
    before = copy.read_bytes()
    for args in (["runs"], ["show", "last"], ["replay", recorded.run_id], ["trace", "last"]):
        lovia(*args, "--store", f"sqlite:///{copy}")
    assert copy.read_bytes() == before


def test_a_bug_exits_2_with_its_traceback_not_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def broken(args: argparse.Namespace, out: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(_runs, "runs", broken)
    code = _main.dispatch(argparse.Namespace(command="runs", json=False))
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" in err and "error: unexpected RuntimeError: boom" in err
