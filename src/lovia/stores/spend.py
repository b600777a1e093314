"""The spend ledger: USD spent and reserved per spend-limit key and window.

One row per ``(key, window_start)``: ``spent`` (priced calls that returned) and
``reserved`` (the estimates of calls in flight). A model call reserves its estimate with
ONE conditional update — admitted only while ``spent + reserved < limit`` — and settles
when it returns (reservation out, real cost in). On PostgreSQL the update is a single
``UPDATE … WHERE spent + reserved < $limit RETURNING``, atomic under concurrency (the row
lock serializes writers); on SQLite it runs in the store's write transaction; the memory
store does it between two awaits.

So the calls admitted past the limit are at most one (the last admitted saw room), and
spend overshoots the limit by at most that call's cost, plus whatever calls in flight
cost beyond their estimates. A reservation whose worker died is never settled: it holds
room until its window ends.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "PG_SPEND_DDL",
    "SQLITE_SPEND_DDL",
    "MemorySpend",
    "SpendLedger",
    "pg_reserve",
    "pg_settle",
    "pg_spent",
    "sqlite_reserve",
    "sqlite_settle",
    "sqlite_spent",
]

SQLITE_SPEND_DDL = """CREATE TABLE IF NOT EXISTS spend (
    key TEXT NOT NULL, window_start REAL NOT NULL, spent REAL NOT NULL DEFAULT 0,
    reserved REAL NOT NULL DEFAULT 0, updated_at REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (key, window_start)
)"""
PG_SPEND_DDL = """CREATE TABLE IF NOT EXISTS {s}.lovia_spend (
    key text NOT NULL, window_start float8 NOT NULL, spent float8 NOT NULL DEFAULT 0,
    reserved float8 NOT NULL DEFAULT 0,
    updated_at float8 NOT NULL DEFAULT extract(epoch FROM clock_timestamp()),
    PRIMARY KEY (key, window_start)
);"""


@runtime_checkable
class SpendLedger(Protocol):
    """What a store needs for spend limits (the bundled stores have it)."""

    async def reserve_spend(
        self, key: str, window_start: float, amount: float, limit: float
    ) -> float | None:
        """Reserve ``amount`` when ``spent + reserved < limit``: None when admitted, else
        the ``spent + reserved`` that refused it."""
        ...

    async def settle_spend(
        self, key: str, window_start: float, reserved: float, actual: float
    ) -> None:
        """A reserved call returned: take ``reserved`` out, add ``actual`` to spent."""
        ...

    async def spent(self, key: str, window_start: float) -> float:
        """USD spent (settled) under ``key`` in the window."""
        ...


def sqlite_reserve(
    conn: sqlite3.Connection, key: str, window_start: float, amount: float, limit: float
) -> float | None:
    conn.execute(
        "INSERT OR IGNORE INTO spend (key, window_start) VALUES (?, ?)", (key, window_start)
    )
    row = conn.execute(
        "UPDATE spend SET reserved = reserved + ? WHERE key = ? AND window_start = ? "
        "AND spent + reserved < ? RETURNING 1",
        (amount, key, window_start, limit),
    ).fetchone()
    if row is not None:
        return None
    return float(
        conn.execute(
            "SELECT spent + reserved FROM spend WHERE key = ? AND window_start = ?",
            (key, window_start),
        ).fetchone()[0]
    )


def sqlite_settle(
    conn: sqlite3.Connection, key: str, window_start: float, reserved: float, actual: float
) -> None:
    conn.execute(
        "UPDATE spend SET reserved = max(reserved - ?, 0), spent = spent + ? "
        "WHERE key = ? AND window_start = ?",
        (reserved, actual, key, window_start),
    )


def sqlite_spent(conn: sqlite3.Connection, key: str, window_start: float) -> float:
    try:
        row = conn.execute(
            "SELECT spent FROM spend WHERE key = ? AND window_start = ?", (key, window_start)
        ).fetchone()
    except sqlite3.OperationalError:  # a read-only open of a store made before the ledger
        return 0.0
    return 0.0 if row is None else float(row[0])


async def pg_reserve(
    db: Any, table: str, key: str, window_start: float, amount: float, limit: float
) -> float | None:
    await db.execute(
        f"INSERT INTO {table} (key, window_start) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        key,
        window_start,
    )
    admitted = await db.fetchval(
        f"UPDATE {table} SET reserved = reserved + $3 WHERE key = $1 AND window_start = $2 "
        "AND spent + reserved < $4 RETURNING 1",
        key,
        window_start,
        amount,
        limit,
    )
    if admitted is not None:
        return None
    found = await db.fetchval(
        f"SELECT spent + reserved FROM {table} WHERE key = $1 AND window_start = $2",
        key,
        window_start,
    )
    return float(found or 0.0)


async def pg_settle(
    db: Any, table: str, key: str, window_start: float, reserved: float, actual: float
) -> None:
    await db.execute(
        f"UPDATE {table} SET reserved = greatest(reserved - $3, 0), spent = spent + $4, "
        "updated_at = extract(epoch FROM clock_timestamp()) "
        "WHERE key = $1 AND window_start = $2",
        key,
        window_start,
        reserved,
        actual,
    )


async def pg_spent(db: Any, table: str, key: str, window_start: float) -> float:
    found = await db.fetchval(
        f"SELECT spent FROM {table} WHERE key = $1 AND window_start = $2", key, window_start
    )
    return float(found or 0.0)


class MemorySpend:
    """The ledger of the memory store (one process; each method runs without awaiting)."""

    __slots__ = ("_lock", "_rows")

    def __init__(self) -> None:
        self._rows: dict[tuple[str, float], list[float]] = {}
        self._lock = threading.Lock()

    def reserve(self, key: str, window_start: float, amount: float, limit: float) -> float | None:
        with self._lock:
            row = self._rows.setdefault((key, window_start), [0.0, 0.0])
            if row[0] + row[1] >= limit:
                return row[0] + row[1]
            row[1] += amount
            return None

    def settle(self, key: str, window_start: float, reserved: float, actual: float) -> None:
        with self._lock:
            row = self._rows.setdefault((key, window_start), [0.0, 0.0])
            row[1] = max(row[1] - reserved, 0.0)
            row[0] += actual

    def spent(self, key: str, window_start: float) -> float:
        row = self._rows.get((key, window_start))
        return 0.0 if row is None else row[0]
