"""Store backends for the conformance suite: memory, SQLite (a temp file), PostgreSQL.

PostgreSQL tests use ``$LOVIA_TEST_POSTGRES_URL`` (default: the local server). Each
test gets its own schema; all of them are dropped when the session ends. When the
server is unreachable the PostgreSQL tests skip, unless ``CI=true``: then they fail.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from store_backends import BACKENDS, PG_URL, Backend, pg_query

from lovia.stores import Store


@pytest.fixture(scope="session")
def pg_prefix() -> Iterator[str]:
    """A random schema-name prefix for this test session; schemas dropped at the end."""
    try:
        asyncio.run(pg_query("SELECT 1"))
    except Exception as exc:
        message = f"PostgreSQL at {PG_URL} is unreachable: {exc!r}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    prefix = f"lovia_t_{secrets.token_hex(4)}"
    yield prefix

    async def drop() -> None:
        rows = await pg_query(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE $1", prefix + "%"
        )
        for row in rows:
            await pg_query(f'DROP SCHEMA "{row[0]}" CASCADE')

    asyncio.run(drop())


_counter = itertools.count()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Each conformance test runs once per backend."""
    name: str = request.param
    if name == "memory":
        return Backend(name, "memory://")
    if name == "sqlite":
        path = tmp_path / "db" / "lovia.db"
        return Backend(name, f"sqlite:///{path}", path)
    prefix: str = request.getfixturevalue("pg_prefix")
    return Backend(name, f"{PG_URL}?schema={prefix}_{next(_counter)}")


@pytest.fixture
async def db(backend: Backend) -> AsyncIterator[Store]:
    """An open store on the backend, closed after the test."""
    opened = backend.open()
    yield opened
    await opened.aclose()
