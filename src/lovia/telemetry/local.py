"""The embedded local trace store: spans in a SQLite table, read back by ``lovia trace``.

``configure(exporter="local")`` writes every finished span (through a
``BatchSpanProcessor``, off the event loop) into table ``lovia_spans`` of
``.lovia/lovia.db`` — the same file as the default SQLite run store, in WAL mode.
:func:`load_spans` reads them back, by run id or trace id.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from .._files import private_file
from . import attributes as A

__all__ = ["DEFAULT_PATH", "SQLiteSpanExporter", "load_spans", "path_from_url"]

DEFAULT_PATH = ".lovia/lovia.db"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS lovia_spans (
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    parent_id TEXT,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL,
    status TEXT NOT NULL,
    status_message TEXT,
    attributes TEXT NOT NULL,
    events TEXT NOT NULL,
    links TEXT NOT NULL,
    run_id TEXT,
    PRIMARY KEY (trace_id, span_id)
);
CREATE INDEX IF NOT EXISTS lovia_spans_run ON lovia_spans (run_id, start_ns);
CREATE INDEX IF NOT EXISTS lovia_spans_trace ON lovia_spans (trace_id, start_ns);
"""

_COLUMNS = (
    "trace_id",
    "span_id",
    "parent_id",
    "name",
    "kind",
    "start_ns",
    "end_ns",
    "status",
    "status_message",
    "attributes",
    "events",
    "links",
    "run_id",
)


def path_from_url(path_or_url: str | Path) -> Path:
    """``sqlite:///x.db`` / ``x.db`` → a path."""
    text = str(path_or_url)
    if text.startswith("sqlite:///"):
        text = text[len("sqlite:///") :]
    elif text.startswith("sqlite://"):
        text = text[len("sqlite://") :]
    return Path(text)


def _connect(path: Path) -> sqlite3.Connection:
    private_file(path, what="the span store")  # 0600 file (and -wal/-shm), 0700 new folders
    conn = sqlite3.connect(str(path), timeout=30.0, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=30000")
    conn.executescript(_SCHEMA)
    return conn


def _attrs(value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in dict(value or {}).items():
        out[str(k)] = list(cast("tuple[object, ...]", v)) if isinstance(v, tuple) else v
    return out


def _row(span: Any) -> tuple[Any, ...]:
    ctx = span.context
    parent = span.parent
    attrs = _attrs(span.attributes)
    events = [
        {"name": e.name, "ts_ns": e.timestamp, "attributes": _attrs(e.attributes)}
        for e in span.events
    ]
    links = [
        {
            "trace_id": f"{lk.context.trace_id:032x}",
            "span_id": f"{lk.context.span_id:016x}",
            "attributes": _attrs(lk.attributes),
        }
        for lk in span.links
    ]
    return (
        f"{ctx.trace_id:032x}",
        f"{ctx.span_id:016x}",
        f"{parent.span_id:016x}" if parent is not None else None,
        span.name,
        span.kind.name,
        span.start_time or 0,
        span.end_time or 0,
        span.status.status_code.name,
        span.status.description,
        json.dumps(attrs, default=str),
        json.dumps(events, default=str),
        json.dumps(links),
        attrs.get(A.RUN_ID),
    )


class SQLiteSpanExporter:
    """An OpenTelemetry ``SpanExporter`` writing to ``lovia_spans`` (stdlib sqlite3)."""

    def __init__(self, path: str | Path = DEFAULT_PATH) -> None:
        self.path = path_from_url(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        rows = [_row(s) for s in spans]
        try:
            with self._lock:
                if self._conn is None:
                    self._conn = _connect(self.path)
                with self._conn:
                    self._conn.executemany(
                        f"INSERT OR REPLACE INTO lovia_spans ({', '.join(_COLUMNS)}) "
                        f"VALUES ({', '.join('?' * len(_COLUMNS))})",
                        rows,
                    )
        except sqlite3.Error:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def load_spans(
    path_or_url: str | Path = DEFAULT_PATH,
    *,
    run_id: str | None = None,
    trace_id: str | None = None,
) -> list[dict[str, Any]]:
    """Stored spans (oldest first) as dicts; ``attributes``/``events``/``links`` decoded,
    ``start_time``/``end_time`` (ns) as aliases of ``start_ns``/``end_ns``.

    With ``run_id``, every span of the traces that run appears in (so nested runs and
    user spans in the same trace come along); with ``trace_id``, that trace.
    """
    path = path_from_url(path_or_url)
    if not path.is_file():
        return []
    # read-only: inspecting a store must not create the span table in it
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
    try:
        conn.row_factory = sqlite3.Row
        if not conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'lovia_spans'"
        ).fetchone():
            return []
        sql = f"SELECT {', '.join(_COLUMNS)} FROM lovia_spans"
        args: list[Any] = []
        if run_id is not None:
            sql += " WHERE trace_id IN (SELECT trace_id FROM lovia_spans WHERE run_id = ?)"
            args.append(run_id)
        elif trace_id is not None:
            sql += " WHERE trace_id = ?"
            args.append(trace_id)
        rows = conn.execute(sql + " ORDER BY start_ns, end_ns DESC", args).fetchall()
    finally:
        conn.close()
    out: list[dict[str, Any]] = []
    for row in rows:
        item = dict(row)
        for key in ("attributes", "events", "links"):
            item[key] = json.loads(item[key])
        item["start_time"], item["end_time"] = item["start_ns"], item["end_ns"]  # OTel names
        out.append(item)
    return out
