"""``--store`` and ``--json`` work before the command as well as after it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lovia.cli import build_parser

from .conftest import Recorded, lovia


@pytest.mark.parametrize(
    ("argv", "store", "as_json"),
    [
        (["--store", "sqlite:///a.db", "runs"], "sqlite:///a.db", False),
        (["runs", "--store", "sqlite:///a.db"], "sqlite:///a.db", False),
        (["--json", "runs"], None, True),
        (["runs", "--json"], None, True),
        (
            ["--store", "sqlite:///a.db", "runs", "--store", "sqlite:///b.db"],
            "sqlite:///b.db",
            False,
        ),
        (["--store", "sqlite:///a.db", "show", "last", "--json"], "sqlite:///a.db", True),
        (["replay", "last"], None, False),
    ],
)
def test_parser_keeps_options_given_before_the_command(
    argv: list[str], store: str | None, as_json: bool
) -> None:
    args = build_parser().parse_args(argv)
    assert args.store == store
    assert args.json is as_json


def test_store_before_the_command_is_the_store_read(recorded: Recorded, tmp_path: Path) -> None:
    before = lovia("--store", recorded.url, "--json", "runs", cwd=tmp_path)
    after = lovia("runs", "--store", recorded.url, "--json", cwd=tmp_path)
    assert before.code == after.code == 0, before.err + after.err
    assert before.out == after.out
    ids = {row["run_id"] for row in json.loads(before.out)}
    assert recorded.run_id in ids and recorded.first_run_id in ids


def test_missing_store_given_before_the_command_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    res = lovia("--store", f"sqlite:///{missing}", "runs", cwd=tmp_path)
    assert res.code == 2
    assert f"no lovia store at {missing}" in res.err
    assert not missing.exists()
