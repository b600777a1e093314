"""Promises of the loop's checkpoints: what the run's row says, what each write reports,
when an answer is durable, and what a resume folds back from the stored records."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from lovia import Agent, ApprovalPending, Runner, events, tool
from lovia._loop.checkpoint import open_calls, restore
from lovia.errors import LeaseLost, ProviderServerError
from lovia.pricing import set_price
from lovia.stores import MemoryStore, store
from lovia.stores.base import CheckpointRecord, RunInfo, RunSnapshot
from lovia.stores.records import LedgerRecord, StateRecord, to_checkpoint
from lovia.testing import FunctionModel, ScriptedModel, call, reply
from lovia.transcript import InputEntry, TextEntry, ToolCallEntry, ToolResultEntry
from lovia.usage import Usage


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def _saved(agent: Agent[Any, Any], cp: Any, run_id: str, **options: Any) -> list[Any]:
    handle = Runner.stream(agent, "go", run_id=run_id, checkpointer=cp, **options)
    return [e async for e in handle if isinstance(e, events.CheckpointSaved)]


def _row(info: RunInfo) -> dict[str, Any]:
    """The row without its clock readings."""
    row = {k: getattr(info, k) for k in RunInfo.__slots__}  # type: ignore[attr-defined]
    del row["started_at"], row["ended_at"]
    return row


async def test_the_run_row_says_who_ran_what_it_used_and_what_it_cost() -> None:
    set_price("pa", "ma", input_per_mtok=1_000_000.0, output_per_mtok=2_000_000.0)
    set_price("pb", "mb", input_per_mtok=10_000_000.0, output_per_mtok=0.0)
    db = MemoryStore()
    target = Agent(name="b", model=ScriptedModel(["b1", "b2"], provider="pb", model="mb"))
    first = Agent(
        name="a",
        model=ScriptedModel([call("transfer_to_b")], provider="pa", model="ma"),
        handoffs=[target],
    )
    # an earlier run of the session: the row counts the entries that preceded this run
    await Runner.run(first, "hello", session=db, session_id="s", checkpointer=db, run_id="r0")
    history = len(await db.load_session("s"))
    assert history > 0
    before = time.time()
    result = await Runner.run(
        first.clone(model=ScriptedModel([call("transfer_to_b")], provider="pa", model="ma")),
        "again",
        session=db,
        session_id="s",
        checkpointer=db,
        run_id="r1",
        labels={"tenant": "acme"},
        deps_key="dk-1",
    )
    after = time.time()
    snap = await db.load("r1")
    assert snap is not None
    usage = result.usage
    assert usage.cost_usd > 0 and usage.input_tokens > 0 and usage.output_tokens > 0
    assert _row(snap.info) == {
        "run_id": "r1",
        "agent": "b",
        "session_id": "s",
        "status": "completed",
        "finish_reason": "stop",
        "error_type": None,
        "turns": 2,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cost_usd": usage.cost_usd,
        "trace_id": None,
        "span_id": None,
        "history_len": history,
        "version": 1,
        "extra": {
            "first_agent": "a",
            "labels": {"tenant": "acme"},
            "deps_key": "dk-1",
            "model": "pb:mb",
            "attempts": 1,
        },
        "parent_run_id": None,
        "parent_call_id": None,
    }
    assert before <= snap.info.started_at <= snap.info.ended_at <= after  # type: ignore[operator]


async def test_the_run_row_says_what_of_the_usage_is_unknown() -> None:
    db = MemoryStore()
    model = ScriptedModel([reply("done", usage=Usage(input_tokens=3, missing=True))])
    await Runner.run(Agent(name="a", model=model), "go", checkpointer=db, run_id="r")
    info = (await db.load("r")).info  # type: ignore[union-attr]
    assert info.extra == {
        "first_agent": "a",
        "unpriced": 1,
        "usage_missing": True,
        "model": "test:scripted",
        "attempts": 1,
    }


async def test_a_failed_run_row_names_the_model_it_was_calling() -> None:
    db = MemoryStore()
    model = ScriptedModel([ProviderServerError("down", status=503)], provider="px", model="mx")
    with pytest.raises(ProviderServerError):
        await Runner.run(Agent(name="a", model=model), "go", checkpointer=db, run_id="r")
    info = (await db.load("r")).info  # type: ignore[union-attr]
    assert (info.status, info.error_type, info.extra["model"]) == (
        "failed",
        "ProviderServerError",
        "px:mx",
    )
    assert info.ended_at is not None and info.ended_at >= info.started_at


async def test_a_child_run_row_names_the_run_and_the_call_that_started_it() -> None:
    db = MemoryStore()
    child = Agent(name="kid", model=ScriptedModel(["kid says"]))
    parent = Agent(
        name="p",
        model=ScriptedModel([call("kid", input="hi", id="c9"), "ok"]),
        tools=[child.as_tool()],
    )
    await Runner.run(parent, "go", run_id="p1", checkpointer=db)
    rows = {i.agent: i for i in await db.list_runs()}
    assert (rows["kid"].parent_run_id, rows["kid"].parent_call_id) == ("p1", "c9")
    assert (rows["p"].parent_run_id, rows["p"].parent_call_id) == (None, None)


async def test_a_traced_run_row_links_to_its_root_span() -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    db = MemoryStore()
    agent = Agent(name="a", model=ScriptedModel(["done"]))
    await Runner.run(agent, "go", run_id="r", checkpointer=db, tracer_provider=tp)
    info = (await db.load("r")).info  # type: ignore[union-attr]
    root = next(s for s in exporter.get_finished_spans() if s.parent is None)
    assert info.trace_id == format(root.context.trace_id, "032x")
    assert info.span_id == format(root.context.span_id, "016x")


class _Sized(MemoryStore):
    """A memory store that reports what each append returned, and is slow to write."""

    def __init__(self, url: str = "memory://") -> None:
        super().__init__(url)
        self.returned: list[int] = []

    async def append(
        self, run_id: str, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int:
        await asyncio.sleep(0.02)
        n = await super().append(run_id, records, fence=fence)
        self.returned.append(n)
        return n


async def test_each_checkpoint_write_reports_its_store_size_and_duration() -> None:
    db = _Sized("memory://host:7")
    agent = Agent(name="a", model=ScriptedModel([call("add", a=1, b=2), "done"]), tools=[add])
    saved = await _saved(agent, db, "r")
    progress = [e for e in saved if e.kind != "complete"]
    assert len(progress) == 3 and all(db.returned)
    assert [e.bytes for e in progress] == db.returned[:3]  # then the end's own write
    assert {e.store for e in saved} == {"memory"}
    for e in progress:
        assert 0.02 <= e.duration_s < 5.0


async def test_a_store_without_a_url_is_named_by_its_class() -> None:
    db = _Sized()
    del db.url
    saved = await _saved(Agent(name="a", model=ScriptedModel(["done"])), db, "r")
    assert {e.store for e in saved} == {"_Sized"}


async def test_a_sqlite_store_is_named_by_its_scheme(tmp_path: Any) -> None:
    db = store(f"sqlite:///{tmp_path}/x.db")
    try:
        saved = await _saved(Agent(name="a", model=ScriptedModel(["done"])), db, "r")
    finally:
        await db.aclose()
    assert {e.store for e in saved} == {"sqlite"}


async def test_a_failed_checkpoint_write_reports_no_bytes_and_fails_the_run() -> None:
    class Broken(MemoryStore):
        async def append(self, run_id: str, records: Any, *, fence: int | None = None) -> int:
            raise OSError("disk gone")

    handle = Runner.stream(
        Agent(name="a", model=ScriptedModel([])), "go", run_id="r", checkpointer=Broken()
    )
    seen = [e async for e in handle]
    assert isinstance(seen[-1], events.RunFailed) and isinstance(seen[-1].error, OSError)
    saved = [e for e in seen if isinstance(e, events.CheckpointSaved)]
    assert [(e.kind, e.bytes, type(e.error)) for e in saved] == [("start", 0, OSError)]


async def test_a_final_answer_is_stored_before_an_output_guardrail_runs() -> None:
    """An output guardrail is user code that may take long: the answer it checks is
    already durable, so a crash while it runs does not pay for the model call again."""
    db = MemoryStore()
    stored: list[list[str]] = []

    async def check(ctx: Any, value: Any) -> None:
        snap = await db.load("r")
        assert snap is not None
        stored.append([e.type for e in snap.entries()])

    agent = Agent(name="a", model=ScriptedModel(["the answer"]), output_guardrails=[check])
    result = await Runner.run(agent, "go", run_id="r", checkpointer=db)
    assert result.output == "the answer"
    assert stored == [["system", "input", "text"]]


async def test_an_approval_policy_sees_the_answer_already_stored() -> None:
    """An approval policy may take long (it may ask a human): the answer that asked for
    the call is durable before it is consulted."""
    db = MemoryStore()
    stored: list[list[str]] = []

    @tool(requires_approval=True)
    def refund(amount: int) -> str:
        """Refund money."""
        return f"refunded {amount}"

    async def policy(ctx: Any, c: ToolCallEntry) -> bool:
        snap = await db.load("r")
        assert snap is not None
        stored.append([e.type for e in snap.entries()])
        return True

    model = ScriptedModel([call("refund", amount=5), "done"])
    agent = Agent(name="a", model=model, tools=[refund], approval=policy)
    await Runner.run(agent, "go", run_id="r", checkpointer=db)
    assert stored == [["system", "input", "tool_call"]]


async def test_a_pause_for_approval_writes_no_empty_checkpoint() -> None:
    """The answer is written before approval is asked; the pause that follows has
    nothing more to write, so it makes no write (and reports none)."""

    @tool(requires_approval=True)
    def refund(amount: int) -> str:
        """Refund money."""
        return f"refunded {amount}"

    db = _Sized()
    agent = Agent(name="a", model=ScriptedModel([call("refund", amount=5)]), tools=[refund])
    handle = Runner.stream(agent, "go", run_id="r", checkpointer=db)
    seen = [e async for e in handle]
    assert isinstance(seen[-1], events.RunFailed) and isinstance(seen[-1].error, ApprovalPending)
    kinds = [(e.kind, e.entries) for e in seen if isinstance(e, events.CheckpointSaved)]
    assert kinds == [("start", 2), ("progress", 1)]
    assert len(db.returned) == 2


async def test_a_run_resumed_before_its_first_turn_was_stored_counts_turns_from_one() -> None:
    db = MemoryStore()
    agent = Agent(name="a", model=ScriptedModel([ProviderServerError("down", status=503)]))
    with pytest.raises(ProviderServerError):
        await Runner.run(agent, "go", run_id="r", checkpointer=db)
    result = await Runner.run(
        agent.clone(model=ScriptedModel(["done"])), None, run_id="r", checkpointer=db
    )
    assert (result.output, result.turns) == ("done", 1)


async def test_a_worker_whose_lease_was_taken_cannot_write_the_runs_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The end is fenced like every other write: a worker that stalled past its lease
    while another took the run over does not mark the run completed."""
    monkeypatch.setenv("LOVIA_LEASE_TTL_S", "0.2")
    db = MemoryStore()

    async def decide(request: Any, info: Any) -> Any:
        time.sleep(0.3)  # stalled past the lease (no heartbeat): another worker takes it
        assert await db.acquire("r", "thief", 30) is not None
        return "done"

    with pytest.raises(LeaseLost):
        await Runner.run(Agent(name="a", model=FunctionModel(decide)), "go", run_id="r",
                         checkpointer=db)  # fmt: skip
    snap = await db.load("r")
    assert snap is not None and snap.info.status == "running"
    assert [e.type for e in snap.entries()] == ["system", "input"]
    assert await db.lease_holder("r") == "thief"


# restore() and open_calls() are pure: they fold stored records into a resume point.


def _snapshot(records: list[Any], **info: Any) -> RunSnapshot:
    return RunSnapshot(
        info=RunInfo(run_id="r", agent="a", **info),
        records=[to_checkpoint(r) for r in records],
    )


def test_a_resume_point_from_no_state_starts_at_turn_zero_with_nothing_known() -> None:
    point = restore(_snapshot([]))
    assert (point.turn, point.agent, point.last_input_tokens, point.usage) == (
        0,
        None,
        None,
        Usage(),
    )
    assert (point.ledger, point.children, tuple(point.trace_links)) == ({}, {}, ())


def test_a_resume_point_keeps_the_last_state_the_ledger_and_child_usage() -> None:
    kid = Usage(input_tokens=7, output_tokens=2, requests=1)
    point = restore(
        _snapshot(
            [
                StateRecord(turn=1, usage=Usage(input_tokens=1), agent="a", trace="t1:s1",
                            last_input_tokens=5, tokens_recorded=True),
                LedgerRecord(call_id="c1", status="started", key="r:c1"),
                LedgerRecord(call_id="c1", status="completed", key="r:c1", child_usage=kid),
                StateRecord(turn=2, usage=Usage(input_tokens=4), agent=None, trace="t2:s2",
                            last_input_tokens=None, tokens_recorded=False),
            ],
            trace_id="t0",
            span_id="s0",
        )
    )  # fmt: skip
    assert (point.turn, point.agent, point.usage, point.last_input_tokens) == (
        2,
        "a",
        Usage(input_tokens=4),
        5,
    )
    assert point.ledger == {"c1": "completed"}
    assert point.children == {"c1": kid}
    assert tuple(point.trace_links) == ("t1:s1", "t2:s2", "t0:s0")


def test_a_row_with_half_a_trace_links_no_trace() -> None:
    assert tuple(restore(_snapshot([], trace_id="t0")).trace_links) == ()
    assert tuple(restore(_snapshot([], span_id="s0")).trace_links) == ()


def test_open_calls_are_the_latest_answers_calls_without_a_result() -> None:
    def tc(cid: str, msg: str, turn: int) -> ToolCallEntry:
        return ToolCallEntry(call_id=cid, name="add", arguments="{}", message_id=msg, turn=turn)

    def tr(cid: str) -> ToolResultEntry:
        return ToolResultEntry(call_id=cid, name="add", content="3")

    entries: list[Any] = [
        InputEntry(content="go"),
        tc("a", "m1", 1),
        tr("a"),
        tc("b", "m2", 2),
        tc("c", "m2", 2),
        tc("d", "m2", 1),  # same message id, another turn: not this answer's
        tc("e", "m3", 2),  # another answer of the same turn
        tr("b"),
        tc("f", "m2", 2),
    ]
    assert [c.call_id for c in open_calls(entries)] == ["c", "f"]
    assert open_calls([*entries, TextEntry(text="done")]) == open_calls(entries)
    assert open_calls([InputEntry(content="go"), TextEntry(text="hi")]) == []
