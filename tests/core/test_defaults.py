"""``lovia.configure(store=...)`` / ``$LOVIA_STORE`` record every run without touching
call sites; an explicit argument wins; ``store=None`` opts a run out."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

import lovia
from lovia import Agent, Runner
from lovia.errors import UserError
from lovia.stores import MemoryStore, store


@pytest.fixture(autouse=True)
def reset(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("LOVIA_STORE", raising=False)
    yield
    lovia.configure(store=lovia._defaults.DEFAULT)


def agent(*replies: str) -> Agent[None, str]:
    from lovia.testing import ScriptedModel

    return Agent(name="a", model=ScriptedModel(list(replies) or ["ok"]))


async def test_configured_store_records_every_run() -> None:
    db = MemoryStore()
    lovia.configure(store=db)
    result = await Runner.run(agent(), "hi")
    runs = await db.list_runs()
    assert [r.run_id for r in runs] == [result.run_id]
    assert runs[0].status == "completed"


async def test_env_store_records_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("LOVIA_STORE", url)
    result = await Runner.run(agent(), "hi")
    db = store(url)
    try:
        assert (await db.load(result.run_id)) is not None
    finally:
        await db.aclose()


async def test_session_id_uses_the_default_store_as_session() -> None:
    db = MemoryStore()
    lovia.configure(store=db)
    await Runner.run(agent("one"), "first", session_id="s1")
    second = await Runner.run(agent("two"), "second", session_id="s1")
    session = await db.load_session("s1")
    texts = [getattr(e, "content", getattr(e, "text", "")) for e in session if e.type != "system"]
    assert texts == ["first", "one", "second", "two"]
    assert second.run_id in {r.run_id for r in await db.list_runs(session_id="s1")}


async def test_explicit_checkpointer_wins() -> None:
    default, mine = MemoryStore(), MemoryStore()
    lovia.configure(store=default)
    result = await Runner.run(agent(), "hi", checkpointer=mine)
    assert await mine.load(result.run_id) is not None
    assert await default.list_runs() == []


async def test_store_argument_and_none_opt_out(monkeypatch: pytest.MonkeyPatch) -> None:
    default, other = MemoryStore(), MemoryStore()
    lovia.configure(store=default)
    await Runner.run(agent(), "hi", store=None)
    assert await default.list_runs() == []
    result = await Runner.run(agent(), "hi", store=other)
    assert await other.load(result.run_id) is not None
    assert await default.list_runs() == []


async def test_configure_none_ignores_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOVIA_STORE", f"sqlite:///{tmp_path / 'env.db'}")
    lovia.configure(store=None)
    await Runner.run(agent(), "hi")
    assert not (tmp_path / "env.db").exists()


def test_run_sync_uses_the_default_too() -> None:
    db = MemoryStore()
    lovia.configure(store=db)
    result = Runner.run_sync(agent(), "hi")
    assert asyncio.run(db.load(result.run_id)) is not None


def test_configure_rejects_what_is_not_a_store() -> None:
    with pytest.raises(UserError) as caught:
        lovia.configure(store=42)  # type: ignore[arg-type]
    assert "lovia.configure" in (caught.value.hint or "")


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_without_default_session_id_still_needs_a_store() -> None:
    with pytest.raises(UserError, match="session_id was given without a session store"):
        await Runner.run(agent(), "hi", session_id="s1")


def test_lease_ttl_is_public_and_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Queues wait ``lovia.lease_ttl()`` before retrying a held run: the engine's value."""
    monkeypatch.delenv("LOVIA_LEASE_TTL_S", raising=False)
    assert lovia.lease_ttl() == 60.0
    monkeypatch.setenv("LOVIA_LEASE_TTL_S", "2.5")
    assert lovia.lease_ttl() == 2.5


@pytest.mark.parametrize("raw", ["soon", "0", "-5", "nan", "inf", ""])
def test_a_bad_lease_ttl_is_a_user_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    monkeypatch.setenv("LOVIA_LEASE_TTL_S", raw)
    with pytest.raises(UserError, match="LOVIA_LEASE_TTL_S") as caught:
        lovia.lease_ttl()
    assert "LOVIA_LEASE_TTL_S=60" in caught.value.hint
