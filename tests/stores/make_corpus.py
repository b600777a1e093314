"""Write the stored-data corpus for the current schema version.

    .venv/bin/python tests/stores/make_corpus.py

Writes ``tests/stores/corpus/v{SCHEMA_VERSION}.json``: runs (info, records, result)
and sessions (segments of entries) exactly as a store hands them out, covering every
entry type, record kind and run status. A corpus file is written once, when a schema
version is introduced, committed, and never regenerated: ``test_corpus.py`` loads
every corpus into every store forever after, so old data keeps loading.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from lovia.stores import SCHEMA_VERSION
from lovia.stores.base import RunInfo
from lovia.transcript import (
    HandoffEntry,
    InputEntry,
    ReasoningEntry,
    SystemEntry,
    TextEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    entry_to_dict,
)

HERE = Path(__file__).parent / "corpus"
T0 = 1_750_000_000.0


def _entries(run_id: str) -> list[TranscriptEntry]:
    common: dict[str, Any] = {"run_id": run_id, "agent": "support"}
    return [
        SystemEntry(id=f"{run_id}-sys", ts=T0, content="Be brief. 简洁。", **common),
        InputEntry(id=f"{run_id}-in", ts=T0 + 1, content="Where is order A1? 😀", **common),
        ReasoningEntry(
            id=f"{run_id}-think",
            ts=T0 + 2,
            turn=1,
            text="look it up",
            signature="sig==",
            provider="anthropic",
            message_id="m1",
            details={"item_id": "rs_1"},
            **common,
        ),
        ToolCallEntry(
            id=f"{run_id}-call",
            ts=T0 + 2,
            turn=1,
            call_id="call_1",
            name="lookup_order",
            arguments='{"order_id": "A1"}',
            message_id="m1",
            **common,
        ),
        ToolResultEntry(
            id=f"{run_id}-res",
            ts=T0 + 3,
            turn=1,
            call_id="call_1",
            name="lookup_order",
            content="A1: shipped\x00 — 已发货\u2028",
            **common,
        ),
        HandoffEntry(
            id=f"{run_id}-hand",
            ts=T0 + 3,
            turn=1,
            from_agent="support",
            to_agent="billing",
            call_id="call_2",
            **common,
        ),
        TextEntry(
            id=f"{run_id}-out", ts=T0 + 4, turn=2, text="Shipped.", message_id="m2", **common
        ),
    ]


def _records(run_id: str, entries: list[TranscriptEntry]) -> list[dict[str, Any]]:
    dump = [entry_to_dict(e) for e in entries]
    usage = {"input_tokens": 120, "output_tokens": 14, "cost_usd": 0.00042}
    return [
        {"version": 1, "kind": "entries", "data": {"entries": dump[:2]}},
        {"version": 1, "kind": "entries", "data": {"entries": dump[2:4]}},
        {
            "version": 1,
            "kind": "ledger",
            "data": {"call_id": "call_1", "status": "started", "key": f"{run_id}:call_1"},
        },
        {"version": 1, "kind": "entries", "data": {"entries": dump[4:6]}},
        {
            "version": 1,
            "kind": "ledger",
            "data": {"call_id": "call_1", "status": "completed", "key": f"{run_id}:call_1"},
        },
        {
            "version": 1,
            "kind": "view",
            "data": {"turn": 1, "hash": "sha256:00ff", "entry_ids": [e.id for e in entries[:2]]},
        },
        {"version": 1, "kind": "state", "data": {"turn": 1, "usage": usage, "agent": "billing"}},
        {"version": 1, "kind": "entries", "data": {"entries": dump[6:]}},
    ]


def _run(run_id: str, status: str, n: int) -> dict[str, Any]:
    info = RunInfo(
        run_id=run_id,
        agent="support",
        session_id="thread-1" if n < 3 else None,
        status=status,  # type: ignore[arg-type]
        finish_reason={"completed": "stop", "failed": "error", "paused": "approval_pending"}.get(
            status
        ),
        error_type="ProviderError" if status == "failed" else None,
        turns=2,
        input_tokens=120,
        output_tokens=14,
        cost_usd=0.00042,
        started_at=T0 + 100 * n,
        ended_at=None if status == "running" else T0 + 100 * n + 5,
        trace_id=f"{n + 1:032x}",
        span_id=f"{n + 1:016x}",
        history_len=0 if n == 0 else 7,
        extra={"first_agent": "support"},
    )
    entries = _entries(run_id)
    result = {"output": "Shipped.", "turns": 2} if status == "completed" else None
    return {
        "info": dataclasses.asdict(info),
        "records": _records(run_id, entries),
        "result": result,
        "entries": [entry_to_dict(e) for e in entries],
    }


def corpus() -> dict[str, Any]:
    """The corpus of the current schema version."""
    runs = [
        _run(f"run-{n}-{status}", status, n)
        for n, status in enumerate(["completed", "completed", "failed", "paused", "running"])
    ]
    sessions = [
        {
            "session_id": "thread-1",
            "segments": [
                {"run_id": run["info"]["run_id"], "entries": run["entries"]} for run in runs[:2]
            ],
        }
    ]
    for run in runs:
        del run["entries"]
    return {"schema_version": SCHEMA_VERSION, "runs": runs, "sessions": sessions}


def main() -> None:
    HERE.mkdir(exist_ok=True)
    path = HERE / f"v{SCHEMA_VERSION}.json"
    if path.exists() and "--force" not in sys.argv:
        sys.exit(f"{path} exists; a corpus is never regenerated (use --force to override)")
    path.write_text(json.dumps(corpus(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
