"""``resume_options``: the one way ``lovia resume``, the web app and ``lovia eval``
continue a stored run (its id, its store as checkpointer and session store, decisions)."""

from __future__ import annotations

import pytest

from lovia import Agent, Runner, configure, tool
from lovia.errors import ApprovalPending
from lovia.runner import resume_options
from lovia.stores import MemoryStore, RunInfo
from lovia.stores.records import ApprovalRecord, read_records
from lovia.testing import ScriptedModel, call


@tool(requires_approval=True)
def refund(amount: int) -> str:
    """Refund money."""
    return f"refunded {amount}"


def test_the_options_name_the_run_its_store_and_its_session() -> None:
    db = MemoryStore()
    alone = resume_options(RunInfo(run_id="r1", agent="a"), db)
    assert alone == {"run_id": "r1", "checkpointer": db, "store": None}
    chat = RunInfo(run_id="r2", agent="a", session_id="s1")
    with_session = resume_options(chat, db, approvals={"c1": True}, approved_by="cli:ann")
    assert with_session == {
        "run_id": "r2",
        "checkpointer": db,
        "store": None,
        "session": db,
        "session_id": "s1",
        "approvals": {"c1": True},
        "approved_by": "cli:ann",
    }
    assert "approvals" not in resume_options(chat, db, approvals={}, approved_by="x")


async def test_a_paused_run_continues_on_its_own_store_not_the_default() -> None:
    elsewhere = MemoryStore()
    configure(store=elsewhere)  # a default store the resume must not write to (reset by conftest)
    db = MemoryStore()
    model = ScriptedModel([call("refund", amount=5, id="c1"), "refunded"])
    agent = Agent(name="desk", tools=[refund], model=model)
    with pytest.raises(ApprovalPending):
        await Runner.run(agent, "refund", store=db, session_id="s1", run_id="r1")
    snapshot = await db.load("r1")
    assert snapshot is not None
    options = resume_options(snapshot.info, db, approvals={"c1": True}, approved_by="t")
    result = await Runner.run(agent, None, **options)
    assert result.output == "refunded" and result.session_id == "s1"
    stored = await db.load("r1")
    assert stored is not None and stored.info.status == "completed"
    decisions = list(read_records(stored, {"approval"}))
    assert [(d.call_id, d.actor) for d in decisions if isinstance(d, ApprovalRecord)] == [
        ("c1", "t")
    ]
    assert len(await db.load_session("s1")) > 0
    assert await elsewhere.list_runs() == []
