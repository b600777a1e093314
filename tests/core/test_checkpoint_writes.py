"""How many checkpoint writes a tool turn makes, and what each one makes durable.

Results of a parallel group that are in together go out in one append (group commit);
a result that comes in while a write is in flight goes out in the next one, before
anything that depends on it. A crash between two writes never re-runs a completed call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from lovia import Agent, RunBudget, Runner, events, tool
from lovia.stores import MemoryStore
from lovia.stores.base import CheckpointRecord, RunEnd
from lovia.testing import ScriptedModel, call


class CountingStore(MemoryStore):
    """A memory store that keeps every append's records, and can fail one of them."""

    def __init__(self) -> None:
        super().__init__()
        self.appends: list[list[CheckpointRecord]] = []
        self.fail_when: Any = None
        """A predicate on an append's records: True raises instead of writing."""
        self.on_append: Any = None

    async def append(
        self, run_id: str, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int:
        batch = list(records)
        if self.fail_when is not None and self.fail_when(batch):
            raise OSError("disk gone")
        written = await super().append(run_id, batch, fence=fence)
        self.appends.append(batch)
        if self.on_append is not None:
            self.on_append(batch)
        return written

    async def end_run(self, end: RunEnd) -> int:
        """The run's end: its last records are a write too (with the row, in one go)."""
        batch = list(end.records)
        if batch and self.fail_when is not None and self.fail_when(batch):
            raise OSError("disk gone")
        written = await super().end_run(end)
        if batch:
            self.appends.append(batch)
        return written


def _results(batch: Sequence[CheckpointRecord]) -> list[str]:
    return [
        e["call_id"]
        for r in batch
        if r.kind == "entries"
        for e in r.data["entries"]
        if e["type"] == "tool_result"
    ]


def _ledger(batch: Sequence[CheckpointRecord]) -> list[tuple[str, str]]:
    return [(r.data["call_id"], r.data["status"]) for r in batch if r.kind == "ledger"]


ran: list[str] = []


@pytest.fixture(autouse=True)
def _reset() -> None:
    ran.clear()


@tool(concurrency_safe=True)
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    ran.append(f"add:{a}+{b}")
    return a + b


def _two_adds() -> ScriptedModel:
    return ScriptedModel([[call("add", a=1, b=2, id="c1"), call("add", a=3, b=4, id="c2")], "done"])


async def test_parallel_results_that_finish_together_are_one_append() -> None:
    store = CountingStore()
    agent = Agent(name="a", model=_two_adds(), tools=[add])
    result = await Runner.run(agent, "go", run_id="r1", checkpointer=store)
    assert result.output == "done" and sorted(ran) == ["add:1+2", "add:3+4"]
    with_results = [b for b in store.appends if _results(b)]
    assert len(with_results) == 1  # was one append per result
    (batch,) = with_results
    assert _results(batch) == ["c1", "c2"]  # the model's order
    assert _ledger(batch) == [("c1", "completed"), ("c2", "completed")]
    # the records are the same as one write per result made, in the same order
    kinds = [(r.kind, _results([r]) or _ledger([r])) for r in batch]
    assert kinds == [
        ("entries", ["c1"]),
        ("ledger", [("c1", "completed")]),
        ("entries", ["c2"]),
        ("ledger", [("c2", "completed")]),
    ]


async def test_one_checkpoint_event_per_group_write() -> None:
    store = CountingStore()
    agent = Agent(name="a", model=_two_adds(), tools=[add])
    seen = [e async for e in Runner.stream(agent, "go", run_id="r2", checkpointer=store)]
    saved = [e for e in seen if isinstance(e, events.CheckpointSaved)]
    tool_writes = [e for e in saved if e.kind == "tool_result"]
    assert len(tool_writes) == 1 and tool_writes[0].entries == 2
    # one event per write; the final answer's records ride with the run's end
    assert len(saved) == len(store.appends)
    assert saved[-1].kind == "complete" and saved[-1].entries == 1
    # both results are reported before the write that makes them durable
    names = [type(e).__name__ for e in seen]
    first_write = seen.index(tool_writes[0])
    assert names[:first_write].count("ToolCallCompleted") == 2
    assert "ToolCallCompleted" not in names[first_write:]


def _slow_after_f(store: CountingStore) -> Any:
    """A parallel-safe, non-idempotent tool that finishes only once call ``f``'s result
    has been appended to ``store``."""
    release = asyncio.Event()

    @tool(concurrency_safe=True)
    async def slow(n: int) -> int:
        """Wait until the fast result is durable."""
        await asyncio.wait_for(release.wait(), 5)
        ran.append(f"slow:{n}")
        return n

    store.on_append = lambda batch: release.set() if "f" in _results(batch) else None
    return slow


async def test_a_result_is_written_while_its_sibling_still_runs() -> None:
    """Group commit does not wait for the group: each result is written once it is in."""
    store = CountingStore()
    slow = _slow_after_f(store)
    model = ScriptedModel([[call("add", a=1, b=1, id="f"), call("slow", n=2, id="s")], "done"])
    agent = Agent(name="a", model=model, tools=[add, slow])
    result = await Runner.run(agent, "go", run_id="r3", checkpointer=store)
    assert result.output == "done"
    assert [_results(b) for b in store.appends if _results(b)] == [["f"], ["s"]]


async def test_a_crash_after_the_first_of_two_results_does_not_rerun_it() -> None:
    store = CountingStore()
    slow = _slow_after_f(store)
    store.fail_when = lambda batch: "s" in _results(batch)  # the store dies on the second
    model = ScriptedModel([[call("add", a=1, b=1, id="f"), call("slow", n=2, id="s")]])
    agent = Agent(name="a", model=model, tools=[add, slow])
    with pytest.raises(OSError, match="disk gone"):
        await Runner.run(agent, "go", run_id="r4", checkpointer=store)
    assert ran == ["add:1+1", "slow:2"]

    store.fail_when = store.on_append = None
    ran.clear()
    fresh = ScriptedModel(["resumed"])
    resumed = await Runner.run(agent.clone(model=fresh), None, run_id="r4", checkpointer=store)
    assert resumed.output == "resumed"
    assert ran == []  # the completed call is not re-run; the unknown one is not either
    by_call = {e.call_id: e for e in resumed.entries if e.type == "tool_result"}
    assert by_call["f"].content == "2" and not by_call["f"].is_error
    assert by_call["s"].is_error and "outcome of this tool call is unknown" in by_call["s"].content


async def test_a_tool_turn_is_written_with_the_ledger_of_its_calls() -> None:
    """The model turn rides with the ledger write: start, turn + ledger, results, answer."""
    store = CountingStore()
    agent = Agent(name="a", model=_two_adds(), tools=[add])
    await Runner.run(agent, "go", run_id="r5", checkpointer=store)
    assert len(store.appends) == 4  # was 6: the turn and each result were writes of their own
    turn = store.appends[1]
    entries = [e["type"] for r in turn if r.kind == "entries" for e in r.data["entries"]]
    assert entries == ["tool_call", "tool_call"]
    assert _ledger(turn) == [("c1", "started"), ("c2", "started")]
    # the call's usage record (what lovia reprice prices again) rides with its view
    assert [r.kind for r in turn] == ["view", "usage", "entries", "state", "ledger", "ledger"]


class YieldingStore(CountingStore):
    """Its writes give the event loop a turn, as a store on a thread or a socket does."""

    async def append(
        self, run_id: str, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return await super().append(run_id, records, fence=fence)


@pytest.mark.parametrize("parallel", [True, False])
async def test_no_tool_starts_before_its_call_and_ledger_are_stored(parallel: bool) -> None:
    store = YieldingStore()
    seen: list[tuple[list[str], list[tuple[str, str]]]] = []

    @tool(concurrency_safe=parallel)
    async def probe(n: int) -> int:
        """Look at what is stored when the tool starts."""
        snap = await store.load("r6")
        assert snap is not None
        calls = [e.call_id for e in snap.entries() if e.type == "tool_call"]
        seen.append((calls, _ledger(snap.records)))
        return n

    model = ScriptedModel([[call("probe", n=1, id="p1"), call("probe", n=2, id="p2")], "done"])
    agent = Agent(name="a", model=model, tools=[probe])
    await Runner.run(agent, "go", run_id="r6", checkpointer=store)
    assert len(seen) == 2
    for calls, ledger in seen:
        assert calls == ["p1", "p2"]
        assert ("p1", "started") in ledger or ("p2", "started") in ledger
    if parallel:
        assert all(
            ("p1", "started") in ledger and ("p2", "started") in ledger for _, ledger in seen
        )


@tool(requires_approval=True)
def wire(amount: int) -> str:
    """Send money."""
    ran.append(f"wire:{amount}")
    return "sent"


async def test_a_turn_that_waits_for_approval_is_written_before_the_pause() -> None:
    store = CountingStore()
    model = ScriptedModel([call("wire", amount=5, id="w1"), "done"])
    agent = Agent(name="a", model=model, tools=[wire])
    seen = [e async for e in Runner.stream(agent, "go", run_id="r7", checkpointer=store)]
    assert isinstance(seen[-1], events.RunFailed) and seen[-1].finish_reason == "approval_pending"
    snap = await store.load("r7")
    assert snap is not None and snap.info.status == "paused"
    assert [e.call_id for e in snap.entries() if e.type == "tool_call"] == ["w1"]
    assert not _ledger(snap.records) and ran == []
    result = await Runner.run(agent, None, run_id="r7", checkpointer=store, approvals={"w1": True})
    assert result.output == "done" and ran == ["wire:5"]


async def test_results_that_come_in_during_a_write_go_out_together_in_the_next() -> None:
    store = YieldingStore()
    writing = asyncio.Event()

    @tool(concurrency_safe=True)
    async def later(n: int) -> int:
        """Finish while the first result is being written."""
        await asyncio.wait_for(writing.wait(), 5)
        return n

    async def append(run_id: str, records: Any, *, fence: int | None = None) -> int:
        if "a" in _results(records):
            writing.set()  # the other two finish while this write is in flight
            for _ in range(5):
                await asyncio.sleep(0)
        return await YieldingStore.append(store, run_id, records, fence=fence)

    store.append = append  # type: ignore[method-assign]
    model = ScriptedModel(
        [
            [
                call("add", a=1, b=1, id="a"),
                call("later", n=2, id="b"),
                call("later", n=3, id="c"),
            ],
            "done",
        ]
    )
    agent = Agent(name="a", model=model, tools=[add, later])
    result = await Runner.run(agent, "go", run_id="r8", checkpointer=store)
    assert result.output == "done"
    assert [_results(b) for b in store.appends if _results(b)] == [["a"], ["b", "c"]]


@pytest.mark.lovia_unconsumed  # the budget stops the run before the model's answer
async def test_a_turn_stopped_by_the_budget_is_written_before_the_run_fails() -> None:
    store = CountingStore()
    agent = Agent(name="a", model=_two_adds(), tools=[add])
    budget = RunBudget(max_tool_calls=1)
    seen = [
        e async for e in Runner.stream(agent, "go", run_id="r9", checkpointer=store, budget=budget)
    ]
    assert isinstance(seen[-1], events.RunFailed) and seen[-1].error_type == "BudgetExceeded"
    assert ran == ["add:1+2"]
    snap = await store.load("r9")
    assert snap is not None
    assert [e.call_id for e in snap.entries() if e.type == "tool_call"] == ["c1", "c2"]
    assert [e.call_id for e in snap.entries() if e.type == "tool_result"] == ["c1"]
    assert _ledger(snap.records) == [("c1", "started"), ("c1", "completed")]
    saved = [e for e in seen if isinstance(e, events.CheckpointSaved)]
    assert [e.kind for e in saved] == ["start", "ledger", "tool_result"]
    # the failure's append is empty (nothing new), and it writes no attempt record: the
    # run's row says how the attempt ended
    assert len(saved) == len([b for b in store.appends if b])
