"""Backend-specific behaviour: SQLite URLs, files and processes; PostgreSQL URLs and pools."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from store_backends import PG_URL, Backend

from lovia.errors import LeaseLost, StoreError, UserError
from lovia.stores import CheckpointRecord, RunInfo, store
from lovia.stores.memory import MemoryStore
from lovia.stores.sqlite import SQLiteStore, sqlite_path

# -- SQLite -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///relative/lovia.db", "relative/lovia.db"),
        ("sqlite:////abs/dir/lovia.db", "/abs/dir/lovia.db"),
        ("sqlite://:memory:", ":memory:"),
        ("sqlite:///:memory:", ":memory:"),
        ("sqlite:///with%20space.db", "with space.db"),
        ("SQLITE:///upper.db", "upper.db"),
    ],
)
def test_sqlite_url_forms(url: str, path: str) -> None:
    assert sqlite_path(url) == path


@pytest.mark.parametrize(
    "url", ["sqlite://", "sqlite:///", "sqlite:///x.db?mode=ro", "sqlite:x.db"]
)
def test_bad_sqlite_urls_are_user_errors(url: str) -> None:
    with pytest.raises(UserError):
        sqlite_path(url)


def test_store_factory_picks_the_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(store("memory://"), MemoryStore)
    opened = store(f"sqlite:///{tmp_path}/a.db")
    assert isinstance(opened, SQLiteStore)
    assert not (tmp_path / "a.db").exists()  # no I/O before first use
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOVIA_STORE", raising=False)
    default = store()
    assert isinstance(default, SQLiteStore)
    assert default.path == ".lovia/lovia.db"


async def test_sqlite_creates_parent_dirs_and_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "lovia.db"
    opened = SQLiteStore(f"sqlite:///{path}")
    await opened.begin(RunInfo(run_id="r1", agent="a"))
    await opened.aclose()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT value FROM meta").fetchone() == ("1",)
    finally:
        conn.close()


async def test_sqlite_in_memory_store_works() -> None:
    opened = store("sqlite://:memory:")
    await opened.begin(RunInfo(run_id="r1", agent="a"))
    assert await opened.append("r1", [CheckpointRecord(kind="state", data={"x": 1})]) == 7
    snap = await opened.load("r1")
    assert snap is not None
    assert snap.records[0].data == {"x": 1}
    await opened.aclose()


async def test_sqlite_io_runs_off_the_event_loop(tmp_path: Path) -> None:
    opened = SQLiteStore(f"sqlite:///{tmp_path}/x.db")
    seen: list[str] = []

    def spy(conn: sqlite3.Connection) -> None:
        seen.append(threading.current_thread().name)

    await opened._run(spy)  # pyright: ignore[reportPrivateUsage]
    await opened.aclose()
    assert seen == ["lovia-sqlite"]
    assert threading.current_thread().name != "lovia-sqlite"


async def test_sqlite_store_works_across_event_loops(tmp_path: Path) -> None:
    opened = SQLiteStore(f"sqlite:///{tmp_path}/x.db")
    await opened.begin(RunInfo(run_id="r1", agent="a"))

    def in_other_loop() -> int:
        async def go() -> int:
            snap = await opened.load("r1")
            return 0 if snap is None else 1

        return asyncio.run(go())

    assert await asyncio.to_thread(in_other_loop) == 1
    await opened.aclose()


async def test_sqlite_file_that_is_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    opened = SQLiteStore(f"sqlite:///{path}")
    with pytest.raises(StoreError, match="not a database"):
        await opened.load("r1")
    await opened.aclose()


WRITER = textwrap.dedent(
    """
    import asyncio, sys
    from lovia.stores.sqlite import SQLiteStore
    from lovia.stores.base import CheckpointRecord, RunInfo

    async def main(path, w, n):
        s = SQLiteStore("sqlite:///" + path, timeout_s=60)
        await s.begin(RunInfo(run_id=f"own{w}", agent="p"))
        for i in range(n):
            await s.append("shared", [CheckpointRecord(kind="state", data={"w": w, "i": i})])
            await s.append(f"own{w}", [CheckpointRecord(kind="state", data={"i": i})])
            await s.acquire(f"lease{i}", f"w{w}", 60)
        assert await s.append_segment("sess", f"run{w}", [])
        await s.aclose()

    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
    """
)


async def test_four_processes_write_one_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    main = SQLiteStore(f"sqlite:///{path}")
    await main.begin(RunInfo(run_id="shared", agent="p"))
    n = 150
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(w), str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(4)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert "locked" not in err
        assert proc.returncode == 0, err
    snap = await main.load("shared")
    assert snap is not None
    assert len(snap.records) == 4 * n
    for w in range(4):
        assert [r.data["i"] for r in snap.records if r.data["w"] == w] == list(range(n))
        own = await main.load(f"own{w}")
        assert own is not None
        assert [r.data["i"] for r in own.records] == list(range(n))
    leases = await asyncio.gather(*(main.acquire(f"lease{i}", "main", 60) for i in range(n)))
    assert not any(leases)  # every lease was taken by exactly one of the workers
    await main.aclose()


# -- PostgreSQL ---------------------------------------------------------------------


def test_postgres_without_asyncpg_is_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "asyncpg", None)
    with pytest.raises(UserError, match=r"lovia\[postgres\]"):
        store("postgresql://localhost/db")


@pytest.mark.parametrize("schema", ["bad-name", "x;drop", "1abc", ""])
def test_postgres_rejects_unsafe_schema_names(schema: str) -> None:
    with pytest.raises(UserError, match="schema"):
        store(f"postgresql://localhost/db?schema={schema}")


def test_postgres_url_options_are_removed_from_the_dsn() -> None:
    from lovia.stores.postgres import PostgresStore

    opened = PostgresStore("postgres://u@h:5/db?schema=s1&pool_max=3&sslmode=disable")
    assert opened.schema == "s1"
    assert opened.options.dsn == "postgres://u@h:5/db?sslmode=disable"
    assert (opened.options.pool_min, opened.options.pool_max) == (1, 3)


async def test_postgres_unreachable_server_is_a_store_error() -> None:
    opened = store("postgresql://postgres@127.0.0.1:1/nowhere")
    with pytest.raises(StoreError, match="PostgreSQL"):
        await opened.load("r1")
    await opened.aclose()


@pytest.mark.postgres
def test_postgres_store_survives_a_new_event_loop(pg_prefix: str) -> None:
    opened = store(f"{PG_URL}?schema={pg_prefix}_loops")

    async def first() -> None:
        await opened.begin(RunInfo(run_id="r1", agent="a"))

    async def second() -> int:
        snap = await opened.load("r1")
        await opened.aclose()
        return 0 if snap is None else 1

    asyncio.run(first())
    assert asyncio.run(second()) == 1


@pytest.mark.postgres
async def test_opening_a_postgres_store_beside_a_live_writer_takes_no_table_lock(
    pg_prefix: str,
) -> None:
    """A worker starting up must not run DDL on an up-to-date schema: ALTER TABLE takes
    ACCESS EXCLUSIVE locks, which queue behind a writer's open transaction (and deadlocked
    with concurrent appends)."""
    import asyncpg  # type: ignore[import-untyped]

    url = f"{PG_URL}?schema={pg_prefix}_live"
    first = store(url)
    await first.begin(RunInfo(run_id="r1", agent="a"))
    writer = await asyncpg.connect(PG_URL)
    try:
        async with writer.transaction():  # a writer mid-transaction on the runs table
            await writer.execute(
                f'UPDATE "{pg_prefix}_live".lovia_runs SET turns = 1 WHERE run_id = $1', "r1"
            )
            second = store(url)
            try:
                runs = await asyncio.wait_for(second.list_runs(), timeout=10)
            finally:
                await second.aclose()
        assert [r.run_id for r in runs] == ["r1"]
    finally:
        await writer.close()
        await first.aclose()


# -- in-place migration ----------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        path = tmp_path / "old.db"
        return Backend("sqlite", f"sqlite:///{path}", path)
    prefix: str = request.getfixturevalue("pg_prefix")
    return Backend("postgres", f"{PG_URL}?schema={prefix}_migrate")


async def test_a_store_from_before_fencing_is_migrated_in_place(sql_backend: Backend) -> None:
    """A database whose leases table has no token column (lovia 0.1) opens, keeps its
    data, and fences from then on; a worker's old lease row still counts."""
    backend = sql_backend
    first = backend.open()
    await first.begin(RunInfo(run_id="r1", agent="a"))
    await first.aclose()
    await backend.raw("ALTER TABLE lovia_leases DROP COLUMN token")
    await backend.raw(
        "INSERT INTO lovia_leases (run_id, owner, expires_at) VALUES ('r1', 'old', ?1)",
        time.time() + 600,
    )
    reopened = backend.open()
    try:
        assert await reopened.lease_holder("r1") == "old"
        assert await reopened.acquire("r1", "new", 30) is None  # the old lease still holds
        # The old lease runs out (moved into the past rather than waited for, so a loaded
        # machine cannot let it lapse before the check above).
        await backend.raw(
            "UPDATE lovia_leases SET expires_at = ?1 WHERE run_id = 'r1'", time.time() - 1
        )
        token = await reopened.acquire("r1", "new", 30)
        assert token == 1
        await reopened.append("r1", [CheckpointRecord(kind="state", data={})], fence=token)
        with pytest.raises(LeaseLost):
            await reopened.append("r1", [CheckpointRecord(kind="state", data={})], fence=0)
        snap = await reopened.load("r1")
        assert snap is not None and len(snap.records) == 1
    finally:
        await reopened.aclose()
