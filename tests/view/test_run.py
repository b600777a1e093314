"""Compaction inside real runs: rebuild every model call from the store, 2 MB results,
recall, context-overflow retries."""

from __future__ import annotations

import re
from typing import Any

import pytest

from lovia import Agent, PluginInstance, RunContext, Runner, tool
from lovia.errors import ContextOverflow
from lovia.providers.base import ModelProfile, ModelRequest
from lovia.stores import MemoryStore
from lovia.testing import FunctionModel, call
from lovia.testing._models import CallInfo
from lovia.transcript import (
    InputEntry,
    ToolResultEntry,
    TranscriptEntry,
    dump_entries,
    entry_from_dict,
)
from lovia.view import (
    DEFAULT_SUMMARY_PROMPT,
    Compaction,
    ViewHasher,
    ViewRecord,
    rebuild_request,
    rebuild_view,
    verify,
    view_records,
)

from ._helpers import assert_paired

STUB_ID = re.compile(r'recall_tool_result\("([^"]+)"\)')


class Reminder:
    """A tiny plugin whose view injector adds a reminder to every view."""

    name = "reminder"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        def inject(c: RunContext[Any]) -> list[str]:
            return [f"reminder: this is turn {c.turn}"]

        return PluginInstance(view_injectors=[inject])


@tool
def fetch(n: int) -> str:
    """Fetch page n (every fifth page is huge)."""
    return f"page {n}: " + ("x" * (60_000 if n % 5 == 0 else 2_500))


def is_summary(req: ModelRequest) -> bool:
    return req.system == DEFAULT_SUMMARY_PROMPT


async def stored(store: MemoryStore, run_id: str) -> tuple[list[ViewRecord], list[TranscriptEntry]]:
    snap = await store.load(run_id)
    assert snap is not None
    entries = [
        entry_from_dict(e) for r in snap.records if r.kind == "entries" for e in r.data["entries"]
    ]
    return view_records(snap.records), entries


def approx_tokens(req: ModelRequest) -> int:
    chars = len(req.system)
    for m in req.messages:
        chars += len(getattr(m, "content", "") or getattr(m, "text", "") or "")
        chars += len(getattr(m, "arguments", "") or "")
    return chars // 4


async def test_200_turn_run_rebuilds_every_model_call_from_the_store() -> None:
    turns = 200

    def reply(req: ModelRequest, info: CallInfo) -> Any:
        if is_summary(req):
            assert_paired(req.messages)
            return f"summary #{sum(map(is_summary, info.requests))}: fetched pages so far"
        assert_paired(req.messages)
        k = sum(not is_summary(r) for r in info.requests)
        return call("fetch", n=k) if k <= turns else "done"

    model = FunctionModel(reply, profile=ModelProfile(context_window=12_000))
    store = MemoryStore()
    agent = Agent(
        name="crawler",
        model=model,
        tools=[fetch],
        plugins=[Reminder()],
        context=Compaction(clear_after_turns=40),
    )
    result = await Runner.run(
        agent, "crawl", run_id="r200", checkpointer=store, max_turns=turns + 5
    )
    assert result.output == "done" and result.turns == turns + 1

    records, entries = await stored(store, "r200")
    assert dump_entries(entries) == dump_entries(result.entries)
    seen = [r for r in model.requests if not is_summary(r)]
    assert len(records) == len(seen) == turns + 1
    summaries = [r for r in model.requests if is_summary(r)]
    assert len(summaries) >= 5  # summaries happened
    assert any(r.summary for r in records) and any(r.compacted for r in records)
    assert sum(len(r.replaced) for r in records) >= turns // 5  # evictions happened

    rebuilt = rebuild_view(records, entries)
    for req, rec, sent in zip(rebuilt, records, seen, strict=True):
        assert ViewHasher().hash(req) == rec.hash == ViewHasher().hash(sent)
        assert req.messages[-1].content == f"reminder: this is turn {rec.turn}"  # type: ignore[union-attr]
        assert approx_tokens(sent) < 12_000
    assert all(
        isinstance(e, InputEntry) and e.origin != "summary" for e in entries if e.type == "input"
    )
    # one record on its own, given the ones before it
    k = 150
    assert verify(records[k], entries, records[:k])
    assert rebuild_request(records[k], entries, records[:k]).messages == rebuilt[k].messages
    # storage is linear: no record carries the whole view again and again
    sizes = [len(str(r.to_data())) for r in records]
    assert max(sizes[100:]) < 8_000
    assert sum(sizes) < 300 * 2_000


async def test_two_megabyte_result_fits_a_16k_window_and_can_be_recalled() -> None:
    big = "".join(f"{i:07d}\n" for i in range(250_000))  # 2 MB
    assert len(big) == 2_000_000

    @tool
    def dump() -> str:
        """Dump the whole database."""
        return big

    pages: list[str] = []

    def reply(req: ModelRequest, info: CallInfo) -> Any:
        assert approx_tokens(req) < 16_000
        if is_summary(req):
            return "summary"
        last = req.messages[-1]
        if len(info.requests) == 1:
            return call("dump")
        assert isinstance(last, ToolResultEntry)
        if last.name == "dump":
            assert "recall_tool_result" in [t.name for t in req.tools]
            assert last.content.startswith("[tool result ") and len(last.content) < 1_000
            (stub_id,) = STUB_ID.findall(last.content)
            return call("recall_tool_result", {"id": stub_id})
        pages.append(last.content)
        if len(pages) == 1:
            (stub_id,) = STUB_ID.findall(req.messages[-3].content)  # type: ignore[union-attr]
            return call("recall_tool_result", {"id": stub_id, "offset": 1_999_990, "limit": 50})
        return "found it"

    model = FunctionModel(reply, profile=ModelProfile(context_window=16_000))
    agent = Agent(name="db", model=model, tools=[dump])
    result = await Runner.run(agent, "what is in the db?")
    assert result.output == "found it"
    first, last = pages
    assert first == (
        "[showing chars 0–20000 of 2000000; call again with offset=20000]\n" + big[:20_000]
    )
    assert last == "[showing chars 1999990–2000000 of 2000000; end of result]\n" + big[-10:]
    original = [e for e in result.entries if isinstance(e, ToolResultEntry) and e.name == "dump"]
    assert original[0].content == big  # the transcript keeps it whole


async def test_recall_by_call_id_and_unknown_id() -> None:
    @tool
    def blob() -> str:
        """A big blob."""
        return "b" * 100_000

    def reply(req: ModelRequest, info: CallInfo) -> Any:
        n = len(info.requests)
        if n == 1:
            return call("blob", id="c-blob")
        if n == 2:
            return [
                call("recall_tool_result", {"id": "c-blob", "limit": 10}),
                call("recall_tool_result", {"id": "e_nope"}),
            ]
        by_call, missing = req.messages[-2:]
        assert isinstance(by_call, ToolResultEntry) and isinstance(missing, ToolResultEntry)
        assert by_call.content.endswith("\n" + "b" * 10) and not by_call.is_error
        assert missing.is_error and "no tool result with id 'e_nope'" in missing.content
        return "ok"

    agent = Agent(name="a", model=FunctionModel(reply), tools=[blob])
    assert (await Runner.run(agent, "go")).output == "ok"


@tool
def report() -> str:
    """A mid-sized report."""
    return "y" * 15_000  # ~3750 tokens: kept at first, evicted when compacting harder


async def test_context_overflow_is_retried_after_harder_compaction() -> None:
    def reply(req: ModelRequest, info: CallInfo) -> Any:
        n = len(info.requests)
        if n == 1:
            return call("report")
        if n == 2:
            assert req.messages[-1].content == "y" * 15_000  # type: ignore[union-attr]
            return ContextOverflow("prompt is too long", tokens=25_000, limit=20_000)
        assert req.messages[-1].content.startswith("[tool result ")  # type: ignore[union-attr]
        return "fits now"

    store = MemoryStore()
    model = FunctionModel(reply, profile=ModelProfile(context_window=20_000))
    agent = Agent(name="a", model=model, tools=[report])
    result = await Runner.run(agent, "go", run_id="ov1", checkpointer=store)
    assert result.output == "fits now"
    records, entries = await stored(store, "ov1")
    assert [(r.turn, r.attempt) for r in records] == [(1, 1), (2, 1), (2, 2)]
    assert not records[1].compacted and records[2].compacted
    for i, rec in enumerate(records):
        assert verify(rec, entries, records[:i])
        assert ViewHasher().hash(model.requests[i]) == rec.hash


async def test_context_overflow_twice_fails_the_run_with_both_attempts_recorded() -> None:
    def reply(req: ModelRequest, info: CallInfo) -> Any:
        if len(info.requests) == 1:
            return call("report")
        return ContextOverflow("prompt is too long")

    store = MemoryStore()
    model = FunctionModel(reply, profile=ModelProfile(context_window=20_000))
    agent = Agent(name="a", model=model, tools=[report])
    with pytest.raises(ContextOverflow) as info:
        await Runner.run(agent, "go", run_id="ov2", checkpointer=store)
    assert "after 2 attempt(s)" in info.value.message
    records, entries = await stored(store, "ov2")
    assert [(r.turn, r.attempt) for r in records] == [(1, 1), (2, 1), (2, 2)]
    for i, rec in enumerate(records):
        assert verify(rec, entries, records[:i])


async def test_compaction_events_carry_the_views_estimated_tokens() -> None:
    """Each CompactionApplied says how big the view was before the strategy changed it and
    after, by the strategy's own estimate: an evicted 60 KB result shrinks the view."""
    from lovia import events as ev
    from lovia.view.compaction import estimate_tokens

    def reply(req: ModelRequest, info: CallInfo) -> Any:
        k = len(info.requests)
        return call("fetch", n=k * 5) if k <= 2 else "done"

    model = FunctionModel(reply, profile=ModelProfile(context_window=12_000))
    agent = Agent(name="crawler", model=model, tools=[fetch], context=Compaction())
    applied: list[ev.CompactionApplied] = []
    async for event in Runner.stream(agent, "crawl"):
        if isinstance(event, ev.CompactionApplied):
            applied.append(event)
    assert applied and {e.kind for e in applied} >= {"evict"}
    sent = {id(r): sum(estimate_tokens(m) for m in r.messages) for r in model.requests}
    for event in applied:
        assert event.tokens_before is not None and event.tokens_after is not None
        assert event.tokens_before - event.tokens_after > 60_000 // 4 - 1_000
        assert event.tokens_after in sent.values()  # the view that was sent


async def test_compaction_token_figures_use_the_strategys_own_estimator() -> None:
    """A Compaction with its own estimator reports its figures in that estimate."""
    from lovia import events as ev

    def reply(req: ModelRequest, info: CallInfo) -> Any:
        k = len(info.requests)
        return call("fetch", n=k * 5) if k <= 2 else "done"

    model = FunctionModel(reply, profile=ModelProfile(context_window=12_000))
    context = Compaction(estimator=lambda e: len(getattr(e, "content", "")) // 2 + 1)
    agent = Agent(name="crawler", model=model, tools=[fetch], context=context)
    applied = [
        e async for e in Runner.stream(agent, "crawl") if isinstance(e, ev.CompactionApplied)
    ]
    assert applied
    sent = {sum(context.estimator(m) for m in r.messages) for r in model.requests}
    for event in applied:
        assert event.tokens_after in sent
        assert event.tokens_before is not None and event.tokens_before > event.tokens_after
