"""Compaction at its edges: the exact token estimate and when it crosses the threshold, the
limits halved after an overflow, turn counting, pairing when the cut moves back, the log
of what was done, and resuming from a stored view record."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest

from lovia import UserError
from lovia.transcript import (
    HandoffEntry,
    InputEntry,
    ReasoningEntry,
    SystemEntry,
    TextEntry,
    ToolCallEntry,
    ToolResultEntry,
    Transcript,
    TranscriptEntry,
    entry_to_dict,
    new_id,
)
from lovia.view import RECALL_TOOL_NAME, BuiltView, Compaction, ViewRecord, estimate_tokens
from view._helpers import SUMMARY_CALLS, assert_paired, build
from view.test_compaction import result_of, start, tool_turn

SYSTEM = "you are a test"  # the system prompt `build` passes: 14 chars, 3 tokens


def call(msg: str, name: str = "fetch") -> ToolCallEntry:
    return ToolCallEntry(call_id=new_id("call"), name=name, arguments="{}", message_id=msg)


def answer(c: ToolCallEntry, content: str) -> ToolResultEntry:
    return ToolResultEntry(call_id=c.call_id, name=c.name, content=content)


def view_tokens(entries: Sequence[TranscriptEntry]) -> int:
    return sum(estimate_tokens(e) for e in entries if not isinstance(e, SystemEntry))


def turns_in(messages: Sequence[TranscriptEntry]) -> list[str]:
    """The message ids of the model responses in a view, in order."""
    seen: list[str] = []
    for m in messages:
        msg = getattr(m, "message_id", None)
        if msg and msg not in seen:
            seen.append(msg)
    return seen


def record_of(built: BuiltView, turn: int = 0) -> ViewRecord:
    """The view record the loop stores for ``built`` (resolved, as restore receives it)."""
    return ViewRecord(
        turn=turn,
        system=SYSTEM,
        order=list(built.order),
        replaced={k: entry_to_dict(v) for k, v in built.replaced.items()},
        summary=built.summary,
        tools=[{"name": RECALL_TOOL_NAME}] if built.evicted else [],
    )


# ------------------------------------------------------------------ the estimate


@pytest.mark.parametrize(
    ("entry", "tokens"),
    [
        (InputEntry(content="x" * 10), 6),
        (TextEntry(text="x" * 5), 5),
        (ToolCallEntry(call_id="c", name="abcd", arguments="x" * 8), 7),
        (ToolResultEntry(call_id="c", name="f", content="x" * 403), 104),
        (SystemEntry(content=""), 4),
        (ReasoningEntry(text="x" * 8, encrypted="y" * 12, signature="z" * 20), 14),
        (ReasoningEntry(text="x" * 8, signature="z" * 20), 11),
        (ReasoningEntry(text="x" * 8, encrypted="y" * 12), 9),
        (HandoffEntry(from_agent="a", to_agent="b"), 8),
    ],
)
def test_the_token_estimate_is_a_quarter_of_the_characters_plus_four(
    entry: TranscriptEntry, tokens: int
) -> None:
    got = estimate_tokens(entry)
    assert got == tokens and isinstance(got, int)


# ------------------------------------------------------------------ configuration


def test_out_of_range_options_are_refused_with_a_message_naming_them() -> None:
    with pytest.raises(UserError) as info:
        Compaction(summarize_at=0)
    assert info.value.message == "Compaction(summarize_at=0) is out of range"
    assert info.value.hint == "Use a fraction of the context window, e.g. 0.8."
    with pytest.raises(UserError) as info:
        Compaction(keep_recent_turns=0)
    assert info.value.message == "Compaction(keep_recent_turns=...) must be at least 1"
    for name in ("max_result_tokens", "clear_after_turns"):
        with pytest.raises(UserError) as info:
            Compaction(**{name: 0})
        assert info.value.message == f"Compaction({name}=0) must be positive or None"


def test_the_edges_of_each_option_range_are_accepted() -> None:
    c = Compaction(summarize_at=1, keep_recent_turns=1, max_result_tokens=1, clear_after_turns=1)
    assert (c.summarize_at, c.keep_recent_turns) == (1, 1)
    assert Compaction(summarize_at=None, max_result_tokens=None, clear_after_turns=None)


# ------------------------------------------------------------------ when to summarize


async def summarizes(s: Compaction, steps: Sequence[tuple[Sequence[TranscriptEntry], Any]]) -> bool:
    """Build one view per step (entries, window or (window, last_input_tokens)) on one
    state; whether the last build summarized."""
    SUMMARY_CALLS.clear()
    st = s.new_state()
    built = None
    for entries, window in steps:
        w, reported = window if isinstance(window, tuple) else (window, None)
        built = await build(s, st, entries, window=w, last_input_tokens=reported)
    assert built is not None
    return built.summary is not None


def long_talk(turns: int) -> Transcript:
    tr = start("the task")
    for _ in range(turns):
        tool_turn(tr, [40])
    return tr


@pytest.mark.parametrize("delta", [0, -1])
async def test_the_first_view_is_summarized_only_once_its_estimate_passes_the_threshold(
    delta: int,
) -> None:
    """The first view's estimate is the entries' estimate plus the system prompt's (chars/4);
    the summary comes when it is above summarize_at x the window, not at it."""
    tr = long_talk(6)
    estimate = view_tokens(tr) + len(SYSTEM) // 4
    s = Compaction(summarize_at=1, keep_recent_turns=1, clear_after_turns=None)
    assert await summarizes(s, [(tr.view(), estimate + delta)]) is (delta < 0)


@pytest.mark.parametrize("delta", [0, -1])
async def test_the_estimate_is_the_reported_count_plus_what_was_added_since(delta: int) -> None:
    """After a call, the estimate is the input tokens the provider reported for it plus the
    estimate of the entries added since; a count below the entries' own estimate adds no
    overhead (the estimate is then that of the entries alone)."""
    for reported in (5_000, 20):
        tr = long_talk(4)
        first = list(tr)
        tool_turn(tr, [40])
        tool_turn(tr, [40])
        overhead = max(0, reported - view_tokens(first))
        s = Compaction(summarize_at=1, keep_recent_turns=1, clear_after_turns=None)
        window = view_tokens(tr) + overhead + delta
        steps = [(first, 100_000), (tr.view(), (window, reported))]
        assert await summarizes(s, steps) is (delta < 0), reported


async def test_a_count_reported_again_is_not_taken_in_twice() -> None:
    """A count already calibrated against (no new call since) does not move the estimate
    when more entries arrive: they are added to it."""
    tr = long_talk(3)
    first = list(tr)
    tool_turn(tr, [40])
    second = list(tr)
    tool_turn(tr, [400])
    reported = 3_000
    estimate = reported + view_tokens(tr) - view_tokens(first)
    s = Compaction(summarize_at=1, keep_recent_turns=1, clear_after_turns=None)
    for delta, summarized in ((0, False), (-1, True)):
        steps = [
            (first, 100_000),
            (second, (100_000, reported)),
            (tr.view(), (estimate + delta, reported)),
        ]
        assert await summarizes(s, steps) is summarized


async def test_a_count_reported_before_the_first_view_is_not_taken_as_the_overhead() -> None:
    """The count reported for another agent's call (before this state built anything) is
    not this view's size: a small view is not summarized because of it."""
    tr = long_talk(6)
    s = Compaction(summarize_at=1, keep_recent_turns=1, clear_after_turns=None)
    estimate = view_tokens(tr) + len(SYSTEM) // 4
    assert await summarizes(s, [(tr.view(), (estimate, 50_000))]) is False


@pytest.mark.parametrize("delta", [0, -1])
async def test_after_a_summary_the_estimate_counts_the_summary_and_the_kept_turns(
    delta: int,
) -> None:
    """The count reported for a summarized view is calibrated against that view (summary
    plus kept turns); the next estimate adds what came since."""
    s = Compaction(summarize_at=1, keep_recent_turns=1, clear_after_turns=None)
    tr = long_talk(6)
    st = s.new_state()
    built = await build(s, st, list(tr), window=view_tokens(tr))
    assert built.summary is not None
    before = len(tr)
    tool_turn(tr, [40])
    reported = 700
    estimate = reported + view_tokens(list(tr)[before:])
    again = await build(s, st, tr.view(), window=estimate + delta, last_input_tokens=reported)
    assert (again.summary is not None) is (delta < 0)


# ------------------------------------------------------------------ turns


async def test_the_first_entry_of_a_transcript_without_a_system_prompt_is_in_view() -> None:
    s = Compaction()
    tr = Transcript([InputEntry(content="first")])
    built = await build(s, s.new_state(), tr.view())
    assert [m.id for m in built.messages] == [tr[0].id]
    assert built.evicted is False and built.compacted is False


async def test_an_empty_transcript_gives_an_empty_view() -> None:
    s = Compaction()
    built = await build(s, s.new_state(), [])
    assert list(built.messages) == [] and built.evicted is False


@pytest.mark.parametrize("clear_after", [1, 2])
async def test_clearing_counts_model_responses_by_message_id_even_back_to_back(
    clear_after: int,
) -> None:
    """Each model response is one turn: parallel calls and reasoning of one response count
    once, and responses with no entry between them still count apart."""
    s = Compaction(clear_after_turns=clear_after, clear_min_tokens=10)
    st = s.new_state()
    c = call("m0")
    old = answer(c, "r" * 400)
    entries: list[TranscriptEntry] = [InputEntry(content="go"), c, old]
    p1, p2 = call("m1"), call("m1")
    entries += [ReasoningEntry(text="hmm", message_id="m1"), p1, p2]
    entries += [answer(p1, "a"), answer(p2, "b")]
    built = await build(s, st, entries)  # two responses: age 1
    assert result_of(built.messages, c) is old
    entries += [TextEntry(text="one", message_id="m2"), TextEntry(text="two", message_id="m3")]
    built = await build(s, st, entries)  # four responses: age 3
    stub = result_of(built.messages, c)
    assert stub is not old and "cleared from view" in stub.content  # type: ignore[union-attr]
    assert built.compactions == (("clear", (old.id,)),)


async def test_responses_without_message_ids_count_as_turns() -> None:
    """Entries from a provider that gives no message ids: each response after another kind
    of entry (a user message, a result, a system prompt) is a new turn."""
    s = Compaction(keep_recent_turns=2, clear_after_turns=None)
    entries: list[TranscriptEntry] = [SystemEntry(content="sys"), TextEntry(text="hello")]
    for i in range(8):
        entries.append(InputEntry(content=f"question {i} " + "q" * 400))
        entries.append(TextEntry(text=f"answer {i} " + "a" * 400))
    entries += [SystemEntry(content="b"), TextEntry(text="b speaks " + "b" * 400)]
    SUMMARY_CALLS.clear()
    built = await build(s, s.new_state(), entries, window=1_800)  # the kept turns fit half
    assert built.summary is not None
    kept = list(built.messages[1:])
    assert [getattr(m, "text", None) or m.content for m in kept] == [  # type: ignore[union-attr]
        entries[-4].content,  # type: ignore[union-attr]
        entries[-3].text,  # type: ignore[union-attr]
        entries[-1].text,  # type: ignore[union-attr]
    ]


async def test_a_first_response_without_message_id_counts_among_the_kept_turns() -> None:
    """Two responses and keep_recent_turns=2: nothing to summarize, however big the view."""
    s = Compaction(keep_recent_turns=2, clear_after_turns=None)
    st = s.new_state()
    c = call("")
    entries: list[TranscriptEntry] = [TextEntry(text="let me see"), c, answer(c, "r" * 40)]
    entries += [InputEntry(content="more"), TextEntry(text="ok")]
    await build(s, st, entries, window=10_000)
    SUMMARY_CALLS.clear()
    built = await build(s, st, entries, window=10_000, last_input_tokens=9_000)
    assert built.summary is None and SUMMARY_CALLS == []


# ------------------------------------------------------------------ results


@pytest.mark.parametrize(("chars", "evicted"), [(24, False), (28, True)])
async def test_a_result_is_evicted_only_above_max_result_tokens(chars: int, evicted: bool) -> None:
    s = Compaction(max_result_tokens=10)  # 24 chars: 6 + 4 = 10 tokens; 28 chars: 11
    tr = start()
    tool_turn(tr, [chars])
    assert (await build(s, s.new_state(), tr.view())).evicted is evicted


@pytest.mark.parametrize(("chars", "cleared"), [(20, False), (24, True)])
async def test_a_result_of_exactly_clear_min_tokens_is_cleared(chars: int, cleared: bool) -> None:
    s = Compaction(clear_after_turns=1, clear_min_tokens=10)
    st = s.new_state()
    tr = start()
    first = tool_turn(tr, [chars])[0]
    for _ in range(3):
        tool_turn(tr, [4])
    built = await build(s, st, tr.view())
    assert (result_of(built.messages, first).id in built.replaced) is cleared


async def test_small_results_and_recalled_results_are_never_cleared() -> None:
    s = Compaction(clear_after_turns=1, clear_min_tokens=10, max_result_tokens=None)
    st = s.new_state()
    tr = start()
    small = tool_turn(tr, [8])[0]
    recalled = tool_turn(tr, [4_000], name=RECALL_TOOL_NAME)[0]
    for _ in range(4):
        tool_turn(tr, [4])
    built = await build(s, st, tr.view())
    assert built.replaced == {}
    assert result_of(built.messages, small) is result_of(tr, small)
    assert result_of(built.messages, recalled) is result_of(tr, recalled)


async def test_the_stub_preview_keeps_non_ascii_text_as_it_is() -> None:
    s = Compaction(max_result_tokens=10, preview_chars=5)
    c = call("m1")
    result = answer(c, "héllo wörld " * 10)
    built = await build(s, s.new_state(), [InputEntry(content="go"), c, result])
    stub = built.messages[-1]
    rid = result.id
    assert stub.content == (  # type: ignore[union-attr]
        f'[tool result {rid} evicted from view: 120 chars; preview: "héllo"; '
        f'call {RECALL_TOOL_NAME}("{rid}") to see it]'
    )


async def test_a_reused_call_id_and_a_stray_result_are_logged_as_orphans() -> None:
    s = Compaction()
    first = call("m1")
    again = ToolCallEntry(call_id=first.call_id, name="fetch", message_id="m2")
    stray = ToolResultEntry(call_id="nope", name="fetch", content="stray")
    entries = [InputEntry(content="go"), first, again, stray]
    built = await build(s, s.new_state(), entries)
    assert built.compactions == (("orphan", (first.id, stray.id)),)


async def test_a_view_that_leaves_out_only_a_stray_result_is_compacted() -> None:
    s = Compaction()
    c = call("m1")
    entries = [InputEntry(content="go"), c, answer(c, "ok")]
    entries.append(ToolResultEntry(call_id="nope", name="fetch", content="stray"))
    built = await build(s, s.new_state(), entries)
    assert built.compacted is True and built.replaced == {}


async def test_a_view_that_hides_only_an_unanswered_call_is_compacted() -> None:
    s = Compaction()
    entries = [InputEntry(content="go"), call("m1")]
    built = await build(s, s.new_state(), entries)
    assert built.compacted is True and [m.id for m in built.messages] == [entries[0].id]


# ------------------------------------------------------------------ after an overflow


def huge_estimator(entry: TranscriptEntry) -> int:
    """A user's estimator: the size given in a result's content, else 1."""
    if isinstance(entry, ToolResultEntry) and entry.content.isdigit():
        return int(entry.content)
    return 1


@pytest.mark.parametrize(
    ("max_result", "size", "evicted"),
    [(10, 5, False), (10, 6, True), (2, 1, False), (2, 2, True), (3, 2, True)],
)
async def test_an_overflow_retry_evicts_results_above_half_the_limit(
    max_result: int, size: int, evicted: bool
) -> None:
    s = Compaction(max_result_tokens=max_result, estimator=huge_estimator, clear_after_turns=None)
    st = s.new_state()
    c = call("m1")
    r = answer(c, str(size))
    entries = [InputEntry(content="go"), c, r]
    assert (await build(s, st, entries)).replaced == {}
    built = await build(s, st, entries, attempt=2)
    stub = result_of(built.messages, c)
    assert (stub is not r) is evicted
    if evicted:
        assert stub.content.startswith(f"[tool result {r.id} evicted from view: ")  # type: ignore[union-attr]
        assert ("evict", (r.id,)) in built.compactions


async def test_the_window_caps_the_result_limit_at_a_quarter_but_at_least_one_token() -> None:
    s = Compaction(estimator=huge_estimator, clear_after_turns=None, summarize_at=None)
    c = call("m1")
    entries = [InputEntry(content="go"), c, answer(c, "1")]
    assert (await build(s, s.new_state(), entries, window=4)).evicted is False
    c2 = call("m1")
    entries = [InputEntry(content="go"), c2, answer(c2, "2")]
    assert (await build(s, s.new_state(), entries, window=4)).evicted is True


async def test_an_overflow_retry_with_eviction_off_evicts_nothing() -> None:
    s = Compaction(max_result_tokens=None, clear_after_turns=None)
    tr = start()
    tool_turn(tr, [40_000])
    tool_turn(tr, [40_000])
    built = await build(s, s.new_state(), tr.view(), attempt=2)
    assert all(k != "evict" for k, _ in built.compactions)


@pytest.mark.parametrize(
    ("clear_after", "age", "cleared"), [(4, 2, False), (4, 3, True), (2, 1, False), (2, 2, True)]
)
async def test_an_overflow_retry_clears_results_older_than_half_clear_after_turns(
    clear_after: int, age: int, cleared: bool
) -> None:
    s = Compaction(
        clear_after_turns=clear_after, clear_min_tokens=10, summarize_at=None, keep_recent_turns=20
    )
    st = s.new_state()
    tr = start()
    tool_turn(tr, [4])  # the oldest turn, which the retry summarizes
    first = tool_turn(tr, [400])[0]
    for _ in range(age):
        tool_turn(tr, [4])
    assert (await build(s, st, tr.view())).replaced == {}
    built = await build(s, st, tr.view(), attempt=2)
    assert (result_of(built.messages, first).id in built.replaced) is cleared


@pytest.mark.parametrize(("keep", "kept"), [(1, 1), (2, 1), (3, 1), (6, 3), (7, 3)])
async def test_an_overflow_retry_keeps_half_the_recent_turns(keep: int, kept: int) -> None:
    s = Compaction(keep_recent_turns=keep, clear_after_turns=None)
    st = s.new_state()
    tr = start()
    for _ in range(10):
        tool_turn(tr, [40])
    built = await build(s, st, tr.view(), attempt=2)
    assert built.summary is not None
    assert len(turns_in(built.messages)) == kept


async def test_an_evicted_result_stays_the_same_stub_when_it_gets_old() -> None:
    s = Compaction(
        max_result_tokens=200, clear_after_turns=2, clear_min_tokens=10, keep_recent_turns=20
    )
    st = s.new_state()
    tr = start()
    tool_turn(tr, [4])  # the oldest turn, which the retry summarizes
    first = tool_turn(tr, [600])[0]  # 154 tokens: kept, until the overflow halves the limit
    second = tool_turn(tr, [300])[0]  # 79 tokens: under the halved limit too
    await build(s, st, tr.view())
    retried = await build(s, st, tr.view(), attempt=2, window=None)
    evicted = result_of(retried.messages, first)
    assert "evicted from view" in evicted.content  # type: ignore[union-attr]
    for _ in range(3):
        tool_turn(tr, [4])
    built = await build(s, st, tr.view())
    assert result_of(built.messages, first) is evicted
    assert built.compactions == (("clear", (result_of(tr, second).id,)),)


# ------------------------------------------------------------------ the summary


async def test_the_summary_call_gets_the_early_turns_then_the_request() -> None:
    s = Compaction(keep_recent_turns=1, clear_after_turns=None, max_result_tokens=None)
    tr = start("the task")
    tool_turn(tr, [400])
    tool_turn(tr, [400])
    SUMMARY_CALLS.clear()
    built = await build(s, s.new_state(), tr.view(), window=250, turn=7)
    assert built.summary is not None
    (sent,) = SUMMARY_CALLS
    assert [e.id for e in sent[:-1]] == [e.id for e in list(tr)[1:4]]
    assert isinstance(sent[-1], InputEntry) and sent[-1].role == "user"
    assert sent[-1].content == "Summarize the conversation above as instructed."
    head = built.messages[0]
    assert isinstance(head, InputEntry) and head.id.startswith("sum_")
    assert (head.turn, head.agent, head.origin) == (7, "a", "summary")


async def test_a_summary_model_gets_the_same_messages_and_prompt() -> None:
    seen: list[tuple[list[str], str, object]] = []
    marker = object()

    async def summarize(entries: Sequence[TranscriptEntry], prompt: str, provider: object) -> str:
        seen.append(([e.id for e in entries], prompt, provider))
        return "short"

    s = Compaction(
        keep_recent_turns=1,
        summary_model=marker,  # type: ignore[arg-type]
        summary_prompt="P",
        max_result_tokens=None,
    )
    tr = start("the task")
    tool_turn(tr, [400])
    tool_turn(tr, [400])
    await build(s, s.new_state(), tr.view(), window=250, summarize=summarize)
    ((ids, prompt, provider),) = seen
    assert ids[:-1] == [e.id for e in list(tr)[1:4]] and (prompt, provider) == ("P", marker)


async def test_an_empty_summary_leaves_the_view_uncompacted() -> None:
    async def empty(*_a: object, **_k: object) -> str:
        return ""

    s = Compaction(keep_recent_turns=1, clear_after_turns=None, max_result_tokens=None)
    tr = start("the task")
    tool_turn(tr, [400])
    tool_turn(tr, [400])
    built = await build(s, s.new_state(), tr.view(), window=250, summarize=empty)
    assert built.summary is None and [m.id for m in built.messages] == [e.id for e in tr][1:]


async def test_a_failed_summary_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def boom(*_a: object, **_k: object) -> str:
        raise RuntimeError("summary model down")

    s = Compaction(keep_recent_turns=1, clear_after_turns=None, max_result_tokens=None)
    tr = start("the task")
    tool_turn(tr, [400])
    tool_turn(tr, [400])
    with caplog.at_level(logging.WARNING, logger="lovia.view"):
        await build(s, s.new_state(), tr.view(), window=250, summarize=boom)
    (rec,) = caplog.records
    assert rec.getMessage() == (
        "summarizing the early conversation failed; the view stays uncompacted this time"
    )
    assert rec.exc_info is not None and str(rec.exc_info[1]) == "summary model down"


async def test_replacements_name_only_entries_still_in_view_after_summaries() -> None:
    s = Compaction(keep_recent_turns=1, clear_after_turns=None, max_result_tokens=50)
    st = s.new_state()
    tr = start("the task")
    summaries = 0
    for turn in range(1, 12):
        tool_turn(tr, [400])
        built = await build(s, st, tr.view(), window=400, turn=turn)
        summaries += built.summary is not None
        assert set(built.replaced) <= set(built.order)
    assert summaries >= 2


async def test_the_last_turn_is_kept_even_when_it_alone_is_over_the_target() -> None:
    """Recent turns too big for half the threshold are summarized too, down to the last."""
    s = Compaction(keep_recent_turns=3, clear_after_turns=None, max_result_tokens=None)
    tr = start("the task")
    for _ in range(5):
        tool_turn(tr, [4_000])
    built = await build(s, s.new_state(), tr.view(), window=2_000)
    assert built.summary is not None
    assert len(turns_in(built.messages)) == 1


async def test_recent_turns_that_fit_half_the_threshold_are_kept() -> None:
    """The kept turns may fill exactly half the threshold; one token more and the oldest
    of them is summarized as well."""
    for extra, kept in ((0, 2), (1, 1)):
        s = Compaction(
            keep_recent_turns=3,
            clear_after_turns=None,
            summarize_at=1,
            estimator=huge_estimator,
            max_result_tokens=None,
        )
        entries: list[TranscriptEntry] = [InputEntry(content="go")]
        for i in range(4):
            c = call(f"m{i}")
            entries += [c, answer(c, "100" if i < 2 else str(49 + extra * (i == 2)))]
        built = await build(s, s.new_state(), entries, window=200)  # half: 100
        assert built.summary is not None
        assert len(turns_in(built.messages)) == kept, extra


# ------------------------------------------------------------------ pairing


@pytest.mark.parametrize("text_first", [False, True])
async def test_a_late_result_at_the_start_keeps_its_whole_response_out_of_the_summary(
    text_first: bool,
) -> None:
    s = Compaction(keep_recent_turns=2, clear_after_turns=None)
    slow = call("m0")
    entries: list[TranscriptEntry] = [TextEntry(text="let me look", message_id="m0")] * text_first
    entries.append(slow)
    for i in range(1, 6):
        c = call(f"m{i}")
        entries += [c, answer(c, "r" * 800)]
    entries.append(answer(slow, "late"))
    SUMMARY_CALLS.clear()
    built = await build(s, s.new_state(), entries, window=1_000)
    assert built.summary is None and SUMMARY_CALLS == []
    assert [m.id for m in built.messages] == [e.id for e in entries]


async def test_a_late_result_keeps_its_response_text_and_sibling_calls() -> None:
    s = Compaction(keep_recent_turns=1, clear_after_turns=None)
    first, late = call("m1"), call("m1")
    text = TextEntry(text="two lookups", message_id="m1")
    entries: list[TranscriptEntry] = [InputEntry(content="go"), text, first, late]
    entries.append(answer(first, "r" * 800))
    for i in range(2, 5):
        c = call(f"m{i}")
        entries += [c, answer(c, "r" * 800)]
    entries.append(answer(late, "late"))
    SUMMARY_CALLS.clear()
    built = await build(s, s.new_state(), entries, window=1_000)
    assert built.summary is not None
    assert [e.id for e in SUMMARY_CALLS[0][:-1]] == [entries[0].id]
    assert [m.id for m in built.messages[1:]] == [e.id for e in entries[1:]]


async def test_two_late_results_both_keep_their_calls() -> None:
    s = Compaction(keep_recent_turns=1, clear_after_turns=None, max_result_tokens=None)
    a, b = call("ma"), call("mb")
    entries: list[TranscriptEntry] = [InputEntry(content="go"), a, b]
    for i in range(4):
        c = call(f"m{i}")
        entries += [c, answer(c, "r" * 800)]
    entries += [answer(b, "late b"), answer(a, "late a")]
    SUMMARY_CALLS.clear()
    built = await build(s, s.new_state(), entries, window=1_000)
    assert a.id in built.order and b.id in built.order
    assert built.summary is not None
    assert [e.id for e in SUMMARY_CALLS[0][:-1]] == [entries[0].id]


class Recorded:
    """A summary model that answers whatever it is given (no checks of its own)."""

    def __init__(self) -> None:
        self.calls: list[list[TranscriptEntry]] = []

    async def __call__(
        self, entries: Sequence[TranscriptEntry], prompt: str, provider: object = None
    ) -> str:
        self.calls.append(list(entries))
        return f"summary {len(self.calls)}"


async def test_after_a_first_summary_a_late_result_still_keeps_its_call() -> None:
    """The same pairing once the view's start has moved (positions after a summary)."""
    s = Compaction(keep_recent_turns=1, clear_after_turns=None)
    st = s.new_state()
    summarize = Recorded()
    tr = start("the task")
    for turn in range(1, 6):
        tool_turn(tr, [800])
        await build(s, st, tr.view(), window=1_000, turn=turn, summarize=summarize)
    assert len(summarize.calls) >= 1
    text = TextEntry(text="a slow one", message_id="m-slow")
    slow = call("m-slow")
    tr.extend([text, slow])
    for _ in range(3):
        tool_turn(tr, [800])
    tr.append(answer(slow, "late"))
    done = len(summarize.calls)
    built = await build(s, st, tr.view(), window=1_000, turn=9, summarize=summarize)
    assert built.summary is not None and len(summarize.calls) == done + 1
    assert_paired(summarize.calls[-1][1:-1])
    ids = [m.id for m in built.messages]
    assert ids.index(text.id) < ids.index(slow.id) < ids.index(result_of(tr, slow).id)


async def test_a_late_result_keeps_its_call_at_the_very_start_of_the_view() -> None:
    """After an overflow (many turns kept, no window): the cut would fall just after the
    slow call; it moves back to it, so nothing is left to summarize."""
    s = Compaction(keep_recent_turns=10, clear_after_turns=None)
    slow = call("m0")
    entries: list[TranscriptEntry] = [slow]
    for i in range(1, 6):
        c = call(f"m{i}")
        entries += [c, answer(c, "r" * 80)]
    entries.append(answer(slow, "late"))
    summarize = Recorded()
    built = await build(s, s.new_state(), entries, attempt=2, summarize=summarize)
    assert built.summary is None and summarize.calls == []
    assert [m.id for m in built.messages] == [e.id for e in entries]


async def test_after_a_first_summary_recent_turns_over_the_target_are_summarized_too() -> None:
    s = Compaction(keep_recent_turns=3, clear_after_turns=None, max_result_tokens=None)
    st = s.new_state()
    tr = start("the task")
    summaries = 0
    for turn in range(1, 12):
        tool_turn(tr, [400])
        built = await build(s, st, tr.view(), window=1_000, turn=turn)
        summaries += built.summary is not None
    assert summaries >= 1
    for _ in range(3):
        tool_turn(tr, [2_400])  # each turn alone is over half the threshold
    built = await build(s, st, tr.view(), window=1_000, turn=15)
    assert built.summary is not None
    assert len(turns_in(built.messages)) == 1


async def test_a_call_of_the_kept_turns_still_open_at_a_summary_gets_its_result() -> None:
    s = Compaction(keep_recent_turns=1, clear_after_turns=None, max_result_tokens=None)
    st = s.new_state()
    tr = start("the task")
    for _ in range(5):
        tool_turn(tr, [800])
    (slow,) = tool_turn(tr, [0], answer=False)
    built = await build(s, st, tr.view(), window=1_000, turn=6)
    assert built.summary is not None and slow.id not in built.order
    tr.append(answer(slow, "late"))
    built = await build(s, st, tr.view(), window=1_000, turn=7)
    assert [m.id for m in built.messages[1:]] == [slow.id, result_of(tr, slow).id]
    assert built.compactions == ()


# ------------------------------------------------------------------ resume


async def crashed_view(
    s: Compaction, tr: Transcript, summarize: Any = None
) -> tuple[BuiltView, ViewRecord]:
    st = s.new_state()
    kwargs = {} if summarize is None else {"summarize": summarize}
    built = await build(s, st, tr.view(), window=1_000, turn=5, **kwargs)
    return built, record_of(built, turn=5)


def scenario() -> Transcript:
    tr = start("the task")
    for _ in range(5):
        tool_turn(tr, [800])
    tool_turn(tr, [20_000])  # evicted
    return tr


async def test_a_resumed_run_repeats_the_crashed_call_with_the_same_view() -> None:
    """The crashed worker's call got no response: the resumed run sends the same view,
    without a new summary, even though it is still over the threshold."""

    async def boom(*_a: object, **_k: object) -> str:
        raise RuntimeError("down")

    s = Compaction(keep_recent_turns=1, clear_after_turns=None)
    tr = scenario()
    built, record = await crashed_view(s, tr, summarize=boom)
    assert built.summary is None
    st = s.new_state()
    s.restore(st, record, list(tr))
    SUMMARY_CALLS.clear()
    again = await build(s, st, tr.view(), window=1_000, turn=5, last_input_tokens=900)
    assert SUMMARY_CALLS == [] and list(again.order) == list(built.order)
    assert again.evicted is True and again.messages[-1] == built.messages[-1]
    # new entries after the resume: over the threshold, it summarizes
    tr.append(InputEntry(content="and then?", origin="mailbox"))
    later = await build(s, st, tr.view(), window=1_000, turn=6)
    assert later.summary is not None


async def test_a_resumed_run_with_a_new_message_summarizes_when_over_the_threshold() -> None:
    async def boom(*_a: object, **_k: object) -> str:
        raise RuntimeError("down")

    s = Compaction(keep_recent_turns=1, clear_after_turns=None)
    tr = scenario()
    _, record = await crashed_view(s, tr, summarize=boom)
    st = s.new_state()
    s.restore(st, record, list(tr))
    tr.append(InputEntry(content="and then?", origin="mailbox"))
    SUMMARY_CALLS.clear()
    built = await build(s, st, tr.view(), window=1_000, turn=5)
    assert built.summary is not None and len(SUMMARY_CALLS) == 1


async def test_restore_keeps_the_summary_and_stubs_of_the_crashed_view() -> None:
    s = Compaction(keep_recent_turns=1, clear_after_turns=None)
    tr = scenario()
    tr.append(InputEntry(content="steer", origin="mailbox", turn=5))  # of the view's turn
    SUMMARY_CALLS.clear()
    built, record = await crashed_view(s, tr)
    assert built.summary is not None and built.evicted
    assert built.order[-1] == tr[-1].id
    st = s.new_state()
    s.restore(st, record, list(tr))
    SUMMARY_CALLS.clear()
    again = await build(s, st, tr.view(), window=1_000, turn=5)
    assert SUMMARY_CALLS == [] and list(again.order) == list(built.order)
    assert again.messages[0].content == built.messages[0].content  # type: ignore[union-attr]


async def grown_view(s: Compaction) -> tuple[Transcript, BuiltView, ViewRecord]:
    """A run summarized once, then four more turns: the view of its last build."""
    st = s.new_state()
    tr = start("the task")
    summaries = 0
    for turn in range(1, 14):
        tool_turn(tr, [400])
        built = await build(s, st, tr.view(), window=1_000, turn=turn)
        summaries += built.summary is not None
    assert summaries == 1 and built.summary is None
    return tr, built, record_of(built, turn=13)


RESUMED = Compaction(
    keep_recent_turns=1, clear_after_turns=None, summarize_at=1, max_result_tokens=None
)


@pytest.mark.parametrize("delta", [0, -1])
async def test_a_resumed_run_is_not_calibrated_by_the_count_of_the_call_before_the_crash(
    delta: int,
) -> None:
    """The crashed call got no response; then a new message arrives. The count the provider
    reported last belongs to the view before the restored one: the estimate is the restored
    view's, plus the new message, plus the system prompt (chars/4)."""
    s = RESUMED
    tr, built, record = await grown_view(s)
    st = s.new_state()
    s.restore(st, record, list(tr))
    tr.append(InputEntry(content="and then? " + "x" * 40, origin="mailbox"))
    estimate = sum(estimate_tokens(m) for m in built.messages) + estimate_tokens(tr[-1])
    estimate += len(SYSTEM) // 4
    SUMMARY_CALLS.clear()
    again = await build(s, st, tr.view(), window=estimate + delta, turn=14, last_input_tokens=5_000)
    assert (again.summary is not None) is (delta < 0)


@pytest.mark.parametrize("delta", [0, -1])
async def test_a_resumed_run_whose_call_was_answered_calibrates_on_the_next_count(
    delta: int,
) -> None:
    """The recorded call got its response before the crash: the next count is taken in as
    in an uninterrupted run (that count plus what was added since the recorded view)."""
    s = RESUMED
    tr, _, record = await grown_view(s)
    before = len(tr)
    c = call("m13").model_copy(update={"turn": 13})  # the answer to the recorded call
    tr.extend([c, answer(c, "r" * 40).model_copy(update={"turn": 13})])
    st = s.new_state()
    s.restore(st, record, list(tr))
    reported = 5_000
    estimate = reported + view_tokens(list(tr)[before:])
    SUMMARY_CALLS.clear()
    again = await build(
        s, st, tr.view(), window=estimate + delta, turn=14, last_input_tokens=reported
    )
    assert (again.summary is not None) is (delta < 0)


async def test_restore_takes_in_results_of_earlier_turns_left_out_of_the_view() -> None:
    """A stray result after the last shown entry: restore skips it as the crashed worker did."""
    s = Compaction(keep_recent_turns=1, clear_after_turns=None)
    tr = Transcript([SystemEntry(content="sys", turn=1), InputEntry(content="go", turn=1)])
    c = call("m1").model_copy(update={"turn": 1})
    tr.extend([c, answer(c, "ok").model_copy(update={"turn": 1})])
    tr.append(ToolResultEntry(call_id="nope", name="fetch", content="stray", turn=1))
    built = await build(s, s.new_state(), tr.view(), turn=2)
    record = record_of(built, turn=2)
    st = s.new_state()
    s.restore(st, record, list(tr))
    again = await build(s, st, tr.view(), turn=2)
    assert list(again.order) == list(built.order)
    (later,) = tool_turn(tr, [10])
    grown = await build(s, st, tr.view(), turn=3)
    assert list(grown.order) == [*built.order, later.id, result_of(tr, later).id]


async def test_restore_of_a_view_that_does_not_match_starts_afresh_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A record holding an entry the transcript does not (a handoff filter's message)."""
    s = Compaction()
    tr = start()
    tool_turn(tr, [10])
    added = InputEntry(content="from the filter")
    built = await build(s, s.new_state(), tr.view())
    record = record_of(built, turn=3)
    record = record.model_copy(
        update={
            "order": [added.id, *record.order],
            "replaced": {added.id: entry_to_dict(added)},
        }
    )
    st = s.new_state()
    with caplog.at_level(logging.WARNING, logger="lovia.view"):
        s.restore(st, record, list(tr))
    (rec,) = caplog.records
    assert rec.getMessage() == (
        "view record of turn 3 does not match the transcript; the resumed run "
        "re-decides its context from scratch"
    )
    again = await build(s, st, tr.view())
    assert list(again.order) == list(built.order)


async def test_restore_ignores_a_handoff_filters_rewrite_of_a_result() -> None:
    s = Compaction()
    tr = start()
    (c,) = tool_turn(tr, [10])
    built = await build(s, s.new_state(), tr.view())
    original = result_of(tr, c)
    rewritten = original.model_copy(update={"content": "[redacted]"})
    record = record_of(built).model_copy(
        update={"replaced": {original.id: entry_to_dict(rewritten)}}
    )
    st = s.new_state()
    s.restore(st, record, list(tr))
    again = await build(s, st, tr.view())
    assert again.replaced == {} and result_of(again.messages, c) is original


def json_size(entry: TranscriptEntry) -> int:
    """A user's estimator: the size of the serialized entry."""
    return len(entry.model_dump_json()) // 4


async def test_a_custom_estimator_is_given_entries_through_summaries_and_resume() -> None:
    s = Compaction(keep_recent_turns=1, clear_after_turns=None, estimator=json_size)
    tr = scenario()
    SUMMARY_CALLS.clear()
    built = await build(s, s.new_state(), tr.view(), window=2_000, turn=5)
    assert built.summary is not None
    st = s.new_state()
    s.restore(st, record_of(built, turn=5), list(tr))
    again = await build(s, st, tr.view(), window=2_000, turn=5)
    assert list(again.order) == list(built.order)


async def test_restore_with_a_stray_result_before_the_last_shown_entry() -> None:
    s = Compaction()
    tr = start()
    tr.append(ToolResultEntry(call_id="nope", name="fetch", content="stray"))
    tool_turn(tr, [10])
    built = await build(s, s.new_state(), tr.view())
    st = s.new_state()
    s.restore(st, record_of(built), list(tr))
    again = await build(s, st, tr.view())
    assert list(again.order) == list(built.order)


@pytest.mark.parametrize("delta", [0, -1])
async def test_after_the_repeated_call_the_next_count_calibrates_the_estimate(delta: int) -> None:
    """Resumed, the crashed call is sent again; the count reported for it is then taken in
    like any other (that count plus what was added since)."""
    s = RESUMED
    tr, built, record = await grown_view(s)
    st = s.new_state()
    s.restore(st, record, list(tr))
    again = await build(s, st, tr.view(), window=100_000, turn=13, last_input_tokens=4_000)
    assert list(again.order) == list(built.order)
    before = len(tr)
    tool_turn(tr, [40])
    reported = 5_000
    estimate = reported + view_tokens(list(tr)[before:])
    SUMMARY_CALLS.clear()
    later = await build(
        s, st, tr.view(), window=estimate + delta, turn=14, last_input_tokens=reported
    )
    assert (later.summary is not None) is (delta < 0)


@pytest.mark.parametrize("delta", [0, -1])
async def test_a_state_moved_to_another_transcript_still_calibrates(delta: int) -> None:
    s = Compaction(summarize_at=1, keep_recent_turns=1, clear_after_turns=None)
    st = s.new_state()
    await build(s, st, long_talk(2).view(), window=100_000)
    tr = long_talk(4)
    first = list(tr)
    await build(s, st, first, window=100_000)  # another transcript: starts over
    tool_turn(tr, [40])
    reported = 5_000
    estimate = reported + view_tokens(tr) - view_tokens(first)
    SUMMARY_CALLS.clear()
    built = await build(s, st, tr.view(), window=estimate + delta, last_input_tokens=reported)
    assert (built.summary is not None) is (delta < 0)


async def test_restore_of_a_view_keeping_a_single_entry_after_its_summary() -> None:
    s = Compaction(keep_recent_turns=1, clear_after_turns=None, max_result_tokens=None)
    tr = start("the task")
    for _ in range(5):
        tool_turn(tr, [800])
    tr.append(TextEntry(text="all done", message_id="final"))
    SUMMARY_CALLS.clear()
    built = await build(s, s.new_state(), tr.view(), window=1_000, turn=6)
    assert built.summary is not None and [m.id for m in built.messages[1:]] == [tr[-1].id]
    st = s.new_state()
    s.restore(st, record_of(built, turn=6), list(tr))
    SUMMARY_CALLS.clear()
    again = await build(s, st, tr.view(), window=1_000, turn=6)
    assert SUMMARY_CALLS == [] and list(again.order) == list(built.order)
