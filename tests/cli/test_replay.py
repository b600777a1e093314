"""``lovia replay`` end to end: a stored run's views rebuilt byte for byte, tampering caught."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from lovia import replay
from lovia.stores import RunInfo, store
from lovia.stores.base import CheckpointRecord
from lovia.transcript import ToolResultEntry

from .conftest import Recorded, lovia


def test_replay_reproduces_every_view(recorded: Recorded) -> None:
    res = lovia("replay", recorded.run_id, "--store", recorded.url)
    assert res.code == 0, res.err
    assert "4/4 views rebuilt with the recorded hash (all verified)" in res.out
    for turn, view_hash in enumerate(recorded.hashes, 1):
        block = res.out.split(f"turn {turn} · ")[1]
        assert f"recorded  {view_hash}" in block
        assert f"rebuilt   {view_hash}  ok (same hash as span attribute lovia.view.hash)" in block
    assert "(replaced)" in res.out and "(injected)" in res.out
    assert "summary   Earlier, the user greeted the agent." in res.out


def test_replay_json_and_turn(recorded: Recorded) -> None:
    res = lovia(
        "replay", recorded.run_id[:10], "--turn", "3", "--format", "json", "--store", recorded.url
    )
    assert res.code == 0, res.err
    data = json.loads(res.out)
    assert data["ok"] is True and data["run"]["run_id"] == recorded.run_id
    (view,) = data["views"]
    assert view["turn"] == 3 and view["rebuilt_hash"] == recorded.hashes[2]
    assert [m["content"] for m in view["messages"] if m["type"] == "input"][-1] == (
        "<reminder>be brief</reminder>"
    )


def test_replay_diff(recorded: Recorded) -> None:
    res = lovia("replay", recorded.run_id, "--diff", "2", "4", "--store", recorded.url)
    assert res.code == 0, res.err
    assert res.out.startswith("turn 2 -> turn 4\n")
    assert "  + added" in res.out and "handoff support -> billing" in res.out
    assert "  - reminder <reminder>be brief</reminder>" in res.out
    assert "  agent      support -> billing" in res.out
    assert "  + system   You handle refunds." in res.out
    assert "  - tool     lookup_order" in res.out
    three = lovia("replay", recorded.run_id, "--diff", "2", "3", "--json", "--store", recorded.url)
    diff = json.loads(three.out)
    assert len(diff["evicted"]) == 1 and diff["summary"] == "Earlier, the user greeted the agent."
    assert len(diff["summarized"]) == 1
    assert diff["injected_kept"] == ["<reminder>be brief</reminder>"]


def _tamper(path: Path, old: str, new: str) -> None:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT rowid, data FROM records WHERE kind = 'entries'").fetchall()
        hits = [(rowid, data) for rowid, data in rows if old in data]
        assert len(hits) == 1, hits
        conn.execute(
            "UPDATE records SET data = ? WHERE rowid = ?",
            (hits[0][1].replace(old, new), hits[0][0]),
        )
        conn.commit()
    finally:
        conn.close()


def test_tampered_entry_fails_naming_the_turn(recorded: Recorded, tmp_path: Path) -> None:
    copy = tmp_path / "tampered.db"
    shutil.copy(recorded.path, copy)
    _tamper(copy, '"B2: shipped"', '"B2: lost"')
    res = lovia("replay", recorded.run_id, "--store", f"sqlite:///{copy}")
    assert res.code == 1
    # B2's result is first seen by the view of turn 3, and again by turn 4
    assert "error: the view of turn 3 does not match its recorded hash" in res.err
    assert "error: the view of turn 4 does not match its recorded hash" in res.err
    assert "turn 1" not in res.err and "turn 2" not in res.err
    assert "2/4 views rebuilt with the recorded hash (2 MISMATCHED)" in res.out
    assert '  - content: "B2: shipped"   (session)' in res.out
    assert '  + content: "B2: lost"   (checkpoint)' in res.out
    assert "entries in this view and in no view that verified:" in res.out


async def test_python_api(recorded: Recorded) -> None:
    views = await replay.views(recorded.run_id, recorded.url)
    assert [(v.turn, v.attempt, v.agent) for v in views] == [
        (1, 1, "support"),
        (2, 1, "support"),
        (3, 1, "support"),
        (4, 1, "billing"),
    ]
    assert [v.rebuilt_hash for v in views] == recorded.hashes
    assert all(v.ok and v.recorded_hash == v.rebuilt_hash for v in views)
    assert views[2].record.summary is not None and views[0].injected[0].type == "input"
    report = await replay.verify_run(recorded.run_id, recorded.url)
    assert report.ok and not report.mismatches
    diff = replay.diff_views(views[1], views[2])
    a1_result = next(e for e in views[1].messages if isinstance(e, ToolResultEntry))
    assert diff.evicted == [a1_result.id]
    assert [e.type for e in views[2].messages].count("tool_result") == 2
    assert replay.diff_views(views[0], views[0]).empty


async def test_python_api_store_object(recorded: Recorded) -> None:
    db = store(recorded.url)
    try:
        views = await replay.views(recorded.run_id, db)
    finally:
        await db.aclose()
    assert len(views) == 4


def test_unknown_run_suggests_close_ids(recorded: Recorded) -> None:
    typo = recorded.run_id[:-3] + "zzz"
    res = lovia("replay", typo, "--store", recorded.url)
    assert res.code == 2 and res.out == ""
    assert res.err.startswith(f"error: no run '{typo}' in this store\nhint: Did you mean ")
    assert recorded.run_id in res.err


def test_newer_store_schema(recorded: Recorded, tmp_path: Path) -> None:
    copy = tmp_path / "newer.db"
    shutil.copy(recorded.path, copy)
    conn = sqlite3.connect(copy)
    conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    res = lovia("replay", recorded.run_id, "--store", f"sqlite:///{copy}")
    assert res.code == 2
    assert "error: " in res.err and "999" in res.err
    assert "hint: Upgrade lovia" in res.err


async def test_run_without_view_records(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    db = store(url)
    await db.begin(RunInfo(run_id="old-run-1", agent="a", started_at=1.0))
    await db.append("old-run-1", [CheckpointRecord(kind="state", data={"turn": 1})])
    await db.aclose()
    res = lovia("replay", "old-run-1", "--store", url)
    assert res.code == 2
    assert "error: run old-run-1 has no view records" in res.err
    assert "hint: It was run without a checkpointer" in res.err


def test_missing_store_file(tmp_path: Path) -> None:
    res = lovia("runs", "--store", f"sqlite:///{tmp_path / 'nope.db'}")
    assert res.code == 2 and "error: no lovia store at" in res.err
    assert not (tmp_path / "nope.db").exists()


def test_store_from_env(recorded: Recorded) -> None:
    res = lovia("replay", recorded.run_id, "--turn", "1", env={"LOVIA_STORE": recorded.url})
    assert res.code == 0, res.err


async def test_find_run_by_trace_id(recorded: Recorded, tmp_path: Path) -> None:
    copy = tmp_path / "traced.db"
    shutil.copy(recorded.path, copy)
    url = f"sqlite:///{copy}"
    db = store(url)
    snapshot = await db.load(recorded.run_id)
    assert snapshot is not None
    info = snapshot.info
    info.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    await db.finish(info, snapshot.result)
    await db.aclose()
    res = lovia("replay", "--trace-id", info.trace_id, "--turn", "2", "--store", url)
    assert res.code == 0, res.err
    assert f"run {recorded.run_id}" in res.out and recorded.hashes[1] in res.out
    res = lovia("replay", "--trace-id", "0" * 32, "--store", url)
    assert res.code == 2 and "error: no run with trace id" in res.err


def test_bad_turn(recorded: Recorded) -> None:
    res = lovia("replay", recorded.run_id, "--turn", "9", "--store", recorded.url)
    assert res.code == 2
    assert "error: this run has no view for turn 9\nhint: Turns with views: 1, 2, 3, 4." in res.err


@pytest.mark.parametrize("args", [["--help"], ["replay", "--help"]])
def test_help(args: list[str]) -> None:
    res = lovia(*args)
    assert res.code == 0 and "usage: lovia" in res.out
