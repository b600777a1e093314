"""Encoding shared by the persistent stores: JSON text for payloads, flat rows for runs.

Every payload (a record's ``data``, a segment's entries, a run's ``extra`` and
``result``) is stored as compact UTF-8 JSON text written by ``pydantic_core`` (the
fastest encoder at hand). Strings may hold any Unicode scalar value, NUL and U+2028
included; lone surrogates cannot be encoded as UTF-8 and are refused with a
:class:`~lovia.errors.StoreError` before anything is written.

Reading is as strict: a stored value that does not decode (non-JSON text, an unknown
record kind, a version that is not an integer) is a :class:`~lovia.errors.StoreError`
naming the run, the record and what is wrong, never a raw ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import pydantic
import pydantic_core

from ..errors import StoreError
from ..transcript import TranscriptEntry, load_entries
from .base import (
    SCHEMA_VERSION,
    CheckpointRecord,
    RunInfo,
    check_version,
    damaged,
)
from .records import BY_KIND

__all__ = [
    "run_filter",
    "RUN_COLUMNS",
    "EncodedRecord",
    "decode_record",
    "dump_json",
    "encode_entries",
    "encode_records",
    "info_from_row",
    "info_row",
    "join_segments",
    "load_json",
    "load_result",
]

RUN_COLUMNS = (
    "run_id",
    "agent",
    "session_id",
    "status",
    "finish_reason",
    "error_type",
    "turns",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "started_at",
    "ended_at",
    "trace_id",
    "span_id",
    "history_len",
    "version",
    "extra",
    # the parent link of a child run (agents as tools); added to v1 stores by a migration
    "parent_run_id",
    "parent_call_id",
)
"""Columns of the runs table that mirror :class:`RunInfo`, in its field order."""

EncodedRecord = tuple[str, int, str]
"""``(kind, version, data JSON)`` of one checkpoint record, ready for an INSERT."""


def dump_json(value: Any, what: str) -> str:
    """Encode ``value`` as compact JSON text; :class:`StoreError` when it cannot be."""
    return _dump_utf8(value, what).decode()


_ENCODE_ERRORS = (pydantic_core.PydanticSerializationError, UnicodeError, ValueError)


def _dump_utf8(value: Any, what: str) -> bytes:
    """``value`` as compact JSON, UTF-8 encoded (lone surrogates refused)."""
    try:
        return pydantic_core.to_json(value)
    except _ENCODE_ERRORS as exc:
        raise _not_storable(what, exc) from exc


def _not_storable(what: str, exc: Exception) -> StoreError:
    return StoreError(
        f"cannot store {what}: {exc}",
        hint="Stored text must be valid Unicode (no lone surrogates) and data must "
        "be JSON-serializable.",
    )


def load_json(text: str | bytes) -> Any:
    """Decode JSON text written by :func:`dump_json`."""
    return pydantic_core.from_json(text)


_KINDS = frozenset(BY_KIND)
_DECODE_ERRORS = (ValueError, TypeError, pydantic.ValidationError)


def _version(value: Any, what: str) -> int:
    """A stored schema version: an integer no newer than this lovia understands."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise damaged(what, f"its schema version {value!r} is not an integer")
    check_version(value, what)
    return value


def _json(text: Any, what: str) -> Any:
    try:
        return load_json(text)
    except _DECODE_ERRORS as exc:
        raise damaged(what, f"it is not valid JSON ({exc})") from None


def encode_records(
    run_id: str, records: Sequence[CheckpointRecord]
) -> tuple[list[EncodedRecord], int]:
    """Check versions and encode records; return the rows and the payload bytes."""
    rows: list[EncodedRecord] = []
    size = 0
    for record in records:  # the error texts are built only for an error (every write)
        version = record.version
        if version > SCHEMA_VERSION:
            check_version(version, f"checkpoint record of run {run_id}")
        try:
            data = pydantic_core.to_json(record.data)
        except _ENCODE_ERRORS as exc:
            raise _not_storable(f"a {record.kind} record of run {run_id}", exc) from exc
        size += len(data)
        rows.append((record.kind, version, data.decode()))
    return rows, size


def decode_record(
    run_id: str, seq: int, version: Any, kind: Any, data: str | bytes
) -> CheckpointRecord:
    """Rebuild stored record ``seq`` of a run; :class:`StoreError` when it is damaged."""
    what = f"checkpoint record {seq} of run {run_id}"
    _version(version, what)
    if kind not in _KINDS:
        raise damaged(what, f"its kind {kind!r} is not one of {', '.join(sorted(_KINDS))}")
    value = _json(data, what)
    if not isinstance(value, dict):
        raise damaged(what, f"its data is a JSON {type(value).__name__}, not an object")
    data_object = cast("dict[str, Any]", value)  # stored JSON: an object, checked above
    return CheckpointRecord.model_construct(version=version, kind=kind, data=data_object)


def load_result(run_id: str, text: str | bytes | None) -> dict[str, Any] | None:
    """A finished run's stored result (None when it has none)."""
    if text is None:
        return None
    value = _json(text, f"the result of run {run_id}")
    if not isinstance(value, dict):
        raise damaged(f"the result of run {run_id}", "it is not a JSON object")
    return cast("dict[str, Any]", value)  # stored JSON: an object, checked above


def encode_entries(session_id: str, entries: Sequence[TranscriptEntry]) -> str:
    """Encode a session segment as a JSON array of entries (what ``dump_entries`` writes,
    byte for byte: each entry by its own model's serializer, which skips the union's
    dispatch)."""
    try:
        parts = [entry.__pydantic_serializer__.to_json(entry) for entry in entries]
        return (b"[" + b",".join(parts) + b"]").decode()
    except (pydantic_core.PydanticSerializationError, UnicodeError, ValueError) as exc:
        raise StoreError(
            f"cannot store a segment of session {session_id}: {exc}",
            hint="Stored text must be valid Unicode (no lone surrogates).",
        ) from exc


def join_segments(session_id: str, rows: Sequence[tuple[int, str]]) -> list[TranscriptEntry]:
    """Parse ``(version, entries JSON array)`` segments, in order, with one parse call."""
    parts: list[str] = []
    for version, text in rows:
        _version(version, f"a segment of session {session_id}")
        inner = text.strip()[1:-1]
        if inner.strip():
            parts.append(inner)
    if not parts:
        return []
    try:
        return load_entries("[" + ",".join(parts) + "]")
    except _DECODE_ERRORS as exc:
        raise damaged(
            f"the history of session {session_id}", f"its entries do not load ({exc})"
        ) from None


def info_row(info: RunInfo) -> tuple[Any, ...]:
    """The values of :data:`RUN_COLUMNS` for ``info`` (``extra`` as JSON text)."""
    check_version(info.version, f"run {info.run_id}")
    extra = dump_json(info.extra, f"extra of run {info.run_id}")
    return tuple(extra if name == "extra" else getattr(info, name) for name in RUN_COLUMNS)


def info_from_row(row: Sequence[Any]) -> RunInfo:
    """Rebuild a :class:`RunInfo` from the :data:`RUN_COLUMNS` of a row."""
    version = _version(row[15], f"run {row[0]}")
    extra: Any = _json(row[16], f"the extra column of run {row[0]}") if row[16] else {}
    if not isinstance(extra, dict):
        raise damaged(f"the extra column of run {row[0]}", "it is not a JSON object")
    return RunInfo(
        run_id=row[0],
        agent=row[1],
        session_id=row[2],
        status=row[3],
        finish_reason=row[4],
        error_type=row[5],
        turns=row[6],
        input_tokens=row[7],
        output_tokens=row[8],
        cost_usd=row[9],
        started_at=row[10],
        ended_at=row[11],
        trace_id=row[12],
        span_id=row[13],
        history_len=row[14],
        version=version,
        extra=cast("dict[str, Any]", extra),  # stored JSON: an object, checked above
        parent_run_id=row[17],
        parent_call_id=row[18],
    )


def run_filter(
    placeholder: Callable[[int], str],
    *,
    top_level: bool = False,
    labels: Mapping[str, str] | None = None,
    label_sql: Callable[[str], tuple[str, str]] | None = None,
    **filters: str | None,
) -> tuple[str, list[Any]]:
    """``(WHERE clause, params)`` for the given column filters (None = no filter).

    ``placeholder(n)`` renders the n-th (1-based) parameter: ``?`` or ``$n``;
    ``top_level`` keeps only runs that are not child runs. ``labels``: runs carrying
    every one of these labels; ``label_sql(key)`` is the store's ``(clause with {key}
    and {value} placeholders, key parameter)``.
    """
    clauses: list[str] = ["parent_run_id IS NULL"] if top_level else []
    params: list[Any] = []
    for column, value in filters.items():
        if value is not None:
            params.append(value)
            clauses.append(f"{column} = {placeholder(len(params))}")
    for key, value in (labels or {}).items():
        assert label_sql is not None, "a store filtering on labels passes label_sql"
        clause, key_param = label_sql(key)
        params.extend((key_param, value))
        n = len(params)
        clauses.append(clause.format(key=placeholder(n - 1), value=placeholder(n)))
    return (f"WHERE {' AND '.join(clauses)}" if clauses else ""), params
