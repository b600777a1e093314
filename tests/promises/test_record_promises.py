"""What a checkpoint stores is what resume reads back: counters, calibration, the ledger."""

from __future__ import annotations

import pytest

from lovia.errors import StoreError
from lovia.stores.base import SCHEMA_VERSION, CheckpointRecord, RunInfo, RunSnapshot
from lovia.stores.records import (
    LedgerRecord,
    StateRecord,
    read_record,
    read_records,
    to_checkpoint,
)
from lovia.usage import Usage

USAGE = Usage(input_tokens=10, output_tokens=5, tool_calls=2, requests=1, cost_usd=0.5)


def test_a_state_record_keeps_the_last_reported_input_tokens() -> None:
    """A resumed run's context estimate starts calibrated: the last call's input tokens
    are stored with the counters and read back."""
    record = StateRecord(turn=3, usage=USAGE, agent="a", last_input_tokens=1234, trace="t:s")
    stored = to_checkpoint(record)
    assert stored.kind == "state" and stored.version == SCHEMA_VERSION
    assert stored.data["last_input_tokens"] == 1234
    back = read_record(stored)
    assert back == record


def test_an_unreported_count_is_stored_as_none_not_left_out() -> None:
    record = StateRecord(turn=1, usage=USAGE, agent="a", last_input_tokens=None)
    stored = to_checkpoint(record)
    assert "last_input_tokens" in stored.data and stored.data["last_input_tokens"] is None
    back = read_record(stored)
    assert isinstance(back, StateRecord) and back.tokens_recorded is True


def test_an_older_record_without_the_count_says_so() -> None:
    record = StateRecord(turn=1, usage=USAGE, agent="a", tokens_recorded=False)
    stored = to_checkpoint(record)
    assert "last_input_tokens" not in stored.data
    back = read_record(stored)
    assert isinstance(back, StateRecord) and back.tokens_recorded is False
    assert "trace" not in stored.data


def test_a_state_record_keeps_every_usage_counter() -> None:
    back = read_record(to_checkpoint(StateRecord(turn=2, usage=USAGE, agent=None)))
    assert isinstance(back, StateRecord)
    assert back.usage == USAGE and back.agent is None and back.turn == 2


@pytest.mark.parametrize("status", ["started", "completed", "failed"])
def test_a_ledger_record_round_trips(status: str) -> None:
    record = LedgerRecord(call_id="c1", status=status, key="r:c1")  # type: ignore[arg-type]
    stored = to_checkpoint(record)
    assert stored.data == {"call_id": "c1", "status": status, "key": "r:c1"}
    assert read_record(stored) == record


def test_a_childs_usage_travels_with_its_ledger_entry() -> None:
    record = LedgerRecord(call_id="c1", status="completed", key="r:c1", child_usage=USAGE)
    back = read_record(to_checkpoint(record))
    assert isinstance(back, LedgerRecord) and back.child_usage == USAGE


def test_a_damaged_record_is_named_by_its_position() -> None:
    good = to_checkpoint(StateRecord(turn=1, usage=USAGE, agent="a"))
    bad = CheckpointRecord(version=SCHEMA_VERSION, kind="ledger", data={"status": "completed"})
    snap = RunSnapshot(info=RunInfo(run_id="r1", agent="a"), records=[good, bad])
    with pytest.raises(StoreError) as info:
        list(read_records(snap, {"state", "ledger"}))
    assert "checkpoint record 2 of run r1" in str(info.value)
    # records of other kinds are not even read
    assert [type(r) for r in read_records(snap, {"state"})] == [StateRecord]


def test_records_of_other_kinds_are_skipped_not_the_end_of_the_run() -> None:
    ledger = to_checkpoint(LedgerRecord(call_id="c", status="started", key="r:c"))
    state = to_checkpoint(StateRecord(turn=4, usage=USAGE, agent="a"))
    snap = RunSnapshot(info=RunInfo(run_id="r1", agent="a"), records=[ledger, state, ledger])
    found = list(read_records(snap, {"state"}))
    assert [type(r) for r in found] == [StateRecord]
    assert [type(r) for r in read_records(snap, {"ledger"})] == [LedgerRecord, LedgerRecord]


def test_an_entries_record_without_entries_is_an_empty_append() -> None:
    from lovia.stores.records import EntriesRecord

    record = read_record(CheckpointRecord(version=SCHEMA_VERSION, kind="entries", data={}))
    assert record == EntriesRecord(())
