"""Handoffs: one transcript across agents, events naming each agent, bounded loops."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lovia import Agent, Handoff, MaxTurnsExceeded, events
from lovia.testing import ScriptedModel, call
from lovia.transcript import HandoffEntry, InputEntry, SystemEntry

from .helpers import Scenario, both


def triage_pair(model: ScriptedModel, **handoff: Any) -> tuple[Agent[Any, Any], Agent[Any, Any]]:
    billing = Agent(
        name="billing",
        instructions="You are billing.",
        model=model,
        description="Invoices and refunds.",
        # billing hands back to triage, defined below: an A→B→A graph via a lazy reference
        handoffs=[lambda: triage],
    )
    triage = Agent(
        name="triage",
        instructions="You are triage.",
        model=model,
        handoffs=[Handoff(agent=billing, **handoff)] if handoff else [billing],
    )
    return triage, billing


def chain() -> Scenario:
    model = ScriptedModel(
        [call("transfer_to_billing"), call("transfer_to_triage"), "Your refund is on its way."]
    )
    triage, _ = triage_pair(model)
    return Scenario(triage, "refund please", extra=model)


async def test_a_b_a_chain_keeps_one_transcript() -> None:
    a, b = await both(chain)
    for out in (a, b):
        r = out.result
        assert r is not None
        assert r.output == "Your refund is on its way."
        assert r.final_agent.name == "triage"
        assert r.turns == 3
        handoffs = [e for e in r.entries if isinstance(e, HandoffEntry)]
        assert [(h.from_agent, h.to_agent) for h in handoffs] == [
            ("triage", "billing"),
            ("billing", "triage"),
        ]
        systems = [e for e in r.entries if isinstance(e, SystemEntry)]
        assert [s.agent for s in systems] == ["triage", "billing", "triage"]
        assert systems[1].content == "You are billing."
        # one transcript: the input appears once and every entry is in order
        assert sum(isinstance(e, InputEntry) for e in r.entries) == 1
        assert [e.type for e in r.entries] == [
            "system",
            "input",
            "tool_call",
            "tool_result",
            "handoff",
            "system",
            "tool_call",
            "tool_result",
            "handoff",
            "system",
            "text",
        ]
        assert [e.agent for e in r.entries if e.type == "tool_call"] == ["triage", "billing"]
        # the target's system prompt is used for its calls
        model = out.scenario.extra
        assert [q.system for q in model.requests] == [
            "You are triage.",
            "You are billing.",
            "You are triage.",
        ]
        # the handoff tool is offered with the target's description
        spec = next(t for t in model.requests[0].tools if t.name == "transfer_to_billing")
        assert "Invoices and refunds." in spec.description
        # the returning agent sees the whole conversation
        assert [m.type for m in model.requests[2].messages][:2] == ["input", "tool_call"]
    occurred = b.of(events.HandoffOccurred)
    assert [(e.from_agent, e.to_agent, e.agent) for e in occurred] == [
        ("triage", "billing", "billing"),
        ("billing", "triage", "triage"),
    ]
    assert [e.agent for e in b.of(events.ModelCallStarted)] == ["triage", "billing", "triage"]
    assert [e.agent for e in b.of(events.TurnStarted)] == ["triage", "billing", "triage"]
    assert b.of(events.RunCompleted)[0].agent == "triage"


async def test_handoff_loops_are_bounded_by_max_turns() -> None:
    def make() -> Scenario:
        model = ScriptedModel([call("transfer_to_billing"), call("transfer_to_triage")] * 2)
        triage, _ = triage_pair(model)
        return Scenario(triage, "ping-pong", {"max_turns": 4}, extra=model)

    a, b = await both(make)
    for out in (a, b):
        assert isinstance(out.error, MaxTurnsExceeded)
        assert out.scenario.extra.unconsumed == 0
    assert len(b.of(events.HandoffOccurred)) == 4
    assert b.of(events.RunFailed)[0].error_type == "MaxTurnsExceeded"


async def test_input_filter_shapes_only_the_targets_view() -> None:
    seen: list[int] = []

    def last_input_only(entries: Sequence[Any]) -> Sequence[Any]:
        seen.append(len(entries))
        return [e for e in entries if isinstance(e, InputEntry)][-1:]

    def make() -> Scenario:
        model = ScriptedModel([call("transfer_to_billing"), "billing here"])
        triage, _ = triage_pair(
            model, description="Send billing questions here.", input_filter=last_input_only
        )
        return Scenario(
            triage, [InputEntry(content="old"), InputEntry(content="refund")], extra=model
        )

    a, b = await both(make)
    for out in (a, b):
        r = out.result
        assert r is not None and r.output == "billing here" and r.final_agent.name == "billing"
        model = out.scenario.extra
        spec = next(t for t in model.requests[0].tools if t.name == "transfer_to_billing")
        assert spec.description == "Send billing questions here."
        # the target sees only what the filter kept…
        assert [m.content for m in model.requests[1].messages] == ["refund"]
        # …while the transcript keeps everything
        assert [e.type for e in r.entries] == [
            "system",
            "input",
            "input",
            "tool_call",
            "tool_result",
            "handoff",
            "system",
            "text",
        ]
        assert len(model.requests[0].messages) == 2
    assert seen and all(n >= 4 for n in seen)


async def test_one_handoff_per_turn() -> None:
    def make() -> Scenario:
        model = ScriptedModel([[call("transfer_to_billing"), call("transfer_to_billing")], "done"])
        triage, _ = triage_pair(model)
        return Scenario(triage, "x", extra=model)

    a, _ = await both(make)
    r = a.result
    assert r is not None and r.final_agent.name == "billing"
    results = [e for e in r.entries if e.type == "tool_result"]
    assert [x.is_error for x in results] == [False, True]  # type: ignore[attr-defined]
    assert sum(isinstance(e, HandoffEntry) for e in r.entries) == 1
