"""Hostile bytes in a store: a damaged record, result, segment or file is a StoreError
naming what is damaged, never a raw ValueError/ValidationError; read-only opens change
nothing. Each test runs once per backend where the attack can be written."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from store_backends import Backend

from lovia.errors import SchemaVersionError, StoreError
from lovia.stores import CheckpointRecord, RunInfo, Store, store
from lovia.stores.memory import MemoryStore
from lovia.stores.sqlite import SQLiteStore


async def _three_records(db: Store) -> None:
    await db.begin(RunInfo(run_id="r1", agent="a", started_at=1.0))
    await db.append(
        "r1",
        [
            CheckpointRecord(kind="state", data={"turn": 1}),
            CheckpointRecord(kind="ledger", data={"call_id": "c1", "status": "started"}),
            CheckpointRecord(kind="state", data={"turn": 2}),
        ],
    )


async def _damage(backend: Backend, db: Store, column: str, value: Any) -> None:
    """Overwrite ``column`` of record 2 of run r1 behind the store's back."""
    if isinstance(db, MemoryStore):
        rows = db._records["r1"]  # pyright: ignore[reportPrivateUsage]
        kind, version, data = rows[1]
        fields = {"kind": kind, "version": version, "data": data, column: value}
        rows[1] = (fields["kind"], fields["version"], fields["data"])
        return
    await backend.raw(
        f"UPDATE lovia_records SET {column} = ?1 WHERE run_id = 'r1' AND seq = 2", value
    )


DAMAGE = [  # (column, value, problem, PostgreSQL's column types can hold it)
    pytest.param("data", '{"turn": 2', "is not valid JSON", False, id="non-json"),
    pytest.param("data", "[1, 2]", "not an object", True, id="json-array"),
    pytest.param("kind", "bogus", "kind 'bogus' is not one of", True, id="unknown-kind"),
    pytest.param(
        "version", "one", "schema version 'one' is not an integer", False, id="text-version"
    ),
]


@pytest.mark.parametrize(("column", "value", "problem", "on_postgres"), DAMAGE)
async def test_damaged_record_is_a_store_error_naming_run_and_seq(
    backend: Backend, db: Store, column: str, value: Any, problem: str, on_postgres: bool
) -> None:
    if backend.name == "postgres" and not on_postgres:
        pytest.skip("PostgreSQL's column type refuses this value on write")
    await _three_records(db)
    await _damage(backend, db, column, value)
    with pytest.raises(StoreError) as info:
        await db.load("r1")
    assert type(info.value) is StoreError
    assert info.value.message.startswith("checkpoint record 2 of run r1 is damaged: ")
    assert problem in info.value.message
    assert info.value.hint and "delete_run" in info.value.hint


async def test_newer_record_version_stays_a_schema_version_error(
    backend: Backend, db: Store
) -> None:
    await _three_records(db)
    await _damage(backend, db, "version", 99)
    with pytest.raises(SchemaVersionError, match="record 2 of run r1"):
        await db.load("r1")


async def test_entry_that_does_not_load_names_its_record(backend: Backend, db: Store) -> None:
    await db.begin(RunInfo(run_id="r1", agent="a", started_at=1.0))
    await db.append(
        "r1",
        [
            CheckpointRecord(kind="state", data={"turn": 1}),
            CheckpointRecord(kind="entries", data={"entries": [{"type": "no-such-entry"}]}),
        ],
    )
    snap = await db.load("r1")
    assert snap is not None
    with pytest.raises(StoreError, match=r"^checkpoint record 2 of run r1 is damaged: an entry"):
        snap.entries()


async def test_damaged_session_segment_is_a_store_error(backend: Backend, db: Store) -> None:
    await db.append_segment("s1", "r1", [])
    bad = '[{"type": 7}]'
    if isinstance(db, MemoryStore):
        db._sessions["s1"][0] = ("r1", 1, bad)  # pyright: ignore[reportPrivateUsage]
    else:
        await backend.raw("UPDATE lovia_sessions SET entries = ?1", bad)
    with pytest.raises(StoreError, match=r"^the history of session s1 is damaged"):
        await db.load_session("s1")


# -- SQLite files: read-only opens, foreign and damaged files ------------------------------


async def test_damaged_result_and_extra_are_store_errors(tmp_path: Path) -> None:
    path = tmp_path / "lovia.db"  # SQLite's text columns can hold invalid JSON
    db = store(f"sqlite:///{path}")
    await db.finish(RunInfo(run_id="r1", agent="a", status="completed"), {"output": "x"})
    conn = sqlite3.connect(path)
    conn.execute("UPDATE runs SET result = '{oops' WHERE run_id = 'r1'")
    conn.commit()
    with pytest.raises(StoreError, match=r"^the result of run r1 is damaged: it is not valid JSON"):
        await db.load("r1")
    conn.execute("UPDATE runs SET extra = 'nope' WHERE run_id = 'r1'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=r"^the extra column of run r1 is damaged"):
        await db.list_runs()
    await db.aclose()


async def test_read_only_open_reads_a_store_and_writes_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'lovia.db'}"
    db = store(url)
    await db.begin(RunInfo(run_id="r1", agent="a"))
    await db.aclose()
    ro = store(url, read_only=True)
    assert isinstance(ro, SQLiteStore) and ro.read_only
    assert [i.run_id for i in await ro.list_runs()] == ["r1"]
    with pytest.raises(StoreError, match="readonly"):
        await ro.begin(RunInfo(run_id="r2", agent="a"))
    await ro.aclose()


@pytest.mark.parametrize("content", [b"", None], ids=["empty-file", "foreign-db"])
async def test_read_only_open_refuses_a_file_that_is_not_a_lovia_store(
    tmp_path: Path, content: bytes | None
) -> None:
    path = tmp_path / "other.db"
    if content is None:
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.commit()
        conn.close()
    else:
        path.write_bytes(content)
    before = path.read_bytes()
    ro = store(f"sqlite:///{path}", read_only=True)
    with pytest.raises(StoreError, match=r"other\.db is not a lovia store") as info:
        await ro.list_runs()
    assert info.value.hint and "changed nothing" in info.value.hint
    await ro.aclose()
    assert path.read_bytes() == before  # no lovia tables were created in it


async def test_read_only_open_of_a_missing_file_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "missing.db"
    ro = store(f"sqlite:///{path}", read_only=True)
    with pytest.raises(StoreError) as info:
        await ro.load("r1")
    await ro.aclose()
    assert info.value.message == f"no lovia store at {path}"
    assert not path.parent.exists()


@pytest.mark.parametrize("read_only", [False, True])
async def test_damaged_sqlite_file_says_damaged_not_busy(tmp_path: Path, read_only: bool) -> None:
    path = tmp_path / "lovia.db"
    db = store(f"sqlite:///{path}")
    await db.begin(RunInfo(run_id="r1", agent="a"))
    await db.aclose()
    data = bytearray(path.read_bytes())
    data[:16] = b"garbage garbage!"  # the header: SQLite no longer knows the file
    path.write_bytes(bytes(data))
    opened = store(f"sqlite:///{path}", read_only=read_only)
    with pytest.raises(StoreError) as info:
        await opened.load("r1")
    await opened.aclose()
    assert "is damaged or is not a database" in info.value.message
    assert info.value.hint and "backup" in info.value.hint
    assert "long write" not in info.value.hint


@pytest.mark.postgres
async def test_postgres_read_only_open_creates_no_schema(pg_prefix: str) -> None:
    from store_backends import PG_URL, pg_query

    schema = f"{pg_prefix}_ro"
    ro = store(f"{PG_URL}?schema={schema}", read_only=True)
    with pytest.raises(StoreError, match="is not a lovia store"):
        await ro.list_runs()
    await ro.aclose()
    assert await pg_query("SELECT 1 FROM pg_namespace WHERE nspname = $1", schema) == []
    rw = store(f"{PG_URL}?schema={schema}")
    await rw.begin(RunInfo(run_id="r1", agent="a"))
    await rw.aclose()
    ro = store(f"{PG_URL}?schema={schema}", read_only=True)
    assert [i.run_id for i in await ro.list_runs()] == ["r1"]
    with pytest.raises(StoreError, match="read-only transaction"):
        await ro.begin(RunInfo(run_id="r2", agent="a"))
    await ro.aclose()


@pytest.mark.postgres
async def test_postgres_refusing_a_value_is_not_blamed_on_the_network(pg_prefix: str) -> None:
    from store_backends import PG_URL

    db = store(f"{PG_URL}?schema={pg_prefix}_nul")  # the store API itself does not check ids
    with pytest.raises(StoreError) as info:
        await db.begin(RunInfo(run_id="a\x00b", agent="a"))
    await db.aclose()
    assert info.value.hint and "refused the statement" in info.value.hint
    assert "reachable" not in info.value.hint


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_resuming_a_run_with_a_damaged_ledger_record_names_it() -> None:
    from lovia import Agent, Runner
    from lovia.testing import ScriptedModel

    db = MemoryStore()
    await db.begin(RunInfo(run_id="r1", agent="a", status="failed"))
    await db.append(
        "r1",
        [
            CheckpointRecord(kind="state", data={"turn": 1}),
            CheckpointRecord(kind="ledger", data={"status": "started"}),  # no call_id
        ],
    )
    model = ScriptedModel(["never"])
    with pytest.raises(StoreError) as info:
        await Runner.run(Agent(name="a", model=model), None, run_id="r1", checkpointer=db)
    assert info.value.message.startswith("checkpoint record 2 of run r1 is damaged: its ledger")
    assert "call_id" in info.value.message and model.requests == []
