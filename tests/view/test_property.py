"""Property: any transcript, any number of views -> no orphan call/result in any view,
the transcript is byte-identical afterwards, and every view rebuilds from its records."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lovia.providers.base import ModelRequest
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
    dump_entries,
    new_id,
)
from lovia.view import Compaction, FullView, ViewHasher, ViewRecord, rebuild_view, resolve_records
from lovia.view.record import ResolvedRecords, rebuild_request

from ._helpers import build

SIZES = st.sampled_from([0, 5, 300, 2_000, 9_000, 40_000])

call_spec = st.tuples(
    st.one_of(st.none(), SIZES),  # None: the result never came (a crash)
    st.booleans(),  # reuse an earlier call id
)

turn_spec = st.fixed_dictionaries(
    {
        "user": st.one_of(st.none(), st.integers(1, 3_000)),
        "reasoning": st.booleans(),
        "text": st.one_of(st.none(), st.integers(0, 2_000)),
        "calls": st.lists(call_spec, max_size=4),
        "shuffle": st.randoms(use_true_random=False),
        "stray": st.booleans(),
        "handoff": st.integers(0, 9),
        "window": st.sampled_from([None, 1_500, 6_000, 40_000]),
        "attempt": st.sampled_from([1, 1, 1, 2]),
        "reported": st.booleans(),
    }
)

config_spec = st.builds(
    Compaction,
    max_result_tokens=st.sampled_from([None, 50, 2_000, 8_000]),
    clear_after_turns=st.sampled_from([None, 1, 3, 30]),
    clear_min_tokens=st.sampled_from([0, 256]),
    summarize_at=st.sampled_from([None, 0.3, 0.8]),
    keep_recent_turns=st.integers(1, 4),
)


def add_turn(tr: Transcript, spec: dict[str, Any], used: list[str]) -> None:
    if spec["user"] is not None:
        tr.append(InputEntry(content="u" * spec["user"]))
    msg = new_id("msg")
    if spec["reasoning"]:
        tr.append(ReasoningEntry(text="think", signature="sig", provider="p", message_id=msg))
    if spec["text"] is not None:
        tr.append(TextEntry(text="t" * spec["text"], message_id=msg))
    calls: list[tuple[ToolCallEntry, int | None]] = []
    for size, reuse in spec["calls"]:
        call_id = used[-1] if reuse and used else new_id("call")
        used.append(call_id)
        call = ToolCallEntry(call_id=call_id, name="f", arguments='{"a":1}', message_id=msg)
        tr.append(call)
        calls.append((call, size))
    spec["shuffle"].shuffle(calls)
    for call, size in calls:
        if size is not None:
            tr.append(ToolResultEntry(call_id=call.call_id, name="f", content="r" * size))
    if spec["stray"]:
        tr.append(ToolResultEntry(call_id=new_id("ghost"), name="f", content="?"))
    if spec["handoff"] == 0:
        tr.append(HandoffEntry(from_agent="a", to_agent="b"))
        tr.append(SystemEntry(content="new system prompt"))


async def run_views(config: Any, turns: list[dict[str, Any]]) -> None:
    tr = Transcript([SystemEntry(content="sys"), InputEntry(content="go")])
    used: list[str] = []
    state = config.new_state()
    hasher = ViewHasher()
    requests: list[ModelRequest] = []
    records: list[ViewRecord] = []
    for i, spec in enumerate(turns):
        add_turn(tr, spec, used)
        before = dump_entries(tr)
        built = await build(
            config,
            state,
            tr.view(),
            window=spec["window"],
            attempt=spec["attempt"],
            turn=i + 1,
            last_input_tokens=(i * 50 if spec["reported"] else None),
        )
        assert dump_entries(tr) == before
        for kind, _ids in built.compactions:
            event(kind)
        injected: list[TranscriptEntry] = [InputEntry(content=f"reminder {i}", origin="injected")]
        request = ModelRequest(system="sys", messages=[*built.messages, *injected])
        records.append(
            hasher.record(
                request=request,
                order=built.order,
                replaced=built.replaced,
                injected=injected,
                turn=i + 1,
            )
        )
        requests.append(request)
    rebuilt = rebuild_view(records, list(tr))
    for want, got, rec in zip(requests, rebuilt, records, strict=True):
        assert ViewHasher().hash(got) == ViewHasher().hash(want) == rec.hash
    full = resolve_records(records)
    assert all(not r.delta for r in full)
    assert [(r.order, r.replaced) for r in full] == naive_resolution(records)
    by_id = {e.id: e for e in tr}
    lazy = ResolvedRecords(records)
    assert lazy.stored == records and len(lazy) == len(records)
    # read backwards, then forwards skipping, then in order: each access folds from
    # wherever it can and resolves exactly what resolve_records does
    for at in [*reversed(range(len(records))), *range(0, len(records), 3)]:
        assert lazy[at] == full[at]
        assert ViewHasher().hash(rebuild_request(lazy[at], by_id)) == records[at].hash
    assert list(lazy) == full and lazy == full and lazy[-1] == full[-1]


def naive_resolution(records: list[ViewRecord]) -> list[tuple[list[str], dict[str, Any]]]:
    """Each record's order and shown replacements by the format's definition: a delta's
    order is the previous order's first ``keep`` ids and its own; replacements
    accumulate (``restored`` drops them) and show only for ids in the order."""
    out: list[tuple[list[str], dict[str, Any]]] = []
    order: list[str] = []
    replaced: dict[str, Any] = {}
    for r in records:
        if not r.delta:
            order, replaced = list(r.order), dict(r.replaced)
        else:
            order = order[: r.keep] + r.order
            replaced.update(r.replaced)
            for key in r.restored:
                replaced.pop(key, None)
        out.append((order, {k: v for k, v in replaced.items() if k in order}))
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(config=config_spec, turns=st.lists(turn_spec, min_size=1, max_size=25))
def test_views_are_always_paired_and_never_touch_the_transcript(
    config: Compaction, turns: list[dict[str, Any]]
) -> None:
    asyncio.run(run_views(config, turns))


@settings(max_examples=25, deadline=None)
@given(turns=st.lists(turn_spec, min_size=1, max_size=10))
def test_full_view_records_rebuild(turns: list[dict[str, Any]]) -> None:
    """FullView (no pairing repair) still round-trips through the record chain."""

    async def go() -> None:
        tr = Transcript([SystemEntry(content="sys")])
        hasher = ViewHasher()
        records: list[ViewRecord] = []
        for spec in turns:
            add_turn(tr, {**spec, "calls": []}, [])
            built = await FullView().build(
                type("I", (), {"entries": tr.view()})(),
                None,
                None,  # type: ignore[arg-type]
            )
            req = ModelRequest(system="sys", messages=list(built.messages))
            records.append(
                hasher.record(request=req, order=built.order, replaced=built.replaced, injected=())
            )
            assert rebuild_view(records, tr)[-1].messages == req.messages

    asyncio.run(go())
