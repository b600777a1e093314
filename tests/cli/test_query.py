"""The data layer shared by the CLI and ``lovia web``: turns, marks, per-turn usage."""

from __future__ import annotations

from lovia.replay import RunData
from lovia.replay._query import turns
from lovia.stores import RunInfo
from lovia.stores.records import StateRecord
from lovia.transcript import HandoffEntry, InputEntry, TextEntry, ToolCallEntry, ToolResultEntry
from lovia.usage import Usage


def run(status: str, *entries: object, states: list[StateRecord] | None = None) -> RunData:
    return RunData(
        info=RunInfo(run_id="r", agent="a", status=status),  # type: ignore[arg-type]
        history=[],
        entries=list(entries),  # type: ignore[arg-type]
        views=[],
        states=states or [],
    )


def test_marks_and_pairing() -> None:
    data = run(
        "paused",
        InputEntry(content="hi", turn=0, agent="a"),
        ToolCallEntry(call_id="c1", name="lookup", turn=1, agent="a"),
        ToolCallEntry(call_id="c2", name="refund", turn=1, agent="a"),
        ToolResultEntry(
            call_id="c1", name="lookup", content="boom", is_error=True, turn=1, agent="a"
        ),
        InputEntry(content="note from ops", origin="mailbox", turn=1, agent="a"),
        HandoffEntry(from_agent="a", to_agent="b", turn=1, agent="a"),
    )
    (t0, t1) = turns(data)
    assert [i.mark for i in t0.items] == [""]
    marks = {i.label: i.mark for i in t1.items}
    assert [i.mark for i in t1.items] == ["error", "approval", "mailbox", "handoff"]
    assert t1.items[0].result is not None and t1.items[0].result.content == "boom"
    assert marks["user[mailbox]"] == "mailbox"
    done = run("failed", ToolCallEntry(call_id="c9", name="x", turn=1, agent="a"))
    assert turns(done)[0].items[0].mark == "error"  # no result and not paused


def test_usage_per_turn_from_running_totals() -> None:
    states = [
        StateRecord(
            turn=1, agent="a", usage=Usage(input_tokens=10, output_tokens=2, cost_usd=0.01)
        ),
        StateRecord(
            turn=1, agent="a", usage=Usage(input_tokens=10, output_tokens=2, cost_usd=0.01)
        ),
        StateRecord(
            turn=2, agent="a", usage=Usage(input_tokens=25, output_tokens=5, cost_usd=0.03)
        ),
    ]
    data = run(
        "completed",
        TextEntry(text="a", turn=1, agent="a"),
        TextEntry(text="b", turn=2, agent="a"),
        states=states,
    )
    first, second = turns(data)
    assert (first.input_tokens, first.output_tokens) == (10, 2)
    assert (second.input_tokens, second.output_tokens) == (15, 3)
    assert second.cost_usd is not None and abs(second.cost_usd - 0.02) < 1e-9
