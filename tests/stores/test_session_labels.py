"""A session's attribution labels: recorded by its first run that gives labels, inherited
by its later runs (across processes, worker tasks and resumes), counted by spend limits.

Each test runs on memory, SQLite and PostgreSQL (``backend``); a second store opened on
the same data stands for another process (the memory backend shares one instance).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from store_backends import Backend

import lovia
from lovia import Agent, Runner, SpendLimit, SpendLimitExceeded, Usage, UserError, pricing
from lovia.errors import ProviderServerError, StoreError
from lovia.events import RunStarted
from lovia.model import ModelRequest
from lovia.runner import resume_options
from lovia.stores import Store
from lovia.stores.session_labels import SessionLabels
from lovia.stores.spend import SpendLedger
from lovia.testing import FunctionModel, ScriptedModel, capture_events, reply
from lovia.testing._models import CallInfo
from lovia.workers.execute import execute_run

MODEL = "session-m"
ACME = {"tenant": "acme", "user": "u-1"}


@pytest.fixture(autouse=True)
def _priced() -> Iterator[None]:
    pricing.set_price("test", MODEL, input_per_mtok=1000.0, output_per_mtok=1000.0)
    yield
    lovia.configure(spend_limits=[])
    pricing.clear_prices()


def _agent() -> Agent[Any, str]:
    def answer(request: ModelRequest, info: CallInfo) -> Any:
        return reply("done", usage=Usage(input_tokens=100, output_tokens=100))  # $0.2

    return Agent(name="chat", model=FunctionModel(answer, model=MODEL))


async def _labels(db: Store, run_id: str) -> dict[str, str] | None:
    snapshot = await db.load(run_id)
    assert snapshot is not None, run_id
    return snapshot.info.extra.get("labels")


async def test_later_runs_of_a_session_inherit_its_labels(backend: Backend) -> None:
    db, other = backend.open(), backend.open()  # `other`: another process on the same data
    try:
        await Runner.run(_agent(), "hi", store=db, session_id="s1", run_id="r0")
        assert await _labels(db, "r0") is None  # no labels yet: nothing recorded
        await Runner.run(_agent(), "hi", store=db, session_id="s1", run_id="r1", labels=ACME)
        with capture_events() as events:
            await Runner.run(_agent(), "again", store=other, session_id="s1", run_id="r2")
        assert await _labels(other, "r2") == ACME
        started = next(e for e in events if isinstance(e, RunStarted))
        assert dict(started.labels) == ACME  # the span's lovia.label.* come from these
        acme = await other.list_runs(labels={"tenant": "acme"})
        assert sorted(r.run_id for r in acme) == ["r1", "r2"]
        # another session, and a run outside any session, inherit nothing
        await Runner.run(_agent(), "hi", store=other, session_id="s2", run_id="r3")
        await Runner.run(_agent(), "hi", store=other, run_id="r4")
        assert await _labels(other, "r3") is None and await _labels(other, "r4") is None
        assert isinstance(other, SessionLabels)
        assert await other.session_labels("s1") == ACME
        assert await other.session_labels("s2") == {}
    finally:
        await db.aclose()
        await other.aclose()


async def test_a_runs_own_labels_win_for_that_run_only(backend: Backend) -> None:
    db = backend.open()
    first = {"tenant": "acme", "feature": "chat"}
    try:
        await Runner.run(_agent(), "hi", store=db, session_id="s", run_id="a", labels=first)
        await Runner.run(
            _agent(), "hi", store=db, session_id="s", run_id="b", labels={"feature": "search"}
        )
        await Runner.run(
            _agent(), "hi", store=db, session_id="s", run_id="c", labels={"user": "u-9"}
        )
        await Runner.run(_agent(), "hi", store=db, session_id="s", run_id="d")
        await Runner.run(
            _agent(), "hi", store=db, session_id="s", run_id="e", labels={"tenant": "globex"}
        )
        assert await _labels(db, "b") == {"tenant": "acme", "feature": "search"}
        assert await _labels(db, "c") == {"tenant": "acme", "feature": "chat", "user": "u-9"}
        assert await _labels(db, "d") == first  # the session's, unchanged by b, c and e
        assert await _labels(db, "e") == {"tenant": "globex", "feature": "chat"}
        assert isinstance(db, SessionLabels)
        assert await db.session_labels("s") == first
    finally:
        await db.aclose()


async def test_too_many_labels_with_the_sessions_is_refused(backend: Backend) -> None:
    db = backend.open()
    mine = {f"k{i}": "v" for i in range(5)}
    theirs = {f"s{i}": "v" for i in range(4)}
    try:
        await Runner.run(_agent(), "hi", store=db, session_id="s", run_id="a", labels=theirs)
        with pytest.raises(UserError, match="would have 9 labels") as caught:
            await Runner.run(_agent(), "hi", store=db, session_id="s", run_id="b", labels=mine)
        assert "s0, s1, s2, s3" in caught.value.message
        assert caught.value.hint and "inherits the session's" in caught.value.hint
    finally:
        await db.aclose()


async def test_the_first_of_racing_runs_records_the_sessions_labels(backend: Backend) -> None:
    stores = [backend.open() for _ in range(4)]
    labelled = [s for s in stores if isinstance(s, SessionLabels)]
    try:
        assert len(labelled) == 4
        got = await asyncio.gather(
            *(s.session_labels("new", {"tenant": f"t{i}"}) for i, s in enumerate(labelled))
        )
        assert len({tuple(g.items()) for g in got}) == 1  # all see the one recorded
        assert got[0]["tenant"] in {"t0", "t1", "t2", "t3"}
        assert await labelled[0].session_labels("new", {"tenant": "late"}) == got[0]
    finally:
        for s in stores:
            await s.aclose()


async def test_a_spend_limit_counts_the_runs_that_inherit_the_label(backend: Backend) -> None:
    db = backend.open()
    lovia.configure(
        spend_limits=[SpendLimit(label="tenant", value="acme", max_usd=0.5, window="day")]
    )
    try:
        await Runner.run(_agent(), "hi", store=db, session_id="s", labels={"tenant": "acme"})
        outcomes: list[str] = []
        for _ in range(3):  # no labels given: the session's tenant=acme is counted
            try:
                await Runner.run(_agent(), "hi", store=db, session_id="s")
                outcomes.append("ok")
            except SpendLimitExceeded as exc:
                outcomes.append(exc.message)
        # $0.2 a call: the third starts at $0.4 (room left), the fourth finds $0.6
        assert outcomes[:2] == ["ok", "ok"] and len(outcomes) == 3
        assert "$0.5 per day for tenant=acme" in outcomes[2]
        assert isinstance(db, SpendLedger)
        window = SpendLimit(label="tenant", max_usd=1).window_start(time.time())
        assert await db.spent("tenant=acme/day", window) == pytest.approx(0.6)
    finally:
        await db.aclose()


async def test_a_resumed_session_run_keeps_the_labels_it_started_with(backend: Backend) -> None:
    db = backend.open()
    try:
        await Runner.run(_agent(), "hi", store=db, session_id="s", labels=ACME)
        failing = Agent(
            name="chat", model=ScriptedModel([ProviderServerError("upstream 502", status=502)])
        )
        own = {"feature": "search"}
        with pytest.raises(ProviderServerError):
            await Runner.run(failing, "hi", store=db, session_id="s", run_id="r", labels=own)
        assert await _labels(db, "r") == {**ACME, **own}
        resumer = backend.open()  # `lovia resume`: another process, the stored options
        try:
            info = (await resumer.load("r")).info  # type: ignore[union-attr]
            with capture_events() as events:
                result = await Runner.run(_agent(), None, **resume_options(info, resumer))
            assert result.output == "done"
            started = next(e for e in events if isinstance(e, RunStarted))
            assert started.resumed and dict(started.labels) == {**ACME, **own}
            assert await _labels(resumer, "r") == {**ACME, **own}
        finally:
            await resumer.aclose()
    finally:
        await db.aclose()


async def test_a_worker_task_records_and_inherits_session_labels(backend: Backend) -> None:
    db = backend.open()
    try:
        first = {"run_id": "w1", "input": "hi", "session_id": "s", "labels": ACME}
        assert await execute_run(_agent(), first, db) == "completed"
        later = {"run_id": "w2", "input": "more", "session_id": "s"}
        assert await execute_run(_agent(), later, db) == "completed"
        assert await _labels(db, "w2") == ACME
    finally:
        await db.aclose()


async def test_a_damaged_session_labels_row_is_a_store_error(backend: Backend) -> None:
    if backend.name == "memory":
        pytest.skip("no rows to damage in the memory store")
    db = backend.open()
    try:
        assert isinstance(db, SessionLabels)
        await db.session_labels("s", {"tenant": "acme"})
        await backend.raw(
            "UPDATE lovia_session_labels SET labels = ?1 WHERE session_id = ?2",
            '{"tenant": 7}',
            "s",
        )
        with pytest.raises(StoreError, match="labels of session 's'"):
            await db.session_labels("s")
    finally:
        await db.aclose()


async def test_a_store_made_before_session_labels_gets_them_in_place(backend: Backend) -> None:
    if backend.name == "memory":
        pytest.skip("the memory store has no schema")
    db = backend.open()
    await Runner.run(_agent(), "hi", store=db, session_id="s", run_id="old")
    await db.aclose()
    await backend.raw("DROP TABLE lovia_session_labels")  # as an older lovia made it
    db = backend.open()
    try:
        await Runner.run(_agent(), "hi", store=db, session_id="s", run_id="a", labels=ACME)
        await Runner.run(_agent(), "hi", store=db, session_id="s", run_id="b")
        assert await _labels(db, "b") == ACME
    finally:
        await db.aclose()


async def test_a_session_bound_workspace_run_inherits_labels(tmp_path: Path) -> None:
    """A workspace bound to a session keeps the session in its folder's store; a run
    there with no labels and no store of its own still runs as the session's tenant."""
    from lovia.plugins.workspace import Workspace

    ws = Workspace(tmp_path, session=True)
    agent = Agent(name="coder", model=ScriptedModel(["first", "second"]))
    await Runner.run(agent, "one", workspace=ws, store=None, labels=ACME)
    with capture_events() as events:
        await Runner.run(agent, "two", workspace=ws, store=None)
    (started,) = [e for e in events if isinstance(e, RunStarted)]
    assert started.session_id == ws.session and dict(started.labels) == ACME
