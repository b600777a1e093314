"""The view record format: deltas, inheritance, replay API, handoff filters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from lovia import Agent, Runner, tool
from lovia.agent import Handoff
from lovia.errors import LoviaError
from lovia.providers.base import ModelRequest, ModelSettings, OutputSchema, ToolSpec
from lovia.stores import MemoryStore
from lovia.testing import ScriptedModel, call, reply
from lovia.transcript import (
    InputEntry,
    TextEntry,
    ToolResultEntry,
    TranscriptEntry,
    entry_from_dict,
)
from lovia.view import (
    ResolvedRecords,
    ViewHasher,
    ViewRecord,
    rebuild_messages,
    rebuild_request,
    rebuild_view,
    resolve_records,
    stored_records,
    verify,
    view_records,
)

TOOLS = (ToolSpec(name="f", description="d", parameters={"type": "object"}),)


def req(messages: Sequence[TranscriptEntry], system: str = "sys", **kw: Any) -> ModelRequest:
    return ModelRequest(system=system, messages=list(messages), tools=kw.pop("tools", TOOLS), **kw)


def texts(n: int) -> list[TranscriptEntry]:
    return [TextEntry(text=f"t{i}", message_id=f"m{i}") for i in range(n)]


def test_first_record_is_full_then_deltas_only_carry_changes() -> None:
    h = ViewHasher()
    t = texts(6)
    stub = ToolResultEntry(call_id="c", name="f", content="stub", id=t[1].id)
    r0 = h.record(request=req(t[:3]), order=[e.id for e in t[:3]], replaced={}, injected=())
    assert not r0.delta and r0.order == [e.id for e in t[:3]] and r0.system == "sys"
    view1 = [t[0], stub, t[2], t[3]]
    r1 = h.record(
        request=req(view1), order=[e.id for e in view1], replaced={stub.id: stub}, injected=()
    )
    assert r1.delta and r1.seq == 1 and r1.keep == 3 and r1.order == [t[3].id]
    assert list(r1.replaced) == [stub.id]
    assert set(r1.inherit) == {"system", "tools", "settings", "output_schema"}
    assert r1.system == "" and r1.tools == []
    view2 = [*view1, t[4]]
    r2 = h.record(
        request=req(view2, system="new"),
        order=[e.id for e in view2],
        replaced={stub.id: stub},
        injected=(),
    )
    assert r2.replaced == {} and r2.keep == 4 and r2.system == "new"
    assert "system" not in r2.inherit
    view3 = [t[0], t[1], t[2], t[5]]  # stub restored to the original, t[3:5] gone
    r3 = h.record(
        request=req(view3, system="new"), order=[e.id for e in view3], replaced={}, injected=()
    )
    assert r3.restored == [stub.id] and r3.keep == 3 and r3.order == [t[5].id]
    records = [r0, r1, r2, r3]
    requests = rebuild_view(records, t)
    assert [list(q.messages) for q in requests] == [t[:3], view1, view2, view3]
    assert [q.system for q in requests] == ["sys", "sys", "new", "new"]
    for i, r in enumerate(records):
        assert verify(r, t, records[:i])
    full = resolve_records(records)
    assert all(not r.delta and r.inherit == [] for r in full)
    assert full[1].replaced.keys() == {stub.id} and full[3].replaced == {}
    by_id = {e.id: e for e in t}
    assert rebuild_messages(full[3], by_id) == view3
    assert rebuild_messages(r3, by_id, records[:3]) == view3


def test_head_changes_are_stored() -> None:
    h = ViewHasher()
    t = texts(2)
    schema = OutputSchema(name="o", schema={"type": "object"})
    r0 = h.record(request=req(t[:1]), order=[t[0].id], replaced={}, injected=())
    r1 = h.record(
        request=req(
            t, tools=(), settings=ModelSettings(temperature=0.5, stop=("x",)), output_schema=schema
        ),
        order=[e.id for e in t],
        replaced={},
        injected=(),
    )
    assert r1.inherit == ["system"] and r1.settings == {"temperature": 0.5, "stop": ["x"]}
    rebuilt = rebuild_request(r1, t, [r0])
    assert rebuilt.settings == ModelSettings(temperature=0.5, stop=("x",))
    assert rebuilt.output_schema == schema and rebuilt.tools == ()
    assert verify(r1, t, [r0])


def test_missing_previous_record_is_an_error_and_storage_round_trips() -> None:
    h = ViewHasher()
    t = texts(3)
    r0 = h.record(request=req(t[:2]), order=[e.id for e in t[:2]], replaced={}, injected=())
    r1 = h.record(request=req(t), order=[e.id for e in t], replaced={}, injected=())
    with pytest.raises(LoviaError, match="missing"):
        rebuild_request(r1, t)
    data = r1.to_data()
    assert "tools" not in data and data["version"] == 2  # compact: defaults left out
    assert ViewRecord.from_data(data) == r1
    with pytest.raises(LoviaError, match="newer"):
        ViewRecord.from_data({**data, "version": 99})
    with pytest.raises(LoviaError, match="not in the transcript"):
        rebuild_request(r0, t[:1])


def test_resolved_records_read_lazily_match_resolve_records_in_any_order() -> None:
    """A run's records read one at a time (as a loaded run's ``views``) are the records
    resolve_records makes, whatever the order they are read in, across a full record in
    the middle of the chain (a chain restarted: the deltas after it build on it)."""
    t = texts(7)
    h = ViewHasher()
    views = [t[:2], t[:3], [t[0], t[3]], t[:5]]
    records = [
        h.record(request=req(v), order=[e.id for e in v], replaced={}, injected=()) for v in views
    ]
    restarted = ViewHasher()  # a second chain of the same run: full, then a delta
    tail = [t[:6], t[:7]]
    seq = len(records)
    for v in tail:
        r = restarted.record(request=req(v), order=[e.id for e in v], replaced={}, injected=())
        records.append(r.model_copy(update={"seq": r.seq + seq}))
    assert [r.delta for r in records] == [False, True, True, True, False, True]
    full = resolve_records(records)
    want = [[e.id for e in v] for v in [*views, *tail]]
    assert [r.order for r in full] == want
    for order in ((0, 1, 2, 3, 4, 5), (5, 4, 3, 2, 1, 0), (5, 1, 4, 4, 0, 3, 2)):
        lazy = ResolvedRecords(records)
        assert [lazy[i].order for i in order] == [want[i] for i in order]
        assert [lazy[i] for i in order] == [full[i] for i in order]
    lazy = ResolvedRecords(records)
    assert lazy[-2:] == full[-2:] and lazy[::2] == full[::2] and lazy[-1] == full[5]
    assert list(lazy) == full and lazy == full and lazy == ResolvedRecords(records)
    assert lazy != full[:-1] and repr(lazy) == "ResolvedRecords(6 records)"
    assert stored_records(lazy) is lazy.stored and stored_records(full) is full
    with pytest.raises(IndexError):
        lazy[6]
    with pytest.raises(IndexError):
        lazy[-7]
    for r in full:  # every read record rebuilds its view alone
        assert ViewHasher().hash(rebuild_request(r, t)) == r.hash


def test_a_gap_in_the_chain_fails_when_the_run_is_loaded() -> None:
    h = ViewHasher()
    t = texts(4)
    records = [
        h.record(request=req(t[:n]), order=[e.id for e in t[:n]], replaced={}, injected=())
        for n in (2, 3, 4)
    ]
    for broken, seq in (([records[0], records[2]], 2), (records[1:], 1)):
        message = rf"view record seq {seq} of run '' is a delta, but the record before it"
        with pytest.raises(LoviaError, match=message) as caught:
            ResolvedRecords(broken)  # at load, not when a page reads the record
        assert caught.value.hint == "Pass all of the run's view records, in stored order."
        with pytest.raises(LoviaError, match=message):
            resolve_records(broken)


def test_version_1_records_still_rebuild() -> None:
    t = texts(2)
    request = req(t)
    v1 = ViewRecord.model_validate(
        {
            "version": 1,
            "order": [e.id for e in t],
            "system": "sys",
            "tools": [
                {"name": "f", "description": "d", "parameters": {"type": "object"}, "strict": False}
            ],
            "hash": ViewHasher().hash(request),
        }
    )
    assert verify(v1, t)


def test_injected_entries_are_stored_in_full_each_time() -> None:
    h = ViewHasher()
    t = texts(1)
    records = []
    for i in range(3):
        inj = [InputEntry(content=f"todo {i}", origin="injected")]
        records.append(
            h.record(request=req([*t, *inj]), order=[t[0].id], replaced={}, injected=inj)
        )
    assert [r.injected[0]["content"] for r in records] == ["todo 0", "todo 1", "todo 2"]
    assert all(verify(r, t, records[:i]) for i, r in enumerate(records))


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"result for {q}"


async def test_handoff_input_filter_is_recorded_exactly() -> None:
    def only_text(entries: Sequence[Any]) -> list[Any]:
        out: list[Any] = []
        for e in entries:
            if e.type in ("tool_call", "tool_result"):
                continue
            out.append(e.model_copy(update={"text": e.text.upper()}) if e.type == "text" else e)
        return out

    specialist = Agent(name="specialist", model=ScriptedModel(["done by specialist"]))
    triage = Agent(
        name="triage",
        model=ScriptedModel(
            [
                reply("checking", tool_calls=[call("lookup", q="x")]),
                [call("transfer_to_specialist")],
            ]
        ),
        tools=[lookup],
        handoffs=[Handoff(agent=specialist, input_filter=only_text)],
    )
    store = MemoryStore()
    result = await Runner.run(triage, "help", run_id="h1", checkpointer=store)
    assert result.output == "done by specialist"
    snap = await store.load("h1")
    assert snap is not None
    records = view_records(snap.records)
    entries = [
        entry_from_dict(e) for r in snap.records if r.kind == "entries" for e in r.data["entries"]
    ]
    assert [r.agent for r in records] == ["triage", "triage", "specialist"]
    sent = specialist.model.requests[0]  # type: ignore[attr-defined]
    rebuilt = rebuild_view(records, entries)
    assert rebuilt[-1].messages == sent.messages
    assert any(getattr(m, "text", "") == "CHECKING" for m in sent.messages)
    assert records[-1].replaced  # the rewritten entry is stored in full
    assert ViewHasher().hash(rebuilt[-1]) == records[-1].hash


def test_incremental_hash_equals_a_fresh_hash_as_views_grow_shrink_and_fork() -> None:
    """The hasher resumes from the previous view's end state (or a STRIDE state): every
    hash must still equal the one of a hasher that never saw an earlier view."""
    h = ViewHasher()
    e = texts(40)
    other = TextEntry(text="other", message_id="mx")
    views = [e[:3], e[:5], e[:5], e[:4], [*e[:4], other], e[:35], e[:36], e[2:36], e[:40], []]
    settings = ModelSettings()  # one head for every view (head bytes cached by identity)
    for messages in views:
        request = req(messages, settings=settings)
        assert h.hash(request) == ViewHasher().hash(request), [m.text for m in messages]  # type: ignore[union-attr]


def test_records_are_what_model_construct_builds() -> None:
    """``record`` builds its ViewRecord without model_construct's walk: same result."""
    h = ViewHasher()
    t = texts(4)
    meta: dict[str, Any] = {"run_id": "r", "turn": 2, "attempt": 1, "agent": "a", "model": "m"}
    meta.update(summary=None, compacted=False)
    for given in (meta, {**meta, "provider": "p"}):  # a default to fill in, then none
        got = h.record(
            request=req(t), order=[e.id for e in t], replaced={}, injected=t[:1], **given
        )
        want = ViewRecord.model_construct(**{k: got.__dict__[k] for k in got.model_fields_set})
        assert got.__dict__ == want.__dict__ and list(got.__dict__) == list(want.__dict__)
        assert got.model_fields_set == want.model_fields_set
        assert got.to_data() == want.to_data() and got == want
