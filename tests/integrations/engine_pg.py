"""PostgreSQL for the engine tests: reachable (skipped locally when not, a failure in CI),
and a fresh schema per test for lovia's tables and one beside it for DBOS's."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator

import pytest

PG_URL = os.environ.get("LOVIA_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _pg_available() -> bool:
    try:
        import asyncpg  # type: ignore[import-untyped]

        async def ping() -> None:
            conn = await asyncpg.connect(PG_URL, timeout=3)
            await conn.close()

        asyncio.run(ping())
        return True
    except Exception:
        return False


async def drop_schemas(*schemas: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(PG_URL, timeout=3)
    try:
        for schema in schemas:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A schema name for lovia's tables (``<name>_dbos`` for DBOS's), dropped after."""
    if not _pg_available():
        if in_ci():
            pytest.fail(f"PostgreSQL unreachable at {PG_URL}")
        pytest.skip("PostgreSQL unreachable")
    schema = f"lovia_engines_{secrets.token_hex(4)}"
    yield schema
    asyncio.run(drop_schemas(schema, f"{schema}_dbos"))
