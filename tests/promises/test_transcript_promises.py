"""The transcript holds valid text whatever arrives, is append-only, and round-trips."""

from __future__ import annotations

import pytest

from lovia import UserError
from lovia.transcript import (
    REPLACEMENT,
    DeltaCleaner,
    InputEntry,
    TextEntry,
    ToolCallEntry,
    ToolResultEntry,
    Transcript,
    clean_text,
    dump_entries,
    entry_from_dict,
    entry_to_dict,
    input_entries,
    load_entries,
    new_id,
    stamped,
)

EMOJI = "\U0001f600"
HIGH, LOW = "\ud83d", "\ude00"  # the surrogate pair of EMOJI


def test_valid_text_is_returned_as_the_same_object() -> None:
    for text in ("plain", "héllo ✓", EMOJI, ""):
        assert clean_text(text) is text


def test_a_split_surrogate_pair_is_joined_into_one_character() -> None:
    assert clean_text(f"a{HIGH}{LOW}b") == f"a{EMOJI}b"


@pytest.mark.parametrize("lone", [HIGH, LOW, "\udcff"])
def test_a_lone_surrogate_becomes_the_replacement_character(lone: str) -> None:
    cleaned = clean_text(f"é{lone}x")
    assert cleaned == f"é{REPLACEMENT}x"
    cleaned.encode("utf-8")  # storable


def test_entries_clean_every_string_they_are_built_with() -> None:
    entry = ToolCallEntry(call_id=f"c{HIGH}", name="t", arguments=f'{{"q": "{LOW}"}}')
    assert entry.call_id == f"c{REPLACEMENT}"
    assert entry.arguments == f'{{"q": "{REPLACEMENT}"}}'
    nested = InputEntry(content=f"a{HIGH}{LOW}")
    assert nested.content == f"a{EMOJI}"


def test_entries_with_nested_data_clean_keys_and_values() -> None:
    data = {"type": "input", "content": "x", "role": "user", "origin": "input", "meta": None}
    data.pop("meta")
    entry = entry_from_dict({**data, "content": f"{LOW}é"})
    assert entry.content == f"{REPLACEMENT}é"  # type: ignore[union-attr]


def test_a_stream_chunk_ending_in_half_a_pair_keeps_it_for_the_next_chunk() -> None:
    cleaner = DeltaCleaner()
    assert cleaner.feed("text", f"ab{HIGH}") == "ab"
    assert cleaner.feed("text", f"{LOW}cd") == f"{EMOJI}cd"
    assert cleaner.flush() == {}


def test_each_stream_keeps_its_own_half_pair() -> None:
    cleaner = DeltaCleaner()
    assert cleaner.feed("text", f"x{HIGH}") == "x"
    assert cleaner.feed(0, "plain") == "plain"  # another stream: nothing held back
    assert cleaner.feed(0, f"y{HIGH}") == "y"
    assert cleaner.flush() == {"text": REPLACEMENT, 0: REPLACEMENT}
    assert cleaner.flush() == {}  # flushed once


def test_a_half_pair_never_completed_is_cleaned_on_the_next_chunk() -> None:
    cleaner = DeltaCleaner()
    assert cleaner.feed("t", HIGH) == ""
    assert cleaner.feed("t", "plain") == f"{REPLACEMENT}plain"


def test_a_lone_low_surrogate_in_a_chunk_is_replaced_at_once() -> None:
    assert DeltaCleaner().feed("t", f"a{LOW}") == f"a{REPLACEMENT}"


def test_ascii_chunks_pass_through_untouched() -> None:
    cleaner = DeltaCleaner()
    text = "just ascii"
    assert cleaner.feed("t", text) is text


def test_run_input_normalization() -> None:
    assert input_entries(None) == []
    (one,) = input_entries("hi")
    assert one.content == "hi" and one.role == "user"
    given = InputEntry(content="x", role="developer")
    assert input_entries(given) == [given]
    nested = input_entries(["a", given, ["b"]])
    assert [e.content for e in nested] == ["a", "x", "b"]
    assert nested[1] is given


@pytest.mark.parametrize("bad", [b"bytes", 3, {"content": "x"}, bytearray(b"x")])
def test_other_input_is_refused_with_a_hint(bad: object) -> None:
    with pytest.raises(UserError) as info:
        input_entries(bad)
    assert type(bad).__name__ in info.value.message
    assert info.value.hint == "Pass a str, an InputEntry, or a list of them."


def test_entries_round_trip_through_dicts_and_bytes() -> None:
    entries = [
        InputEntry(content="q"),
        TextEntry(text="a", message_id="m1"),
        ToolCallEntry(call_id="c1", name="t", arguments="{}", message_id="m1"),
        ToolResultEntry(call_id="c1", name="t", content="r", is_error=True),
    ]
    assert [entry_from_dict(entry_to_dict(e)) for e in entries] == entries
    assert load_entries(dump_entries(entries)) == entries
    assert load_entries(dump_entries(entries).decode()) == entries


def test_stamping_copies_with_run_turn_and_agent_and_leaves_the_original() -> None:
    entry = TextEntry(text="a", message_id="m")
    copy = stamped(entry, "run-1", 3, "bot")
    assert (copy.run_id, copy.turn, copy.agent) == ("run-1", 3, "bot")
    assert (entry.run_id, entry.turn, entry.agent) == ("", 0, "")
    assert copy.id == entry.id and copy.text == "a" and copy.ts == entry.ts
    assert {"run_id", "turn", "agent"} <= copy.model_fields_set
    assert entry_from_dict(entry_to_dict(copy)) == copy


def test_new_ids_are_unique_and_prefixed() -> None:
    ids = {new_id("call") for _ in range(1000)}
    assert len(ids) == 1000 and all(i.startswith("call_") for i in ids)
    assert new_id().startswith("e_")


def test_a_transcript_finds_calls_by_id_and_views_from_a_start() -> None:
    call = ToolCallEntry(call_id="c9", name="t", arguments="{}")
    tr = Transcript([InputEntry(content="q"), call])
    tr.append(ToolResultEntry(call_id="c9", name="t", content="r"))
    assert tr.call("c9") is call and tr.call("nope") is None
    view = tr.view(1)
    assert len(view) == 2 and view[0] is call and view[-1] is tr[2]
    assert list(view) == list(tr)[1:]
    assert list(view[0:1]) == [call]
    with pytest.raises(IndexError):
        view[2]
    with pytest.raises(IndexError):
        view[-3]
    tr.append(InputEntry(content="later"))
    assert len(view) == 3  # a live view


def test_provider_details_nested_in_an_entry_are_cleaned_too() -> None:
    from lovia.transcript import ReasoningEntry

    entry = ReasoningEntry(
        text="t", details={"k": [f"x{HIGH}", {"inner": f"{LOW}"}], "n": 1, "f": None}
    )
    assert entry.details == {"k": [f"x{REPLACEMENT}", {"inner": REPLACEMENT}], "n": 1, "f": None}
    json_ready = entry_to_dict(entry)
    assert json_ready["details"]["k"][0] == f"x{REPLACEMENT}"


def test_non_ascii_text_beside_scalars_is_cleaned() -> None:
    entry = ToolResultEntry(call_id="c", name="t", content=f"é{HIGH}", is_error=False)
    assert entry.content == f"é{REPLACEMENT}"


def test_a_chunk_ending_in_the_last_high_surrogate_is_held_too() -> None:
    """The whole high-surrogate range, both ends included, waits for its partner."""
    for high in ("\ud800", "\udbff"):
        cleaner = DeltaCleaner()
        assert cleaner.feed("t", f"a{high}") == "a"
        low = "\udc00"
        joined = (high + low).encode("utf-16-le", "surrogatepass").decode("utf-16-le")
        assert cleaner.feed("t", low) == joined


def test_ids_have_a_fixed_shape() -> None:
    import re

    assert re.fullmatch(r"call_[0-9a-f]{16}", new_id("call"))


def test_entries_dump_to_json_ready_values() -> None:
    import json

    data = entry_to_dict(InputEntry(content="q", turn=2))
    assert json.loads(json.dumps(data)) == data
    assert input_entries("hi")[0].role == "user"


def test_a_view_of_entries_starts_at_the_first_by_default() -> None:
    from lovia.transcript import EntriesView

    first, second = InputEntry(content="1"), InputEntry(content="2")
    assert list(EntriesView([first, second])) == [first, second]
