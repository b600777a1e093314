"""Compaction, driven directly: eviction, clearing, summaries, pairing, stability."""

from __future__ import annotations

import json
import re

import pytest

from lovia import UserError
from lovia.transcript import (
    HandoffEntry,
    InputEntry,
    SystemEntry,
    TextEntry,
    ToolCallEntry,
    ToolResultEntry,
    Transcript,
    TranscriptEntry,
    new_id,
)
from lovia.view import Compaction, CompactionState, FullView, default_strategy

from ._helpers import SUMMARY_CALLS, build

STUB = re.compile(
    r"^\[tool result (?P<id>e_[0-9a-f]+) (?:evicted|cleared) from view: (?P<n>\d+) chars; "
    r'preview: (?P<preview>".*"); call recall_tool_result\("(?P=id)"\) to see it\]$',
    re.S,
)


def tool_turn(
    tr: Transcript, sizes: list[int], *, name: str = "fetch", answer: bool = True
) -> list[ToolCallEntry]:
    """One model response with len(sizes) parallel calls, then their results."""
    msg = new_id("msg")
    calls = [
        ToolCallEntry(call_id=new_id("call"), name=name, arguments="{}", message_id=msg)
        for _ in sizes
    ]
    tr.extend(calls)
    if answer:
        for c, size in zip(calls, sizes, strict=True):
            tr.append(ToolResultEntry(call_id=c.call_id, name=name, content="r" * size))
    return calls


def start(text: str = "go") -> Transcript:
    return Transcript([SystemEntry(content="sys"), InputEntry(content=text)])


def result_of(entries: list[TranscriptEntry] | Transcript, call: ToolCallEntry) -> TranscriptEntry:
    return next(e for e in entries if isinstance(e, ToolResultEntry) and e.call_id == call.call_id)


async def test_default_strategy_is_compaction() -> None:
    s = default_strategy()
    assert isinstance(s, Compaction)
    assert s == Compaction()


def test_config_is_frozen_and_validated() -> None:
    c = Compaction()
    with pytest.raises(AttributeError):
        c.summarize_at = 0.5  # type: ignore[misc]
    with pytest.raises(UserError):
        Compaction(summarize_at=1.5)
    with pytest.raises(UserError):
        Compaction(keep_recent_turns=0)
    with pytest.raises(UserError):
        Compaction(max_result_tokens=0)


async def test_huge_result_is_stubbed_with_same_id_and_call_id() -> None:
    s = Compaction()
    tr = start()
    (c,) = tool_turn(tr, [100_000])
    built = await build(s, s.new_state(), tr.view())
    original = result_of(tr, c)
    stub = built.messages[-1]
    assert isinstance(stub, ToolResultEntry) and stub.id == original.id
    assert stub.call_id == c.call_id and stub.name == "fetch"
    m = STUB.match(stub.content)
    assert m and m["id"] == original.id and m["n"] == "100000"
    assert json.loads(m["preview"]) == "r" * 200
    assert built.evicted and built.compacted
    assert built.replaced == {stub.id: stub}
    assert ("evict", (original.id,)) in built.compactions
    assert original.content == "r" * 100_000  # the transcript is untouched


async def test_small_window_lowers_the_eviction_threshold() -> None:
    s = Compaction()  # 8000 tokens, but a quarter of a 16k window is 4000
    tr = start()
    tool_turn(tr, [20_000])  # ~5000 tokens
    assert not (await build(s, s.new_state(), tr.view())).evicted
    assert (await build(s, s.new_state(), tr.view(), window=16_000)).evicted


async def test_tool_max_result_chars_is_respected() -> None:
    s = Compaction()
    tr = start()
    tool_turn(tr, [600], name="capped")
    built = await build(s, s.new_state(), tr.view(), caps={"capped": 500})
    assert built.evicted
    assert not (await build(s, s.new_state(), tr.view(), caps={"capped": 600})).evicted


async def test_old_results_are_cleared_after_n_turns_and_stay_cleared() -> None:
    s = Compaction(clear_after_turns=2, clear_min_tokens=10)
    st = s.new_state()
    tr = start()
    first = tool_turn(tr, [400])[0]
    small = tool_turn(tr, [8])[0]
    built = await build(s, st, tr.view())
    assert not built.replaced
    tool_turn(tr, [400])
    built = await build(s, st, tr.view())
    assert not built.replaced  # age 2: not older than 2 turns yet
    tool_turn(tr, [400])
    built = await build(s, st, tr.view())
    cleared = result_of(built.messages, first)
    assert isinstance(cleared, ToolResultEntry) and "cleared from view" in cleared.content
    assert result_of(built.messages, small).content == "r" * 8  # too small to clear
    assert [k for k, _ in built.compactions] == ["clear"]
    for _ in range(3):  # stable: stays cleared, reported once
        tool_turn(tr, [5])
        again = await build(s, st, tr.view())
        assert result_of(again.messages, first) is cleared


async def test_views_grow_by_appending_when_nothing_new_is_compacted() -> None:
    s = Compaction()
    st = s.new_state()
    tr = start()
    prev: list[str] = []
    for i in range(20):
        tool_turn(tr, [100_000 if i % 4 == 0 else 50])
        built = await build(s, st, tr.view())
        assert list(built.order[: len(prev)]) == prev
        prev = list(built.order)


async def test_unknown_window_never_summarizes_but_still_evicts() -> None:
    SUMMARY_CALLS.clear()
    s = Compaction()
    st = s.new_state()
    tr = start()
    for _ in range(40):
        tool_turn(tr, [20_000, 50_000])
        built = await build(s, st, tr.view())
    assert not SUMMARY_CALLS and built.summary is None
    assert (
        sum(isinstance(m, ToolResultEntry) and m.id in built.replaced for m in built.messages) >= 40
    )


async def test_summary_keeps_recent_turns_and_pairs() -> None:
    SUMMARY_CALLS.clear()
    s = Compaction(keep_recent_turns=3, clear_after_turns=None)
    st = s.new_state()
    tr = start("the task")
    summaries: list[str] = []
    for i in range(30):
        tool_turn(tr, [2_000, 1_000])
        if i % 7 == 3:
            tr.append(InputEntry(content=f"steer {i}", origin="mailbox"))
        built = await build(s, st, tr.view(), window=8_000, turn=i + 1)
        if built.summary is not None:
            summaries.append(built.summary)
            head = built.messages[0]
            assert isinstance(head, InputEntry) and head.origin == "summary"
            assert head.content == f"<summary>\n{built.summary}\n</summary>"
            assert built.replaced[head.id] is head
            kinds = [k for k, _ in built.compactions]
            assert "summarize" in kinds
            responses = {
                getattr(m, "message_id", "")
                for m in built.messages[1:]
                if isinstance(m, ToolCallEntry)
            }
            assert len(responses) == 3
    assert len(summaries) >= 3
    assert all(e.origin != "summary" for e in tr if isinstance(e, InputEntry))
    # the second summary is made from the first one + the turns after it
    second = SUMMARY_CALLS[1]
    assert isinstance(second[0], InputEntry) and second[0].origin == "summary"


async def test_summary_failure_is_not_fatal() -> None:
    async def boom(*_a: object, **_k: object) -> str:
        raise RuntimeError("summary model down")

    s = Compaction(keep_recent_turns=1)
    st = s.new_state()
    tr = start()
    for _ in range(12):
        tool_turn(tr, [3_000])
    built = await build(s, st, tr.view(), window=4_000, summarize=boom)
    assert built.summary is None and built.messages[0].id == tr[1].id


async def test_summary_model_is_passed_to_summarize() -> None:
    seen: list[object] = []
    marker = object()

    async def summarize(entries: object, prompt: str, provider: object = None) -> str:
        seen.append(provider)
        return "short"

    s = Compaction(keep_recent_turns=1, summary_model=marker)  # type: ignore[arg-type]
    tr = start()
    for _ in range(12):
        tool_turn(tr, [3_000])
    built = await build(s, s.new_state(), tr.view(), window=4_000, summarize=summarize)
    assert built.summary == "short" and seen == [marker]


async def test_overflow_attempt_compacts_harder() -> None:
    SUMMARY_CALLS.clear()
    s = Compaction(clear_after_turns=None)
    st = s.new_state()
    tr = start()
    for _ in range(8):
        tool_turn(tr, [12_000])  # 3000 tokens: under the 4000-token limit of a 16k window
    first = await build(s, st, tr.view(), window=16_000, last_input_tokens=1)
    assert not first.replaced or first.summary is not None
    harder = await build(s, st, tr.view(), window=16_000, attempt=2)
    assert harder.summary is not None
    assert any(k == "evict" for k, _ in harder.compactions)
    assert len(harder.messages) < len(first.messages)


async def test_orphans_are_left_out_of_the_view_and_transcript_is_untouched() -> None:
    s = Compaction()
    st = s.new_state()
    tr = start()
    crashed = tool_turn(tr, [10, 10], answer=False)  # a crash: calls without results
    tr.append(ToolResultEntry(call_id=crashed[0].call_id, name="fetch", content="late"))
    tr.append(ToolResultEntry(call_id="nope", name="fetch", content="stray"))
    again = tool_turn(tr, [10])
    dup = ToolCallEntry(call_id=again[0].call_id, name="fetch", message_id="m2")
    tr.append(dup)  # a reused call id, never answered
    built = await build(s, st, tr.view())
    ids = set(built.order)
    assert crashed[0].id in ids and crashed[1].id not in ids
    assert dup.id not in ids
    assert all(getattr(m, "content", "") != "stray" for m in built.messages)
    assert built.compacted
    kinds = dict(built.compactions)
    assert crashed[1].id not in kinds.get("orphan", ())  # still open, may get a result
    # the answer arrives later: the call comes back, paired
    tr.append(ToolResultEntry(call_id=dup.call_id, name="fetch", content="ok"))
    built = await build(s, st, tr.view())
    assert dup.id in built.order


async def test_handoff_and_system_entries() -> None:
    s = Compaction()
    tr = start()
    tool_turn(tr, [10])
    tr.append(HandoffEntry(from_agent="a", to_agent="b"))
    tr.append(SystemEntry(content="b's prompt"))
    tr.append(TextEntry(text="hi from b", message_id="m"))
    built = await build(s, s.new_state(), tr.view())
    assert not any(isinstance(m, SystemEntry) for m in built.messages)
    assert any(isinstance(m, HandoffEntry) for m in built.messages)
    full = await build(FullView(), None, tr.view())
    assert [m.id for m in full.messages] == [m.id for m in built.messages]


async def test_state_is_per_run_and_resets_on_a_different_transcript() -> None:
    s = Compaction()
    a, b = s.new_state(), s.new_state()
    assert isinstance(a, CompactionState) and a is not b
    tr1, tr2 = start("one"), start("two")
    tool_turn(tr1, [10])
    await build(s, a, tr1.view())
    built = await build(s, a, tr2.view())  # same state, other transcript: starts over
    assert [getattr(m, "content", None) for m in built.messages] == ["two"]


async def test_build_cost_is_incremental() -> None:
    """Taking in entries is O(new): the per-build cursor only moves forward."""
    s = Compaction()
    st = s.new_state()
    tr = start()
    for _ in range(50):
        tool_turn(tr, [10])
        await build(s, st, tr.view())
    assert st.cursor == len(tr)
    calls = 0
    real = s.estimator

    def counting(entry: TranscriptEntry) -> int:
        nonlocal calls
        calls += 1
        return real(entry)

    counted = Compaction(estimator=counting)
    st2 = counted.new_state()
    await build(counted, st2, tr.view())
    before = calls
    tool_turn(tr, [10])
    await build(counted, st2, tr.view())
    assert calls - before <= 4  # the new entries only


async def test_token_figures_count_every_eviction_of_one_build_exactly() -> None:
    """Two results evicted in one build: before counts both whole, after counts both stubs."""

    def chars(entry: TranscriptEntry) -> int:
        return len(getattr(entry, "content", "") or "") + 1

    s = Compaction(estimator=chars, max_result_tokens=1_000)
    tr = start()
    calls = tool_turn(tr, [50_000, 30_000, 10])
    built = await build(s, s.new_state(), tr.view())
    assert built.evicted
    ((kind, ids),) = built.compactions
    big = {result_of(tr, c).id for c in calls[:2]}
    assert kind == "evict" and set(ids) == big
    # the system prompt is not a view entry: the figures cover the conversation
    assert built.tokens_before == sum(chars(e) for e in tr if not isinstance(e, SystemEntry))
    assert built.tokens_after == sum(chars(m) for m in built.messages)
    assert built.tokens_before - built.tokens_after == sum(
        chars(result_of(tr, c)) - chars(built.replaced[result_of(tr, c).id]) for c in calls[:2]
    )


async def test_token_figures_after_a_summary_count_the_summary_once() -> None:
    """An eviction in the build after a summary: before is the previous view (summary
    included) plus the new entries whole; after is the view this build sent."""

    def chars(entry: TranscriptEntry) -> int:
        return len(getattr(entry, "content", "") or "") + 1

    s = Compaction(estimator=chars, max_result_tokens=3_000, keep_recent_turns=1)
    st = s.new_state()
    tr = start()
    for _ in range(4):
        tool_turn(tr, [1_500, 1_000])
    first = await build(s, st, tr.view(), window=8_000)  # 10k chars > 0.8 of the window
    assert first.summary is not None and first.tokens_after is not None
    assert first.tokens_after == sum(chars(m) for m in first.messages)
    seen = len(tr)
    tool_turn(tr, [20_000])
    second = await build(s, st, tr.view(), window=80_000, turn=2)
    assert second.summary is None and [k for k, _ in second.compactions] == ["evict"]
    new = sum(chars(e) for e in list(tr)[seen:])
    assert second.tokens_before == first.tokens_after + new
    assert second.tokens_after == sum(chars(m) for m in second.messages)
