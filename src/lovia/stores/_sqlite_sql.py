"""The SQLite store's SQL: schema, opening a connection, migrations and one function per
statement group, each ``fn(conn, *args)`` run inside the caller's transaction (on the
store's worker thread or inline on the event loop, see :mod:`lovia.stores.sqlite`)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._files import private_file
from ..errors import RunNotFound, StoreError
from ._codec import RUN_COLUMNS, decode_record, info_from_row, load_json, load_result
from .base import (
    CANCEL_REQUEST_KEY,
    PRUNED_KEY,
    SCHEMA_VERSION,
    RunSnapshot,
    check_version,
    lease_lost,
)
from .session_labels import SQLITE_SESSION_LABELS_DDL
from .spend import SQLITE_SPEND_DDL

COLS = ", ".join(RUN_COLUMNS)
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, agent TEXT NOT NULL, session_id TEXT,
    status TEXT NOT NULL, finish_reason TEXT, error_type TEXT,
    turns INTEGER NOT NULL DEFAULT 0, input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0, cost_usd REAL NOT NULL DEFAULT 0,
    started_at REAL NOT NULL, ended_at REAL, trace_id TEXT, span_id TEXT,
    history_len INTEGER NOT NULL DEFAULT 0, version INTEGER NOT NULL,
    extra TEXT NOT NULL DEFAULT '{}', result TEXT,
    n_records INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_started ON runs (started_at);
CREATE INDEX IF NOT EXISTS runs_session ON runs (session_id, started_at);
CREATE INDEX IF NOT EXISTS runs_trace ON runs (trace_id);
CREATE INDEX IF NOT EXISTS runs_ended ON runs (ended_at);
CREATE TABLE IF NOT EXISTS records (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, version INTEGER NOT NULL,
    kind TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS leases (
    run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    seq INTEGER PRIMARY KEY, session_id TEXT NOT NULL, run_id TEXT NOT NULL,
    version INTEGER NOT NULL, entries TEXT NOT NULL, created_at REAL NOT NULL,
    UNIQUE (session_id, run_id)
);
"""


def connect(path: str, timeout_s: float, read_only: bool = False) -> sqlite3.Connection:
    """Open ``path``, switch to WAL and create the schema (first use, worker thread).

    Read-only: open with ``mode=ro`` and only check that lovia's tables are there.
    """
    if read_only:
        return _connect_read_only(path, timeout_s)
    if path != ":memory:":
        private_file(Path(path))  # 0600 file (and -wal/-shm), 0700 new folders
    conn = sqlite3.connect(path, timeout=timeout_s, isolation_level=None, check_same_thread=False)
    try:
        _init(conn, path, timeout_s)
    except BaseException:
        conn.close()
        raise
    return conn


def connect_inline(path: str) -> sqlite3.Connection | None:
    """A second connection for inline writes on an initialized WAL file (None: the file
    is not in WAL mode, so writers would block readers: no inline writes).

    No busy timeout (a locked file is SQLITE_BUSY at once), no automatic checkpoints
    (they copy pages and sync: the worker runs them), commits not synced (WAL + NORMAL).
    """
    conn = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
    try:
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        conn.execute("PRAGMA synchronous = NORMAL")
        mode = conn.execute("PRAGMA journal_mode").fetchone()
    except BaseException:
        conn.close()
        raise
    if mode is None or str(mode[0]).lower() != "wal":
        conn.close()
        return None
    return conn


def wal_checkpoint(conn: sqlite3.Connection) -> None:
    """Copy committed WAL pages into the database, waiting for nobody (PASSIVE)."""
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


def _connect_read_only(path: str, timeout_s: float) -> sqlite3.Connection:
    file = Path(path)
    if path == ":memory:" or not file.is_file():
        raise StoreError(
            f"no lovia store at {path}",
            hint="Check the path (--store URL or $LOVIA_STORE, e.g. sqlite:///path/lovia.db); "
            "a store is created when an agent runs with checkpointer=... .",
        )
    uri = f"{file.resolve().as_uri()}?mode=ro"
    conn = sqlite3.connect(
        uri, uri=True, timeout=timeout_s, isolation_level=None, check_same_thread=False
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
        _check_lovia_tables(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _check_lovia_tables(conn: sqlite3.Connection, path: str) -> None:
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    found = None
    if {"meta", "runs"} <= tables:
        found = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if found is None:
        raise StoreError(
            f"{path} is not a lovia store (it has no lovia tables)",
            hint="Check the --store URL / $LOVIA_STORE; lovia opened it read-only and "
            "changed nothing.",
        )
    check_version(int(found[0]), "this SQLite store")


def _init(conn: sqlite3.Connection, path: str, timeout_s: float) -> None:
    """Pragmas, schema and the schema-version check; retried while another process inits."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            if path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                _create_schema(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _create_schema(conn: sqlite3.Connection) -> None:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if row is None:
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
    found = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if found is None:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
        )
    else:
        check_version(int(found[0]), "this SQLite store")
    _add_lease_tokens(conn)
    _add_parent_link(conn)
    conn.execute(TOMBSTONES)
    conn.execute(SQLITE_SPEND_DDL)  # spend limits' ledger (stores made before it get it here)
    conn.execute(SQLITE_SESSION_LABELS_DDL)  # likewise


# -- migrations (in place; each is idempotent and runs inside the init transaction) ----


def _add_lease_tokens(conn: sqlite3.Connection) -> None:
    """Fencing: each lease row keeps its run's last fencing token."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(leases)")}
    if "token" not in columns:
        conn.execute("ALTER TABLE leases ADD COLUMN token INTEGER NOT NULL DEFAULT 0")


TOMBSTONES = """CREATE TABLE IF NOT EXISTS pruned (
    run_id TEXT PRIMARY KEY, status TEXT NOT NULL, ended_at REAL, pruned_at REAL NOT NULL
)"""
"""What is left of runs ``prune`` deleted whole (created on every open for writing, so
stores made before it get it in place)."""


def prune_delete(conn: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> int:
    """:func:`delete` for retention: each run deleted leaves a tombstone."""
    conn.execute(
        "INSERT OR REPLACE INTO pruned (run_id, status, ended_at, pruned_at) "
        f"SELECT run_id, status, ended_at, ? FROM runs WHERE {where}",
        (time.time(), *params),
    )
    return delete(conn, where, params)


def tombstone(conn: sqlite3.Connection, run_id: str) -> tuple[Any, ...] | None:
    """The tombstone row of ``run_id`` (None: never pruned, or a store from before them)."""
    try:
        return conn.execute(
            "SELECT run_id, status, ended_at, pruned_at FROM pruned WHERE run_id = ?", (run_id,)
        ).fetchone()
    except sqlite3.OperationalError:  # read-only open of a store made before tombstones
        return None


def _add_parent_link(conn: sqlite3.Connection) -> None:
    """Agents as tools: the parent → child run link, on stores made without it."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
    for name in ("parent_run_id", "parent_call_id"):
        if name not in columns:
            conn.execute(f"ALTER TABLE runs ADD COLUMN {name} TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS runs_parent ON runs (parent_run_id)")


RELEASE = "UPDATE leases SET owner = '', expires_at = 0 WHERE run_id = ? AND owner = ?"


def exec_(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> int:
    return conn.execute(sql, params).rowcount


def renew_many(
    conn: sqlite3.Connection, leases: Sequence[tuple[str, str, int]], expires: float
) -> set[str]:
    """Extend each ``(run_id, owner, token)`` lease still current; the run ids that are not."""
    query = "UPDATE leases SET expires_at = ? WHERE run_id = ? AND owner = ? AND token = ?"
    return {
        run_id
        for run_id, owner, token in leases
        if conn.execute(query, (expires, run_id, owner, token)).rowcount == 0
    }


def fetch(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> list[Any]:
    return conn.execute(sql, params).fetchall()


_BEGIN = (
    f"INSERT INTO runs ({COLS}) VALUES ({', '.join('?' * len(RUN_COLUMNS))}) ON CONFLICT DO NOTHING"
)


def begin(conn: sqlite3.Connection, row: tuple[Any, ...]) -> bool:
    """Create the run's row unless it exists; whether this created it."""
    return conn.execute(_BEGIN, row).rowcount == 1


def _check_fence(conn: sqlite3.Connection, run_id: str, fence: int | None) -> None:
    """Raise LeaseLost unless ``fence`` is the run's current lease token (None: no check)."""
    if fence is None:
        return
    row = conn.execute("SELECT token FROM leases WHERE run_id = ?", (run_id,)).fetchone()
    if row is None or row[0] != fence:
        raise lease_lost(run_id, fence)


_APPEND_AT = (
    "SELECT (SELECT token FROM leases WHERE run_id = ?1), "
    "(SELECT n_records FROM runs WHERE run_id = ?1)"
)
_INSERT_RECORD = "INSERT INTO records (run_id, seq, kind, version, data) VALUES (?, ?, ?, ?, ?)"
_ADVANCE = "UPDATE runs SET n_records = ?3 WHERE run_id = ?1 AND n_records = ?2"
_ADVANCE_FENCED = f"{_ADVANCE} AND (SELECT token FROM leases WHERE run_id = ?1) = ?4"

Counts = dict[str, int]
"""The record count of each run as this store last wrote it: a hint that saves the
count's read, checked by the write that uses it (a stale one costs that read)."""
COUNTS_KEPT = 4096
"""At most this many runs' counts are kept (a run's end drops its own; runs that never
end here, a lost lease or a killed task, would leave theirs): past it they are dropped."""


def append(
    conn: sqlite3.Connection,
    run_id: str,
    rows: list[tuple[str, int, str]],
    fence: int | None,
    counts: Counts,
) -> None:
    """Number the records after the run's last one and insert them (the write lock is
    held). With the run's count in ``counts``, one UPDATE checks it, checks the fence and
    advances it; otherwise (or when that UPDATE matches nothing) one query reads the
    token and the count."""
    start = counts.get(run_id)
    if start is None or not _advance(conn, run_id, start, len(rows), fence):
        token, start = conn.execute(_APPEND_AT, (run_id,)).fetchone()
        if fence is not None and token != fence:
            raise lease_lost(run_id, fence)
        if start is None:
            raise RunNotFound(f"no run {run_id!r} to append to", hint="Call begin() first.")
        conn.execute("UPDATE runs SET n_records = ? WHERE run_id = ?", (start + len(rows), run_id))
    if len(counts) >= COUNTS_KEPT:
        counts.clear()
    counts[run_id] = start + len(rows)
    if len(rows) == 1:
        conn.execute(_INSERT_RECORD, (run_id, start + 1, *rows[0]))
        return
    conn.executemany(_INSERT_RECORD, [(run_id, start + i, *row) for i, row in enumerate(rows, 1)])


def _advance(
    conn: sqlite3.Connection, run_id: str, start: int, count: int, fence: int | None
) -> bool:
    """Move the run's count from ``start`` to ``start + count`` if it is ``start`` and
    ``fence`` (when given) is the run's lease token; whether it did."""
    if fence is None:
        return conn.execute(_ADVANCE, (run_id, start, start + count)).rowcount == 1
    return conn.execute(_ADVANCE_FENCED, (run_id, start, start + count, fence)).rowcount == 1


def start(
    conn: sqlite3.Connection,
    row: tuple[Any, ...],
    rows: list[tuple[str, int, str]],
    fence: int | None,
    counts: Counts,
) -> None:
    """A new run's row and first records in one transaction (a refused fence raises
    before the transaction commits: neither is written). A row this call created has
    no records yet."""
    if begin(conn, row):
        counts[row[0]] = 0
    if rows:
        append(conn, row[0], rows, fence, counts)


def has_run(conn: sqlite3.Connection, run_id: str) -> bool:
    return conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is not None


def has_segments(conn: sqlite3.Connection, session_id: str) -> bool:
    query = "SELECT 1 FROM sessions WHERE session_id = ? LIMIT 1"
    return conn.execute(query, (session_id,)).fetchone() is not None


def load(conn: sqlite3.Connection, run_id: str) -> RunSnapshot | None:
    conn.execute("BEGIN")
    try:
        run = conn.execute(
            f"SELECT {COLS}, result FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        if run is None:
            return None
        rows = conn.execute(
            "SELECT seq, version, kind, data FROM records WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()
    finally:
        conn.execute("COMMIT")
    info = info_from_row(run)
    records = [decode_record(run_id, *row) for row in rows]
    result = run[len(RUN_COLUMNS)]
    return RunSnapshot(info=info, records=records, result=load_result(run_id, result))


_OUTCOME_NAMES = [*RUN_COLUMNS, "result"]
_OUTCOME = (
    f"INSERT INTO runs ({', '.join(_OUTCOME_NAMES)}) "
    f"VALUES ({', '.join('?' * len(_OUTCOME_NAMES))}) ON CONFLICT (run_id) DO UPDATE SET "
    f"{', '.join(f'{n} = excluded.{n}' for n in _OUTCOME_NAMES[1:])}"
)
"""The run's row with its result (created when the run was never begun)."""


def finish(
    conn: sqlite3.Connection, row: tuple[Any, ...], result: str | None, fence: int | None
) -> None:
    _check_fence(conn, row[0], fence)
    conn.execute(_OUTCOME, (*row, result))


def cancel_requests(conn: sqlite3.Connection, run_ids: Sequence[str]) -> dict[str, Any]:
    """The cancel requests stored on the rows of ``run_ids`` (run id -> the request)."""
    found: dict[str, Any] = {}
    for start in range(0, len(run_ids), 500):  # under SQLite's bound-parameter limit
        part = run_ids[start : start + 500]
        rows = conn.execute(
            f"SELECT run_id, json_extract(extra, '$.{CANCEL_REQUEST_KEY}') FROM runs "
            f"WHERE status = 'cancelled' AND run_id IN ({', '.join('?' * len(part))}) "
            f"AND json_type(extra, '$.{CANCEL_REQUEST_KEY}') = 'object'",
            tuple(part),
        ).fetchall()
        for run_id, text in rows:
            mark: Any = None if text is None else load_json(text)
            if isinstance(mark, dict):
                found[str(run_id)] = mark
    return found


def lease_holder(conn: sqlite3.Connection, run_id: str) -> str | None:
    row = conn.execute(
        "SELECT owner FROM leases WHERE run_id = ? AND expires_at > ?", (run_id, time.time())
    ).fetchone()
    return None if row is None else str(row[0])


_SEGMENT = (
    "INSERT INTO sessions (session_id, run_id, version, entries, created_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, run_id) DO NOTHING"
)


def segment(conn: sqlite3.Connection, params: tuple[Any, ...], fence: int | None) -> bool:
    _check_fence(conn, params[1], fence)
    return conn.execute(_SEGMENT, params).rowcount > 0


def end(
    conn: sqlite3.Connection,
    row: tuple[Any, ...],
    result: str | None,
    fence: int | None,
    rows: list[tuple[str, int, str]],
    segment_params: tuple[Any, ...] | None,
    owner: str | None,
    counts: Counts,
) -> None:
    """A run's end in one transaction: its last records, outcome, session segment and the
    release of its lease (a refused fence raises before anything is written). The fence
    is checked once: the transaction holds the write lock, so no grant comes between."""
    run_id = row[0]
    if rows:
        append(conn, run_id, rows, fence, counts)
    else:
        _check_fence(conn, run_id, fence)
    conn.execute(_OUTCOME, (*row, result))
    if segment_params is not None:
        conn.execute(_SEGMENT, segment_params)
    if owner is not None:
        conn.execute(RELEASE, (run_id, owner))
    counts.pop(run_id, None)


_HELD = (
    "SELECT EXISTS (SELECT 1 FROM runs WHERE run_id = ?1 AND status = 'completed'), "
    "leases.owner, leases.expires_at, leases.token "
    "FROM (SELECT ?1 AS id) LEFT JOIN leases ON leases.run_id = id"
)
"""Whether the run is completed, and its lease row (NULLs when it has none)."""


def acquire(conn: sqlite3.Connection, run_id: str, owner: str, ttl_s: float) -> int | None:
    """Runs in the write transaction, so the checks and the grant are one atomic step."""
    done, held_by, expires_at, token = conn.execute(_HELD, (run_id,)).fetchone()
    if done:
        return None
    now = time.time()
    if token is not None and held_by != owner and expires_at > now:
        return None
    token = 1 if token is None else int(token) + 1
    conn.execute(
        "INSERT INTO leases (run_id, owner, expires_at, token) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (run_id) DO UPDATE SET owner = excluded.owner, "
        "expires_at = excluded.expires_at, token = excluded.token",
        (run_id, owner, now + ttl_s, token),
    )
    return token


def delete(conn: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> int:
    """Delete the runs matching ``where`` with their records and leases; return count."""
    ids = f"SELECT run_id FROM runs WHERE {where}"
    conn.execute(f"DELETE FROM records WHERE run_id IN ({ids})", params)
    conn.execute(f"DELETE FROM leases WHERE run_id IN ({ids})", params)
    return conn.execute(f"DELETE FROM runs WHERE {where}", params).rowcount


def drop_records(conn: sqlite3.Connection, where: str, params: tuple[Any, ...]) -> int:
    """Drop the checkpoint records of the runs matching ``where``, keep their rows."""
    where = f"{where} AND json_extract(extra, '$.{PRUNED_KEY}') IS NULL"
    ids = f"SELECT run_id FROM runs WHERE {where}"
    conn.execute(f"DELETE FROM records WHERE run_id IN ({ids})", params)
    conn.execute(f"DELETE FROM leases WHERE run_id IN ({ids})", params)
    sql = f"UPDATE runs SET extra = json_set(extra, '$.{PRUNED_KEY}', ?) WHERE {where}"
    return conn.execute(sql, (time.time(), *params)).rowcount
