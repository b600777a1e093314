"""Promises of the loop's tool phase, through the public API: what a refused, denied,
failed or recovered call gives the model and the events, how approvals are recorded,
and which calls run together."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lovia import (
    Agent,
    ApprovalPending,
    BudgetExceeded,
    RunBudget,
    RunCancelled,
    Runner,
    ToolError,
    events,
    tool,
)
from lovia.context import CancelToken
from lovia.errors import ProviderServerError, TooManyToolCalls
from lovia.plugins import PluginInstance
from lovia.stores import MemoryStore
from lovia.testing import ScriptedModel, call
from lovia.tools import ToolArgumentsError
from lovia.transcript import ToolCallEntry
from lovia.usage import Usage


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


def _counting_fetch() -> tuple[Any, list[int]]:
    """A parallel-safe tool and the most of its calls seen running at once (``most[0]``)."""
    live: list[str] = []
    most = [0]

    @tool(concurrency_safe=True)
    async def fetch(n: str) -> str:
        """Fetch something."""
        live.append(n)
        most[0] = max(most[0], len(live))
        await asyncio.sleep(0.01)
        live.remove(n)
        return n

    return fetch, most


async def test_max_parallel_tools_bounds_how_many_safe_calls_run_at_once() -> None:
    fetch, most = _counting_fetch()
    model = ScriptedModel([[call("fetch", n=s, id=s) for s in "abcde"], "done"])
    agent = Agent(name="a", model=model, tools=[fetch], max_parallel_tools=2)
    stream = await _run(agent)
    assert most == [2]
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


async def test_a_failing_tool_is_retried_then_reports_the_exception(
    caplog: pytest.LogCaptureFixture,
) -> None:
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
    with caplog.at_level(logging.INFO, logger="lovia.tools"):
        stream = await _run(Agent(name="a", model=model, tools=[flaky, broken]))
    assert [r.getMessage() for r in caplog.records if r.name == "lovia.tools"][:2] == [
        "tool flaky failed (not yet); retrying",
        "tool flaky failed (not yet); retrying",
    ]
    done = _completed(stream)
    assert (done["f"].result.content, done["f"].is_error) == ("worked", False)
    assert tries == [1, 1, 1, 2, 2]
    b = done["b"]
    assert b.error_type == "KeyError" and b.is_error
    assert b.result.content.startswith("Tool 'broken' failed: KeyError: ")
    assert "x" * 40 not in b.result.content  # the key it quoted is masked


async def test_a_result_that_cannot_be_sent_is_an_error_and_not_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tries: list[int] = []

    @tool(retries=3)
    def opaque() -> Any:
        """Return something that is not text."""
        tries.append(1)
        return object()

    with caplog.at_level(logging.WARNING, logger="lovia.tools"):
        stream = await _run(Agent(name="a", model=ScriptedModel([call("opaque", id="o"), "done"]),
                                  tools=[opaque]))  # fmt: skip
    o = _completed(stream)["o"]
    assert [r.getMessage() for r in caplog.records if r.name == "lovia.tools"] == [
        "tool opaque " + o.result.content.removeprefix("Tool 'opaque' ")
    ]
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


# -- what each commit of the tool phase makes durable, and under which span a tool runs


class _Kinds(MemoryStore):
    """A memory store that keeps each append's record kinds."""

    def __init__(self) -> None:
        super().__init__()
        self.appends: list[list[str]] = []

    async def append(self, run_id: str, records: Any, *, fence: int | None = None) -> int:
        self.appends.append([r.kind for r in records])
        return await super().append(run_id, records, fence=fence)


async def test_each_tool_phase_commit_is_named_by_what_it_makes_durable() -> None:
    """The first call's start goes out as a ``ledger`` write; a later call's start carries
    the results before it (``tool_result``), and so does the phase's last write."""
    db = _Kinds()

    @tool
    async def one(n: int) -> int:
        """Run alone."""
        return n

    @tool(concurrency_safe=True)
    async def many(n: int) -> int:
        """Run in parallel."""
        await asyncio.sleep(0.05 * n)
        return n

    model = ScriptedModel(
        [
            [call("one", n=1, id="a"), call("one", n=2, id="b"), call("many", n=1, id="c"),
             call("many", n=3, id="d"), call("many", n=5, id="e")],
            "done",
        ]
    )  # fmt: skip
    agent = Agent(name="x", model=model, tools=[one, many], max_parallel_tools=2)
    stream = await _run(agent, run_id="r", checkpointer=db)
    saved = [(e.kind, e.entries) for e in stream if isinstance(e, events.CheckpointSaved)]
    assert saved == [
        ("start", 2),
        ("ledger", 5),  # the answer (its five calls) with a's start
        ("tool_result", 1),  # a's result, b starts
        ("tool_result", 1),  # b's result, c and d start
        ("tool_result", 1),  # c's result, e takes its slot
        ("tool_result", 1),  # d's result while e runs
        ("tool_result", 1),  # e's result, the phase's last write
        ("complete", 1),
    ]
    assert db.appends[1:7] == [
        ["view", "usage", "entries", "state", "ledger"],
        ["entries", "ledger", "ledger"],
        ["entries", "ledger", "ledger", "ledger"],
        ["entries", "ledger", "ledger"],
        ["entries", "ledger"],
        ["entries", "ledger"],
    ]
    assert [e.call.call_id for e in stream if isinstance(e, events.ToolCallCompleted)] == list(
        "abcde"
    )
    done = _completed(stream)
    assert 0.25 <= done["e"].duration_s < 5.0 and 0.15 <= done["d"].duration_s < 5.0


async def test_max_parallel_tools_of_one_runs_safe_calls_one_at_a_time() -> None:
    fetch, most = _counting_fetch()
    model = ScriptedModel([[call("fetch", n=s, id=s) for s in "abc"], "done"])
    await Runner.run(Agent(name="a", model=model, tools=[fetch], max_parallel_tools=1), "go")
    assert most == [1]


def _tracer() -> TracerProvider:
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    return tp


@pytest.mark.parametrize("parallel", [False, True])
async def test_a_tool_runs_under_its_calls_span(
    parallel: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The span the tool sees as current is its call's span (a tool's own spans nest
    under it), the call's events carry that same span, and it is current only while
    the tool runs."""
    inside: dict[str, Any] = {}

    @tool(concurrency_safe=True)
    async def probe(n: str) -> str:
        """Look at the current span."""
        inside[n] = otel_trace.get_current_span()
        return n

    ids = ["a", "b"] if parallel else ["a"]
    model = ScriptedModel([[call("probe", n=i, id=i) for i in ids], "done"])
    with caplog.at_level(logging.ERROR):
        stream = await _run(Agent(name="x", model=model, tools=[probe]), tracer_provider=_tracer())
    done = _completed(stream)
    started = {e.call.call_id: e for e in stream if isinstance(e, events.ToolCallStarted)}
    for i in ids:
        span = done[i].span
        assert span is not None and span is inside[i]
        assert started[i].span is span
        assert span.name == "execute_tool probe"
    assert otel_trace.get_current_span() is otel_trace.INVALID_SPAN
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_an_untraced_tool_sees_no_span() -> None:
    seen: list[Any] = []

    @tool
    def probe() -> str:
        """Look at the current span."""
        seen.append(otel_trace.get_current_span().get_span_context().is_valid)
        return "ok"

    stream = await _run(Agent(name="x", model=ScriptedModel([call("probe", id="p"), "done"]),
                              tools=[probe]))  # fmt: skip
    assert seen == [False] and _completed(stream)["p"].span is None


async def test_an_agent_run_as_a_tool_is_linked_and_its_usage_kept_with_the_result() -> None:
    db = MemoryStore()
    child = Agent(name="kid", model=ScriptedModel(["kid says"]))
    parent = Agent(
        name="p",
        model=ScriptedModel([call("kid", input="hi", id="c9"), "ok"]),
        tools=[child.as_tool()],
    )
    result = await Runner.run(parent, "go", run_id="p1", checkpointer=db)
    kid = next(i for i in await db.list_runs() if i.agent == "kid")
    assert (kid.parent_run_id, kid.parent_call_id) == ("p1", "c9")
    kid_usage = result.child_usage["c9"]
    assert kid_usage.requests == 1 and kid_usage.input_tokens == kid.input_tokens
    snap = await db.load("p1")
    assert snap is not None
    ledger = [r.data for r in snap.records if r.kind == "ledger"]
    assert [(d["status"], "child_usage" in d) for d in ledger] == [
        ("started", False),
        ("completed", True),
    ]
    assert Usage.from_dict(ledger[1]["child_usage"]) == kid_usage


async def test_a_call_answered_without_running_leaves_no_ledger_entry() -> None:
    db = MemoryStore()
    b = Agent(name="b", model=ScriptedModel(["from b"]))
    model = ScriptedModel(
        [[call("nope", id="u"), call("add", {"a": "x", "b": 1}, id="v"),
          call("transfer_to_b", id="h")]]
    )  # fmt: skip
    await Runner.run(
        Agent(name="a", model=model, tools=[add], handoffs=[b]), "go", run_id="r", checkpointer=db
    )
    snap = await db.load("r")
    assert snap is not None
    assert _ledger(snap) == {"h": "completed"}  # the handoff is recorded: it happened
    results = [e for e in snap.entries() if e.type in ("tool_result", "handoff")]
    assert [(e.type, e.call_id, e.turn, e.agent) for e in results] == [
        ("tool_result", "u", 1, "a"),
        ("tool_result", "v", 1, "a"),
        ("tool_result", "h", 1, "a"),
        ("handoff", "h", 1, "a"),
    ]


async def test_cancel_mid_group_records_the_finished_sync_call_not_the_waiting_one() -> None:
    """A cancel stops the async calls of a group (their outcome stays unknown: the ledger
    says started); a sync call's thread that finished is recorded, so a resume does not
    run it again."""
    token = CancelToken()
    db = MemoryStore()
    model = ScriptedModel([[call("wait", id="w"), call("quick", id="q")]])
    agent = Agent(name="a", model=model, tools=_cancel_mid_group(token))
    with pytest.raises(RunCancelled):
        await Runner.run(agent, "go", run_id="r", checkpointer=db, cancel_token=token)
    snap = await db.load("r")
    assert snap is not None and snap.info.status == "cancelled"
    assert _ledger(snap) == {"w": "started", "q": "completed"}
    assert _results(snap) == {"q": ("quick done", False)}


# -- a budget reached at a call's pre-check


@pytest.mark.lovia_unconsumed
async def test_a_budget_reached_mid_answer_runs_the_calls_before_it_and_keeps_their_results() -> (
    None
):
    ran: list[int] = []

    @tool
    def note(n: int) -> str:
        """Note a number."""
        ran.append(n)
        return f"noted {n}"

    db = MemoryStore()
    model = ScriptedModel([[call("note", n=1, id="a"), call("note", n=2, id="b")], "never"])
    stream = await _run(
        Agent(name="x", model=model, tools=[note]),
        run_id="r",
        checkpointer=db,
        budget=RunBudget(max_tool_calls=1),
    )
    error = _failure(stream)
    assert isinstance(error, BudgetExceeded) and ran == [1]
    assert (error.limit, error.used) == ("max_tool_calls", 1.0)  # the calls that ran
    saved = [(e.kind, e.entries) for e in stream if isinstance(e, events.CheckpointSaved)]
    assert saved == [("start", 2), ("ledger", 2), ("tool_result", 1)]
    snap = await db.load("r")
    assert snap is not None
    assert _results(snap) == {"a": ("noted 1", False)} and _ledger(snap) == {"a": "completed"}


@pytest.mark.lovia_unconsumed
async def test_a_budget_reached_at_an_answers_first_call_keeps_the_answer() -> None:
    ran: list[int] = []

    @tool
    def note(n: int) -> str:
        """Note a number."""
        ran.append(n)
        return f"noted {n}"

    db = MemoryStore()
    model = ScriptedModel([call("note", n=1, id="a"), call("note", n=2, id="b"), "never"])
    stream = await _run(
        Agent(name="x", model=model, tools=[note]),
        run_id="r",
        checkpointer=db,
        budget=RunBudget(max_tool_calls=1),
    )
    assert isinstance(_failure(stream), BudgetExceeded) and ran == [1]
    saved = [(e.kind, e.entries) for e in stream if isinstance(e, events.CheckpointSaved)]
    assert saved[-1] == ("progress", 1)  # the second answer, before the run ends
    snap = await db.load("r")
    assert snap is not None
    assert [e.call_id for e in snap.entries() if e.type == "tool_call"] == ["a", "b"]


# -- approvals see the run


async def test_approval_callables_get_the_runs_context() -> None:
    seen: list[tuple[str, str, str]] = []

    def needs(ctx: Any, c: ToolCallEntry) -> bool:
        seen.append(("needs", ctx.run_id, c.call_id))
        return True

    def policy(ctx: Any, c: ToolCallEntry) -> bool:
        seen.append(("policy", ctx.run_id, c.call_id))
        return True

    log: list[str] = []
    model = ScriptedModel([call("refund", amount=1, id="c1"), "done"])
    agent = Agent(name="a", model=model, tools=[_refund(log, needs)], approval=policy)
    await Runner.run(agent, "go", run_id="r")
    assert seen == [("needs", "r", "c1"), ("policy", "r", "c1")] and log == ["refund 1"]


async def test_a_pause_writes_the_decisions_already_made() -> None:
    """One call is decided with the run, another waits: the pause writes the decision
    (so the resume does not ask again) and runs nothing."""
    log: list[str] = []
    db = MemoryStore()
    model = ScriptedModel([[call("refund", amount=1, id="c1"), call("refund", amount=2, id="c2")]])
    stream = await _run(
        Agent(name="a", model=model, tools=[_refund(log)]),
        run_id="r",
        checkpointer=db,
        approvals={"c1": True},
    )
    error = _failure(stream)
    assert isinstance(error, ApprovalPending) and [c.call_id for c in error.pending] == ["c2"]
    saved = [(e.kind, e.entries) for e in stream if isinstance(e, events.CheckpointSaved)]
    assert saved == [("start", 2), ("progress", 2), ("progress", 0)]
    snap = await db.load("r")
    assert snap is not None and snap.info.status == "paused"
    assert [(r.data["call_id"], r.data["decision"]) for r in snap.records
            if r.kind == "approval"] == [("c1", "approved")]  # fmt: skip
    assert log == []


# -- the ledger is the authority on what ran


async def test_a_call_the_ledger_says_ended_is_not_run_again_even_without_its_result() -> None:
    ran: list[str] = []

    @tool(idempotent=True)
    def look(n: int) -> str:
        """Look something up."""
        ran.append(f"look {n}")
        if n == 2:
            raise ValueError("no")
        return f"looked {n}"

    def torn(record: Any) -> bool:  # the results are lost, the ledger is not
        if record.kind == "entries":
            return not any(e["type"] == "tool_result" for e in record.data["entries"])
        return True

    steps = [[call("look", n=1, id="ok"), call("look", n=2, id="bad"), call("look", n=3, id="o")]]
    db = await _crashed_with(torn, steps, [look])
    snap = await db.load("r")
    assert snap is not None
    # cut the last call back to "started": it is the only one a resume runs
    keep = [r for r in snap.records if not (r.kind == "ledger" and r.data["call_id"] == "o"
                                             and r.data["status"] != "started")]  # fmt: skip
    again = MemoryStore()
    await again.begin(snap.info)
    await again.append("r", keep)
    ran.clear()
    result = await Runner.run(
        Agent(name="a", model=ScriptedModel(["ok"]), tools=[look]), None, run_id="r",
        checkpointer=again,
    )  # fmt: skip
    assert result.output == "ok" and ran == ["look 3"]


class _Closing:
    """A plugin whose close (user code, run before the run's end is written) looks at
    what the store holds."""

    name = "closing"

    def __init__(self, db: MemoryStore, seen: list[dict[str, str]]) -> None:
        self.db, self.seen = db, seen

    async def setup(self, ctx: Any) -> PluginInstance:
        async def aclose() -> None:
            snap = await self.db.load(ctx.run_id)
            assert snap is not None
            self.seen.append(_ledger(snap))

        return PluginInstance(aclose=aclose)


def _cancel_mid_group(token: CancelToken) -> list[Any]:
    @tool(concurrency_safe=True)
    async def wait() -> str:
        """Wait a long time."""
        await asyncio.sleep(30)
        return "waited"

    @tool(concurrency_safe=True)
    def quick() -> str:
        """Cancel the run, then finish."""
        token.cancel()
        time.sleep(0.1)
        return "quick done"

    return [wait, quick]


async def test_settled_results_are_stored_before_the_runs_plugins_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = CancelToken()
    db = MemoryStore()
    seen: list[dict[str, str]] = []
    model = ScriptedModel([[call("wait", id="w"), call("quick", id="q")]])
    agent = Agent(
        name="a", model=model, tools=_cancel_mid_group(token), plugins=[_Closing(db, seen)]
    )
    with caplog.at_level(logging.ERROR), pytest.raises(RunCancelled):
        await Runner.run(agent, "go", run_id="r", checkpointer=db, cancel_token=token)
    assert seen == [{"w": "started", "q": "completed"}]
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_a_failed_write_of_settled_results_is_logged_and_the_run_still_cancelled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = CancelToken()

    class Failing(MemoryStore):
        async def append(self, run_id: str, records: Any, *, fence: int | None = None) -> int:
            if token.cancelled:
                raise OSError("disk gone")
            return await super().append(run_id, records, fence=fence)

    db = Failing()
    model = ScriptedModel([[call("wait", id="w"), call("quick", id="q")]])
    agent = Agent(name="a", model=model, tools=_cancel_mid_group(token))
    with caplog.at_level(logging.ERROR, logger="lovia.tools"), pytest.raises(RunCancelled):
        await Runner.run(agent, "go", run_id="r", checkpointer=db, cancel_token=token)
    assert [r.getMessage() for r in caplog.records if r.name == "lovia.tools"] == [
        "recording the tool results of run r failed: disk gone"
    ]


async def test_cancel_mid_group_without_a_store_ends_the_run_cancelled() -> None:
    token = CancelToken()
    model = ScriptedModel([[call("wait", id="w"), call("quick", id="q")]])
    agent = Agent(name="a", model=model, tools=_cancel_mid_group(token))
    with pytest.raises(RunCancelled):
        await Runner.run(agent, "go", checkpointer=None, store=None, cancel_token=token)


async def test_a_cancel_during_a_sync_tool_that_fails_starts_no_further_call() -> None:
    token = CancelToken()
    db = MemoryStore()
    ran: list[str] = []

    @tool
    def first() -> str:
        """Cancel the run, then fail."""
        token.cancel()
        time.sleep(0.1)
        raise ValueError("no")

    @tool
    def second() -> str:
        """Must not run."""
        ran.append("second")
        return "ran"

    model = ScriptedModel([[call("first", id="a"), call("second", id="b")]])
    handle = Runner.stream(
        Agent(name="x", model=model, tools=[first, second]),
        "go",
        run_id="r",
        checkpointer=db,
        cancel_token=token,
    )
    stream = [e async for e in handle]
    assert isinstance(_failure(stream), RunCancelled) and ran == []
    assert [e.call.call_id for e in stream if isinstance(e, events.ToolCallStarted)] == ["a"]
    snap = await db.load("r")
    assert snap is not None and _ledger(snap) == {"a": "failed"}


async def test_a_nested_stream_shows_the_child_runs_events_while_it_runs() -> None:
    """The parent's consumer sees the child's events live, not once the child ended:
    here the child waits for the consumer to react to one of them."""
    gate = asyncio.Event()

    @tool
    async def wait_for_gate() -> str:
        """Wait until the consumer opens the gate."""
        try:
            async with asyncio.timeout(5):
                await gate.wait()
        except TimeoutError:
            return "never opened"
        return "opened"

    child = Agent(
        name="kid",
        model=ScriptedModel([call("wait_for_gate", id="g"), "kid done"]),
        tools=[wait_for_gate],
    )
    parent = Agent(
        name="p",
        model=ScriptedModel([call("kid", input="hi", id="c1"), "ok"]),
        tools=[child.as_tool()],
    )
    inner: list[Any] = []
    async for e in Runner.stream(parent, "go", nested=True):
        if isinstance(e, events.ChildRunEvent):
            inner.append(e.event)
            if isinstance(e.event, events.ToolCallStarted):
                gate.set()
    kid_done = [e for e in inner if isinstance(e, events.ToolCallCompleted)]
    assert [e.result.content for e in kid_done] == ["opened"]


async def test_a_parallel_group_first_in_an_answer_writes_its_starts_as_a_ledger_write() -> None:
    db = _Kinds()

    @tool(concurrency_safe=True)
    async def many(n: int) -> int:
        """Run in parallel."""
        return n

    model = ScriptedModel([[call("many", n=1, id="a"), call("many", n=2, id="b")], "done"])
    stream = await _run(Agent(name="x", model=model, tools=[many]), run_id="r", checkpointer=db)
    saved = [(e.kind, e.entries) for e in stream if isinstance(e, events.CheckpointSaved)]
    assert saved[:2] == [("start", 2), ("ledger", 2)]
    assert db.appends[1] == ["view", "usage", "entries", "state", "ledger", "ledger"]


async def test_a_cancel_of_async_calls_writes_no_empty_checkpoint() -> None:
    token = CancelToken()
    db = _Kinds()

    @tool(concurrency_safe=True)
    async def wait(n: int) -> str:
        """Cancel the run (the first call), then wait a long time."""
        if n == 1:
            token.cancel()
        await asyncio.sleep(30)
        return "waited"

    model = ScriptedModel([[call("wait", n=1, id="a"), call("wait", n=2, id="b")]])
    with pytest.raises(RunCancelled):
        await Runner.run(Agent(name="x", model=model, tools=[wait]), "go", run_id="r",
                         checkpointer=db, cancel_token=token)  # fmt: skip
    assert [] not in db.appends
    snap = await db.load("r")
    assert snap is not None and _ledger(snap) == {"a": "started", "b": "started"}


async def test_a_nested_stream_runs_plain_tools_too() -> None:
    model = ScriptedModel([call("add", a=2, b=3, id="c1"), "done"])
    stream = [e async for e in Runner.stream(Agent(name="a", model=model, tools=[add]), "go",
                                             nested=True)]  # fmt: skip
    assert _completed(stream)["c1"].result.content == "5"
    assert isinstance(stream[-1], events.RunCompleted) and stream[-1].output == "done"
