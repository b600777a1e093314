"""Data written by every past schema version loads into every store, forever.

``corpus/v*.json`` are frozen exports (see ``make_corpus.py``). Each is written into
each store through the public API and read back: runs, records, results and sessions
must come back exactly as exported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lovia.stores import SCHEMA_VERSION, CheckpointRecord, RunInfo, Store
from lovia.transcript import entry_from_dict, entry_to_dict

CORPUS = sorted((Path(__file__).parent / "corpus").glob("v*.json"))


def test_there_is_a_corpus_for_every_schema_version() -> None:
    versions = {int(p.stem[1:]) for p in CORPUS}
    assert versions == set(range(1, SCHEMA_VERSION + 1))
    assert sum(p.stat().st_size for p in CORPUS) < 50_000


async def _write(db: Store, corpus: dict[str, Any]) -> None:
    for run in corpus["runs"]:
        info = RunInfo(**run["info"])
        await db.begin(info)
        records = [CheckpointRecord.model_validate(r) for r in run["records"]]
        await db.append(info.run_id, records[:3])
        await db.append(info.run_id, records[3:])
        if info.status != "running":
            await db.finish(info, run["result"])
    for session in corpus["sessions"]:
        for segment in session["segments"]:
            entries = [entry_from_dict(e) for e in segment["entries"]]
            assert await db.append_segment(session["session_id"], segment["run_id"], entries)


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
async def test_corpus_round_trips(db: Store, path: Path) -> None:
    corpus = json.loads(path.read_text(encoding="utf-8"))
    await _write(db, corpus)
    for run in corpus["runs"]:
        snap = await db.load(run["info"]["run_id"])
        assert snap is not None
        assert snap.info == RunInfo(**run["info"])
        assert [r.model_dump() for r in snap.records] == run["records"]
        assert snap.result == run["result"]
        assert await db.find_run_by_trace(run["info"]["trace_id"]) == snap.info
    listed = await db.list_runs()
    assert [r.run_id for r in listed] == [r["info"]["run_id"] for r in reversed(corpus["runs"])]
    for session in corpus["sessions"]:
        loaded = await db.load_session(session["session_id"])
        expected = [e for seg in session["segments"] for e in seg["entries"]]
        assert [entry_to_dict(e) for e in loaded] == expected
