"""The view record format: deltas, inheritance, replay API, handoff filters."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from lovia import Agent, Runner, tool
from lovia.agent import Handoff
from lovia.errors import LoviaError, SchemaVersionError
from lovia.providers.base import ModelRequest, ModelSettings, OutputSchema, ToolSpec
from lovia.stores import MemoryStore
from lovia.testing import ScriptedModel, call, reply
from lovia.transcript import (
    InputEntry,
    TextEntry,
    ToolResultEntry,
    TranscriptEntry,
    entry_from_dict,
    entry_to_dict,
)
from lovia.view import (
    BuiltView,
    ResolvedRecords,
    ViewHasher,
    ViewRecord,
    canonical_request,
    rebuild_messages,
    rebuild_request,
    rebuild_view,
    resolve_records,
    stored_records,
    verify,
    view_records,
)
from lovia.view.record import view_parts

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
    assert (r0.keep, r0.restored, r0.inherit) == (0, [], [])
    full = resolve_records(records)
    assert all(not r.delta and r.inherit == [] and r.keep == 0 for r in full)
    assert all(r.restored == [] for r in full)
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
        message = (
            rf"^view record seq {seq} of run '' is a delta, but the record before it "
            rf"\(seq {seq - 1}\) is missing"
        )
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


def test_stored_form_is_json_ready_and_a_record_without_version_is_version_1() -> None:
    """``to_data`` gives JSON values (a tuple becomes a list), and a stored record that
    names no version loads as a version 1 record (full, no delta)."""
    record = ViewRecord(order=["a"], settings={"stop": ("x", "y")})
    assert record.to_data() == {"version": 2, "order": ["a"], "settings": {"stop": ["x", "y"]}}
    loaded = ViewRecord.from_data({"order": ["a"], "system": "s"})
    assert (loaded.order, loaded.system, loaded.delta) == (["a"], "s", False)


def test_a_record_from_a_newer_lovia_says_to_upgrade() -> None:
    with pytest.raises(SchemaVersionError) as caught:
        ViewRecord.from_data({"version": 3, "order": []})
    assert caught.value.message == (
        "view record version 3 is newer than this lovia understands (2)"
    )
    assert caught.value.hint == "Upgrade lovia to replay this run (pip install -U lovia)."


def test_canonical_request_is_the_head_then_the_messages_as_dicts() -> None:
    t = texts(2)
    schema = OutputSchema(name="o", schema={"type": "object"}, strict=False)
    request = req(t, settings=ModelSettings(temperature=0.5), output_schema=schema)
    assert canonical_request(request) == {
        "system": "sys",
        "tools": [
            {"name": "f", "description": "d", "parameters": {"type": "object"}, "strict": False}
        ],
        "settings": {"temperature": 0.5},
        "output_schema": {"name": "o", "schema": {"type": "object"}, "strict": False},
        "messages": [entry_to_dict(e) for e in t],
    }


def test_resume_needs_a_resolved_record() -> None:
    h = ViewHasher()
    t = texts(2)
    h.record(request=req(t[:1]), order=[t[0].id], replaced={}, injected=())
    delta = h.record(request=req(t), order=[e.id for e in t], replaced={}, injected=())
    with pytest.raises(LoviaError) as caught:
        ViewHasher().resume(delta)
    assert caught.value.message == "ViewHasher.resume() needs a resolved record (delta=False)"
    assert caught.value.hint == "Pass the last record of resolve_records(records)."


def test_a_resumed_chain_continues_as_a_delta_of_the_stored_record() -> None:
    """After a resume the next record is a delta against the stored one: an unchanged
    head is inherited, and a replacement equal to the stored one (a copy read back from
    the store, not the same object) is not stored again; a changed one is."""
    t = texts(3)
    schema = OutputSchema(name="o", schema={"type": "object"})
    settings = ModelSettings(temperature=0.2, stop=("x",))
    stub = ToolResultEntry(call_id="c", name="f", content="stub", id=t[1].id)
    first = ViewHasher()
    view = [t[0], stub]
    request = req(view, settings=settings, output_schema=schema)
    r0 = first.record(
        request=request, order=[e.id for e in view], replaced={stub.id: stub}, injected=()
    )
    stored = ViewRecord.from_data(json.loads(json.dumps(r0.to_data())))  # as a store reads it
    resumed = ViewHasher()
    resumed.resume(stored)
    view1 = [*view, t[2]]
    copy = stub.model_copy()
    r1 = resumed.record(
        request=req(view1, settings=settings, output_schema=schema),
        order=[e.id for e in view1],
        replaced={stub.id: copy},
        injected=(),
    )
    assert (r1.seq, r1.delta, r1.keep, r1.order, r1.replaced) == (1, True, 2, [t[2].id], {})
    assert sorted(r1.inherit) == ["output_schema", "settings", "system", "tools"]
    changed = stub.model_copy(update={"content": "another stub"})
    r2 = resumed.record(
        request=req(view1, settings=settings, output_schema=schema),
        order=[e.id for e in view1],
        replaced={stub.id: changed},
        injected=(),
    )
    assert r2.replaced == {stub.id: entry_to_dict(changed)}
    assert rebuild_messages(r2, {e.id: e for e in t}, [stored, r1]) == [t[0], changed, t[2]]


def test_entries_that_left_the_view_are_not_kept_alive_by_the_hasher() -> None:
    """A long run's hasher caches the serialized entries of the current view: once it
    holds more than 4 x the view's length + 256, the others are let go."""
    import gc
    import weakref

    h = ViewHasher()
    old = texts(260)  # with the next view's entry: one more than 4 x its length + 256
    h.hash(req(old))
    refs = [weakref.ref(e) for e in old]
    del old
    new = [TextEntry(text="new", message_id="n")]
    h.hash(req(new))
    gc.collect()
    assert [r for r in refs if r() is not None] == []
    assert h.hash(req(new)) == ViewHasher().hash(req(new))


def test_view_parts_keeps_verbatim_entries_as_references_and_the_rest_in_full() -> None:
    """With a handoff filter the view is what the filter returned: entries the strategy
    took verbatim from the transcript stay references; the strategy's stubs and the
    entries the filter rewrote are stored in full."""
    t = texts(3)
    stub = ToolResultEntry(call_id="c", name="f", content="stub", id=t[1].id)
    built = BuiltView(
        messages=[t[0], stub, t[2]], order=[t[0].id, stub.id, t[2].id], replaced={stub.id: stub}
    )
    rewritten = t[2].model_copy(update={"text": "T2"})
    order, replaced = view_parts(built, [t[0], stub, rewritten])
    assert order == [t[0].id, t[1].id, t[2].id]
    assert replaced == {stub.id: stub, t[2].id: rewritten}


def test_a_replacement_of_an_entry_no_longer_shown_is_left_out_when_resolved() -> None:
    """A resolved record's replacements are those of the entries it shows: an entry
    shown twice keeps its stub while one copy remains, and one dropped from the view
    loses it (its stub is not shown)."""
    t = texts(3)
    stub = ToolResultEntry(call_id="c", name="f", content="stub", id=t[1].id)
    h = ViewHasher()
    by_id = {e.id: e for e in t}
    views = [[t[0], stub, stub], [t[0], stub], [t[0], t[2]]]
    records = [
        h.record(request=req(v), order=[e.id for e in v], replaced={stub.id: stub}, injected=())
        for v in views
    ]
    full = resolve_records(records)
    assert [list(r.replaced) for r in full] == [[stub.id], [stub.id], []]
    assert [rebuild_messages(r, by_id) for r in full] == views
    assert all(verify(r, t) for r in full)


def test_reading_views_forward_folds_each_record_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loaded run's views read in order cost one fold per record (a page reading a
    500-turn run stays linear), and reading the same view again gives the same object."""
    from lovia.view import record as module

    t = texts(8)
    h = ViewHasher()
    records = [
        h.record(request=req(t[:n]), order=[e.id for e in t[:n]], replaced={}, injected=())
        for n in range(1, 9)
    ]
    folded: list[int] = []
    advance = module._Fold.advance  # pyright: ignore[reportPrivateUsage]

    def counting(fold: Any, record: ViewRecord) -> None:
        folded.append(record.seq)
        advance(fold, record)

    monkeypatch.setattr(module._Fold, "advance", counting)  # pyright: ignore[reportPrivateUsage]
    lazy = ResolvedRecords(records)
    views = [lazy[i] for i in range(len(records))]
    assert folded == list(range(8))
    assert lazy[7] is views[7] and folded == list(range(8))
    assert [v.order for v in views] == [[e.id for e in t[:n]] for n in range(1, 9)]


def test_reading_past_the_end_names_the_index_and_the_count() -> None:
    h = ViewHasher()
    t = texts(1)
    lazy = ResolvedRecords([h.record(request=req(t), order=[t[0].id], replaced={}, injected=())])
    for index in (1, -2):
        with pytest.raises(IndexError, match=rf"^view record {index} of 1$"):
            lazy[index]


def test_a_missing_entry_is_named_with_its_turn_and_a_hint() -> None:
    record = ViewRecord(turn=4, order=["gone"])
    with pytest.raises(LoviaError) as caught:
        rebuild_request(record, texts(1))
    assert caught.value.message == (
        "view of turn 4 uses entry 'gone', which is not in the transcript given"
    )
    assert caught.value.hint == "Pass the session history together with the run's entries."


def test_a_tools_strict_flag_is_rebuilt_and_an_older_record_without_it_is_not_strict() -> None:
    t = texts(1)
    tools = (
        ToolSpec(name="f", description="d", parameters={"type": "object"}, strict=True),
        ToolSpec(name="g", description="e", parameters={"type": "object"}),
    )
    record = ViewHasher().record(
        request=req(t, tools=tools), order=[t[0].id], replaced={}, injected=()
    )
    assert rebuild_request(record, t).tools == tools
    older = record.model_copy(
        update={"tools": [{"name": "f", "description": "d", "parameters": {}}]}
    )
    (tool,) = rebuild_request(older, t).tools
    assert tool.strict is False


def test_an_output_schemas_strict_flag_is_rebuilt_and_strict_when_not_stored() -> None:
    t = texts(1)
    loose = OutputSchema(name="o", schema={"type": "object"}, strict=False)
    record = ViewHasher().record(
        request=req(t, output_schema=loose), order=[t[0].id], replaced={}, injected=()
    )
    assert rebuild_request(record, t).output_schema == loose
    older = record.model_copy(update={"output_schema": {"name": "o", "schema": {}}})
    schema = rebuild_request(older, t).output_schema
    assert schema is not None and schema.strict is True


def test_the_view_hash_is_sha256_of_the_canonical_head_then_each_message() -> None:
    """``lovia.view.hash``: sha256 over the head's canonical JSON (UTF-8, keys sorted, no
    spaces), then a newline and each message's. Stored hashes are checked by replay, so
    the bytes never change: non-ASCII text is hashed as UTF-8, not escaped."""
    import hashlib

    def canon(value: Any) -> bytes:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    t = [TextEntry(text="café ☕", message_id="m0"), TextEntry(text="naïve", message_id="m1")]
    schema = OutputSchema(name="o", schema={"type": "object"})
    request = req(t, system="système", settings=ModelSettings(top_p=0.5), output_schema=schema)
    head = {k: v for k, v in canonical_request(request).items() if k != "messages"}
    assert head["output_schema"] == {"name": "o", "schema": {"type": "object"}, "strict": True}
    want = hashlib.sha256(canon(head))
    for entry in t:
        want.update(b"\n" + canon(entry_to_dict(entry)))
    h = ViewHasher()
    assert h.hash(request) == want.hexdigest()
    other = req(t, system="autre", tools=(), settings=ModelSettings(), output_schema=None)
    assert h.hash(other) == ViewHasher().hash(other) != want.hexdigest()  # a whole new head


def test_a_view_hash_serializes_only_what_it_has_not_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn costs in proportion to what changed: the head and the entries already
    serialized (while they stay in the view) are not serialized again."""
    from lovia.view import record as module

    h = ViewHasher()
    settings = ModelSettings()
    e = texts(300)
    new = [TextEntry(text=f"new {i}", message_id=f"n{i}") for i in range(2)]
    views = [[*e, new[0]], e[:10], [*e[:9], new[1]]]
    h.hash(req(e, settings=settings))
    serialized: list[Any] = []
    canon = module.canonical_entry

    def counting(entry: Any) -> bytes:
        serialized.append(entry)
        return canon(entry)

    monkeypatch.setattr(module, "canonical_entry", counting)
    got = []
    for view in views:
        got.append(h.hash(req(view, settings=settings)))
    assert [v.text for v in serialized] == ["new 0", "new 1"]
    monkeypatch.undo()
    assert got == [ViewHasher().hash(req(v, settings=settings)) for v in views]


def test_a_view_that_shrinks_to_a_prefix_is_a_delta_with_nothing_new() -> None:
    t = texts(3)
    h = ViewHasher()
    r0 = h.record(request=req(t), order=[e.id for e in t], replaced={}, injected=())
    r1 = h.record(request=req(t[:2]), order=[e.id for e in t[:2]], replaced={}, injected=())
    assert (r1.delta, r1.keep, r1.order) == (True, 2, [])
    assert rebuild_messages(r1, {e.id: e for e in t}, [r0]) == t[:2]


def test_a_view_changed_in_the_middle_rehashes_from_the_last_stride_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hash states are kept every STRIDE (32) entries and at the end of each view: a view
    that extends the last one hashes its new entries only, and one that differs from
    entry 70 on hashes again from entry 64. The same request hashed twice is hashed once."""
    h = ViewHasher()
    settings = ModelSettings()
    e = texts(101)
    x, y = TextEntry(text="x", message_id="x"), TextEntry(text="y", message_id="y")
    views = [e[:101], [*e[:100], x], [*e[:70], y, *e[71:100]]]
    h.hash(req(e[:100], settings=settings))
    hashed: list[int] = []
    entry_bytes = ViewHasher.entry_bytes

    def counting(hasher: ViewHasher, entry: TranscriptEntry) -> bytes:
        hashed[-1] += 1
        return entry_bytes(hasher, entry)

    monkeypatch.setattr(ViewHasher, "entry_bytes", counting)
    got: list[str] = []
    for view in views:
        hashed.append(0)
        request = req(view, settings=settings)
        got.append(h.hash(request))
        assert h.hash(request) == got[-1]
    assert hashed == [1, 1, 36]
    monkeypatch.undo()
    assert got == [ViewHasher().hash(req(v, settings=settings)) for v in views]


def test_views_that_differ_from_the_first_entry_hash_as_a_fresh_hasher_would() -> None:
    h = ViewHasher()
    a, b, c = texts(3)
    settings = ModelSettings()  # one head for every view: the hasher resumes from its states
    for view in ([a], [b, c], [], [c]):
        request = req(view, settings=settings)
        assert h.hash(request) == ViewHasher().hash(request)


def test_an_unchanged_output_schema_is_inherited_by_the_next_record() -> None:
    t = texts(2)
    schema = OutputSchema(name="o", schema={"type": "object"})
    h = ViewHasher()
    h.record(request=req(t[:1], output_schema=schema), order=[t[0].id], replaced={}, injected=())
    r1 = h.record(
        request=req(t, output_schema=schema), order=[e.id for e in t], replaced={}, injected=()
    )
    assert "output_schema" in r1.inherit and r1.output_schema is None
