"""Store backends shared by the store tests (memory, SQLite file, PostgreSQL schema)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from lovia.stores import Store, store
from lovia.stores.memory import MemoryStore

PG_URL = os.environ.get("LOVIA_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


async def pg_query(sql: str, *args: Any) -> Any:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(PG_URL, timeout=3)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


class Backend:
    """One store kind: open stores on the same data, and write raw rows behind its back."""

    def __init__(self, name: str, url: str, path: Path | None = None) -> None:
        self.name = name
        self.url = url
        self.path = path
        self.schema = url.rsplit("schema=", 1)[-1] if name == "postgres" else ""
        self._memory = MemoryStore(url) if name == "memory" else None

    def open(self) -> Store:
        """A store on this backend's data (the memory backend has one shared instance)."""
        return self._memory if self._memory is not None else store(self.url)

    async def raw(self, sql: str, *args: Any) -> list[Any]:
        """Run SQL directly against the database (not the memory backend)."""
        if self.name == "sqlite":
            assert self.path is not None
            conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
            try:
                return conn.execute(sql.replace("lovia_", ""), args).fetchall()
            finally:
                conn.close()
        sql = sql.replace("lovia_", f'"{self.schema}".lovia_')
        for i in range(len(args), 0, -1):
            sql = sql.replace(f"?{i}", f"${i}")
        return list(await pg_query(sql, *args))
