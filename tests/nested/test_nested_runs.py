"""Agents as tools: a manager runs two specialists as parallel child runs.

Usage and cost add up exactly across events, RunResult, spans, metrics and the store;
the trace is one tree; the parent's budget stops a child; a child's failure is an error
result; cancelling the parent cancels the child; child events show only when asked.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from nested_support import PRICED, otel_options
from pydantic import BaseModel
from telemetry_helpers import Otel, span_tree

from lovia import (
    Agent,
    AgentHooks,
    BudgetExceeded,
    RunBudget,
    RunCancelled,
    Runner,
    Usage,
    events,
    tool,
)
from lovia._loop.state import CHILD_EVENT_BUFFER
from lovia.agent_tool import child_run_id
from lovia.errors import ProviderServerError, UserError
from lovia.stores.memory import MemoryStore
from lovia.testing import ScriptedModel, call, capture_events, reply


def u(inp: int, out: int) -> Usage:
    return Usage(input_tokens=inp, output_tokens=out)


def specialist(name: str, answer: str, usage: Usage, **options: Any) -> Agent[Any, Any]:
    return Agent(
        name=name,
        description=f"The {name} specialist.",
        model=ScriptedModel([reply(answer, usage=usage)], model=PRICED),
        **options,
    )


def manager(*tools: Any, steps: list[Any] | None = None) -> Agent[Any, Any]:
    steps = steps or [
        reply(
            tool_calls=[
                call("research", input="moths", id="c1"),
                call("write", input="x", id="c2"),
            ],
            usage=u(5, 1),
        ),
        reply("report done", usage=u(7, 2)),
    ]
    return Agent(name="manager", model=ScriptedModel(steps, model=PRICED), tools=list(tools))


def team() -> Agent[Any, Any]:
    research = specialist("research", "moths like lamps", u(11, 3))
    write = specialist("write", "a fine text", u(13, 4))
    return manager(research.as_tool(concurrency_safe=True), write.as_tool(concurrency_safe=True))


def summed(usages: list[Usage]) -> Usage:
    total = Usage()
    for item in usages:
        total.add(item)
    return total


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_parallel_children_usage_adds_up_everywhere(otel: Otel) -> None:
    db = MemoryStore()
    stream = Runner.stream(
        team(), "write about moths", checkpointer=db, nested=True, **otel_options(otel)
    )
    seen = [e async for e in stream]
    result = await stream.result()

    assert result.output == "report done"
    own, c1, c2 = u(12, 3), u(11, 3), u(13, 4)
    for usage, requests, tools in ((own, 2, 2), (c1, 1, 0), (c2, 1, 0)):
        usage.cost_usd = usage.input_tokens + 2.0 * usage.output_tokens
        usage.requests, usage.tool_calls = requests, tools
    total = summed([own, c1, c2])
    assert result.own_usage == own
    assert result.child_usage == {"c1": c1, "c2": c2}
    assert result.usage == total

    # events: every model call's usage, the parent's and (wrapped) the children's
    calls = [e.usage for e in seen if isinstance(e, events.MessageCompleted)]
    wrapped = [e for e in seen if isinstance(e, events.ChildRunEvent)]
    calls += [w.event.usage for w in wrapped if isinstance(w.event, events.MessageCompleted)]
    assert len(calls) == 4
    assert summed(calls).cost_usd == total.cost_usd == 12 + 6 + 11 + 6 + 13 + 8
    assert summed(calls).total_tokens == total.total_tokens
    done = [e for e in seen if isinstance(e, events.RunCompleted)]
    assert [d.usage for d in done] == [total]
    child_done = {w.call_id: w.event for w in wrapped if isinstance(w.event, events.RunCompleted)}
    assert {k: e.usage for k, e in child_done.items()} == {"c1": c1, "c2": c2}
    assert {w.child_run_id for w in wrapped} == {
        child_run_id(result.run_id, "c1"),
        child_run_id(result.run_id, "c2"),
    }

    # spans: the chat spans of the whole tree add up to the root run span's totals
    spans = otel.spans()
    chats = [s for s in spans if s.name.startswith("chat")]
    assert sum(int((s.attributes or {})["gen_ai.usage.input_tokens"]) for s in chats) == 36
    assert sum(float((s.attributes or {})["lovia.cost.usd"]) for s in chats) == total.cost_usd
    runs = {(s.attributes or {})["lovia.run.id"]: s for s in spans if s.name.startswith("invoke")}
    root = runs[result.run_id].attributes or {}
    assert root["lovia.run.usage.cost_usd"] == total.cost_usd
    assert root["lovia.run.usage.input_tokens"] == total.input_tokens
    kid = runs[child_run_id(result.run_id, "c2")].attributes or {}
    assert (kid["lovia.run.parent_id"], kid["lovia.run.parent_call_id"]) == (result.run_id, "c2")

    # metrics: cost counted once per model call; child runs carry the nested label
    metrics = otel.metrics()
    cost = sum(p.value for p in metrics["lovia.cost"].data.data_points)
    assert cost == total.cost_usd
    counted = {False: 0, True: 0}
    for point in metrics["lovia.runs"].data.data_points:
        counted[bool(dict(point.attributes).get("lovia.run.nested"))] += point.value
    assert counted == {False: 1, True: 2}

    # store: the parent's row has the total; the children are linked to their calls
    parent = await db.load(result.run_id)
    assert parent is not None and parent.info.cost_usd == total.cost_usd
    kids = await db.list_runs(parent_run_id=result.run_id)
    assert sorted((k.parent_call_id, k.agent, k.cost_usd) for k in kids) == [
        ("c1", "research", c1.cost_usd),
        ("c2", "write", c2.cost_usd),
    ]
    assert [r.run_id for r in await db.list_runs(top_level=True)] == [result.run_id]
    stored = await Runner.run(team(), "write about moths", checkpointer=db, run_id=result.run_id)
    assert stored.replayed and stored.usage == total and stored.child_usage == result.child_usage


def _names(tree: list[dict[str, Any]]) -> list[Any]:
    return [
        (n["name"], _names(n.get("children", []))) if "children" in n else n["name"] for n in tree
    ]


async def test_the_trace_is_one_tree(otel: Otel) -> None:
    result = await Runner.run(team(), "go", **otel_options(otel))
    assert result.output == "report done"
    assert len({s.context.trace_id for s in otel.spans()}) == 1
    child = lambda name: (  # noqa: E731
        f"invoke_agent {name}",
        [("lovia.turn", ["lovia.view", f"chat {PRICED}"])],
    )
    assert _names(span_tree(otel.spans())) == [
        (
            "invoke_agent manager",
            [
                (
                    "lovia.turn",
                    [
                        "lovia.view",
                        f"chat {PRICED}",
                        ("execute_tool research", [child("research")]),
                        ("execute_tool write", [child("write")]),
                    ],
                ),
                ("lovia.turn", ["lovia.view", f"chat {PRICED}"]),
            ],
        )
    ]


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_a_child_cannot_spend_past_the_parents_remaining_budget() -> None:
    spent: list[str] = []

    @tool
    def dig() -> str:
        """Dig."""
        spent.append("dig")
        return "dug"

    # the parent's first call costs 5+2=7; the child's first call costs 20: over the 25 limit
    digger = Agent(
        name="digger",
        model=ScriptedModel(
            [reply(tool_calls=[call("dig")], usage=u(20, 0)), "never reached"], model=PRICED
        ),
        tools=[dig],
    )
    boss = manager(
        digger.as_tool(),
        steps=[reply(tool_calls=[call("digger", input="dig", id="c1")], usage=u(5, 1)), "no"],
    )
    db = MemoryStore()
    with pytest.raises(BudgetExceeded) as caught:
        await Runner.run(
            boss, "go", budget=RunBudget(max_cost_usd=25), checkpointer=db, run_id="boss"
        )
    error = caught.value
    assert error.limit == "max_cost_usd" and error.budget_run_id == "boss"
    assert error.run_id == "boss"
    assert "digger" in error.message and child_run_id("boss", "c1") in error.message
    assert spent == [], "the child's tool call was refused before it ran"
    kid = await db.load(child_run_id("boss", "c1"))
    assert (
        kid is not None and kid.info.status == "failed" and kid.info.error_type == "BudgetExceeded"
    )


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_a_parent_cost_limit_needs_a_price_for_the_childs_model_too() -> None:
    unpriced = Agent(name="unpriced", model=ScriptedModel(["free?"], model="no-price-known"))
    boss = manager(unpriced.as_tool(), steps=[call("unpriced", input="?", id="c1"), "no"])
    with pytest.raises(UserError, match="no price is known for test:no-price-known"):
        await Runner.run(boss, "go", budget=RunBudget(max_cost_usd=1000))


async def test_the_childs_own_budget_is_an_error_result_for_the_parent() -> None:
    digger = Agent(
        name="digger",
        model=ScriptedModel([reply(tool_calls=[call("nothing")], usage=u(20, 0))], model=PRICED),
    )
    boss = manager(
        digger.as_tool(budget=RunBudget(max_total_tokens=10)),
        steps=[call("digger", input="dig", id="c1"), "the digger ran out"],
    )
    stream = Runner.stream(boss, "go")
    seen = [e async for e in stream]
    result = await stream.result()
    assert result.output == "the digger ran out"
    done = next(e for e in seen if isinstance(e, events.ToolCallCompleted))
    assert done.is_error
    assert "Agent 'digger' failed (BudgetExceeded)" in done.result.content
    assert "Hint: Raise RunBudget(max_total_tokens=...)" in done.result.content
    assert result.child_usage["c1"].input_tokens == 20


async def test_a_failed_child_is_an_error_result_with_its_type_and_hint() -> None:
    broken = Agent(
        name="broken",
        model=ScriptedModel([ProviderServerError("upstream 500", hint="try later")]),
    )
    boss = manager(broken.as_tool(), steps=[call("broken", input="?", id="c1"), "noted"])
    stream = Runner.stream(boss, "go")
    seen = [e async for e in stream]
    assert (await stream.result()).output == "noted"
    done = next(e for e in seen if isinstance(e, events.ToolCallCompleted))
    assert done.is_error
    assert "Agent 'broken' failed (ProviderServerError): upstream 500" in done.result.content
    assert "Hint: try later" in done.result.content


class Brief(BaseModel):
    topic: str
    words: int


class Summary(BaseModel):
    title: str
    points: list[str]


async def test_structured_input_and_output() -> None:
    writer = Agent(
        name="writer",
        model=ScriptedModel(['{"title": "Moths", "points": ["lamps", "night"]}']),
        output_type=Summary,
    )
    t = writer.as_tool("write_brief", input_type=Brief)
    assert set(t.parameters["properties"]) == {"topic", "words"}
    boss = manager(t, steps=[call("write_brief", topic="moths", words=50, id="c1"), "ok"])
    stream = Runner.stream(boss, "go", nested=True)
    seen = [e async for e in stream]
    await stream.result()
    inner = [w.event for w in seen if isinstance(w, events.ChildRunEvent)]
    start = next(e for e in inner if isinstance(e, events.ModelCallStarted))
    assert start.request is not None
    assert start.request.messages[-1].content == '{"topic":"moths","words":50}'
    done = next(e for e in seen if isinstance(e, events.ToolCallCompleted))
    assert Summary.model_validate_json(done.result.content) == Summary(
        title="Moths", points=["lamps", "night"]
    )


async def test_child_events_only_when_asked() -> None:
    stream = Runner.stream(team(), "go")
    seen = [e async for e in stream]
    await stream.result()
    assert not any(isinstance(e, events.ChildRunEvent) for e in seen)
    assert {e.run_id for e in seen} == {seen[0].run_id}


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_cancelling_the_parent_cancels_the_child() -> None:
    slow = Agent(name="slow", model=ScriptedModel([reply("late", delay=30)]))
    boss = manager(slow.as_tool(), steps=[call("slow", input="wait", id="c1"), "never"])
    db = MemoryStore()
    stream = Runner.stream(boss, "go", checkpointer=db, run_id="boss", nested=True)
    async for event in stream:
        inner = event.event if isinstance(event, events.ChildRunEvent) else None
        if isinstance(inner, events.ModelCallStarted):
            stream.cancel("user pressed stop")
    with pytest.raises(RunCancelled):
        await asyncio.wait_for(stream.result(), 10)
    kid = await db.load(child_run_id("boss", "c1"))
    assert kid is not None and kid.info.status == "cancelled"
    assert kid.info.finish_reason == "cancelled"
    parent = await db.load("boss")
    assert parent is not None
    ledger = [r.data for r in parent.records if r.kind == "ledger"]
    assert ledger[-1]["status"] == "started", "no result: resuming the parent resumes the child"


def test_as_tool_refuses_bad_options() -> None:
    agent = Agent(name="a b", model=ScriptedModel([]))
    assert agent.as_tool().name == "a_b"
    with pytest.raises(UserError, match="pydantic model"):
        agent.as_tool(input_type=dict)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="max_turns"):
        agent.as_tool(max_turns=0)
    with pytest.raises(UserError, match="RunBudget"):
        agent.as_tool(budget={"max_cost_usd": 1})  # type: ignore[arg-type]
    with pytest.raises(UserError, match="invalid tool name"):
        agent.as_tool("no spaces")


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_a_sibling_cut_short_by_another_childs_budget_trip_ends_recorded() -> None:
    """Child c1 trips the parent's budget while child c2 is mid-model-call: c2 is not
    left 'running' in the store but ends recorded as cancelled (and can be resumed)."""
    calling = asyncio.Event()
    hooks = AgentHooks()

    @hooks.on(events.ModelCallStarted)
    def mid_call(event: events.ModelCallStarted, ctx: Any) -> None:
        calling.set()

    @tool
    async def wait_for_sibling() -> str:
        """Wait until the sibling child is mid-model-call."""
        await calling.wait()
        return "go on"

    digger = Agent(
        name="digger",
        model=ScriptedModel(
            [
                reply(tool_calls=[call("wait_for_sibling")], usage=u(0, 0)),
                reply(tool_calls=[call("wait_for_sibling")], usage=u(20, 0)),
                "no",
            ],
            model=PRICED,
        ),
        tools=[wait_for_sibling],
    )
    slow = Agent(
        name="slow", model=ScriptedModel([reply("late", delay=30)], model=PRICED), hooks=hooks
    )
    boss = manager(
        digger.as_tool(concurrency_safe=True),
        slow.as_tool(concurrency_safe=True),
        steps=[
            reply(
                tool_calls=[
                    call("digger", input="dig", id="c1"),
                    call("slow", input="wait", id="c2"),
                ],
                usage=u(5, 1),
            ),
            "no",
        ],
    )
    db = MemoryStore()
    with pytest.raises(BudgetExceeded):
        await asyncio.wait_for(
            Runner.run(
                boss, "go", budget=RunBudget(max_cost_usd=25), checkpointer=db, run_id="boss"
            ),
            10,
        )
    sibling = await db.load(child_run_id("boss", "c2"))
    assert sibling is not None and sibling.info.status == "cancelled"
    assert sibling.info.finish_reason == "cancelled"
    assert await db.lease_holder(child_run_id("boss", "c2")) is None


async def test_nested_events_wait_for_a_slow_consumer_and_none_is_dropped() -> None:
    """The nested stream's buffer is bounded: a child whose parent's consumer is not
    reading waits (it does not run ahead filling memory) and every event arrives."""
    text = "x" * 16 * (3 * CHILD_EVENT_BUFFER)  # three buffers' worth of text deltas
    chatty = Agent(name="chatty", model=ScriptedModel([text]))
    boss = manager(chatty.as_tool(), steps=[call("chatty", input="talk", id="c1"), "ok"])
    kid = child_run_id("boss", "c1")
    received: list[events.Event] = []
    with capture_events() as emitted:
        stream = Runner.stream(boss, "go", run_id="boss", nested=True)
        async for event in stream:
            if isinstance(event, events.ChildRunEvent):
                received.append(event.event)
                if len(received) == 1:  # the consumer stalls; the child runs meanwhile
                    for _ in range(5000):
                        await asyncio.sleep(0)
                    ahead = sum(e.run_id == kid for e in emitted) - len(received)
                    assert ahead <= CHILD_EVENT_BUFFER + 1
        await stream.result()
    assert received == [e for e in emitted if e.run_id == kid]
    assert "".join(e.text for e in received if isinstance(e, events.TextDelta)) == text
