"""Checkpoint storage grows with entries, not with turns squared.

A run writes, per turn, one ``entries`` record (a model response and a tool result),
one ``ledger`` record and one ``state`` record, each about 300 bytes of payload. If a
store re-serialized the growing snapshot on each write, 10x the turns would cost ~100x
the bytes; append-only deltas cost ~10x. Ratios, not timings.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from lovia.stores import CheckpointRecord, RunInfo, Store
from lovia.stores.sqlite import SQLiteStore
from lovia.transcript import TextEntry, ToolResultEntry, entry_to_dict

PAD = "lorem ipsum dolor sit amet " * 6


def turn_records(run_id: str, turn: int) -> list[CheckpointRecord]:
    response = TextEntry(id=f"m{turn}", run_id=run_id, turn=turn, text=PAD, ts=1.0)
    result = ToolResultEntry(
        id=f"t{turn}", run_id=run_id, turn=turn, call_id=f"c{turn}", name="t", content=PAD
    )
    usage = {"input_tokens": 1000 * turn, "output_tokens": 50 * turn, "note": PAD}
    return [
        CheckpointRecord(kind="entries", data={"entries": [entry_to_dict(response)]}),
        CheckpointRecord(kind="entries", data={"entries": [entry_to_dict(result)]}),
        CheckpointRecord(
            kind="ledger", data={"call_id": f"c{turn}", "status": "completed", "key": PAD}
        ),
        CheckpointRecord(kind="state", data={"turn": turn, "usage": usage, "agent": "a"}),
    ]


async def simulate(db: Store, run_id: str, turns: int) -> int:
    await db.begin(RunInfo(run_id=run_id, agent="a"))
    written = 0
    for turn in range(1, turns + 1):
        written += await db.append(run_id, turn_records(run_id, turn))
    return written


def test_records_are_about_300_bytes() -> None:
    sizes = [len(r.model_dump_json()) for r in turn_records("r", 250)]
    assert all(200 <= s <= 450 for s in sizes), sizes


async def test_bytes_written_grow_linearly(db: Store) -> None:
    short = await simulate(db, "short", 50)
    long = await simulate(db, "long", 500)
    print(f"\n{type(db).__name__} bytes 500/50 turns: {long / short:.2f} ({short} -> {long})")
    assert 8 <= long / short <= 12, (short, long)
    snap = await db.load("long")
    assert snap is not None
    assert len(snap.records) == 2000


async def _file_size_after(tmp_path: Path, name: str, turns: int) -> int:
    path = tmp_path / f"{name}.db"
    db = SQLiteStore(f"sqlite:///{path}")
    if turns:
        await simulate(db, name, turns)
    else:
        await db.begin(RunInfo(run_id=name, agent="a"))
    await db.aclose()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
    finally:
        conn.close()
    return path.stat().st_size


async def test_sqlite_file_grows_linearly(tmp_path: Path) -> None:
    empty = await _file_size_after(tmp_path, "empty", 0)
    short = await _file_size_after(tmp_path, "short", 50) - empty
    long = await _file_size_after(tmp_path, "long", 500) - empty
    print(f"\nSQLite file growth 500/50 turns: {long / short:.2f} ({short} -> {long} bytes)")
    assert 8 <= long / short <= 12, (empty, short, long)
