"""Tool approvals: an in-process policy, or a pause that resumes from the checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent, ApprovalPending, RunContext, Runner, events, tool
from lovia.stores import store
from lovia.testing import ScriptedModel, call
from lovia.transcript import ToolCallEntry, ToolResultEntry

from .helpers import Outcome, Scenario, both, run_mode, stream_mode


def big_transfer(ctx: RunContext[Any], c: ToolCallEntry) -> bool:
    return json.loads(c.arguments)["amount"] > 100


def make_tools(log: list[str]) -> list[Any]:
    @tool
    async def lookup(order: str) -> str:
        """Look up an order."""
        log.append(f"lookup {order}")
        return f"{order}: shipped"

    @tool(requires_approval=True)
    async def refund(amount: int) -> str:
        """Refund money."""
        log.append(f"refund {amount}")
        return f"refunded {amount}"

    @tool(requires_approval=big_transfer)
    async def transfer(amount: int) -> str:
        """Transfer money (large amounts need approval)."""
        log.append(f"transfer {amount}")
        return f"transferred {amount}"

    return [lookup, refund, transfer]


FIRST_TURN = [
    call("lookup", order="A1", id="c_lookup"),
    call("refund", amount=5, id="c_refund"),
    call("transfer", amount=500, id="c_big"),
    call("transfer", amount=50, id="c_small"),
]


def results(entries: Any) -> dict[str, tuple[str, bool]]:
    return {e.call_id: (e.content, e.is_error) for e in entries if isinstance(e, ToolResultEntry)}


@pytest.mark.parametrize("where", ["runner", "agent"])
async def test_policy_approves_and_denies_in_process(where: str) -> None:
    def make() -> Scenario:
        log: list[str] = []

        async def policy(ctx: RunContext[Any], c: ToolCallEntry) -> bool | str:
            log.append(f"ask {c.name} {c.call_id}")
            return True if c.name == "refund" else "amount over the limit"

        model = ScriptedModel([FIRST_TURN, "done"])
        agent = Agent(
            name="bank",
            model=model,
            tools=make_tools(log),
            approval=policy if where == "agent" else None,
        )
        options = {"approval": policy} if where == "runner" else {}
        return Scenario(agent, "help", options, extra=(log, model))

    a, b = await both(make)
    for out in (a, b):
        log, model = out.scenario.extra
        assert out.result is not None and out.result.output == "done"
        # pre-checks in request order, all before any tool of the turn runs
        assert log == [
            "ask refund c_refund",
            "ask transfer c_big",
            "lookup A1",
            "refund 5",
            "transfer 50",
        ]
        seen = results(model.requests[1].messages)
        assert seen["c_big"] == ("The call was denied: amount over the limit", True)
        assert seen["c_refund"] == ("refunded 5", False)
        assert seen["c_small"] == ("transferred 50", False)
        assert out.result.usage.tool_calls == 3
    denied = next(e for e in b.of(events.ToolCallCompleted) if e.call.call_id == "c_big")
    assert denied.is_error and not denied.started and denied.error_type == "refused"


async def test_sync_policy_false_denies() -> None:
    def make() -> Scenario:
        log: list[str] = []
        model = ScriptedModel([call("refund", amount=9, id="c1"), "ok"])
        agent = Agent(
            name="bank", model=model, tools=make_tools(log), approval=lambda ctx, c: False
        )
        return Scenario(agent, "x", extra=(log, model))

    a, _ = await both(make)
    log, model = a.scenario.extra
    assert log == []
    content, is_error = results(model.requests[1].messages)["c1"]
    assert is_error and "denied" in content


def pause_scenario(db: Path, run_id: str) -> Scenario:
    log: list[str] = []
    model = ScriptedModel([FIRST_TURN])
    agent = Agent(name="bank", model=model, tools=make_tools(log))
    st = store(f"sqlite:///{db}")
    return Scenario(agent, "help", {"run_id": run_id, "checkpointer": st}, extra=(log, st))


def resume_scenario(db: Path, run_id: str, approvals: dict[str, Any], steps: list[Any]) -> Scenario:
    log: list[str] = []
    model = ScriptedModel(steps)
    agent = Agent(name="bank", model=model, tools=make_tools(log))
    st = store(f"sqlite:///{db}")  # a new store object: as after a process restart
    return Scenario(
        agent,
        None,
        {"run_id": run_id, "checkpointer": st, "approvals": approvals},
        extra=(log, st, model),
    )


async def _close(out: Outcome) -> None:
    await out.scenario.options["checkpointer"].aclose()


async def test_pause_then_resume_runs_only_the_approved_calls(tmp_path: Path) -> None:
    counter = iter(range(100))

    def make_pause() -> Scenario:
        return pause_scenario(tmp_path / f"{next(counter)}.db", "run-approve")

    a, b = await both(make_pause)
    for out in (a, b):
        err = out.error
        assert isinstance(err, ApprovalPending)
        assert [c.call_id for c in err.pending] == ["c_refund", "c_big"]
        assert err.run_id == "run-approve" and err.turn == 1
        log, st = out.scenario.extra
        assert log == []  # nothing ran: the pause comes before any tool of the turn
        snap = await st.load("run-approve")
        assert snap is not None and snap.info.status == "paused"
        db = Path(str(st.url).removeprefix("sqlite:///"))
        await _close(out)

        # resume from a fresh store object on the same file, in the same mode
        approvals = {"c_refund": True, "c_big": "needs a manager"}
        mode = run_mode if out is a else stream_mode
        res = await mode(resume_scenario(db, "run-approve", approvals, ["all done"]))
        log2, _, model2 = res.scenario.extra
        assert res.error is None, res.error
        assert res.result is not None and res.result.output == "all done"
        assert log2 == ["lookup A1", "refund 5", "transfer 50"]  # each exactly once
        assert results(model2.requests[0].messages) == {
            "c_lookup": ("A1: shipped", False),
            "c_refund": ("refunded 5", False),
            "c_big": ("The call was denied: needs a manager", True),
            "c_small": ("transferred 50", False),
        }
        assert res.result.turns == 2
        assert [e.type for e in res.result.entries].count("tool_call") == 4
        assert res.types[0] == "RunStarted" and res.events[0].resumed  # type: ignore[attr-defined]
        await _close(res)
    assert b.types[-1] == "RunFailed"
    assert b.of(events.RunFailed)[0].error_type == "ApprovalPending"


async def test_resume_in_stream_mode_and_partial_decisions(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    first = await run_mode(pause_scenario(db, "run-partial"))
    assert isinstance(first.error, ApprovalPending)
    await _close(first)
    # decide only one call: the run pauses again on the other, still running nothing
    again = await stream_mode(resume_scenario(db, "run-partial", {"c_refund": False}, []))
    assert isinstance(again.error, ApprovalPending)
    assert [c.call_id for c in again.error.pending] == ["c_big"]
    assert again.scenario.extra[0] == []
    await _close(again)
    done = await stream_mode(
        resume_scenario(db, "run-partial", {"c_big": True, "c_refund": False}, ["finished"])
    )
    assert done.result is not None and done.result.output == "finished"
    log, _, model = done.scenario.extra
    assert log == ["lookup A1", "transfer 500", "transfer 50"]
    seen = results(model.requests[0].messages)
    assert seen["c_refund"] == ("The call was denied: denied by the approver.", True)
    await _close(done)
    # the run is complete: resubmitting its id replays the result, no model call
    replay = await run_mode(resume_scenario(db, "run-partial", {}, []))
    assert replay.result is not None and replay.result.replayed
    assert replay.result.output == "finished"
    await _close(replay)


async def test_memory_store_pause_and_resume() -> None:
    from lovia.stores import MemoryStore

    st = MemoryStore()
    log: list[str] = []
    agent = Agent(
        name="bank", model=ScriptedModel([call("refund", amount=1, id="r1")]), tools=make_tools(log)
    )
    with pytest.raises(ApprovalPending):
        await Runner.run(agent, "x", run_id="m1", checkpointer=st)
    agent2 = agent.clone(model=ScriptedModel(["ok"]))
    r = await Runner.run(agent2, None, run_id="m1", checkpointer=st, approvals={"r1": "approve"})
    assert r.output == "ok" and log == ["refund 1"]
