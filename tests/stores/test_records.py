"""Typed checkpoint records: the v1 corpus reads into them and writes back key for key;
data that does not fit its kind is a StoreError naming the record on resume and replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent, Runner, tool
from lovia.errors import StoreError
from lovia.replay import load_run
from lovia.stores import CheckpointRecord, RunInfo, RunSnapshot
from lovia.stores.base import SCHEMA_VERSION
from lovia.stores.memory import MemoryStore
from lovia.stores.records import (
    CallUsageRecord,
    EntriesRecord,
    LedgerRecord,
    StateRecord,
    ViewNote,
    read_record,
    to_checkpoint,
)
from lovia.testing import ScriptedModel, call
from lovia.usage import Usage

CORPUS = sorted((Path(__file__).parent / "corpus").glob("v*.json"))


def _corpus_records() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in CORPUS:
        for run in json.loads(path.read_text(encoding="utf-8"))["runs"]:
            out.extend(run["records"])
    return out


def test_every_corpus_record_reads_typed_and_writes_back_the_same_json() -> None:
    kinds = {EntriesRecord: "entries", LedgerRecord: "ledger", StateRecord: "state"}
    seen: set[str] = set()
    for stored in _corpus_records():
        if stored["kind"] == "view":  # the corpus's view payloads are stand-ins (make_corpus)
            continue
        record = read_record(CheckpointRecord.model_validate(stored))
        assert kinds[type(record)] == stored["kind"]
        assert read_record(to_checkpoint(record)) == record
        if stored["kind"] != "state":  # v1 state usage may hold fewer counters than lovia writes
            assert to_checkpoint(record).model_dump() == stored
        seen.add(stored["kind"])
    assert seen == set(kinds.values())


@tool
def look(item: str) -> str:
    """Look an item up."""
    return f"{item}: found"


async def test_records_a_run_writes_read_back_typed_and_unchanged() -> None:
    db = MemoryStore()
    model = ScriptedModel([call("look", item="A1"), "done"])
    agent = Agent(name="a", model=model, tools=[look])
    await Runner.run(agent, "find A1", run_id="r1", checkpointer=db)
    snapshot = await db.load("r1")
    assert snapshot is not None
    typed = [read_record(r) for r in snapshot.records]
    assert [to_checkpoint(r).model_dump() for r in typed] == [
        r.model_dump() for r in snapshot.records
    ]
    ledger = [(r.call_id, r.status) for r in typed if isinstance(r, LedgerRecord)]
    assert [status for _, status in ledger] == ["started", "completed"]
    states = [r for r in typed if isinstance(r, StateRecord)]
    assert [s.turn for s in states] == [1, 2] and states[-1].usage.output_tokens > 0
    assert len([r for r in typed if isinstance(r, ViewNote)]) == 2


def test_state_record_without_input_tokens_keeps_the_earlier_value() -> None:
    def state(**data: Any) -> CheckpointRecord:
        return CheckpointRecord(kind="state", data={"turn": 1, "usage": {}, "agent": "a", **data})

    records = [state(last_input_tokens=812), state(trace="t:s"), state()]
    snapshot = RunSnapshot(info=RunInfo(run_id="r1", agent="a"), records=records)
    from lovia._loop.checkpoint import restore

    point = restore(snapshot)
    assert point.last_input_tokens == 812
    assert point.trace_links == ("t:s",)
    unknown = restore(RunSnapshot(info=snapshot.info, records=[state(last_input_tokens=None)]))
    assert unknown.last_input_tokens is None


def test_ledger_record_carries_the_child_runs_usage() -> None:
    child = Usage(input_tokens=7, output_tokens=3, cost_usd=0.5)
    record = LedgerRecord(call_id="c1", status="completed", key="r1:c1", child_usage=child)
    stored = to_checkpoint(record)
    assert stored.data == {
        "call_id": "c1",
        "status": "completed",
        "key": "r1:c1",
        "child_usage": child.to_dict(),
    }
    assert read_record(stored) == record
    started = to_checkpoint(LedgerRecord(call_id="c1", status="started", key="r1:c1"))
    assert "child_usage" not in started.data


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
async def test_resuming_with_an_unknown_ledger_status_is_a_store_error() -> None:
    # a status this lovia never writes would have let resume treat the call as not run
    db = MemoryStore()
    await db.begin(RunInfo(run_id="r1", agent="a", status="failed"))
    bad = {"call_id": "c1", "status": "exploded", "key": "r1:c1"}
    await db.append("r1", [CheckpointRecord(kind="ledger", data=bad)])
    model = ScriptedModel(["never"])
    with pytest.raises(StoreError) as info:
        await Runner.run(Agent(name="a", model=model), None, run_id="r1", checkpointer=db)
    assert info.value.message.startswith("checkpoint record 1 of run r1 is damaged: its ledger")
    assert "status" in info.value.message and model.requests == []


async def test_replay_names_a_damaged_state_record() -> None:
    db = MemoryStore()
    await db.begin(RunInfo(run_id="r1", agent="a", status="completed"))
    good = {"turn": 1, "usage": {"input_tokens": 3}, "agent": "a"}
    damaged = {"turn": "one", "usage": {}, "agent": "a"}
    await db.append("r1", [CheckpointRecord(kind="state", data=good)])
    run = await load_run("r1", db)
    assert [(s.turn, s.usage.input_tokens) for s in run.states] == [(1, 3)]
    await db.append("r1", [CheckpointRecord(kind="state", data=damaged)])
    with pytest.raises(StoreError, match=r"^checkpoint record 2 of run r1 is damaged: its state"):
        await load_run("r1", db)


KINDS_CORPUS = Path(__file__).parent / "corpus" / "kinds_v1.json"


def test_records_of_every_kind_written_by_an_earlier_lovia_read_and_write_back() -> None:
    """``corpus/kinds_v1.json`` was written by the lovia before the record registry
    (``make_kinds_corpus.py``): each record reads into the same typed record and writes
    back the same JSON, byte for byte."""
    import pydantic_core

    corpus = json.loads(KINDS_CORPUS.read_text(encoding="utf-8"))
    assert {e["kind"] for e in corpus} == {
        "entries",
        "ledger",
        "state",
        "view",
        "attempt",
        "approval",
        "failed_call",
    }
    for entry in corpus:
        stored = CheckpointRecord.model_validate({k: entry[k] for k in ("version", "kind", "data")})
        record = read_record(stored)
        assert repr(record) == entry["typed"]
        written = to_checkpoint(record)
        assert written.kind == entry["kind"] and written.version == entry["version"]
        assert pydantic_core.to_json(written.data).decode() == entry["written_back"]


def test_each_kind_is_described_once_and_the_names_agree() -> None:
    """``RECORD_TYPES`` is the one table: the stored names (``RecordKind``), the typed
    classes (``Record``) and the stores' kind check all come from it."""
    from typing import get_args

    from lovia.stores import _codec
    from lovia.stores.base import RecordKind
    from lovia.stores.records import BY_KIND, RECORD_TYPES, Record

    assert [t.kind for t in RECORD_TYPES] == list(get_args(RecordKind))
    assert {t.cls for t in RECORD_TYPES} == set(get_args(Record))
    assert frozenset(BY_KIND) == _codec._KINDS  # pyright: ignore[reportPrivateUsage]
    with pytest.raises(StoreError, match="is not one of approval, attempt, entries"):
        _codec.decode_record("r1", 1, 1, "mystery", "{}")


def test_a_usage_record_is_stored_key_for_key_and_reads_back() -> None:
    """A model call's usage record (what ``lovia reprice`` prices again) stores its turn,
    purpose, provider, model, usage and price source; an unpriced call has no source key."""
    usage = Usage(input_tokens=40, output_tokens=8, requests=1, cost_usd=0.25)
    priced = CallUsageRecord(
        turn=2,
        purpose="summary",
        provider="openai",
        model="gpt-x",
        usage=usage,
        source="genai-prices==1.0",
    )
    stored = to_checkpoint(priced)
    assert (stored.version, stored.kind) == (SCHEMA_VERSION, "usage")
    assert stored.data == {
        "turn": 2,
        "purpose": "summary",
        "provider": "openai",
        "model": "gpt-x",
        "usage": usage.to_dict(),
        "source": "genai-prices==1.0",
    }
    assert read_record(stored) == priced
    unpriced = CallUsageRecord(turn=2, purpose="main", provider="p", model="m", usage=usage)
    assert "source" not in to_checkpoint(unpriced).data
    assert read_record(to_checkpoint(unpriced)) == unpriced


def test_a_usage_record_with_only_its_turn_reads_as_an_unpriced_main_call() -> None:
    """The other fields of a usage record may be missing: the call then reads as the
    run's main call, provider and model unknown (""), no usage, unpriced."""
    record = read_record(CheckpointRecord(kind="usage", data={"turn": 3}))
    assert record == CallUsageRecord(
        turn=3, purpose="main", provider="", model="", usage=Usage(), source=None
    )


def test_a_state_record_without_usage_reads_as_zero_usage() -> None:
    record = read_record(CheckpointRecord(kind="state", data={"turn": 4, "agent": "a"}))
    assert isinstance(record, StateRecord)
    assert (record.turn, record.agent, record.usage) == (4, "a", Usage())


def test_a_ledger_record_without_a_key_reads_with_an_empty_key() -> None:
    stored = CheckpointRecord(kind="ledger", data={"call_id": "c1", "status": "failed"})
    assert read_record(stored) == LedgerRecord(call_id="c1", status="failed", key="")


def test_an_entries_record_stores_each_entry_as_the_transcript_dicts_it() -> None:
    """Every entry kind, JSON types included (a tuple in a reasoning entry's details is
    stored as a list), and it reads back as the same entries."""
    from lovia.transcript import (
        HandoffEntry,
        InputEntry,
        ReasoningEntry,
        SystemEntry,
        TextEntry,
        ToolCallEntry,
        ToolResultEntry,
        entry_to_dict,
    )

    entries = (
        SystemEntry(content="be brief"),
        InputEntry(content="hi"),
        ReasoningEntry(text="hm", details={"ids": ("a", "b")}),
        TextEntry(text="hello"),
        ToolCallEntry(call_id="c1", name="add"),
        ToolResultEntry(call_id="c1", name="add", content="2"),
        HandoffEntry(from_agent="a", to_agent="b"),
    )
    stored = to_checkpoint(EntriesRecord(entries))
    assert stored == CheckpointRecord(
        version=SCHEMA_VERSION,
        kind="entries",
        data={"entries": [entry_to_dict(e) for e in entries]},
    )
    assert stored.data["entries"][2]["details"] == {"ids": ["a", "b"]}
    assert stored.model_fields_set == {"version", "kind", "data"}
    assert read_record(stored) == EntriesRecord(entries)


def test_a_plain_record_kind_stores_its_fields_without_nones_and_validates_on_read() -> None:
    """The attempt, approval, failed-call and reprice kinds are ``plain``: stored as their
    fields with None values left out, read back validated against the field types. The
    table builds them when lovia is imported; this builds one afresh to check the recipe."""
    from pydantic import ValidationError

    from lovia.stores.records import AttemptRecord, plain

    kind = plain("attempt", AttemptRecord)
    assert (kind.kind, kind.cls) == ("attempt", AttemptRecord)
    record = AttemptRecord(attempt=2, at=5.0, host="h", pid=7, fence=3, previous="killed")
    data = kind.encode(record)
    assert data == {
        "attempt": 2,
        "at": 5.0,
        "host": "h",
        "pid": 7,
        "pid_started": "",
        "fence": 3,
        "previous": "killed",
    }
    assert kind.decode(data) == record
    assert kind.decode({"attempt": 1, "at": 0.5}) == AttemptRecord(attempt=1, at=0.5)
    with pytest.raises(ValidationError, match="attempt"):
        kind.decode({"attempt": "first", "at": 0.5})
