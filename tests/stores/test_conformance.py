"""One conformance suite for every store: memory, SQLite and PostgreSQL.

Each test runs once per backend (see ``conftest.py``). The contract is the ``Store``
protocol in ``lovia.stores.base`` plus the behaviour documented in docs/sessions.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import pydantic_core
import pytest
from store_backends import BACKENDS, Backend

from lovia.errors import LeaseLost, RunNotFound, SchemaVersionError, StoreError
from lovia.stores import SCHEMA_VERSION, CheckpointRecord, RunInfo, Store
from lovia.stores.base import renew_many
from lovia.transcript import (
    InputEntry,
    TextEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    entry_to_dict,
)

NEWER = SCHEMA_VERSION + 1


def info(run_id: str = "r1", **kw: Any) -> RunInfo:
    kw.setdefault("agent", "writer")
    kw.setdefault("started_at", 1_700_000_000.0)
    return RunInfo(run_id=run_id, **kw)


def rec(i: int, kind: str = "state", **data: Any) -> CheckpointRecord:
    return CheckpointRecord(kind=kind, data={"i": i, **data})  # type: ignore[arg-type]


def entries_record(*entries: TranscriptEntry) -> CheckpointRecord:
    return CheckpointRecord(kind="entries", data={"entries": [entry_to_dict(e) for e in entries]})


def text(i: int, body: str = "") -> TextEntry:
    return TextEntry(id=f"e{i:05d}", text=body or f"entry {i}", turn=i, ts=1.5)


def payload_bytes(records: list[CheckpointRecord]) -> int:
    return sum(len(pydantic_core.to_json(r.data)) for r in records)


# -- runs and records -----------------------------------------------------------------


async def test_is_a_store(db: Store) -> None:
    assert isinstance(db, Store)
    assert db.url


async def test_unknown_run_loads_none(db: Store) -> None:
    assert await db.load("nope") is None
    assert await db.find_run_by_trace("nope") is None
    assert await db.list_runs() == []


async def test_run_info_round_trips_every_field(db: Store) -> None:
    full = info(
        "r-full",
        session_id="s1",
        status="running",
        finish_reason=None,
        turns=3,
        input_tokens=1234567890123,
        output_tokens=42,
        cost_usd=0.125,
        started_at=1_700_000_000.123456,
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id="b7ad6b7169203331",
        history_len=7,
        extra={"first_agent": "writer", "nested": {"list": [1, "二", None]}},
    )
    await db.begin(full)
    snap = await db.load("r-full")
    assert snap is not None
    assert snap.info == full
    assert snap.records == []
    assert snap.result is None


async def test_begin_is_idempotent(db: Store) -> None:
    await db.begin(info("r1", agent="first"))
    await db.append("r1", [rec(1)])
    await db.begin(info("r1", agent="second", turns=9))
    snap = await db.load("r1")
    assert snap is not None
    assert snap.info.agent == "first"
    assert snap.info.turns == 0
    assert [r.data["i"] for r in snap.records] == [1]


async def test_append_keeps_order_and_returns_payload_bytes(db: Store) -> None:
    await db.begin(info())
    batches = [[rec(1)], [rec(2, "ledger", call_id="c1"), rec(3, "view")], [rec(4, "entries")]]
    written = [await db.append("r1", batch) for batch in batches]
    assert written == [payload_bytes(b) for b in batches]
    assert await db.append("r1", []) == 0
    snap = await db.load("r1")
    assert snap is not None
    assert [r.data["i"] for r in snap.records] == [1, 2, 3, 4]
    assert [r.kind for r in snap.records] == ["state", "ledger", "view", "entries"]
    assert all(r.version == SCHEMA_VERSION for r in snap.records)


async def test_append_only_reappending_adds_and_loaded_copies_are_detached(db: Store) -> None:
    await db.begin(info())
    same = rec(1, payload={"k": "v"})
    await db.append("r1", [same])
    await db.append("r1", [same])
    same.data["payload"]["k"] = "changed after append"
    snap = await db.load("r1")
    assert snap is not None
    assert [r.data for r in snap.records] == [{"i": 1, "payload": {"k": "v"}}] * 2
    snap.records[0].data["i"] = 99
    snap.info.extra["x"] = 1
    again = await db.load("r1")
    assert again is not None
    assert again.records[0].data["i"] == 1
    assert again.info.extra == {}
    mutators = {"update", "update_record", "set", "rewrite", "truncate", "replace_records"}
    assert not mutators & set(dir(db))


async def test_append_to_unknown_run_fails(db: Store) -> None:
    with pytest.raises(RunNotFound):
        await db.append("ghost", [rec(1)])
    assert await db.load("ghost") is None


async def test_finish_stores_outcome_and_result(db: Store) -> None:
    await db.begin(info(session_id="s1"))
    await db.append("r1", [rec(1)])
    done = info(
        session_id="s1",
        status="completed",
        finish_reason="stop",
        turns=2,
        cost_usd=0.5,
        ended_at=1_700_000_100.0,
    )
    result = {"output": "done ✓", "usage": {"input_tokens": 10}, "structured": [1, 2.5, None]}
    await db.finish(done, result)
    snap = await db.load("r1")
    assert snap is not None
    assert snap.info == done
    assert snap.result == result
    assert [r.data["i"] for r in snap.records] == [1]
    await db.begin(info(session_id="s1"))  # resubmitting a completed run changes nothing
    again = await db.load("r1")
    assert again is not None
    assert again.info.status == "completed"
    assert again.result == result


async def test_finish_without_begin_creates_the_run(db: Store) -> None:
    await db.finish(info("r9", status="failed", error_type="ProviderError", ended_at=2.0), None)
    snap = await db.load("r9")
    assert snap is not None
    assert snap.info.status == "failed"
    assert snap.info.error_type == "ProviderError"
    assert snap.result is None


async def test_delete_run_removes_records_and_a_new_run_starts_empty(db: Store) -> None:
    await db.begin(info())
    await db.append("r1", [rec(1), rec(2)])
    assert await db.acquire("r1", "w1", 60)
    await db.delete_run("r1")
    assert await db.load("r1") is None
    await db.delete_run("r1")  # deleting twice is fine
    assert await db.acquire("r1", "w2", 60) is not None  # the lease went with the run
    await db.begin(info())
    await db.append("r1", [rec(3)])
    snap = await db.load("r1")
    assert snap is not None
    assert [r.data["i"] for r in snap.records] == [3]


# -- content ------------------------------------------------------------------------

WEIRD = [
    "emoji 😀👩🏽‍💻🏳️‍🌈",
    "中文，日本語、한국어",
    "nul \x00 inside",
    "line\u2028para\u2029sep",
    "rtl \u202e עברית",
    'quotes " \\ / \b\f\n\r\t',
    "control \x01\x1f\x7f",
    "\ufeffbom and \U0010ffff max",
]


async def test_unicode_and_control_characters_round_trip(db: Store) -> None:
    entries = [text(i, body) for i, body in enumerate(WEIRD)]
    await db.begin(info(extra={"note": WEIRD[2]}))
    await db.append("r1", [entries_record(*entries), rec(1, "state", note="\x00😀")])
    done = info(status="completed", ended_at=3.0, extra={"note": WEIRD[2]})
    await db.finish(done, {"output": "".join(WEIRD)})
    assert await db.append_segment("s1", "r1", entries)
    snap = await db.load("r1")
    assert snap is not None
    assert snap.records[0].data["entries"] == [entry_to_dict(e) for e in entries]
    assert snap.records[1].data["note"] == "\x00😀"
    assert snap.result == {"output": "".join(WEIRD)}
    assert snap.info.extra == {"note": WEIRD[2]}
    assert await db.load_session("s1") == entries


async def test_lone_surrogates_are_refused_and_nothing_is_written(db: Store) -> None:
    await db.begin(info())
    await db.append("r1", [rec(1)])
    with pytest.raises(StoreError, match="surrogates"):
        await db.append("r1", [rec(2), rec(3, note="bad \ud800")])
    assert text(1, "bad \udfff").text == "bad \ufffd"  # entries clean their text...
    forged = TextEntry.model_construct(id="e1", text="bad \udfff", turn=1, ts=1.5)
    with pytest.raises(StoreError):  # ...and a store still refuses one that was forged
        await db.append_segment("s1", "r1", [forged])
    snap = await db.load("r1")
    assert snap is not None
    assert [r.data["i"] for r in snap.records] == [1]
    assert await db.load_session("s1") == []


async def test_one_megabyte_tool_result_round_trips_byte_exact(db: Store) -> None:
    chunk = "".join(chr(c) for c in range(32, 0x3000, 7))
    big = (chunk * (1_048_576 // len(chunk) + 1))[:1_048_576] + "\x00末尾"
    result = ToolResultEntry(id="e-big", call_id="c1", name="fetch", content=big, ts=1.0)
    await db.begin(info())
    written = await db.append("r1", [entries_record(result)])
    assert written > 1_048_576
    assert await db.append_segment("s1", "r1", [result])
    snap = await db.load("r1")
    assert snap is not None
    assert snap.records[0].data["entries"][0]["content"] == big
    loaded = await db.load_session("s1")
    assert isinstance(loaded[0], ToolResultEntry)
    assert loaded[0].content.encode() == big.encode()


# -- sessions -----------------------------------------------------------------------


async def test_session_segments_are_written_once_in_order(db: Store) -> None:
    assert await db.load_session("s1") == []
    first = [InputEntry(id="a", content="hi", ts=1.0), text(1)]
    second = [
        InputEntry(id="b", content="again", ts=2.0),
        ToolCallEntry(id="c", call_id="c1", name="t", arguments='{"x": 1}', ts=2.0),
        ToolResultEntry(id="d", call_id="c1", name="t", content="ok", ts=2.0),
    ]
    assert await db.append_segment("s1", "run-a", first) is True
    assert await db.append_segment("s1", "run-b", second) is True
    assert await db.append_segment("s1", "run-a", [text(9)]) is False
    assert await db.append_segment("s1", "run-empty", []) is True
    assert await db.append_segment("s2", "run-a", [text(5)]) is True
    assert await db.load_session("s1") == first + second
    assert await db.load_session("s2") == [text(5)]


async def test_ten_thousand_entry_session_loads_in_order(db: Store) -> None:
    entries = [
        text(i)
        if i % 2
        else ToolResultEntry(id=f"e{i:05d}", call_id=f"c{i}", name="t", content="r" * 40, ts=1.0)
        for i in range(10_000)
    ]
    for seg in range(100):
        assert await db.append_segment("big", f"run{seg:03d}", entries[seg * 100 : seg * 100 + 100])
    t0 = time.perf_counter()
    loaded = await db.load_session("big")
    elapsed = time.perf_counter() - t0
    assert [e.id for e in loaded] == [e.id for e in entries]
    assert loaded == entries
    print(f"\n{type(db).__name__}: 10,000-entry session loaded in {elapsed * 1000:.1f} ms")


# -- concurrency --------------------------------------------------------------------


async def test_fifty_concurrent_appenders_lose_nothing(db: Store) -> None:
    runs = [f"run{i}" for i in range(50)]
    await db.begin(info("shared"))
    for run_id in runs:
        await db.begin(info(run_id))

    async def worker(w: int) -> None:
        for i in range(10):
            await db.append("shared", [rec(i, w=w), rec(i, w=w, second=True)])
            await db.append(runs[w], [rec(i)])

    await asyncio.gather(*(worker(w) for w in range(50)))
    snap = await db.load("shared")
    assert snap is not None
    assert len(snap.records) == 1000
    for w in range(50):
        mine = [(r.data["i"], "second" in r.data) for r in snap.records if r.data["w"] == w]
        assert mine == [(i, second) for i in range(10) for second in (False, True)]
    for i in range(0, 1000, 2):  # a batch is contiguous
        assert snap.records[i].data["w"] == snap.records[i + 1].data["w"]
    for run_id in runs:
        own = await db.load(run_id)
        assert own is not None
        assert [r.data["i"] for r in own.records] == list(range(10))


async def test_a_failing_write_among_concurrent_ones_fails_alone(db: Store) -> None:
    await db.begin(info())
    outcomes = await asyncio.gather(
        *(db.append("r1", [rec(i)]) for i in range(5)),
        db.append("ghost", [rec(99)]),
        *(db.append("r1", [rec(i)]) for i in range(5, 10)),
        db.append_segment("s1", "r1", [text(1)]),
        return_exceptions=True,
    )
    assert isinstance(outcomes[5], RunNotFound)
    assert all(isinstance(o, int) for o in outcomes[:5] + outcomes[6:11])
    assert outcomes[11] is True
    snap = await db.load("r1")
    assert snap is not None
    assert sorted(r.data["i"] for r in snap.records) == list(range(10))
    assert await db.load("ghost") is None
    assert await db.load_session("s1") == [text(1)]


async def test_two_store_objects_on_the_same_data(backend: Backend, db: Store) -> None:
    other = backend.open()
    try:
        await db.begin(info())

        async def writer(target: Store, by: str) -> None:
            for i in range(20):
                await target.append("r1", [rec(i, by=by)])

        await asyncio.gather(writer(db, "a"), writer(other, "b"))
        snap = await other.load("r1")
        assert snap is not None
        for by in "ab":
            assert [r.data["i"] for r in snap.records if r.data["by"] == by] == list(range(20))
    finally:
        if other is not db:
            await other.aclose()


# -- leases -------------------------------------------------------------------------


async def test_lease_one_holder_renew_release(db: Store) -> None:
    first = await db.acquire("r1", "w1", 30)
    assert first is not None and first >= 1
    assert await db.acquire("r1", "w2", 30) is None
    assert await db.renew("r1", "w1", first, 30) is True
    await db.release("r1", "w2")  # not the holder: no effect
    assert await db.acquire("r1", "w2", 30) is None
    assert await db.lease_holder("r1") == "w1"
    await db.release("r1", "w1")
    assert await db.lease_holder("r1") is None
    second = await db.acquire("r1", "w2", 30)
    assert second is not None and second > first  # the token survived the release
    assert await db.acquire("r2", "w1", 30) is not None  # leases are per run


async def test_expired_lease_can_be_taken(db: Store) -> None:
    first = await db.acquire("r1", "w1", 0.2)
    assert first is not None
    assert await db.acquire("r1", "w2", 0.2) is None
    await asyncio.sleep(0.35)
    second = await db.acquire("r1", "w2", 30)
    assert second is not None and second > first
    assert await db.acquire("r1", "w1", 30) is None


async def test_exactly_one_of_many_concurrent_acquirers_wins(backend: Backend, db: Store) -> None:
    stores = [db] + [backend.open() for _ in range(3)]
    try:
        for round_ in range(5):
            got = await asyncio.gather(
                *(stores[w % 4].acquire(f"run{round_}", f"w{w}", 30) for w in range(20))
            )
            assert sum(g is not None for g in got) == 1
    finally:
        for s in stores[1:]:
            if s is not db:
                await s.aclose()


# -- fencing ------------------------------------------------------------------------


async def test_renewal_never_regrants_a_lease_taken_in_between(db: Store) -> None:
    """A stalled owner whose lease expired and was taken cannot renew it back."""
    stale = await db.acquire("r1", "w1", 0.1)
    assert stale is not None
    await asyncio.sleep(0.25)
    assert await db.acquire("r1", "w2", 30) is not None
    assert await db.renew("r1", "w1", stale, 30) is False
    assert await db.lease_holder("r1") == "w2"
    await db.release("r1", "w2")  # freed, but the stale token stays stale
    assert await db.renew("r1", "w1", stale, 30) is False


async def test_renew_many_refuses_a_stale_fence_or_a_wrong_owner_for_that_run_only(
    db: Store,
) -> None:
    """One call renews every lease still held; the others are returned, not renewed."""
    tokens = {r: await db.acquire(r, "w1", 0.2) for r in ("ok", "taken", "stranger", "ok2")}
    await asyncio.sleep(0.3)  # all expired; then another worker takes one run
    taken = await db.acquire("taken", "w2", 30)
    assert taken is not None and all(t is not None for t in tokens.values())
    leases = [(r, "w1", t or 0) for r, t in tokens.items() if r != "stranger"]
    leases.append(("stranger", "someone-else", tokens["stranger"] or 0))
    assert hasattr(db, "renew_many")  # the store's own one-call version
    assert await renew_many(db, leases, 30) == {"taken", "stranger"}
    assert await db.lease_holder("ok") == "w1" and await db.lease_holder("ok2") == "w1"
    assert await db.lease_holder("taken") == "w2"
    assert await db.lease_holder("stranger") is None  # expired, not renewed by a stranger
    assert await db.renew("taken", "w1", tokens["taken"] or 0, 30) is False
    assert await renew_many(db, [], 30) == set()


async def test_an_expired_lease_nobody_took_can_be_renewed(db: Store) -> None:
    token = await db.acquire("r1", "w1", 0.1)
    assert token is not None
    await asyncio.sleep(0.25)
    assert await db.renew("r1", "w1", token, 30) is True  # nobody else wrote meanwhile
    assert await db.lease_holder("r1") == "w1"
    await db.begin(info())
    await db.append("r1", [rec(1)], fence=token)


async def test_a_stale_token_is_refused_by_every_write(db: Store) -> None:
    await db.begin(info(session_id="s1"))
    stale = await db.acquire("r1", "w1", 0.1)
    assert stale is not None
    await db.append("r1", [rec(1)], fence=stale)
    await asyncio.sleep(0.25)
    fresh = await db.acquire("r1", "w2", 30)
    assert fresh is not None
    await db.append("r1", [rec(2)], fence=fresh)
    before = await db.load("r1")
    with pytest.raises(LeaseLost) as caught:
        await db.append("r1", [rec(99)], fence=stale)
    assert caught.value.hint
    with pytest.raises(LeaseLost):
        await db.finish(info(status="completed", ended_at=2.0), {"output": "stale"}, fence=stale)
    with pytest.raises(LeaseLost):
        await db.append_segment("s1", "r1", [text(99)], fence=stale)
    assert await db.load("r1") == before
    assert await db.load_session("s1") == []
    # the holder's writes go through, the session segment included
    await db.finish(info(status="completed", ended_at=2.0), {"output": "ok"}, fence=fresh)
    assert await db.append_segment("s1", "r1", [text(1)], fence=fresh)
    with pytest.raises(LeaseLost):  # a released lease's token is stale too
        await db.append("r1", [rec(3)], fence=fresh + 1)


async def test_a_write_for_a_run_never_leased_is_refused(db: Store) -> None:
    await db.begin(info())
    with pytest.raises(LeaseLost):
        await db.append("r1", [rec(1)], fence=1)


async def test_a_completed_run_is_never_leased_again(db: Store) -> None:
    await db.begin(info())
    token = await db.acquire("r1", "w1", 0.1)
    assert token is not None
    await db.finish(info(status="completed", ended_at=2.0), {"output": "done"}, fence=token)
    await db.release("r1", "w1")
    assert await db.acquire("r1", "w2", 30) is None
    assert await db.acquire("r1", "w1", 30) is None  # not even by its last owner
    await asyncio.sleep(0.25)
    assert await db.acquire("r1", "w3", 30) is None
    # a completed run that never had a lease row (e.g. written by an older lovia)
    await db.finish(info("r2", status="completed", ended_at=2.0), {"output": "done"})
    assert await db.acquire("r2", "w1", 30) is None


@pytest.mark.parametrize("status", ["failed", "paused"])
async def test_a_failed_or_paused_run_can_be_leased_to_resume(db: Store, status: str) -> None:
    await db.begin(info())
    token = await db.acquire("r1", "w1", 30)
    assert token is not None
    await db.finish(info(status=status, ended_at=2.0), None, fence=token)  # type: ignore[arg-type]
    await db.release("r1", "w1")
    again = await db.acquire("r1", "w2", 30)
    assert again is not None and again > token


async def test_concurrent_stale_and_fresh_writers(backend: Backend, db: Store) -> None:
    """Two workers on separate connections append at once; only the holder's land."""
    other = backend.open()
    try:
        await db.begin(info())
        stale = await db.acquire("r1", "w1", 0.1)
        assert stale is not None
        await asyncio.sleep(0.25)
        fresh = await other.acquire("r1", "w2", 30)
        assert fresh is not None

        async def writer(target: Store, by: str, fence: int) -> int:
            refused = 0
            for i in range(15):
                try:
                    await target.append("r1", [rec(i, by=by)], fence=fence)
                except LeaseLost:
                    refused += 1
            return refused

        refused = await asyncio.gather(writer(db, "stale", stale), writer(other, "fresh", fresh))
        assert refused == [15, 0]
        snap = await db.load("r1")
        assert snap is not None
        assert [r.data["i"] for r in snap.records] == list(range(15))
        assert {r.data["by"] for r in snap.records} == {"fresh"}
    finally:
        if other is not db:
            await other.aclose()


async def test_a_takeover_racing_the_finish_never_leases_a_completed_run(
    backend: Backend, db: Store
) -> None:
    """Grant and fenced finish race from separate connections: either the finish
    lands (and the run is never leased again) or the grant does (and the finish is
    refused), never both."""
    other = backend.open()
    try:
        for round_ in range(10):
            run_id = f"race{round_}"
            await db.begin(info(run_id))
            token = await db.acquire(run_id, "w1", 0.05)
            assert token is not None
            await asyncio.sleep(0.1)
            done = info(run_id, status="completed", ended_at=2.0)
            finished, granted = await asyncio.gather(
                db.finish(done, {"output": "x"}, fence=token),
                other.acquire(run_id, "w2", 30),
                return_exceptions=True,
            )
            snap = await db.load(run_id)
            assert snap is not None
            if finished is None:  # the finish landed first
                assert snap.info.status == "completed"
                assert granted is None
            else:
                assert isinstance(finished, LeaseLost)
                assert snap.info.status == "running" and granted is not None
    finally:
        if other is not db:
            await other.aclose()


# -- listing, pruning, tracing ------------------------------------------------------


async def test_list_runs_filters_and_newest_first(db: Store) -> None:
    specs = [
        ("a", "writer", "s1", "completed", 1.0),
        ("b", "writer", "s2", "running", 2.0),
        ("c", "critic", "s1", "failed", 3.0),
        ("d", "writer", "s1", "running", 4.0),
        ("e", "critic", None, "completed", 5.0),
    ]
    for run_id, agent, session, status, started in specs:
        await db.begin(info(run_id, agent=agent, session_id=session, started_at=started))
        if status != "running":
            await db.finish(
                info(run_id, agent=agent, session_id=session, status=status, started_at=started),
                None,
            )

    async def ids(**kw: Any) -> list[str]:
        return [r.run_id for r in await db.list_runs(**kw)]

    assert await ids() == ["e", "d", "c", "b", "a"]
    assert await ids(limit=2) == ["e", "d"]
    assert await ids(session_id="s1") == ["d", "c", "a"]
    assert await ids(agent="critic") == ["e", "c"]
    assert await ids(status="running") == ["d", "b"]
    assert await ids(session_id="s1", agent="writer", status="completed") == ["a"]
    assert await ids(session_id="nope") == []
    listed = await db.list_runs(session_id="s2")
    assert listed == [info("b", session_id="s2", started_at=2.0)]


async def test_prune_removes_only_old_finished_runs(db: Store) -> None:
    now = time.time()
    specs = {
        "old-done": ("completed", now - 1000),
        "old-failed": ("failed", now - 1000),
        "old-paused": ("paused", now - 1000),
        "new-done": ("completed", now - 10),
    }
    for run_id, (status, ended) in specs.items():
        await db.begin(info(run_id))
        await db.append(run_id, [rec(1)])
        await db.finish(info(run_id, status=status, ended_at=ended), {"output": run_id})
    await db.begin(info("running"))
    assert await db.append_segment("s1", "old-done", [text(1)])
    assert await db.prune(older_than_s=100) == 2
    assert await db.load("old-done") is None
    assert await db.load("old-failed") is None
    for kept in ("old-paused", "new-done", "running"):
        assert await db.load(kept) is not None
    assert await db.load_session("s1") == [text(1)]  # sessions outlive runs
    assert await db.prune(older_than_s=100) == 0
    await db.begin(info("old-done"))
    snap = await db.load("old-done")
    assert snap is not None
    assert snap.records == []


async def test_prune_keeps_a_failed_run_that_ran_tools_unless_forced(db: Store) -> None:
    """A failed run can resume; its ledger is what keeps a resume from running a completed
    tool again, so retention keeps it (records included) unless forced."""
    old = time.time() - 1000
    for run_id, kind in (("with-ledger", "ledger"), ("no-ledger", "state")):
        await db.begin(info(run_id))
        await db.append(run_id, [rec(1, kind=kind, call_id="c1", status="completed")])
        await db.finish(info(run_id, status="failed", ended_at=old), None)
    assert await db.prune(older_than_s=100, records_only=True) == 1  # no-ledger only
    assert await db.prune(older_than_s=100) == 1  # no-ledger (its row), not with-ledger
    kept = await db.load("with-ledger")
    assert kept is not None and [r.kind for r in kept.records] == ["ledger"]
    assert await db.prune(older_than_s=100, status="failed", force=True) == 1
    assert await db.load("with-ledger") is None


async def test_a_run_pruned_whole_leaves_a_tombstone(db: Store) -> None:
    ended = time.time() - 1000
    await db.begin(info("gone"))
    await db.finish(info("gone", status="completed", ended_at=ended), {"output": 1})
    await db.begin(info("dropped"))
    await db.finish(info("dropped", status="completed", ended_at=ended), {"output": 2})
    assert await db.prune(older_than_s=100, run_id="dropped", records_only=True) == 1
    before = time.time()
    assert await db.prune(older_than_s=100, run_id="gone") == 1
    stone = await db.tombstone("gone")  # type: ignore[attr-defined]
    assert stone is not None and (stone.run_id, stone.status) == ("gone", "completed")
    assert stone.ended_at == pytest.approx(ended) and stone.pruned_at >= before - 1
    assert await db.tombstone("dropped") is None  # type: ignore[attr-defined]
    assert await db.tombstone("never-existed") is None  # type: ignore[attr-defined]


async def test_find_run_by_trace(db: Store) -> None:
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    await db.begin(info("older", trace_id=trace, span_id="00f067aa0ba902b7", started_at=1.0))
    await db.begin(info("newer", trace_id=trace, span_id="00f067aa0ba902b8", started_at=2.0))
    await db.begin(info("other", trace_id="0" * 32, started_at=3.0))
    found = await db.find_run_by_trace(trace)
    assert found is not None
    assert found.run_id == "newer"
    assert found.span_id == "00f067aa0ba902b8"
    assert await db.find_run_by_trace("f" * 32) is None


# -- schema versions ----------------------------------------------------------------


async def _bump_run(backend: Backend, db: Store, run_id: str) -> None:
    if backend.name == "memory":
        db._runs[run_id].version = NEWER  # type: ignore[attr-defined]
    else:
        await backend.raw("UPDATE lovia_runs SET version = ?1 WHERE run_id = ?2", NEWER, run_id)


async def test_newer_run_version_fails_fast(backend: Backend, db: Store) -> None:
    await db.begin(info("r1", trace_id="t1"))
    await _bump_run(backend, db, "r1")
    with pytest.raises(SchemaVersionError):
        await db.load("r1")
    with pytest.raises(SchemaVersionError):
        await db.list_runs()
    with pytest.raises(SchemaVersionError):
        await db.find_run_by_trace("t1")
    with pytest.raises(SchemaVersionError):
        await db.begin(info("r2", version=NEWER))
    with pytest.raises(SchemaVersionError):
        await db.finish(info("r3", version=NEWER), None)


async def test_newer_record_version_fails_fast(backend: Backend, db: Store) -> None:
    await db.begin(info())
    await db.append("r1", [rec(1)])
    with pytest.raises(SchemaVersionError):
        await db.append("r1", [CheckpointRecord(version=NEWER, kind="state", data={})])
    if backend.name == "memory":
        db._records["r1"].append(("state", NEWER, "{}"))  # type: ignore[attr-defined]
    else:
        await backend.raw(
            "INSERT INTO lovia_records (run_id, seq, version, kind, data) "
            "VALUES ('r1', 2, ?1, 'state', '{}')",
            NEWER,
        )
        await backend.raw("UPDATE lovia_runs SET n_records = 2 WHERE run_id = 'r1'")
    with pytest.raises(SchemaVersionError, match=f"schema version {NEWER}"):
        await db.load("r1")


async def test_newer_segment_version_fails_fast(backend: Backend, db: Store) -> None:
    assert await db.append_segment("s1", "r1", [text(1)])
    if backend.name == "memory":
        run_id, _, entries = db._sessions["s1"][0]  # type: ignore[attr-defined]
        db._sessions["s1"][0] = (run_id, NEWER, entries)  # type: ignore[attr-defined]
    else:
        await backend.raw("UPDATE lovia_sessions SET version = ?1", NEWER)
    with pytest.raises(SchemaVersionError):
        await db.load_session("s1")


PERSISTENT = [b for b in BACKENDS if b != "memory"]  # what a store file or schema has


@pytest.mark.parametrize("backend", PERSISTENT, indirect=True)
async def test_store_written_by_newer_lovia_refuses_to_open(backend: Backend, db: Store) -> None:
    await db.begin(info())
    await backend.raw("UPDATE lovia_meta SET value = ?1 WHERE key = 'schema_version'", str(NEWER))
    fresh = backend.open()
    try:
        with pytest.raises(SchemaVersionError, match="Upgrade lovia"):
            await fresh.load("r1")
    finally:
        await fresh.aclose()


@pytest.mark.parametrize("backend", PERSISTENT, indirect=True)
async def test_closed_store_refuses_calls(backend: Backend) -> None:
    opened = backend.open()
    await opened.begin(info())
    await opened.aclose()
    await opened.aclose()  # twice is fine
    with pytest.raises(StoreError, match="closed"):
        await opened.load("r1")


def test_run_info_fields_match_the_stored_columns() -> None:
    from lovia.stores._codec import RUN_COLUMNS

    assert tuple(f.name for f in dataclasses.fields(RunInfo)) == RUN_COLUMNS
