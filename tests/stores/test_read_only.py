"""The three store protocols: a read-only store (queries alone) serves replay, the run
lifecycle and ``lovia web``; the bundled stores implement all three."""

from __future__ import annotations

import asyncio

import pytest
from store_backends import Backend

from lovia import Agent, Runner, replay
from lovia.errors import UserError
from lovia.stores import (
    Checkpointer,
    Checkpoints,
    Leases,
    MemoryStore,
    ReadOnlyStore,
    RunInfo,
    RunQueries,
    RunSnapshot,
    SessionStore,
    Store,
)
from lovia.stores.lifecycle import list_lives
from lovia.testing import ScriptedModel, call
from lovia.tools import tool
from lovia.transcript import InputEntry, TranscriptEntry


class ArchiveStore:
    """Runs exported from another store, served read-only: queries and nothing else."""

    url = "archive://"

    def __init__(self, runs: list[RunSnapshot], sessions: dict[str, list[TranscriptEntry]]):
        self._runs = {s.info.run_id: s for s in runs}
        self._sessions = sessions

    async def load(self, run_id: str) -> RunSnapshot | None:
        return self._runs.get(run_id)

    async def list_runs(
        self,
        *,
        session_id: str | None = None,
        agent: str | None = None,
        status: str | None = None,
        limit: int = 50,
        parent_run_id: str | None = None,
        top_level: bool = False,
    ) -> list[RunInfo]:
        infos = [s.info for s in self._runs.values()]
        infos = [
            i
            for i in infos
            if (session_id is None or i.session_id == session_id)
            and (agent is None or i.agent == agent)
            and (status is None or i.status == status)
            and (parent_run_id is None or i.parent_run_id == parent_run_id)
            and not (top_level and i.parent_run_id is not None)
        ]
        return sorted(infos, key=lambda i: i.started_at, reverse=True)[:limit]

    async def find_run_by_trace(self, trace_id: str) -> RunInfo | None:
        return next((s.info for s in self._runs.values() if s.info.trace_id == trace_id), None)

    async def lease_holder(self, run_id: str) -> str | None:
        return None  # an archive holds no leases: a "running" run here is interrupted

    async def load_session(self, session_id: str) -> list[TranscriptEntry]:
        return list(self._sessions.get(session_id, ()))

    async def aclose(self) -> None:
        return None


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped"


async def _archive() -> tuple[ArchiveStore, str]:
    """A run recorded in a memory store (a session turn before it), then exported."""
    db = MemoryStore()
    agent = Agent(name="support", model=ScriptedModel(["hello"]))
    await Runner.run(agent, "hi", store=db, session_id="s1")
    agent = Agent(
        name="support", tools=[lookup], model=ScriptedModel([call("lookup", order="A1"), "ok"])
    )
    result = await Runner.run(agent, "where is A1?", store=db, session_id="s1")
    runs = [s for i in await db.list_runs() if (s := await db.load(i.run_id)) is not None]
    history = await db.load_session("s1")
    return ArchiveStore(runs, {"s1": history}), result.run_id


def test_a_read_only_store_is_only_a_query_store() -> None:
    archive, _ = asyncio.run(_archive())
    assert isinstance(archive, RunQueries) and isinstance(archive, ReadOnlyStore)
    for writer in (Checkpoints, Leases, Checkpointer, SessionStore, Store):
        assert not isinstance(archive, writer), writer


def test_the_bundled_stores_implement_all_three(backend: Backend) -> None:
    """Memory, SQLite and PostgreSQL (the conformance suite's backends)."""
    db = backend.open()
    for protocol in (Checkpoints, Leases, RunQueries, Checkpointer, ReadOnlyStore, Store):
        assert isinstance(db, protocol), protocol
    asyncio.run(db.aclose())


def test_replay_and_the_lifecycle_read_a_read_only_store() -> None:
    async def main() -> None:
        archive, run_id = await _archive()
        views = await replay.views(run_id, archive)
        assert [v.turn for v in views] == [1, 2]
        assert all(v.ok for v in views)
        first = views[0].messages[0]  # the session's earlier turn, from load_session
        assert isinstance(first, InputEntry) and first.content == "hi"
        lives = await list_lives(archive, top_level=True)
        assert [life.state for _, life in lives] == ["completed", "completed"]
        assert lives[0][0].run_id == run_id  # newest first
        assert await replay.resolve_run_id(run_id[:8], archive) == run_id

    asyncio.run(main())


def test_lovia_web_browses_a_read_only_store_and_refuses_chat_on_it() -> None:
    from starlette.testclient import TestClient

    from lovia.web import create_app

    archive, run_id = asyncio.run(_archive())
    with TestClient(create_app(archive), base_url="http://127.0.0.1:8765") as client:
        runs = client.get("/api/runs").json()["runs"]
        assert run_id in [r["run_id"] for r in runs]
        run = client.get(f"/api/runs/{run_id}").json()
        assert run["run"]["status"] == "completed"
    with pytest.raises(UserError, match="only answers queries") as caught:
        create_app(archive, agent=Agent(name="a", model=ScriptedModel([])))
    assert "read-only" in (caught.value.hint or "")
