"""The stores' shared codec: a run row and its records read back as written, bad stored
values are errors that name the run and the problem, and run filters select the rows
they say (run against SQLite, the embedded store's engine)."""

from __future__ import annotations

import dataclasses
import sqlite3
from typing import Any, cast

import pytest

from lovia.errors import SchemaVersionError, StoreError
from lovia.stores._codec import (
    RUN_COLUMNS,
    decode_record,
    dump_json,
    encode_entries,
    encode_records,
    info_from_row,
    info_row,
    join_segments,
    load_result,
    run_filter,
)
from lovia.stores.base import CheckpointRecord, RunInfo
from lovia.stores.sqlite import _label_sql as sqlite_label_sql  # the store's own lookup
from lovia.transcript import (
    HandoffEntry,
    InputEntry,
    ReasoningEntry,
    SystemEntry,
    TextEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    dump_entries,
    load_entries,
)

CHILD = RunInfo(
    run_id="child-1",
    agent="helper",
    session_id="s1",
    status="completed",
    finish_reason="stop",
    turns=2,
    input_tokens=30,
    output_tokens=7,
    cost_usd=0.25,
    started_at=10.0,
    ended_at=12.5,
    trace_id="t" * 32,
    span_id="s" * 16,
    history_len=4,
    extra={"note": "ok"},
    parent_run_id="parent-1",
    parent_call_id="call-9",
)


def test_a_run_row_reads_back_as_written_parent_link_included() -> None:
    row = info_row(CHILD)
    assert len(row) == len(RUN_COLUMNS)
    assert info_from_row(row) == CHILD


def test_a_run_row_without_extra_reads_back_an_empty_extra() -> None:
    row = list(info_row(dataclasses.replace(CHILD, extra={})))
    row[RUN_COLUMNS.index("extra")] = None  # a row written before extra was filled
    assert info_from_row(row).extra == {}


def test_an_extra_column_that_is_not_an_object_names_the_run() -> None:
    row = list(info_row(CHILD))
    row[RUN_COLUMNS.index("extra")] = "[1, 2]"
    with pytest.raises(StoreError) as exc:
        info_from_row(row)
    problem = "it is not a JSON object"
    assert exc.value.message == f"the extra column of run child-1 is damaged: {problem}"


def test_a_run_row_with_a_bad_version_names_the_run() -> None:
    row = list(info_row(CHILD))
    row[RUN_COLUMNS.index("version")] = "1"
    with pytest.raises(StoreError, match=r"^run child-1 is damaged: its schema version"):
        info_from_row(row)


def test_unstorable_extra_names_the_run() -> None:
    with pytest.raises(StoreError, match=r"^cannot store extra of run child-1: ") as exc:
        info_row(dataclasses.replace(CHILD, extra={"bad": "\ud800"}))
    assert exc.value.hint == (
        "Stored text must be valid Unicode (no lone surrogates) and data must be JSON-serializable."
    )
    with pytest.raises(StoreError, match=r"^cannot store the answer: .*surrogate"):
        dump_json("\ud800", "the answer")


def test_a_result_that_is_not_an_object_names_the_run() -> None:
    assert load_result("r1", None) is None
    assert load_result("r1", '{"output": "hi"}') == {"output": "hi"}
    with pytest.raises(StoreError) as exc:
        load_result("r1", '"hi"')
    assert exc.value.message == "the result of run r1 is damaged: it is not a JSON object"


def test_encoded_records_count_their_payload_bytes() -> None:
    records = [
        CheckpointRecord(kind="state", data={"turn": 1}),
        CheckpointRecord(kind="entries", data={"entries": ["é"]}),
    ]
    rows, size = encode_records("r1", records)
    assert rows == [
        ("state", 1, '{"turn":1}'),
        ("entries", 1, '{"entries":["é"]}'),
    ]
    assert size == sum(len(data.encode()) for _, _, data in rows)


def test_an_unstorable_record_names_its_kind_and_run() -> None:
    bad = CheckpointRecord(kind="state", data={"text": "\ud800"})
    with pytest.raises(StoreError, match=r"^cannot store a state record of run r1: .*surrogate"):
        encode_records("r1", [bad])


def test_a_decoded_record_keeps_its_stored_version() -> None:
    record = decode_record("r1", 3, 0, "state", '{"turn": 2}')
    assert (record.version, record.kind, record.data) == (0, "state", {"turn": 2})


def test_a_record_whose_data_is_not_an_object_is_damaged() -> None:
    with pytest.raises(StoreError) as exc:
        decode_record("r1", 3, 1, "state", "[1]")
    assert exc.value.message == (
        "checkpoint record 3 of run r1 is damaged: its data is a JSON list, not an object"
    )


def _select(top_level: bool = False, **filters: str | None) -> list[str]:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE runs (run_id TEXT, agent TEXT, status TEXT, parent_run_id TEXT)")
    db.executemany(
        "INSERT INTO runs VALUES (?, ?, ?, ?)",
        [
            ("a", "triage", "completed", None),
            ("b", "triage", "failed", None),
            ("c", "helper", "completed", "a"),
        ],
    )
    where, params = run_filter(lambda n: "?", top_level=top_level, **filters)
    found = db.execute(f"SELECT run_id FROM runs {where} ORDER BY run_id", params).fetchall()
    return [run_id for (run_id,) in found]


def test_run_filters_select_the_rows_they_name() -> None:
    assert _select() == ["a", "b", "c"]
    assert _select(agent="triage", status=None) == ["a", "b"]
    assert _select(agent="triage", status="failed") == ["b"]
    assert _select(top_level=True) == ["a", "b"]
    assert _select(top_level=True, status="completed") == ["a"]


def test_run_filters_number_their_placeholders() -> None:
    where, params = run_filter(lambda n: f"${n}", top_level=True, agent="x", status="y")
    assert where == "WHERE parent_run_id IS NULL AND agent = $1 AND status = $2"
    assert params == ["x", "y"]
    assert run_filter(lambda n: "?") == ("", [])


def test_an_older_run_row_keeps_its_version() -> None:
    row = list(info_row(CHILD))
    row[RUN_COLUMNS.index("version")] = 0
    assert info_from_row(row).version == 0


def test_rows_and_records_from_a_newer_lovia_are_refused_naming_the_run() -> None:
    with pytest.raises(SchemaVersionError, match=r"^run child-1 has schema version 99"):
        info_row(dataclasses.replace(CHILD, version=99))
    newer = CheckpointRecord(version=99, kind="state", data={})
    with pytest.raises(SchemaVersionError, match=r"^checkpoint record of run r1 has schema"):
        encode_records("r1", [newer])


EVERY_KIND: list[TranscriptEntry] = [
    SystemEntry(id="e1", run_id="r1", content="be brief"),
    InputEntry(id="e2", run_id="r1", turn=1, content="hi \u2028 \x00 \U0001f600"),
    ReasoningEntry(id="e3", text="hm", signature="s", details={"ids": ("a", "b"), "n": 1.5}),
    TextEntry(id="e4", text="hello", message_id="m1"),
    ToolCallEntry(id="e5", call_id="c1", name="add", arguments='{"a": 1}'),
    ToolResultEntry(id="e6", call_id="c1", name="add", content="2", is_error=True),
    HandoffEntry(id="e7", from_agent="a", to_agent="b", call_id="c2"),
]


def test_a_segment_is_stored_as_the_transcripts_own_json_of_its_entries() -> None:
    """Byte for byte what ``dump_entries`` writes, so a segment loads back equal, for
    every entry kind, an empty segment included."""
    text = encode_entries("s1", EVERY_KIND)
    assert text.encode() == dump_entries(EVERY_KIND)
    assert load_entries(text) == EVERY_KIND
    assert encode_entries("s1", []) == "[]" == dump_entries([]).decode()


def test_an_unstorable_segment_names_the_session_and_says_why() -> None:
    bad = [InputEntry.model_construct(role="user", content="\ud800")]
    with pytest.raises(StoreError, match=r"^cannot store a segment of session s1: ") as exc:
        encode_entries("s1", bad)
    assert exc.value.hint == "Stored text must be valid Unicode (no lone surrogates)."


def test_damaged_segments_name_the_session() -> None:
    with pytest.raises(StoreError, match=r"^a segment of session s1 is damaged: its schema"):
        join_segments("s1", [(cast(Any, "1"), "[]")])
    with pytest.raises(StoreError) as exc:
        join_segments("s1", [(1, "[{]")])
    assert exc.value.message.startswith(
        "the history of session s1 is damaged: its entries do not load ("
    )


def _select_labelled(labels: dict[str, str], **filters: str | None) -> list[str]:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE runs (run_id TEXT, agent TEXT, extra TEXT)")
    db.executemany(
        "INSERT INTO runs VALUES (?, ?, ?)",
        [
            ("a", "triage", '{"labels": {"tenant": "acme", "env": "prod"}}'),
            ("b", "triage", '{"labels": {"tenant": "acme", "env": "dev"}}'),
            ("c", "helper", '{"labels": {"tenant": "zeta", "env": "prod"}}'),
            ("d", "triage", "{}"),
        ],
    )
    where, params = run_filter(lambda n: "?", labels=labels, label_sql=sqlite_label_sql, **filters)
    found = db.execute(f"SELECT run_id FROM runs {where} ORDER BY run_id", params).fetchall()
    return [run_id for (run_id,) in found]


def test_label_filters_select_the_runs_carrying_every_label() -> None:
    assert _select_labelled({}) == ["a", "b", "c", "d"]
    assert _select_labelled({"tenant": "acme"}) == ["a", "b"]
    assert _select_labelled({"env": "prod"}) == ["a", "c"]
    assert _select_labelled({"tenant": "acme", "env": "prod"}) == ["a"]
    assert _select_labelled({"tenant": "acme"}, agent="helper") == []
    assert _select_labelled({"env": "prod"}, agent="helper") == ["c"]


def test_label_filters_number_the_key_and_value_after_the_columns() -> None:
    where, params = run_filter(
        lambda n: f"${n}",
        labels={"tenant": "acme", "env": "prod"},
        label_sql=lambda key: ("(labels ->> {key}) = {value}", key),
        agent="x",
    )
    assert where == ("WHERE agent = $1 AND (labels ->> $2) = $3 AND (labels ->> $4) = $5")
    assert params == ["x", "tenant", "acme", "env", "prod"]
