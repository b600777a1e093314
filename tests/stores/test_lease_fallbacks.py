"""The store-agnostic lease helpers of ``lovia.stores.base``: what a store that brings
only the ``Leases`` protocol's four methods gets (one renewal per lease, and a run's end
as its separate writes), and the words of the refusal every store raises."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from lovia.errors import LeaseLost
from lovia.stores import CheckpointRecord, RunInfo
from lovia.stores.base import RunEnd, end_run, lease_lost, renew_many
from lovia.stores.memory import MemoryStore
from lovia.transcript import TextEntry


class _PlainLeases:
    """A store with ``acquire``/``renew``/``release``/``lease_holder`` and no
    ``renew_many`` (a third-party store), counting its renewals."""

    def __init__(self) -> None:
        self._inner = MemoryStore()
        self.renewed: list[tuple[str, str, int, float]] = []

    async def acquire(self, run_id: str, owner: str, ttl_s: float) -> int | None:
        return await self._inner.acquire(run_id, owner, ttl_s)

    async def renew(self, run_id: str, owner: str, fence: int, ttl_s: float) -> bool:
        self.renewed.append((run_id, owner, fence, ttl_s))
        return await self._inner.renew(run_id, owner, fence, ttl_s)

    async def release(self, run_id: str, owner: str) -> None:
        await self._inner.release(run_id, owner)

    async def lease_holder(self, run_id: str) -> str | None:
        return await self._inner.lease_holder(run_id)


async def test_a_store_without_renew_many_is_renewed_one_lease_at_a_time() -> None:
    db = _PlainLeases()
    a, b = await db.acquire("a", "w1", 30), await db.acquire("b", "w2", 30)
    assert a is not None and b is not None
    leases: Sequence[tuple[str, str, int]] = [("a", "w1", a), ("b", "w1", b), ("c", "w1", 1)]
    assert await renew_many(db, leases, 12.5) == {"b", "c"}  # type: ignore[arg-type]
    assert db.renewed == [("a", "w1", a, 12.5), ("b", "w1", b, 12.5), ("c", "w1", 1, 12.5)]
    assert await db.lease_holder("b") == "w2"


class _Writes(MemoryStore):
    """A memory store without ``end_run`` (a third-party store's shape), noting the order
    of the writes a run's end makes through the fallback."""

    end_run = None  # type: ignore[assignment]  # the fallback's writes, one by one

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    async def append(self, run_id: str, records: Sequence[CheckpointRecord], **kw: Any) -> int:
        self.calls.append(f"append {run_id} {len(records)} fence={kw.get('fence')}")
        return await super().append(run_id, records, **kw)

    async def finish(self, info: RunInfo, result: dict[str, Any] | None, **kw: Any) -> None:
        self.calls.append(f"finish {info.run_id} {info.status} fence={kw.get('fence')}")
        await super().finish(info, result, **kw)

    async def append_segment(self, session_id: str, run_id: str, entries: Any, **kw: Any) -> bool:
        self.calls.append(f"segment {session_id} {run_id} fence={kw.get('fence')}")
        return await super().append_segment(session_id, run_id, entries, **kw)

    async def release(self, run_id: str, owner: str) -> None:
        self.calls.append(f"release {run_id} {owner}")
        await super().release(run_id, owner)


async def test_a_store_without_end_run_gets_its_writes_in_order_under_the_fence() -> None:
    """Records, then the outcome, then the session segment, then the release; only the
    parts the end carries, each with the run's fence."""
    db = _Writes()
    await db.begin(RunInfo(run_id="r1", agent="a"))
    token = await db.acquire("r1", "w1", 30)
    records = [CheckpointRecord(kind="state", data={"turn": 1})]
    done = RunInfo(run_id="r1", agent="a", status="completed")
    end = RunEnd(
        info=done, result={"output": "ok"}, fence=token, records=records, session_id="s1",
        entries=[TextEntry(id="e1", text="hi")], release="w1",
    )  # fmt: skip
    assert await end_run(db, end) == len('{"turn":1}')
    assert db.calls == [
        f"append r1 1 fence={token}",
        f"finish r1 completed fence={token}",
        f"segment s1 r1 fence={token}",
        "release r1 w1",
    ]
    assert [e.id for e in await db.load_session("s1")] == ["e1"]
    assert await db.lease_holder("r1") is None
    db.calls.clear()
    assert await end_run(db, RunEnd(info=done, result=None, fence=token)) == 0
    assert db.calls == [f"finish r1 completed fence={token}"]  # nothing else to write


async def test_a_stale_fence_stops_the_end_before_anything_is_written() -> None:
    db = _Writes()
    await db.begin(RunInfo(run_id="r1", agent="a"))
    token = await db.acquire("r1", "w1", 30)
    assert token is not None and await db.acquire("r1", "w1", 30) == token + 1
    done = RunInfo(run_id="r1", agent="a", status="completed")
    end = RunEnd(info=done, result=None, fence=token, session_id="s1", release="w1")
    with pytest.raises(LeaseLost):
        await end_run(db, end)
    assert db.calls == [f"finish r1 completed fence={token}"]
    assert await db.load_session("s1") == []
    assert await db.lease_holder("r1") == "w1"


def test_a_refused_write_says_the_run_was_taken_over_and_that_nothing_is_needed() -> None:
    error = lease_lost("r7", 3)
    assert isinstance(error, LeaseLost)
    assert error.message == (
        "run r7: lease token 3 is stale: another worker took the run over, "
        "so this worker's writes are refused"
    )
    assert error.hint == (
        "This worker stalled past its lease (LOVIA_LEASE_TTL_S) and another worker "
        "now owns the run; this one stopped without writing. No action is needed."
    )
