"""Leases, fencing tokens and a run's end, on every store (memory, SQLite, PostgreSQL).

What a worker relies on: a write carrying the token of a lease that was taken over is
refused and stores nothing; a renewal extends only a lease its owner still holds under
that token; a release by anyone but the holder changes nothing; and a run's end lands
whole or not at all. Each test runs once per backend (see ``conftest.py``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pydantic_core
import pytest
from store_backends import Backend

from lovia.errors import LeaseLost, RunNotFound
from lovia.stores import CheckpointRecord, RunInfo, Store
from lovia.stores.base import RunEnd, end_run, renew_many
from lovia.transcript import InputEntry, TextEntry

_SEGMENT = [InputEntry(id="e00001", content="hi"), TextEntry(id="e00002", text="hello")]


def _info(run_id: str = "r1", status: Any = "running", **kw: Any) -> RunInfo:
    return RunInfo(run_id=run_id, agent="writer", status=status, started_at=1.0, **kw)


def _recs(*names: str, kind: Any = "state") -> list[CheckpointRecord]:
    return [CheckpointRecord(kind=kind, data={"name": n}) for n in names]


async def _names(db: Store, run_id: str = "r1") -> list[str]:
    snap = await db.load(run_id)
    assert snap is not None
    return [r.data["name"] for r in snap.records]


async def _taken_over(db: Store, run_id: str = "r1") -> tuple[int, int]:
    """w1 held the run and wrote "mine"; its lease expired and w2 took the run over."""
    await db.begin(_info(run_id, session_id="s1"))
    stale = await db.acquire(run_id, "w1", 0.1)
    assert stale is not None
    await db.append(run_id, _recs("mine"), fence=stale)
    await asyncio.sleep(0.25)
    fresh = await db.acquire(run_id, "w2", 30)
    assert fresh is not None
    return stale, fresh


# -- fenced writes ------------------------------------------------------------------


async def test_a_write_with_the_fence_of_a_lease_that_was_taken_over_is_refused(
    db: Store,
) -> None:
    """Every write of the stalled worker fails with LeaseLost naming the run and its
    stale token, and nothing of it is stored; the new holder writes on."""
    stale, fresh = await _taken_over(db)
    before = await db.load("r1")
    with pytest.raises(LeaseLost) as caught:
        await db.append("r1", _recs("late"), fence=stale)
    assert f"run r1: lease token {stale} is stale" in str(caught.value)
    with pytest.raises(LeaseLost) as caught:
        await db.finish(_info(status="completed", ended_at=2.0), {"output": "x"}, fence=stale)
    assert f"run r1: lease token {stale} is stale" in str(caught.value)
    with pytest.raises(LeaseLost) as caught:
        await db.append_segment("s1", "r1", _SEGMENT, fence=stale)
    assert f"run r1: lease token {stale} is stale" in str(caught.value)
    end = RunEnd(
        info=_info(status="completed", ended_at=2.0), result={"output": "x"}, fence=stale,
        records=_recs("end"), session_id="s1", entries=_SEGMENT, release="w1",
    )  # fmt: skip
    with pytest.raises(LeaseLost) as caught:
        await end_run(db, end)
    assert f"run r1: lease token {stale} is stale" in str(caught.value)
    assert await db.load("r1") == before
    assert await db.load_session("s1") == []
    assert await db.lease_holder("r1") == "w2"
    await db.append("r1", _recs("theirs"), fence=fresh)
    assert await _names(db) == ["mine", "theirs"]


async def test_a_stale_fence_refuses_even_a_bare_end_with_nothing_but_the_outcome(
    db: Store,
) -> None:
    """An end without records or segment is still fenced: the row keeps its status."""
    stale, _ = await _taken_over(db)
    end = RunEnd(info=_info(status="failed", ended_at=2.0), result=None, fence=stale)
    with pytest.raises(LeaseLost):
        await end_run(db, end)
    snap = await db.load("r1")
    assert snap is not None and snap.info.status == "running" and snap.info.ended_at is None


async def test_a_fenced_write_to_a_run_deleted_under_its_worker_is_refused_as_lease_lost(
    db: Store,
) -> None:
    """Deleting a run drops its lease: the worker still on it is fenced out (LeaseLost,
    which stops it quietly), not told the run is missing, and nothing comes back."""
    await db.begin(_info(session_id="s1"))
    token = await db.acquire("r1", "w1", 30)
    assert token is not None
    await db.delete_run("r1")
    with pytest.raises(LeaseLost):
        await db.append("r1", _recs("late"), fence=token)
    with pytest.raises(LeaseLost):
        await db.finish(_info(status="failed"), None, fence=token)
    with pytest.raises(LeaseLost):
        await db.append_segment("s1", "r1", _SEGMENT, fence=token)
    end = RunEnd(
        info=_info(status="completed"), result=None, fence=token, records=_recs("end"),
        session_id="s1", entries=_SEGMENT, release="w1",
    )  # fmt: skip
    with pytest.raises(LeaseLost):
        await end_run(db, end)
    assert await db.load("r1") is None
    assert await db.load_session("s1") == []


async def test_a_grant_to_the_same_owner_again_makes_its_earlier_token_stale(
    db: Store,
) -> None:
    """Re-acquiring (e.g. a worker that restarted under the same id) starts a new lease:
    the first one's token can neither write nor renew."""
    await db.begin(_info())
    first = await db.acquire("r1", "w1", 30)
    again = await db.acquire("r1", "w1", 30)
    assert first is not None and again == first + 1
    with pytest.raises(LeaseLost):
        await db.append("r1", _recs("old"), fence=first)
    assert await db.renew("r1", "w1", first, 30) is False
    assert await db.renew("r1", "w1", again, 30) is True
    await db.append("r1", _recs("new"), fence=again)
    assert await _names(db) == ["new"]


async def test_a_write_without_a_fence_is_not_checked(db: Store) -> None:
    """fence=None (a store used without leases) writes whatever lease the run has."""
    await db.begin(_info(session_id="s1"))
    assert await db.acquire("r1", "w1", 30) is not None
    await db.append("r1", _recs("a"))
    assert await db.append_segment("s1", "r1", _SEGMENT[:1])
    await db.finish(_info(status="paused"), None)
    snap = await db.load("r1")
    assert snap is not None and snap.info.status == "paused"
    assert [r.data["name"] for r in snap.records] == ["a"]
    assert [e.id for e in await db.load_session("s1")] == ["e00001"]


async def test_appending_nothing_writes_nothing_and_checks_no_fence(db: Store) -> None:
    await db.begin(_info())
    assert await db.append("r1", [], fence=99) == 0
    assert await _names(db) == []


# -- tokens -------------------------------------------------------------------------


async def test_lease_tokens_count_the_grants_of_each_run(db: Store) -> None:
    """The first grant of a run is token 1 and each later grant one more, through
    release and expiry (an attempt shows its token)."""
    assert await db.acquire("r1", "w1", 0.1) == 1
    await asyncio.sleep(0.25)
    assert await db.acquire("r1", "w2", 30) == 2
    await db.release("r1", "w2")
    assert await db.acquire("r1", "w1", 30) == 3
    assert await db.acquire("r2", "w1", 30) == 1


async def test_a_lease_lasts_its_ttl_and_then_has_no_holder(db: Store) -> None:
    assert await db.acquire("r1", "w1", 0.3) is not None
    assert await db.lease_holder("r1") == "w1"
    await asyncio.sleep(0.45)
    assert await db.lease_holder("r1") is None
    assert await db.lease_holder("never-leased") is None


# -- renewals -----------------------------------------------------------------------


async def test_a_renewal_by_another_owner_is_refused_and_does_not_extend_the_lease(
    db: Store,
) -> None:
    token = await db.acquire("r1", "w1", 0.3)
    assert token is not None
    assert await db.renew("r1", "w2", token, 30) is False
    assert await db.lease_holder("r1") == "w1"
    await asyncio.sleep(0.45)
    assert await db.lease_holder("r1") is None  # not extended by the refused renewal
    assert await db.acquire("r1", "w2", 30) == token + 1


async def test_a_renewal_extends_the_lease_by_its_ttl(db: Store) -> None:
    token = await db.acquire("r1", "w1", 0.3)
    assert token is not None
    assert await db.renew("r1", "w1", token, 30) is True
    await asyncio.sleep(0.45)
    assert await db.lease_holder("r1") == "w1"
    assert await db.acquire("r1", "w2", 30) is None
    assert await db.renew("r1", "w1", token, 0.1) is True  # a shorter ttl shortens it
    await asyncio.sleep(0.25)
    assert await db.lease_holder("r1") is None


async def test_renew_many_renews_only_the_leases_this_owner_still_holds(db: Store) -> None:
    """Held leases get the new ttl; a lease taken over, re-granted under a newer token
    or never granted is returned and left as it was."""
    held = {r: await db.acquire(r, "w1", 0.3) for r in ("a", "b", "regranted")}
    newer = await db.acquire("regranted", "w1", 0.3)
    assert newer is not None and all(t is not None for t in held.values())
    leases = [(r, "w1", t or 0) for r, t in held.items()]
    leases.append(("never", "w1", 1))
    assert await db.renew_many(leases, 30) == {"regranted", "never"}  # type: ignore[attr-defined]
    await asyncio.sleep(0.45)
    assert await db.lease_holder("a") == "w1" and await db.lease_holder("b") == "w1"
    assert await db.lease_holder("regranted") is None  # its newer lease was not extended
    assert await db.lease_holder("never") is None
    assert await renew_many(db, [("a", "w1", held["a"] or 0)], 0.1) == set()
    await asyncio.sleep(0.25)
    assert await db.lease_holder("a") is None  # renewed with the shorter ttl
    assert await db.renew_many([], 30) == set()  # type: ignore[attr-defined]


# -- releases -----------------------------------------------------------------------


async def test_a_release_by_a_non_owner_keeps_the_lease(db: Store) -> None:
    await db.begin(_info())
    token = await db.acquire("r1", "w1", 30)
    assert token is not None
    await db.release("r1", "w2")
    assert await db.lease_holder("r1") == "w1"
    assert await db.acquire("r1", "w2", 30) is None
    assert await db.renew("r1", "w1", token, 30) is True
    await db.append("r1", _recs("still mine"), fence=token)
    assert await _names(db) == ["still mine"]


async def test_a_released_lease_cannot_be_renewed_by_its_former_owner(db: Store) -> None:
    token = await db.acquire("r1", "w1", 30)
    assert token is not None
    await db.release("r1", "w1")
    assert await db.renew("r1", "w1", token, 30) is False
    assert await db.lease_holder("r1") is None
    assert await db.acquire("r1", "w2", 30) == token + 1


async def test_releasing_a_run_never_leased_changes_nothing(db: Store) -> None:
    await db.release("ghost", "w1")
    assert await db.lease_holder("ghost") is None
    assert await db.acquire("ghost", "w1", 30) == 1


# -- a run's end ----------------------------------------------------------------------


async def test_the_end_returns_the_bytes_of_its_records(db: Store) -> None:
    await db.begin(_info())
    token = await db.acquire("r1", "w1", 30)
    records = _recs("a", "bb")
    end = RunEnd(info=_info(status="completed"), result=None, fence=token, records=records)
    expected = sum(len(pydantic_core.to_json(r.data)) for r in records)
    assert await end_run(db, end) == expected
    bare = RunEnd(info=_info("r2", status="completed"), result=None)
    assert await end_run(db, bare) == 0


async def test_a_run_without_a_lease_ends_unfenced(db: Store) -> None:
    """fence=None: the end is written whatever the lease; an unleased release is a no-op."""
    await db.begin(_info())
    end = RunEnd(
        info=_info(status="completed", ended_at=2.0), result={"output": "ok"},
        records=_recs("last"), session_id="s1", entries=_SEGMENT, release="w1",
    )  # fmt: skip
    await end_run(db, end)
    snap = await db.load("r1")
    assert snap is not None and snap.info.status == "completed"
    assert snap.result == {"output": "ok"}
    assert [r.data["name"] for r in snap.records] == ["last"]
    assert [e.id for e in await db.load_session("s1")] == ["e00001", "e00002"]


async def test_an_end_with_records_for_a_run_never_begun_fails_and_writes_nothing(
    db: Store,
) -> None:
    end = RunEnd(
        info=_info("ghost", status="completed"), result={"output": "x"},
        records=_recs("a"), session_id="s1", entries=_SEGMENT,
    )  # fmt: skip
    with pytest.raises(RunNotFound):
        await end_run(db, end)
    assert await db.load("ghost") is None
    assert await db.load_session("s1") == []


async def test_an_end_releases_only_its_owners_lease(db: Store) -> None:
    await db.begin(_info())
    token = await db.acquire("r1", "w1", 30)
    end = RunEnd(info=_info(status="failed"), result=None, fence=token, release="w2")
    await end_run(db, end)
    assert await db.lease_holder("r1") == "w1"


async def test_records_written_after_a_failed_end_continue_its_order(db: Store) -> None:
    """A failed run resumes under a new lease: its ledger and other records, written
    before, at and after the end, load back in the order they were written."""
    await db.begin(_info())
    token = await db.acquire("r1", "w1", 30)
    assert token is not None
    await db.append("r1", _recs("one"), fence=token)
    await db.append("r1", _recs("two", "three", kind="ledger"), fence=token)
    end = RunEnd(
        info=_info(status="failed"), result=None, fence=token,
        records=_recs("four", "five", kind="ledger"), release="w1",
    )  # fmt: skip
    await end_run(db, end)
    resumed = await db.acquire("r1", "w2", 30)
    assert resumed == token + 1
    await db.append("r1", _recs("six"), fence=resumed)
    await db.append("r1", _recs("seven", "eight"), fence=resumed)
    snap = await db.load("r1")
    assert snap is not None
    assert [r.data["name"] for r in snap.records] == [
        "one", "two", "three", "four", "five", "six", "seven", "eight"
    ]  # fmt: skip
    assert [r.kind for r in snap.records].count("ledger") == 4


async def test_the_outcome_replaces_every_field_the_run_began_with(db: Store) -> None:
    """What ``lovia runs`` shows after the end is the info the run ended with (the agent
    that finished it after a handoff, its counters), by finish and by end_run alike."""
    for run_id, ending in (("by-finish", "finish"), ("by-end", "end_run")):
        await db.begin(_info(run_id, session_id="s1", extra={"first": 1}))
        token = await db.acquire(run_id, "w1", 30)
        done = RunInfo(
            run_id=run_id, agent="reviewer", session_id="s2", status="completed",
            finish_reason="stop", error_type="None", turns=4, input_tokens=10,
            output_tokens=20, cost_usd=0.5, started_at=3.0, ended_at=9.0, trace_id="t",
            span_id="s", history_len=2, extra={"second": 2}, parent_run_id="p",
            parent_call_id="c",
        )  # fmt: skip
        if ending == "finish":
            await db.finish(done, {"output": "ok"}, fence=token)
        else:
            await end_run(db, RunEnd(info=done, result={"output": "ok"}, fence=token))
        snap = await db.load(run_id)
        assert snap is not None and snap.info == done and snap.result == {"output": "ok"}


# -- the tool ledger and retention ----------------------------------------------------


async def test_prune_keeps_a_cancelled_run_with_a_tool_ledger_unless_forced(db: Store) -> None:
    """A cancelled run can resume like a failed one: its ledger (what stops a resume from
    running a completed tool again) is kept, records included."""
    old = time.time() - 1000
    await db.begin(_info("c1"))
    await db.append("c1", _recs("tool", kind="ledger"))
    await db.finish(_info("c1", status="cancelled", ended_at=old), None)
    assert await db.prune(older_than_s=100) == 0
    assert await db.prune(older_than_s=100, records_only=True) == 0
    assert await _names(db, "c1") == ["tool"]
    assert await db.prune(older_than_s=100, status="cancelled", force=True) == 1
    assert await db.load("c1") is None


async def test_a_run_whose_records_were_pruned_loads_empty_and_takes_new_records(
    db: Store,
) -> None:
    old = time.time() - 1000
    await db.begin(_info())
    token = await db.acquire("r1", "w1", 30)
    await db.append("r1", _recs("old"), fence=token)
    await db.finish(_info(status="completed", ended_at=old), {"output": "x"}, fence=token)
    assert await db.prune(older_than_s=100, records_only=True) == 1
    assert await _names(db) == []
    await db.append("r1", _recs("new"))
    assert await _names(db) == ["new"]


async def test_postgres_opens_a_sessions_history_and_labels_in_one_read(
    backend: Backend, db: Store
) -> None:
    """The read a run starts with: the session's segments in order and its labels."""
    if backend.name != "postgres":
        pytest.skip("open_session is PostgreSQL's one-statement read")
    assert await db.append_segment("s1", "r1", _SEGMENT[:1])
    assert await db.append_segment("s1", "r2", _SEGMENT[1:])
    assert await db.session_labels("s1", {"tenant": "acme"}) == {"tenant": "acme"}  # type: ignore[attr-defined]
    history, labels = await db.open_session("s1")  # type: ignore[attr-defined]
    assert [e.id for e in history] == ["e00001", "e00002"]
    assert labels == {"tenant": "acme"}
    assert await db.open_session("nobody") == ([], {})  # type: ignore[attr-defined]
