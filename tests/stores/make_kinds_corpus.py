"""Write ``corpus/kinds_v1.json``: one stored record of every kind, as lovia writes them.

    PYTHONPATH=src .venv/bin/python tests/stores/make_kinds_corpus.py

Each entry is a record's stored envelope (``kind``, ``version``, ``data``), the ``repr``
of the typed record it reads into and the JSON that record writes back, all made by the
lovia that wrote the file:
a real run (entries, ledger, state, view, attempt records) plus hand-built records for
the fields a run does not exercise (approvals, failed calls, a child's usage, a state
record of an older lovia). Written once, committed, and never regenerated:
``test_records.py`` checks that every entry still reads into the same typed record and
writes back the same JSON, byte for byte.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pydantic_core

from lovia import Agent, Runner, tool
from lovia.stores.memory import MemoryStore
from lovia.stores.records import (
    ApprovalRecord,
    AttemptRecord,
    FailedCallRecord,
    LedgerRecord,
    Record,
    StateRecord,
    read_record,
    to_checkpoint,
)
from lovia.testing import ScriptedModel, call
from lovia.usage import Usage

OUT = Path(__file__).parent / "corpus" / "kinds_v1.json"


@tool
def look(item: str) -> str:
    """Look an item up."""
    return f"{item}: found"


def _by_hand() -> list[Record]:
    usage = Usage(input_tokens=12, output_tokens=3, requests=1, cost_usd=0.0025)
    return [
        LedgerRecord(call_id="c9", status="completed", key="r:c9", child_usage=usage),
        LedgerRecord(call_id="c8", status="failed", key="r:c8"),
        StateRecord(turn=4, usage=usage, agent=None, tokens_recorded=False, trace="ab:cd"),
        StateRecord(turn=2, usage=usage, agent="a", last_input_tokens=None),
        AttemptRecord(
            attempt=2,
            at=1.5,
            host="h",
            pid=7,
            pid_started="9",
            fence=3,
            trace="t:s",
            previous="killed",
            previous_ended_at=1.25,
        ),
        ApprovalRecord(
            call_id="c1",
            tool="pay",
            decision="denied",
            actor="cli:ann",
            at=2.0,
            reason="too \u00e9xpensive \u2028",
        ),
        ApprovalRecord(call_id="c2", tool="pay", decision="approved", actor="policy:p", at=3),
        FailedCallRecord(
            turn=1,
            attempt=1,
            view_hash="ab" * 32,
            error_type="ProviderError",
            message="429",
            status=429,
            retries=2,
            provider="openai",
            model="m",
            at=4.0,
        ),
        FailedCallRecord(
            turn=2, attempt=1, view_hash="cd" * 32, error_type="Timeout", message="idle"
        ),
    ]


async def _recorded() -> list[dict[str, Any]]:
    db = MemoryStore()
    model = ScriptedModel([call("look", item="A1"), "done"])
    result = await Runner.run(Agent(name="a", tools=[look], model=model), "find A1", store=db)
    snapshot = await db.load(result.run_id)
    assert snapshot is not None
    return [r.model_dump() for r in snapshot.records]


def main() -> None:
    stored = asyncio.run(_recorded()) + [to_checkpoint(r).model_dump() for r in _by_hand()]
    from lovia.stores.base import CheckpointRecord

    out = []
    for envelope in stored:
        record = read_record(CheckpointRecord.model_validate(envelope))
        again = pydantic_core.to_json(to_checkpoint(record).data).decode()
        out.append({**envelope, "typed": repr(record), "written_back": again})
    kinds = sorted({e["kind"] for e in out})
    OUT.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(out)} records ({', '.join(kinds)}) to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
