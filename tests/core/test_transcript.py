from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lovia.transcript import (
    HandoffEntry,
    InputEntry,
    ReasoningEntry,
    SystemEntry,
    TextEntry,
    ToolCallEntry,
    ToolResultEntry,
    Transcript,
    dump_entries,
    load_entries,
    stamped,
)

text = st.text(max_size=200)
common = {
    "run_id": st.text(max_size=10),
    "turn": st.integers(0, 1000),
    "agent": st.text(max_size=10),
    "ts": st.floats(0, 2e9),
}

entries = st.one_of(
    st.builds(SystemEntry, content=text, **common),
    st.builds(
        InputEntry, content=text, origin=st.sampled_from(["input", "mailbox", "repair"]), **common
    ),
    st.builds(TextEntry, text=text, message_id=text, refusal=st.booleans(), **common),
    st.builds(
        ReasoningEntry,
        text=text,
        signature=st.none() | text,
        encrypted=st.none() | text,
        redacted=st.booleans(),
        provider=st.sampled_from(["openai", "anthropic"]),
        **common,
    ),
    st.builds(ToolCallEntry, call_id=text, name=text, arguments=text, **common),
    st.builds(
        ToolResultEntry, call_id=text, name=text, content=text, is_error=st.booleans(), **common
    ),
    st.builds(HandoffEntry, from_agent=text, to_agent=text, **common),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(entries, max_size=20))
def test_entries_round_trip_losslessly(items: list) -> None:  # type: ignore[type-arg]
    data = dump_entries(items)
    back = load_entries(data)
    assert back == items
    assert dump_entries(back) == data


@settings(max_examples=100, deadline=None)
@given(entries, st.text(max_size=10), st.integers(0, 1000), st.text(max_size=10))
def test_stamped_is_model_copy_with_the_three_fields(
    entry: object, run_id: str, turn: int, agent: str
) -> None:
    want = entry.model_copy(update={"run_id": run_id, "turn": turn, "agent": agent})  # type: ignore[attr-defined]
    got = stamped(entry, run_id, turn, agent)  # type: ignore[type-var]
    assert type(got) is type(want) and got == want
    assert got.__dict__ == want.__dict__ and list(got.__dict__) == list(want.__dict__)
    assert got.model_dump_json() == want.model_dump_json()
    already = (entry.run_id, entry.turn, entry.agent) == (run_id, turn, agent)  # type: ignore[attr-defined]
    assert (got is entry) == already  # a copy only where a field changes


def test_an_entry_built_with_its_stamp_is_not_copied() -> None:
    entry = TextEntry(text="hi", message_id="m", run_id="r1", turn=3, agent="a")
    assert stamped(entry, "r1", 3, "a") is entry
    for run_id, turn, agent in (("r2", 3, "a"), ("r1", 4, "a"), ("r1", 3, "b")):
        copy = stamped(entry, run_id, turn, agent)
        assert copy is not entry and (copy.run_id, copy.turn, copy.agent) == (run_id, turn, agent)
        assert (copy.id, copy.text, copy.ts) == (entry.id, entry.text, entry.ts)


def test_stamped_leaves_the_original_entry_unchanged() -> None:
    entry = TextEntry(text="hi", message_id="m")
    copy = stamped(entry, "r1", 3, "a")
    assert (entry.run_id, entry.turn, entry.agent) == ("", 0, "")
    assert (copy.run_id, copy.turn, copy.agent, copy.id, copy.ts) == (
        "r1",
        3,
        "a",
        entry.id,
        entry.ts,
    )
    assert "run_id" not in entry.model_fields_set


def test_transcript_is_append_only_and_pairs_by_id() -> None:
    t = Transcript()
    call = t.append(ToolCallEntry(call_id="c1", name="f"))
    t.append(ToolResultEntry(call_id="c1", name="f", content="x"))
    assert t.call("c1") is call
    view = t.view()
    assert len(view) == 2 and view[-1].type == "tool_result"
    assert not hasattr(t, "remove") and not hasattr(t, "__setitem__")
    t.append(TextEntry(text="later"))
    assert len(view) == 3  # a live view


def test_usage_minus_gives_what_was_used_since() -> None:
    from lovia import Usage

    before = Usage(input_tokens=10, output_tokens=5, tool_calls=1, cost_usd=0.5)
    after = Usage(input_tokens=25, output_tokens=9, tool_calls=3, cost_usd=0.75, missing=True)
    turn = after.minus(before)
    assert (turn.input_tokens, turn.output_tokens, turn.tool_calls) == (15, 4, 2)
    assert turn.cost_usd == 0.25 and turn.missing  # flags are kept, not subtracted
