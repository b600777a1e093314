"""Mailbox: messages from a tool, a hook, or outside the run are delivered at the next
turn start as user entries (origin recorded); late ones end up in RunResult.undelivered."""

from __future__ import annotations

from typing import Any

import pytest

from lovia import Agent, AgentHooks, InputEntry, Mailbox, RunContext, Runner, events, tool
from lovia.testing import ScriptedModel, call

from .helpers import Scenario, both, stream_mode


def mail(entries: Any) -> list[tuple[str, str, int]]:
    return [
        (e.content, e.origin, e.turn) for e in entries if e.type == "input" and e.origin != "input"
    ]


async def test_put_from_a_tool_is_delivered_next_turn() -> None:
    @tool
    async def remind(ctx: RunContext[Any]) -> str:
        """Queue a reminder."""
        ctx.mailbox.put("remember the deadline")
        return "queued"

    def make() -> Scenario:
        model = ScriptedModel([call("remind"), "noted"])
        return Scenario(Agent(name="a", model=model, tools=[remind]), "start", extra=model)

    a, b = await both(make)
    for out in (a, b):
        assert out.result is not None
        assert mail(out.result.entries) == [("remember the deadline", "mailbox", 2)]
        second = out.scenario.extra.requests[1].messages
        assert (second[-1].type, second[-1].content) == ("input", "remember the deadline")
        assert [m.type for m in second] == ["input", "tool_call", "tool_result", "input"]
        # the first request did not see it
        assert all(
            getattr(m, "origin", "") != "mailbox" for m in out.scenario.extra.requests[0].messages
        )
        assert out.result.undelivered == ()


async def test_put_from_a_hook_keeps_a_custom_origin() -> None:
    def make() -> Scenario:
        hooks = AgentHooks()

        @hooks.on(events.ToolCallCompleted)
        def steer(event: events.ToolCallCompleted, ctx: RunContext[Any]) -> None:
            ctx.mailbox.put(InputEntry(content="use metric units", origin="supervisor"))
            ctx.mailbox.put(InputEntry(content="be brief"))  # origin "input" → "mailbox"

        @tool
        async def measure() -> str:
            """Measure."""
            return "12 inches"

        model = ScriptedModel([call("measure"), "30 cm"])
        return Scenario(Agent(name="a", model=model, tools=[measure], hooks=hooks), "how long?")

    a, b = await both(make)
    for out in (a, b):
        assert out.result is not None
        assert mail(out.result.entries) == [
            ("use metric units", "supervisor", 2),
            ("be brief", "mailbox", 2),
        ]


async def test_put_from_outside_while_iterating() -> None:
    @tool
    async def slow() -> str:
        """Work."""
        return "done"

    model = ScriptedModel([call("slow"), call("slow"), "final"])
    agent = Agent(name="a", model=model, tools=[slow])

    def outside(handle: Any, event: events.Event) -> None:
        if isinstance(event, events.ToolCallStarted) and event.turn == 1:
            handle.mailbox.put("the user says: hurry")
        if isinstance(event, events.MessageCompleted) and event.turn == 3:
            handle.mailbox.put("too late")  # after the final answer

    out = await stream_mode(Scenario(agent, "go"), on_event=outside)
    assert out.result is not None
    assert mail(out.result.entries) == [("the user says: hurry", "mailbox", 2)]
    assert [m.content for m in out.result.undelivered] == ["too late"]
    # delivery happens right after TurnStarted of turn 2, before its model call
    assert model.requests[1].messages[-1].content == "the user says: hurry"
    assert "the user says: hurry" not in [
        getattr(m, "content", "") for m in model.requests[0].messages
    ]


async def test_mailbox_passed_in_and_late_messages_undelivered() -> None:
    def make() -> Scenario:
        box = Mailbox()
        box.put("queued before the run")
        hooks = AgentHooks()

        @hooks.on(events.TurnEnded)
        def late(event: events.TurnEnded, ctx: RunContext[Any]) -> None:
            ctx.mailbox.put("after the answer")

        model = ScriptedModel(["answer"])
        agent = Agent(name="a", model=model, hooks=hooks)
        return Scenario(agent, "hi", {"mailbox": box}, extra=model)

    a, b = await both(make)
    for out in (a, b):
        r = out.result
        assert r is not None
        assert [e.type for e in r.entries] == ["system", "input", "input", "text"]
        assert mail(r.entries) == [("queued before the run", "mailbox", 1)]
        assert [m.content for m in r.undelivered] == ["after the answer"]
        assert all(m.origin == "mailbox" for m in r.undelivered)


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_stream_handle_exposes_the_runs_mailbox() -> None:
    box = Mailbox()
    handle = Runner.stream(Agent(name="a", model=ScriptedModel(["x"])), "hi", mailbox=box)
    assert handle.mailbox is box


async def test_put_from_outside_while_iterating_with_a_nonempty_mailbox() -> None:
    """The same as above, working around the empty-mailbox bug (one message pre-queued)."""

    @tool
    async def slow() -> str:
        """Work."""
        return "done"

    model = ScriptedModel([call("slow"), call("slow"), "final"])
    agent = Agent(name="a", model=model, tools=[slow])
    box = Mailbox()
    box.put("first")

    def outside(handle: Any, event: events.Event) -> None:
        if isinstance(event, events.ToolCallStarted) and event.turn == 1:
            handle.mailbox.put("the user says: hurry")
        if isinstance(event, events.MessageCompleted) and event.turn == 3:
            handle.mailbox.put("too late")

    out = await stream_mode(Scenario(agent, "go", {"mailbox": box}), on_event=outside)
    assert out.result is not None
    assert mail(out.result.entries) == [
        ("first", "mailbox", 1),
        ("the user says: hurry", "mailbox", 2),
    ]
    assert [m.content for m in out.result.undelivered] == ["too late"]
    assert model.requests[1].messages[-1].content == "the user says: hurry"
