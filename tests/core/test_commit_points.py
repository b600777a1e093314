"""Store transactions per model round-trip: the driver's commit points, counted.

A store wrapped to count every call that writes (one transaction each on SQLite and
PostgreSQL). With tools whose calls run as one group (parallel-safe, or one call a
turn), a tool round-trip costs two appends: the answer with its calls' ledger entries
before any tool starts, and the results before the next model call. The final answer
rides with the run's end (``end_run``: its records, row, session segment and lease
release in one transaction); the run's lease and start are a fixed cost per run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from lovia import Agent, Runner, tool
from lovia.stores import MemoryStore
from lovia.stores.base import CheckpointRecord, RunEnd, RunInfo
from lovia.testing import ScriptedModel, call
from lovia.transcript import TranscriptEntry

WRITES = (
    "begin", "append", "finish", "acquire", "renew", "release", "append_segment", "end_run",
)  # fmt: skip
"""The store calls that write (a transaction each)."""


class TransactionCounter(MemoryStore):
    """A memory store that counts its writing calls."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    async def begin(self, info: RunInfo) -> None:
        self.calls["begin"] += 1
        await super().begin(info)

    async def append(
        self, run_id: str, records: Sequence[CheckpointRecord], *, fence: int | None = None
    ) -> int:
        self.calls["append"] += 1
        return await super().append(run_id, records, fence=fence)

    async def finish(
        self, info: RunInfo, result: dict[str, Any] | None, *, fence: int | None = None
    ) -> None:
        self.calls["finish"] += 1
        await super().finish(info, result, fence=fence)

    async def acquire(self, run_id: str, owner: str, ttl_s: float) -> int | None:
        self.calls["acquire"] += 1
        return await super().acquire(run_id, owner, ttl_s)

    async def renew(self, run_id: str, owner: str, fence: int, ttl_s: float) -> bool:
        self.calls["renew"] += 1
        return await super().renew(run_id, owner, fence, ttl_s)

    async def release(self, run_id: str, owner: str) -> None:
        self.calls["release"] += 1
        await super().release(run_id, owner)

    async def append_segment(
        self,
        session_id: str,
        run_id: str,
        entries: Sequence[TranscriptEntry],
        *,
        fence: int | None = None,
    ) -> bool:
        self.calls["append_segment"] += 1
        return await super().append_segment(session_id, run_id, entries, fence=fence)

    async def end_run(self, end: RunEnd) -> int:
        self.calls["end_run"] += 1
        return await super().end_run(end)

    def transactions(self) -> int:
        return sum(self.calls[name] for name in WRITES)


@tool(concurrency_safe=True)
async def add(a: int, b: int) -> int:
    """Add two numbers (parallel-safe)."""
    return a + b


@tool
async def record(n: int) -> int:
    """Not parallel-safe, not idempotent: each call runs alone, after its ledger entry."""
    return n


async def _run(tools: list[Any], steps: list[Any]) -> TransactionCounter:
    db = TransactionCounter()
    agent = Agent(name="a", model=ScriptedModel(steps), tools=tools)
    result = await Runner.run(agent, "go", checkpointer=db, session=db, session_id="s")
    assert result.output == "done"
    return db


FIXED = {"acquire": 1, "begin": 1, "end_run": 1}
"""Once a run: the lease, the run's row, its end (with the final answer, the session
segment and the lease release)."""


@pytest.mark.parametrize("turns", [1, 5, 20])
async def test_two_appends_per_tool_round_trip(turns: int) -> None:
    steps: list[Any] = [[call("add", a=i, b=1), call("add", a=i, b=2)] for i in range(turns)]
    db = await _run([add], [*steps, "done"])
    round_trips = turns + 1
    # the run's start + 2 per tool round-trip; the final answer rides with the end
    assert db.calls["append"] == 1 + 2 * turns
    assert db.calls["append"] + db.calls["end_run"] <= 2 * round_trips
    assert dict(db.calls) == {**FIXED, "append": 2 * turns + 1}
    assert db.transactions() <= 2 * round_trips + len(FIXED)


async def test_one_call_a_turn_is_two_appends_per_round_trip() -> None:
    db = await _run([record], [call("record", n=1), call("record", n=2), "done"])
    assert db.calls["append"] == 1 + 2 * 2


async def test_calls_that_run_one_at_a_time_add_one_append_per_extra_call() -> None:
    """The second call's ledger entry must be durable before it starts: that append also
    carries the first call's result, so two calls cost three appends, not four."""
    steps: list[Any] = [[call("record", n=1), call("record", n=2)] for _ in range(3)]
    db = await _run([record], [*steps, "done"])
    assert db.calls["append"] == 1 + 3 * 3
