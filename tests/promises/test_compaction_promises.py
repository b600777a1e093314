"""Compaction keeps the promises its options make: what stays verbatim, when the recall tool
is offered, and that the estimate follows what the provider reports."""

from __future__ import annotations

from lovia.transcript import InputEntry, ToolCallEntry, ToolResultEntry, Transcript
from lovia.view import Compaction
from view._helpers import SUMMARY_CALLS, build
from view.test_compaction import result_of, start, tool_turn


def responses_in(messages: list) -> set[str]:  # type: ignore[type-arg]
    return {m.message_id for m in messages if isinstance(m, ToolCallEntry)}


async def test_a_cleared_result_offers_the_recall_tool() -> None:
    """A cleared stub tells the model to call recall_tool_result, so the view must say it
    holds stubs (which is what makes the loop offer that tool)."""
    s = Compaction(clear_after_turns=1, clear_min_tokens=10)
    st = s.new_state()
    tr = start()
    first = tool_turn(tr, [400])[0]
    built = await build(s, st, tr.view())
    assert not built.evicted
    tool_turn(tr, [8])
    tool_turn(tr, [8])
    built = await build(s, st, tr.view())
    cleared = result_of(built.messages, first)
    assert isinstance(cleared, ToolResultEntry) and "cleared from view" in cleared.content
    assert built.evicted is True


async def test_exactly_keep_recent_turns_stay_verbatim_after_a_summary() -> None:
    for keep in (1, 2, 3, 5):
        SUMMARY_CALLS.clear()
        s = Compaction(keep_recent_turns=keep, clear_after_turns=None)
        st = s.new_state()
        tr = start("the task")
        summarized = None
        for turn in range(1, 60):
            tool_turn(tr, [400])
            built = await build(s, st, tr.view(), window=4_000, turn=turn)
            if built.summary is not None:
                summarized = built
                break
        assert summarized is not None, "a summary was expected once past 80% of the window"
        assert len(responses_in(summarized.messages)) == keep


async def test_the_estimate_is_calibrated_by_the_reported_input_tokens() -> None:
    """When the provider reports far more input tokens than the local estimate (a big system
    prompt, tool schemas), the summary comes when the *reported* size nears the window."""
    SUMMARY_CALLS.clear()
    s = Compaction(keep_recent_turns=1, clear_after_turns=None)
    st = s.new_state()
    tr = start()
    for _ in range(4):
        tool_turn(tr, [40])
    built = await build(s, st, tr.view(), window=10_000, turn=1)
    assert built.summary is None  # ~60 estimated tokens: nowhere near 8,000
    tool_turn(tr, [40])
    built = await build(s, st, tr.view(), window=10_000, turn=2, last_input_tokens=9_000)
    assert built.summary is not None
    assert len(SUMMARY_CALLS) == 1


async def test_without_reported_usage_small_views_are_not_summarized() -> None:
    SUMMARY_CALLS.clear()
    s = Compaction(keep_recent_turns=1, clear_after_turns=None)
    st = s.new_state()
    tr = start()
    for turn in range(1, 6):
        tool_turn(tr, [40])
        built = await build(s, st, tr.view(), window=10_000, turn=turn)
        assert built.summary is None
    assert SUMMARY_CALLS == []


async def test_a_late_result_keeps_its_call_in_view_when_the_cut_passes_it() -> None:
    """A result that arrives turns after its call (a slow tool) pulls the summary's cut back
    to its call: a result is never shown without its call (``build`` checks the pairing)."""
    SUMMARY_CALLS.clear()
    s = Compaction(keep_recent_turns=2, clear_after_turns=None)
    st = s.new_state()
    tr = Transcript([*start("task")])
    (slow,) = tool_turn(tr, [0], answer=False)
    for _ in range(12):
        tool_turn(tr, [1_200])
    tr.append(ToolResultEntry(call_id=slow.call_id, name="fetch", content="late " * 50))
    tool_turn(tr, [1_200])
    built = await build(s, st, tr.view(), window=4_000, turn=20)
    # the summary covers only what precedes the slow call (the task), never half a pair
    assert built.summary is not None
    assert not any(isinstance(m, ToolCallEntry | ToolResultEntry) for m in SUMMARY_CALLS[0])
    ids = [m.id for m in built.messages]
    late = result_of(tr, slow)
    assert late.id in ids and slow.id in ids
    assert ids.index(slow.id) < ids.index(late.id)
    # once the pair is older than the kept turns, the summary may take both
    for turn in range(21, 25):
        tool_turn(tr, [1_200])
        built = await build(s, st, tr.view(), window=4_000, turn=turn)
    assert built.summary is not None or any(
        isinstance(m, InputEntry) and m.origin == "summary" for m in built.messages
    )
    ids = [m.id for m in built.messages]
    assert late.id not in ids and slow.id not in ids
