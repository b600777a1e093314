"""Session and checkpoint stores, addressed by URL.

``store("memory://")``, ``store("sqlite:///path/to.db")`` (the embedded default),
``store("postgresql://user@host/db")`` (extra ``postgres``).
"""

from __future__ import annotations

from .base import (
    SCHEMA_VERSION,
    Checkpointer,
    CheckpointRecord,
    Checkpoints,
    Leases,
    ReadOnlyStore,
    RunInfo,
    RunQueries,
    RunSnapshot,
    SessionStore,
    Store,
)
from .memory import MemoryStore

__all__ = [
    "SCHEMA_VERSION",
    "CheckpointRecord",
    "Checkpointer",
    "Checkpoints",
    "Leases",
    "MemoryStore",
    "ReadOnlyStore",
    "RunInfo",
    "RunQueries",
    "RunSnapshot",
    "SessionStore",
    "Store",
    "store",
]

DEFAULT_URL = "sqlite:///.lovia/lovia.db"


def store(url: str | None = None, *, read_only: bool = False) -> Store:
    """Open the store at ``url`` (default: ``$LOVIA_STORE`` or ``sqlite:///.lovia/lovia.db``).

    ``read_only=True`` (for inspecting runs) never creates a file, a schema or a table:
    a store that does not exist, or is not a lovia store, is a :class:`StoreError`.
    (A ``memory://`` store is new and empty either way.)
    """
    import os

    from ..errors import UserError

    url = url or os.environ.get("LOVIA_STORE") or DEFAULT_URL
    scheme = url.split(":", 1)[0].lower()
    if scheme == "memory":
        return MemoryStore(url)
    if scheme == "sqlite":
        from .sqlite import SQLiteStore

        return SQLiteStore(url, read_only=read_only)
    if scheme in ("postgres", "postgresql"):
        from .postgres import PostgresStore

        return PostgresStore(url, read_only=read_only)
    from .._redact import redact_url

    raise UserError(
        f"unknown store URL scheme in {redact_url(url)!r}",
        hint="Use memory://, sqlite:///path/to/lovia.db or postgresql://user@host/db.",
    )
