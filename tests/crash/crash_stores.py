"""The stores the crash tests run on: SQLite, and PostgreSQL (a fresh schema per test;
skipped locally when PostgreSQL is unreachable, a failure in CI)."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_URL = os.environ.get("LOVIA_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


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


async def _drop_schema(schema: str) -> None:
    import asyncpg  # type: ignore[import-untyped]

    conn = await asyncpg.connect(PG_URL, timeout=3)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'crash.db'}"
        return
    if not _pg_available():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"PostgreSQL unreachable at {PG_URL}")
        pytest.skip("PostgreSQL unreachable")
    schema = f"lovia_crash_{secrets.token_hex(4)}"
    yield f"{PG_URL}?schema={schema}"
    asyncio.run(_drop_schema(schema))
