"""A session's attribution labels: recorded once, by its first run that gives labels.

One row per session: ``(session_id, labels JSON, created_at)``. Recording is an insert
that does nothing when the session already has a row, followed by a read of the row, so
of two first runs racing on a new session exactly one's labels are recorded and both
see the same ones. Nothing ever changes a recorded row: what a later run of the session
gives applies to that run only (see :func:`lovia._loop.session_labels.resolve`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any, Protocol, cast, runtime_checkable

from ..errors import LoviaError
from ..labels import check_labels
from ..transcript import TranscriptEntry
from .base import damaged

__all__ = [
    "PG_SESSION_LABELS_DDL",
    "SQLITE_SESSION_LABELS_DDL",
    "SessionLabels",
    "SessionOpener",
    "decode_labels",
    "encode_labels",
    "pg_session_labels",
    "sqlite_session_labels",
]

SQLITE_SESSION_LABELS_DDL = """CREATE TABLE IF NOT EXISTS session_labels (
    session_id TEXT PRIMARY KEY, labels TEXT NOT NULL, created_at REAL NOT NULL
)"""
PG_SESSION_LABELS_DDL = """CREATE TABLE IF NOT EXISTS {s}.lovia_session_labels (
    session_id text PRIMARY KEY, labels json NOT NULL, created_at float8 NOT NULL
);"""


@runtime_checkable
class SessionLabels(Protocol):
    """What a session store needs for labels a session's runs inherit (the bundled
    stores have it; a session store without it records none, and its runs keep only
    the labels they are given)."""

    async def session_labels(
        self, session_id: str, record: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The labels recorded with ``session_id`` (``{}``: none). When it has none and
        ``record`` is not empty, ``record`` is recorded first (the first writer wins;
        every caller gets what was recorded)."""
        ...


@runtime_checkable
class SessionOpener(SessionLabels, Protocol):
    """Optional: a session's history and labels in one read (PostgreSQL has it), so a
    new run of a session costs the store one round trip for both."""

    async def open_session(
        self, session_id: str, record: Mapping[str, str] | None = None
    ) -> tuple[list[TranscriptEntry], dict[str, str]]:
        """``(load_session(session_id), session_labels(session_id, record))``."""
        ...


def encode_labels(labels: Mapping[str, str]) -> str:
    return json.dumps(dict(labels), sort_keys=True, ensure_ascii=False)


def decode_labels(session_id: str, text: Any) -> dict[str, str]:
    """A stored row's labels, checked (a damaged row is a ``StoreError`` naming it)."""
    if text is None:
        return {}
    try:
        value = json.loads(text) if isinstance(text, str) else text
        return check_labels(cast("Mapping[str, str]", value))
    except (ValueError, LoviaError) as exc:
        raise damaged(f"the labels of session {session_id!r}", str(exc)) from None


def sqlite_session_labels(
    conn: sqlite3.Connection, session_id: str, text: str | None, now: float
) -> str | None:
    """Record ``text`` (when given) unless the session has labels; the stored JSON."""
    try:
        if text is not None:
            conn.execute(
                "INSERT OR IGNORE INTO session_labels (session_id, labels, created_at) "
                "VALUES (?, ?, ?)",
                (session_id, text, now),
            )
        row = conn.execute(
            "SELECT labels FROM session_labels WHERE session_id = ?", (session_id,)
        ).fetchone()
    except sqlite3.OperationalError:
        if text is not None:
            raise
        return None  # a read-only open of a store made before session labels
    return None if row is None else str(row[0])


async def pg_session_labels(
    db: Any, table: str, session_id: str, text: str | None, now: float
) -> Any:
    """:func:`sqlite_session_labels` on PostgreSQL (two statements: the read's
    snapshot is taken after a concurrent first writer committed)."""
    if text is not None:
        await db.execute(
            f"INSERT INTO {table} (session_id, labels, created_at) VALUES ($1, $2::json, $3) "
            "ON CONFLICT (session_id) DO NOTHING",
            session_id,
            text,
            now,
        )
    return await db.fetchval(f"SELECT labels FROM {table} WHERE session_id = $1", session_id)
