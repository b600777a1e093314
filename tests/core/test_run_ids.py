"""Hostile ids: run_id/session_id are checked once where they enter (Runner), so every
store gives the same clear UserError and nothing is written or called."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent, Runner, UserError
from lovia.stores import MemoryStore, store
from lovia.testing import ScriptedModel

BAD = [
    pytest.param("", "is empty", id="empty"),
    pytest.param("run\x00id", "control character", id="nul"),
    pytest.param("tab\there", "control character", id="tab"),
    pytest.param("caf\udce9", "not valid Unicode", id="lone-surrogate"),
    pytest.param("r" * 257, "257 characters long (at most 256)", id="over-long"),
]


@pytest.fixture(params=["memory", "sqlite"])
async def db(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    opened = MemoryStore() if request.param == "memory" else store(f"sqlite:///{tmp_path}/l.db")
    yield opened
    await opened.aclose()


@pytest.mark.lovia_unconsumed  # refused before any model call, on purpose
@pytest.mark.parametrize(("run_id", "problem"), BAD)
async def test_bad_run_id_is_a_user_error_before_anything_runs(
    db: Any, run_id: str, problem: str
) -> None:
    model = ScriptedModel(["hi"])
    agent = Agent(name="a", model=model)
    with pytest.raises(UserError) as info:
        await Runner.run(agent, "go", run_id=run_id, checkpointer=db, session=db, session_id="s")
    assert info.value.message.startswith("run_id ") and problem in info.value.message
    assert info.value.hint and "run_id=None" in info.value.hint
    assert "reachable" not in info.value.hint
    assert model.requests == [] and await db.list_runs() == []


@pytest.mark.lovia_unconsumed  # refused before any model call, on purpose
@pytest.mark.parametrize(("session_id", "problem"), BAD)
async def test_bad_session_id_is_a_user_error(db: Any, session_id: str, problem: str) -> None:
    model = ScriptedModel(["hi"])
    with pytest.raises(UserError, match=f"^session_id .*{re.escape(problem)}"):
        await Runner.run(
            Agent(name="a", model=model), "go", session=db, session_id=session_id, checkpointer=db
        )
    assert model.requests == [] and await db.list_runs() == []


@pytest.mark.lovia_unconsumed  # refused before any model call, on purpose
async def test_non_str_run_id_is_a_user_error() -> None:
    with pytest.raises(UserError, match="run_id must be a str, got int"):
        Runner.stream(Agent(name="a", model=ScriptedModel(["x"])), "go", run_id=7)  # type: ignore[arg-type]


async def test_longest_allowed_and_unicode_ids_work() -> None:
    db = MemoryStore()
    run_id = "运行-" + "x" * 253
    result = await Runner.run(
        Agent(name="a", model=ScriptedModel(["ok"])), "go", run_id=run_id, checkpointer=db
    )
    assert result.run_id == run_id and (await db.load(run_id)) is not None
