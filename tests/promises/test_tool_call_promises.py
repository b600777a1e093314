"""Promises of the loop's tool phase, through the public API: what a refused, denied,
failed or recovered call gives the model and the events, how approvals are recorded,
and which calls run together."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from lovia import Agent, ApprovalPending, RunCancelled, Runner, ToolError, events, tool
from lovia.context import CancelToken
from lovia.errors import ProviderServerError, TooManyToolCalls
from lovia.stores import MemoryStore
from lovia.testing import ScriptedModel, call
from lovia.tools import ToolArgumentsError
from lovia.transcript import ToolCallEntry


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def mul(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


async def _run(agent: Agent[Any, Any], **options: Any) -> list[Any]:
    """Every event of one run (the run's error is its RunFailed event)."""
    return [e async for e in Runner.stream(agent, "go", **options)]


def _completed(stream: list[Any]) -> dict[str, Any]:
    return {e.call.call_id: e for e in stream if isinstance(e, events.ToolCallCompleted)}


def _failure(stream: list[Any]) -> BaseException:
    assert isinstance(stream[-1], events.RunFailed)
    return stream[-1].error


# -- how many calls one answer may ask for


@pytest.mark.lovia_unconsumed
async def test_an_answer_with_more_calls_than_allowed_ends_the_run_before_any_runs() -> None:
    ran: list[int] = []

    @tool
    def note(n: int) -> str:
        """Note a number."""
        ran.append(n)
        return "ok"

    calls = [call("note", n=i, id=f"c{i}") for i in range(3)]
    agent = Agent(
        name="counter", model=ScriptedModel([calls]), tools=[note], max_tool_calls_per_turn=2
    )
    error = _failure(await _run(agent))
    assert isinstance(error, TooManyToolCalls) and ran == []
    assert error.message == (
        "the model asked for 3 tool calls in one answer; agent 'counter' allows 2 "
        "(max_tool_calls_per_turn); none of them ran"
    )
    assert error.hint == (
        "If the task really needs that many calls in one turn, raise "
        "Agent(max_tool_calls_per_turn=...); otherwise check the prompt and the model "
        "(lovia show RUN_ID shows the answer)."
    )
    assert (error.calls, error.limit) == (3, 2)


async def test_an_answer_with_exactly_the_allowed_calls_runs_them_all() -> None:
    calls = [call("add", a=i, b=1, id=f"c{i}") for i in range(2)]
    agent = Agent(
        name="a", model=ScriptedModel([calls, "done"]), tools=[add], max_tool_calls_per_turn=2
    )
    result = await Runner.run(agent, "go")
    assert result.output == "done" and result.usage.tool_calls == 2


# -- calls answered without running


async def test_a_call_to_an_unknown_tool_is_refused_with_the_names_of_the_tools() -> None:
    model = ScriptedModel([[call("nope", id="u"), call("add", a=1, b=2, id="k")], "done"])
    stream = await _run(Agent(name="a", model=model, tools=[mul, add]))
    done = _completed(stream)
    u = done["u"]
    assert u.result.content == "Unknown tool 'nope'. Available tools: add, mul."
    assert (u.is_error, u.result.is_error, u.error_type) == (True, True, "refused")
    assert (u.started, u.known, u.recovered, u.duration_s) == (False, False, False, 0.0)
    k = done["k"]
    assert (k.result.content, k.is_error, k.error_type, k.started, k.known) == (
        "3",
        False,
        None,
        True,
        True,
    )
    result = stream[-1]
    assert isinstance(result, events.RunCompleted) and result.usage.tool_calls == 1
    assert [e.call.call_id for e in stream if isinstance(e, events.ToolCallStarted)] == ["k"]


async def test_an_agent_with_no_tools_says_so_when_a_tool_is_called() -> None:
    stream = await _run(Agent(name="a", model=ScriptedModel([call("nope", id="u"), "done"])))
    assert _completed(stream)["u"].result.content == "Unknown tool 'nope'. Available tools: (none)."


async def test_a_call_with_invalid_arguments_is_refused_with_the_validation_error() -> None:
    ran: list[int] = []

    @tool
    def double(n: int) -> int:
        """Double a number."""
        ran.append(n)
        return 2 * n

    with pytest.raises(ToolArgumentsError) as expected:
        double.validate('{"n": "many"}')
    model = ScriptedModel([call("double", {"n": "many"}, id="v"), "done"])
    stream = await _run(Agent(name="a", model=model, tools=[double]))
    v = _completed(stream)["v"]
    assert (v.result.content, v.error_type, v.started, v.known) == (
        str(expected.value),
        "refused",
        False,
        True,
    )
    assert ran == []


async def test_only_the_first_handoff_of_an_answer_is_taken() -> None:
    b = Agent(name="b", model=ScriptedModel(["from b"]))
    c = Agent(name="c", model=ScriptedModel([]))
    model = ScriptedModel([[call("transfer_to_b", id="h1"), call("transfer_to_c", id="h2")]])
    stream = await _run(Agent(name="a", model=model, handoffs=[b, c]))
    done = _completed(stream)
    assert (done["h1"].result.content, done["h1"].is_error, done["h1"].known) == (
        "Transferred to b.",
        False,
        True,
    )
    assert done["h2"].result.content == (
        "Only one handoff per turn; the conversation is already being transferred to b."
    )
    assert (done["h2"].error_type, done["h2"].started) == ("refused", False)
    assert [
        (e.from_agent, e.to_agent) for e in stream if isinstance(e, events.HandoffOccurred)
    ] == [("a", "b")]
    assert isinstance(stream[-1], events.RunCompleted) and stream[-1].output == "from b"


# -- approvals


def _refund(log: list[str], needs: Any = True) -> Any:
    @tool(requires_approval=needs)
    def refund(amount: int) -> str:
        """Refund money."""
        log.append(f"refund {amount}")
        return f"refunded {amount}"

    return refund


@pytest.mark.parametrize(
    ("verdict", "ran", "content", "decision", "reason"),
    [
        (True, True, "refunded 5", "approved", None),
        ("approve", True, "refunded 5", "approved", None),
        (False, False, "The call was denied: denied by the approver.", "denied", None),
        (None, False, "The call was denied: denied by the approver.", "denied", None),
        ("deny", False, "The call was denied: denied by the approver.", "denied", None),
        ("too much", False, "The call was denied: too much", "denied", "too much"),
    ],
)
async def test_a_decision_given_with_the_run_approves_or_denies_the_call(
    verdict: Any, ran: bool, content: str, decision: str, reason: str | None
) -> None:
    log: list[str] = []
    db = MemoryStore()
    model = ScriptedModel([call("refund", amount=5, id="c1"), "done"])
    agent = Agent(name="a", model=model, tools=[_refund(log)])
    stream = await _run(
        agent, checkpointer=db, run_id="r", approvals={"c1": verdict}, approved_by="cli:bob"
    )
    assert log == (["refund 5"] if ran else [])
    c1 = _completed(stream)["c1"]
    assert (c1.result.content, c1.is_error, c1.started) == (content, not ran, ran)
    assert c1.error_type == (None if ran else "refused")
    decided = [e for e in stream if isinstance(e, events.ApprovalDecided)]
    assert [(e.call_id, e.tool, e.decision, e.actor, e.reason) for e in decided] == [
        ("c1", "refund", decision, "cli:bob", reason)
    ]
    snap = await db.load("r")
    assert snap is not None
    stored = [r.data for r in snap.records if r.kind == "approval"]
    assert [(d["call_id"], d["decision"], d["actor"], d.get("reason")) for d in stored] == [
        ("c1", decision, "cli:bob", reason)
    ]


async def test_a_decision_given_without_a_name_is_recorded_as_the_apis() -> None:
    log: list[str] = []
    model = ScriptedModel([call("refund", amount=5, id="c1"), "done"])
    stream = await _run(Agent(name="a", model=model, tools=[_refund(log)]), approvals={"c1": True})
    assert [e.actor for e in stream if isinstance(e, events.ApprovalDecided)] == ["api"]
    assert log == ["refund 5"]


class Reviewer:
    """An approval policy object (named by its class when it has no qualified name)."""

    def __call__(self, ctx: Any, c: ToolCallEntry) -> str:
        return "not on a weekend"


async def test_a_policy_decides_in_process_and_is_named_in_the_record() -> None:
    log: list[str] = []

    async def finance(ctx: Any, c: ToolCallEntry) -> bool:
        return c.call_id == "ok"

    model = ScriptedModel(
        [[call("refund", amount=1, id="ok"), call("refund", amount=2, id="no")], "done"]
    )
    stream = await _run(Agent(name="a", model=model, tools=[_refund(log)], approval=finance))
    assert log == ["refund 1"]
    assert [
        (e.call_id, e.decision, e.actor) for e in stream if isinstance(e, events.ApprovalDecided)
    ] == [
        ("ok", "approved", f"policy:{finance.__qualname__}"),
        ("no", "denied", f"policy:{finance.__qualname__}"),
    ]
    stream = await _run(
        Agent(name="a", model=ScriptedModel([call("refund", amount=3, id="x"), "done"]),
              tools=[_refund(log)]),
        approval=Reviewer(),
    )  # fmt: skip
    decided = [e for e in stream if isinstance(e, events.ApprovalDecided)]
    assert [(e.decision, e.actor, e.reason) for e in decided] == [
        ("denied", f"policy:{Reviewer.__qualname__}", "not on a weekend")
    ]
    assert _completed(stream)["x"].result.content == "The call was denied: not on a weekend"


async def test_a_tool_can_decide_per_call_whether_it_needs_approval() -> None:
    log: list[str] = []

    def big(ctx: Any, c: ToolCallEntry) -> bool:
        return '"amount": 500' in c.arguments

    async def big_async(ctx: Any, c: ToolCallEntry) -> bool:
        return big(ctx, c)

    for needs in (big, big_async):
        log.clear()
        model = ScriptedModel(
            [[call("refund", amount=5, id="s"), call("refund", amount=500, id="b")]]
        )
        stream = await _run(Agent(name="a", model=model, tools=[_refund(log, needs)]))
        error = _failure(stream)
        assert isinstance(error, ApprovalPending)
        assert [c.call_id for c in error.pending] == ["b"]
        assert log == []  # nothing runs while a call of the answer waits for a human


async def test_a_pause_names_every_call_that_waits_for_approval() -> None:
    log: list[str] = []
    model = ScriptedModel(
        [[call("refund", amount=1, id="c1"), call("add", a=1, b=1, id="c2"),
          call("refund", amount=2, id="c3")]]
    )  # fmt: skip
    stream = await _run(Agent(name="a", model=model, tools=[_refund(log), add]))
    error = _failure(stream)
    assert isinstance(error, ApprovalPending)
    assert error.message == "2 tool call(s) wait for approval: refund (c1), refund (c3)"
    assert error.hint == (
        "Resume with Runner.run(agent, None, run_id=..., approvals={call_id: True "
        "or False or 'reason to deny'}), or pass an approval policy."
    )
    assert [c.call_id for c in error.pending] == ["c1", "c3"]
    assert not any(isinstance(e, events.ToolCallStarted) for e in stream)


# -- running calls


async def test_concurrency_safe_calls_of_one_answer_run_together() -> None:
    both = asyncio.Barrier(2)

    @tool(concurrency_safe=True)
    async def meet(who: str) -> str:
        """Wait for the other caller."""
        async with asyncio.timeout(5):
            await both.wait()
        return who

    model = ScriptedModel([[call("meet", who="x", id="x"), call("meet", who="y", id="y")], "done"])
    result = await Runner.run(Agent(name="a", model=model, tools=[meet]), "go")
    assert result.output == "done"


async def test_calls_that_are_not_concurrency_safe_run_one_at_a_time_in_order() -> None:
    live: list[str] = []
    seen: list[tuple[str, int]] = []

    @tool
    async def step(n: str) -> str:
        """One step."""
        live.append(n)
        seen.append((n, len(live)))
        await asyncio.sleep(0.01)
        live.remove(n)
        return n

    model = ScriptedModel([[call("step", n=s, id=s) for s in "abc"], "done"])
    await Runner.run(Agent(name="a", model=model, tools=[step]), "go")
    assert seen == [("a", 1), ("b", 1), ("c", 1)]


async def test_max_parallel_tools_bounds_how_many_safe_calls_run_at_once() -> None:
    live: list[str] = []
    most = 0

    @tool(concurrency_safe=True)
    async def fetch(n: str) -> str:
        """Fetch something."""
        nonlocal most
        live.append(n)
        most = max(most, len(live))
        await asyncio.sleep(0.01)
        live.remove(n)
        return n

    model = ScriptedModel([[call("fetch", n=s, id=s) for s in "abcde"], "done"])
    agent = Agent(name="a", model=model, tools=[fetch], max_parallel_tools=2)
    stream = await _run(agent)
    assert most == 2
    assert sorted(_completed(stream)) == list("abcde")


async def test_a_started_call_carries_its_idempotency_key_and_description() -> None:
    model = ScriptedModel([call("add", a=1, b=2, id="c1"), "done"])
    stream = await _run(Agent(name="a", model=model, tools=[add]), run_id="r")
    started = [e for e in stream if isinstance(e, events.ToolCallStarted)]
    assert [(e.call.call_id, e.idempotency_key, e.description) for e in started] == [
        ("c1", "r:c1", "Add two numbers.")
    ]


async def test_a_completed_call_reports_how_long_it_ran() -> None:
    @tool
    async def slow() -> str:
        """Take a while."""
        await asyncio.sleep(0.05)
        return "slept"

    stream = await _run(Agent(name="a", model=ScriptedModel([call("slow", id="s"), "done"]),
                              tools=[slow]))  # fmt: skip
    assert 0.05 <= _completed(stream)["s"].duration_s < 5.0


# -- what a failing tool gives the model


async def test_a_tool_error_gives_the_model_its_message() -> None:
    @tool
    def picky() -> str:
        """Refuse politely."""
        raise ToolError("try another day")

    stream = await _run(Agent(name="a", model=ScriptedModel([call("picky", id="p"), "done"]),
                              tools=[picky]))  # fmt: skip
    p = _completed(stream)["p"]
    assert (p.result.content, p.is_error, p.error_type, p.started) == (
        "try another day",
        True,
        "ToolError",
        True,
    )


async def test_a_tool_that_times_out_says_after_how_long() -> None:
    @tool(timeout=0.05)
    async def hang() -> str:
        """Never answer."""
        await asyncio.sleep(30)
        return "never"

    stream = await _run(Agent(name="a", model=ScriptedModel([call("hang", id="h"), "done"]),
                              tools=[hang]))  # fmt: skip
    h = _completed(stream)["h"]
    assert (h.result.content, h.error_type) == (
        "Tool 'hang' timed out after 0.05 s.",
        "TimeoutError",
    )


async def test_a_failing_tool_is_retried_then_reports_the_exception() -> None:
    tries: list[int] = []

    @tool(retries=2)
    def flaky() -> str:
        """Fail twice, then work."""
        tries.append(1)
        if len(tries) < 3:
            raise ValueError("not yet")
        return "worked"

    @tool(retries=1)
    def broken() -> str:
        """Always fail, quoting a secret."""
        tries.append(2)
        raise KeyError("sk-ant-api03-" + "x" * 40)

    model = ScriptedModel([[call("flaky", id="f"), call("broken", id="b")], "done"])
    stream = await _run(Agent(name="a", model=model, tools=[flaky, broken]))
    done = _completed(stream)
    assert (done["f"].result.content, done["f"].is_error) == ("worked", False)
    assert tries == [1, 1, 1, 2, 2]
    b = done["b"]
    assert b.error_type == "KeyError" and b.is_error
    assert b.result.content.startswith("Tool 'broken' failed: KeyError: ")
    assert "x" * 40 not in b.result.content  # the key it quoted is masked


async def test_a_result_that_cannot_be_sent_is_an_error_and_not_retried() -> None:
    tries: list[int] = []

    @tool(retries=3)
    def opaque() -> Any:
        """Return something that is not text."""
        tries.append(1)
        return object()

    stream = await _run(Agent(name="a", model=ScriptedModel([call("opaque", id="o"), "done"]),
                              tools=[opaque]))  # fmt: skip
    o = _completed(stream)["o"]
    assert tries == [1]
    assert o.error_type == "ResultNotSerializable" and o.is_error
    assert o.result.content.startswith("Tool 'opaque' ")


# -- the ledger


async def test_every_started_call_is_in_the_ledger_before_it_runs_and_after_it_ends() -> None:
    db = MemoryStore()
    seen: list[list[tuple[str, str]]] = []

    @tool
    async def probe(n: int) -> int:
        """Look at the ledger."""
        snap = await db.load("r")
        assert snap is not None
        seen.append([(r.data["call_id"], r.data["status"]) for r in snap.records
                     if r.kind == "ledger"])  # fmt: skip
        if n == 2:
            raise ValueError("no")
        return n

    model = ScriptedModel([[call("probe", n=1, id="a"), call("probe", n=2, id="b")], "done"])
    await Runner.run(Agent(name="a", model=model, tools=[probe]), "go", run_id="r",
                     checkpointer=db)  # fmt: skip
    assert seen == [[("a", "started")], [("a", "started"), ("a", "completed"), ("b", "started")]]
    snap = await db.load("r")
    assert snap is not None
    assert [(r.data["call_id"], r.data["status"], r.data["key"]) for r in snap.records
            if r.kind == "ledger"] == [
        ("a", "started", "r:a"), ("a", "completed", "r:a"),
        ("b", "started", "r:b"), ("b", "failed", "r:b"),
    ]  # fmt: skip


# -- the run ends while sync tools run in their threads (a thread cannot be stopped)


def _ledger(snap: Any) -> dict[str, str]:
    return {r.data["call_id"]: r.data["status"] for r in snap.records if r.kind == "ledger"}


def _results(snap: Any) -> dict[str, tuple[str, bool]]:
    return {e.call_id: (e.content, e.is_error) for e in snap.entries() if e.type == "tool_result"}


async def test_cancel_while_parallel_sync_tools_run_records_every_outcome() -> None:
    token = CancelToken()
    db = MemoryStore()

    @tool(concurrency_safe=True)
    def ship(order: str) -> str:
        """Ship an order (slow; cancelled while it runs)."""
        if order == "A":
            token.cancel()
        time.sleep(0.2)
        return f"shipped {order}"

    model = ScriptedModel([[call("ship", order="A", id="a"), call("ship", order="B", id="b")]])
    agent = Agent(name="a", model=model, tools=[ship])
    with pytest.raises(RunCancelled):
        await Runner.run(agent, "go", run_id="r", checkpointer=db, cancel_token=token)
    snap = await db.load("r")
    assert snap is not None and snap.info.status == "cancelled"
    assert _ledger(snap) == {"a": "completed", "b": "completed"}
    assert _results(snap) == {"a": ("shipped A", False), "b": ("shipped B", False)}


async def test_a_sync_tool_failing_after_a_cancel_is_recorded_as_failed() -> None:
    token = CancelToken()
    db = MemoryStore()
    secret = "sk-ant-api03-" + "k" * 40

    @tool
    def charge() -> str:
        """Charge a card (cancelled while it runs, then fails)."""
        token.cancel()
        time.sleep(0.1)
        raise ValueError(f"declined for {secret}")

    agent = Agent(name="a", model=ScriptedModel([call("charge", id="c")]), tools=[charge])
    handle = Runner.stream(agent, "go", run_id="r", checkpointer=db, cancel_token=token)
    stream = [e async for e in handle]
    assert isinstance(_failure(stream), RunCancelled)
    c = _completed(stream)["c"]
    assert (c.is_error, c.error_type) == (True, "ValueError")
    assert c.result.content.startswith("Tool 'charge' failed: ValueError: declined for ")
    assert secret not in c.result.content  # the key it quoted is masked
    snap = await db.load("r")
    assert snap is not None
    assert _ledger(snap) == {"c": "failed"}
    assert _results(snap) == {"c": (c.result.content, True)}


async def test_a_sync_tool_still_running_when_the_wait_ends_leaves_its_outcome_unknown(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("lovia._loop.tool_calls.SETTLE_S", 0.05)
    token = CancelToken()
    db = MemoryStore()

    @tool
    def charge() -> str:
        """Charge a card (slower than the end waits for)."""
        token.cancel()
        time.sleep(0.5)
        return "charged"

    agent = Agent(name="a", model=ScriptedModel([call("charge", id="c")]), tools=[charge])
    with caplog.at_level(logging.WARNING, logger="lovia.tools"), pytest.raises(RunCancelled):
        await Runner.run(agent, "go", run_id="r", checkpointer=db, cancel_token=token)
    snap = await db.load("r")
    assert snap is not None
    assert _ledger(snap) == {"c": "started"} and _results(snap) == {}
    assert [r.getMessage() for r in caplog.records if r.name == "lovia.tools"] == [
        "run r ended while tool charge was still running after 0 s; its outcome is unknown"
    ]
    await asyncio.sleep(0.5)  # the thread ends before the test does


# -- a nested stream


async def test_a_nested_stream_shows_the_child_runs_events_before_the_tool_result() -> None:
    child = Agent(name="kid", model=ScriptedModel(["kid says"]))
    parent = Agent(
        name="p",
        model=ScriptedModel([call("kid", input="hi", id="c1"), "ok"]),
        tools=[child.as_tool()],
    )
    stream = [e async for e in Runner.stream(parent, "go", nested=True)]
    kinds = [
        f"child:{type(e.event).__name__}"
        if isinstance(e, events.ChildRunEvent)
        else type(e).__name__
        for e in stream
    ]
    start = kinds.index("ToolCallStarted")
    end = kinds.index("ToolCallCompleted")
    inside = kinds[start + 1 : end]
    assert inside and all(k.startswith("child:") for k in inside)
    assert inside[0] == "child:RunStarted" and inside[-1] == "child:RunCompleted"
    assert not any(k.startswith("child:") for k in kinds[:start] + kinds[end:])
    assert _completed(stream)["c1"].result.content == "kid says"


# -- a resumed turn


async def _crashed_with(records_kept: Any, steps: list[Any], tools: list[Any]) -> MemoryStore:
    """A store holding run "r" as a worker killed mid-tool leaves it: the records that
    ``records_kept`` keeps of a run that made the calls of ``steps``."""
    db = MemoryStore()
    agent = Agent(name="a", model=ScriptedModel([*steps, ProviderServerError("x", status=500)]),
                  tools=tools)  # fmt: skip
    with pytest.raises(ProviderServerError):
        await Runner.run(agent, "go", run_id="r", checkpointer=db)
    snap = await db.load("r")
    assert snap is not None
    crashed = MemoryStore()
    snap.info.status = "running"
    await crashed.begin(snap.info)
    await crashed.append("r", [r for r in snap.records if records_kept(r)])
    return crashed


def _no_result_of(*call_ids: str) -> Any:
    def keep(record: Any) -> bool:
        if record.kind == "entries":
            return not any(
                e["type"] == "tool_result" and e["call_id"] in call_ids
                for e in record.data["entries"]
            )
        if record.kind == "ledger":
            return record.data["call_id"] not in call_ids or record.data["status"] == "started"
        return True

    return keep


async def test_a_resumed_turn_answers_a_call_of_unknown_outcome_without_running_it() -> None:
    ran: list[str] = []

    @tool
    def charge(n: int) -> str:
        """Charge a card (not idempotent)."""
        ran.append(f"charge {n}")
        return f"charged {n}"

    @tool(idempotent=True)
    def look(n: int) -> str:
        """Look something up (idempotent)."""
        ran.append(f"look {n}")
        return f"looked {n}"

    @tool
    def fail() -> str:
        """Always fail."""
        ran.append("fail")
        raise ValueError("no")

    steps = [[call("look", n=0, id="done"), call("fail", id="bad"), call("charge", n=1, id="k"),
              call("look", n=2, id="i")]]  # fmt: skip
    db = await _crashed_with(_no_result_of("k", "i"), steps, [charge, look, fail])
    ran.clear()
    handle = Runner.stream(
        Agent(name="a", model=ScriptedModel(["ok"]), tools=[charge, look, fail]),
        None,
        run_id="r",
        checkpointer=db,
    )
    stream = [e async for e in handle]
    assert isinstance(stream[-1], events.RunCompleted) and stream[-1].output == "ok"
    assert ran == ["look 2"]  # completed and failed calls are not redone; "k" is unknown
    done = _completed(stream)
    assert sorted(done) == ["i", "k"]
    k = done["k"]
    assert k.result.content == (
        "The outcome of this tool call is unknown: the run crashed while it was running, and "
        "the tool is not marked idempotent, so it was not run again. Check its effects "
        "before retrying."
    )
    assert (k.is_error, k.error_type, k.started, k.known, k.recovered) == (
        True,
        "refused",
        False,
        True,
        True,
    )
    assert (done["i"].result.content, done["i"].recovered, done["i"].started) == (
        "looked 2",
        False,
        True,
    )
    snap = await db.load("r")
    assert snap is not None
    # the unknown outcome stays unknown in the ledger: only the model got an answer
    assert _ledger(snap) == {"done": "completed", "bad": "failed", "k": "started", "i": "completed"}
