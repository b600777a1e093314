"""The PostgreSQL store at fleet scale, counted at the wire.

Round trips are counted by a proxy that reads the frontend protocol (``pg_wire``): a
``Sync`` or a simple ``Query`` is one wait for the server, whatever the driver thinks.
PgBouncer tests start Debian's ``pgbouncer`` in transaction mode on a free port
(``pg_bouncer``); when it is missing they skip, or fail under ``CI=true``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from pg_bouncer import PgBouncer, find_pgbouncer
from pg_wire import WireCounter
from store_backends import PG_URL, pg_query

from lovia import Agent, Runner, tool
from lovia.errors import StoreError
from lovia.stores import store
from lovia.stores.base import CheckpointRecord, RunInfo, start_run
from lovia.stores.postgres import PostgresStore
from lovia.testing import ScriptedModel, call
from lovia.workers import execute

pytest.importorskip("asyncpg")
pytestmark = pytest.mark.postgres

_n = itertools.count()
_RESET = ("pg_advisory_unlock_all", "RESET ALL", "UNLISTEN")


@pytest.fixture
def schema(pg_prefix: str) -> str:
    return f"{pg_prefix}_fleet_{next(_n)}"


@pytest.fixture
async def wire() -> AsyncIterator[WireCounter]:
    counter = WireCounter()
    await counter.start()
    yield counter
    await counter.aclose()


@pytest.fixture(scope="session")
def bouncer(pg_prefix: str) -> Iterator[PgBouncer]:
    if find_pgbouncer() is None:
        message = "pgbouncer is not installed (scripts/ci-install-ops.sh installs it)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    started = PgBouncer(pool_size=3).start()
    yield started
    started.stop()


def _db(url: str) -> str:
    return url.rsplit("/", 1)[-1].split("?")[0]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _agent(turns: int) -> Agent[Any, str]:
    steps: list[Any] = [call("add", a=i, b=1) for i in range(turns - 1)]
    return Agent(name="calc", model=ScriptedModel([*steps, "done"]), tools=[add])


async def _run(db: PostgresStore, run_id: str, turns: int) -> int:
    result = await Runner.run(
        _agent(turns), "go", run_id=run_id, checkpointer=db, session=db, session_id=run_id
    )
    assert result.output == "done"
    return result.turns


# -- round trips ------------------------------------------------------------------------


async def test_every_store_call_is_one_round_trip_and_none_resets(
    wire: WireCounter, schema: str
) -> None:
    db = store(wire.url(_db(PG_URL), query=f"schema={schema}"))
    assert isinstance(db, PostgresStore)
    try:
        await db.begin(RunInfo(run_id="warm", agent="a"))  # pool, schema, first statements
        await _calls(db, "warm")
        wire.reset()
        counts = await _calls(db, "r1")
        assert counts == dict.fromkeys(counts, 1), counts
        assert not [sql for sql in wire.trips if any(word in sql for word in _RESET)]
    finally:
        await db.aclose()


async def _calls(db: PostgresStore, run_id: str) -> dict[str, int]:
    """Each store call a run makes, with the round trips it took."""
    counts: dict[str, int] = {}
    wire = _current_wire(db)
    _one = [CheckpointRecord(kind="state", data={})]
    calls: list[tuple[str, Any]] = [
        ("begin", lambda: db.begin(RunInfo(run_id=run_id, agent="a"))),
        ("start_run", lambda: start_run(db, RunInfo(run_id=f"{run_id}-s", agent="a"), _one)),
        ("acquire", lambda: db.acquire(run_id, "w1", 30)),
        ("load", lambda: db.load(run_id)),
        ("load_session", lambda: db.load_session(run_id)),
        ("append", lambda: db.append(run_id, [CheckpointRecord(kind="state", data={})], fence=1)),
        ("renew", lambda: db.renew(run_id, "w1", 1, 30)),
        ("renew_many", lambda: db.renew_many([(run_id, "w1", 1)], 30)),
        ("lease_holder", lambda: db.lease_holder(run_id)),
        (
            "finish",
            lambda: db.finish(RunInfo(run_id=run_id, agent="a", status="completed"), {}, fence=1),
        ),
        ("append_segment", lambda: db.append_segment(run_id, run_id, [], fence=1)),
        ("release", lambda: db.release(run_id, "w1")),
    ]
    for name, make in calls:
        before = wire.round_trips
        await make()
        counts[name] = wire.round_trips - before
    return counts


_WIRES: dict[int, WireCounter] = {}


def _current_wire(db: PostgresStore) -> WireCounter:
    port = int(db.options.dsn.split(":")[2].split("/")[0])
    return _WIRES[port]


@pytest.fixture(autouse=True)
def _register_wire(request: pytest.FixtureRequest) -> Iterator[None]:
    if "wire" in request.fixturenames:
        counter: WireCounter = request.getfixturevalue("wire")
        _WIRES[counter.port] = counter
    yield
    _WIRES.clear()


@pytest.mark.parametrize("turns", [2, 3, 4])
async def test_a_multi_turn_run_takes_at_most_four_round_trips_per_model_turn(
    wire: WireCounter, schema: str, turns: int
) -> None:
    """Lease, load and session are one round trip each per run, and the new run's row
    goes out with its first records (one statement); each turn that calls a tool writes
    its answer with the calls' ledger, then the results; the last answer, the completed
    row, the session segment and the lease release go out as one statement: 2 per turn
    + 3."""
    db = store(wire.url(_db(PG_URL), query=f"schema={schema}"))
    assert isinstance(db, PostgresStore)
    try:
        await _run(db, "warm", 3)
        wire.reset()
        assert await _run(db, f"r{turns}", turns) == turns
        assert wire.round_trips <= 2 * turns + 3, wire.by_statement()
        assert wire.round_trips <= 4 * turns
        assert wire.named_statements > 0  # the statement cache: one round trip each
        assert await db.lease_holder(f"r{turns}") is None  # released with the end
        history = await db.load_session(f"r{turns}")
        assert "input" in [e.type for e in history] and history[-1].type == "text"
    finally:
        await db.aclose()


async def test_without_a_statement_cache_nothing_is_named_and_a_call_takes_two(
    wire: WireCounter, schema: str
) -> None:
    db = store(wire.url(_db(PG_URL), query=f"schema={schema}&statement_cache_size=0"))
    assert isinstance(db, PostgresStore)
    try:
        await db.begin(RunInfo(run_id="warm", agent="a"))
        wire.reset()
        counts = await _calls(db, "r1")
        assert counts == dict.fromkeys(counts, 2), counts  # prepare (unnamed), then execute
        assert wire.named_statements == 0
        assert await _run(db, "r3", 3) == 3
        assert wire.named_statements == 0
    finally:
        await db.aclose()


async def test_pool_max_bounds_the_connections_of_a_process(wire: WireCounter, schema: str) -> None:
    name = f"lovia-t-{secrets.token_hex(4)}"
    db = store(wire.url(_db(PG_URL), query=f"schema={schema}&pool_max=2&application_name={name}"))
    assert isinstance(db, PostgresStore)
    try:
        await db.begin(RunInfo(run_id="r1", agent="a"))
        await asyncio.gather(*(db.load("r1") for _ in range(40)))
        rows = await pg_query(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", name
        )
        assert 1 <= rows[0][0] <= 2
        assert wire.connections <= 2
    finally:
        await db.aclose()


# -- waiting for a run ------------------------------------------------------------------


def _load_trips(wire: WireCounter) -> int:
    return sum(1 for sql in wire.trips if sql.startswith("SELECT r.run_id"))


async def test_a_waiter_wakes_on_the_notify_not_by_polling(
    wire: WireCounter, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(execute, "WATCH_RECHECK_S", 60.0)  # no safety re-read in this test
    waiter = store(wire.url(_db(PG_URL), query=f"schema={schema}"))
    writer = store(f"{PG_URL}?schema={schema}")
    try:
        await writer.begin(RunInfo(run_id="r1", agent="a"))
        await writer.load("r1")  # its pool is up: finish below is one statement
        wire.reset()
        waiting = asyncio.ensure_future(execute.wait_for_run(waiter, "r1", timeout_s=30))
        await asyncio.sleep(1.0)
        assert not waiting.done()
        assert _load_trips(wire) == 1  # read once, then it listens: no polling
        ended = time.monotonic()
        await writer.finish(RunInfo(run_id="r1", agent="a", status="completed"), {"output": 1})
        snap = await asyncio.wait_for(waiting, 10)
        assert time.monotonic() - ended < 2.0
        assert snap.info.status == "completed" and snap.result == {"output": 1}
        assert _load_trips(wire) == 2
        assert [sql for sql in wire.trips if sql.startswith("LISTEN")] == [
            f'LISTEN "lovia_{schema}"'[: len("LISTEN ") + 65]
        ]
    finally:
        await waiter.aclose()
        await writer.aclose()


async def test_a_waiter_whose_listen_connection_is_killed_still_sees_the_end(
    schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(execute, "WATCH_RECHECK_S", 60.0)
    name = f"lovia-t-{secrets.token_hex(4)}"
    waiter = store(f"{PG_URL}?schema={schema}&application_name={name}")
    writer = store(f"{PG_URL}?schema={schema}")
    try:
        await writer.begin(RunInfo(run_id="r1", agent="a"))
        waiting = asyncio.ensure_future(execute.wait_for_run(waiter, "r1", timeout_s=30))
        await asyncio.sleep(1.0)
        killed = await pg_query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = $1 AND query LIKE 'LISTEN%'",
            name,
        )
        assert [row[0] for row in killed] == [True]
        listening: list[Any] = []
        for _ in range(50):  # the waiter re-reads the run, then listens again
            await asyncio.sleep(0.1)
            listening = await pg_query(
                "SELECT pid FROM pg_stat_activity WHERE application_name = $1 "
                "AND query LIKE 'LISTEN%'",
                name,
            )
            if listening:
                break
        assert len(listening) == 1
        assert not waiting.done()
        await writer.finish(RunInfo(run_id="r1", agent="a", status="completed"), None)
        snap = await asyncio.wait_for(waiting, 5)  # the notification, not a 60 s re-check
        assert snap.info.status == "completed"
    finally:
        await waiter.aclose()
        await writer.aclose()


async def test_forged_and_hostile_notifications_never_end_a_wait(
    wire: WireCounter, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anyone who can reach the database can NOTIFY the channel: a forged end of the
    run, another run's id, a huge or odd payload only make the waiter read the run
    again; it returns when the stored run has ended, with what is stored."""
    monkeypatch.setattr(execute, "WATCH_RECHECK_S", 60.0)
    waiter = store(wire.url(_db(PG_URL), query=f"schema={schema}"))
    writer = store(f"{PG_URL}?schema={schema}")
    channel = f"lovia_{schema}"[:63]
    waiting: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    try:
        await writer.begin(RunInfo(run_id="r1", agent="a"))
        wire.reset()
        waiting = asyncio.ensure_future(execute.wait_for_run(waiter, "r1", timeout_s=30))
        await asyncio.sleep(1.0)
        for payload in ["r1", "r2", "probe:0000", "\u202e" * 100, "x" * 7000, "r1"]:
            await pg_query("SELECT pg_notify($1, $2)", channel, payload)
        await asyncio.sleep(1.0)
        assert not waiting.done()
        assert 2 <= _load_trips(wire) <= 4  # only the notifications naming r1 woke it
        await writer.finish(RunInfo(run_id="r1", agent="a", status="completed"), {"output": 2})
        snap = await asyncio.wait_for(waiting, 10)
        assert snap.result == {"output": 2}
    finally:
        waiting.cancel()
        await waiter.aclose()
        await writer.aclose()


async def test_listen_off_polls_with_backoff_and_sends_no_listen(
    wire: WireCounter, schema: str
) -> None:
    waiter = store(wire.url(_db(PG_URL), query=f"schema={schema}&listen=off"))
    writer = store(f"{PG_URL}?schema={schema}")
    try:
        await writer.begin(RunInfo(run_id="r1", agent="a"))
        await waiter.load("r1")
        wire.reset()
        waiting = asyncio.ensure_future(
            execute.wait_for_run(waiter, "r1", timeout_s=30, poll_s=0.1)
        )
        await asyncio.sleep(3.0)
        await writer.finish(RunInfo(run_id="r1", agent="a", status="failed"), None)
        snap = await asyncio.wait_for(waiting, 10)
        assert snap.info.status == "failed"
        # 0.1, 0.2, 0.4, 0.8, then every 1 s: about 6 reads in 3 s, not 30
        assert 4 <= _load_trips(wire) <= 9
        assert not [sql for sql in wire.trips if "LISTEN" in sql]
    finally:
        await waiter.aclose()
        await writer.aclose()


# -- through PgBouncer in transaction mode ----------------------------------------------


async def test_runs_through_pgbouncer_in_transaction_mode(bouncer: PgBouncer, schema: str) -> None:
    """Twenty concurrent runs over a 3-connection PgBouncer pool: every run completes
    with every record, and no statement leaves state on a server connection."""
    url = bouncer.url(_db(PG_URL), query=f"schema={schema}&statement_cache_size=0&pool_max=4")
    db = store(url)
    assert isinstance(db, PostgresStore)
    try:
        turns = await asyncio.gather(*(_run(db, f"r{i}", 3) for i in range(20)))
        assert turns == [3] * 20
        shapes: set[tuple[str, ...]] = set()
        for i in range(20):
            snap = await db.load(f"r{i}")
            assert snap is not None and snap.info.status == "completed"
            assert snap.result is not None and snap.result["output"] == "done"
            shapes.add(tuple(record.kind for record in snap.records))
        assert len(shapes) == 1 and len(next(iter(shapes))) >= 6  # same records, in order
        log = bouncer.log()
        assert "prepared statement" not in log and "ERROR" not in log, log[-2000:]
    finally:
        await db.aclose()


async def test_one_lease_among_concurrent_workers_through_pgbouncer(
    bouncer: PgBouncer, schema: str
) -> None:
    url = bouncer.url(_db(PG_URL), query=f"schema={schema}&statement_cache_size=0")
    stores = [store(url) for _ in range(6)]
    try:
        await stores[0].begin(RunInfo(run_id="r1", agent="a"))
        tokens = await asyncio.gather(
            *(db.acquire("r1", f"w{i}", 30) for i, db in enumerate(stores))
        )
        assert sorted(t for t in tokens if t is not None) == [1]
    finally:
        for db in stores:
            await db.aclose()


async def test_a_waiter_behind_pgbouncer_falls_back_to_polling(
    bouncer: PgBouncer, schema: str
) -> None:
    url = bouncer.url(_db(PG_URL), query=f"schema={schema}&statement_cache_size=0")
    waiter, writer = store(url), store(url)
    assert isinstance(waiter, PostgresStore)
    try:
        await writer.begin(RunInfo(run_id="r1", agent="a"))
        async with waiter.watch_run("r1") as watch:
            assert watch.listening is False  # the probe never came back
        waiting = asyncio.ensure_future(execute.wait_for_run(waiter, "r1", timeout_s=30))
        await asyncio.sleep(0.5)
        await writer.finish(RunInfo(run_id="r1", agent="a", status="completed"), None)
        snap = await asyncio.wait_for(waiting, 10)
        assert snap.info.status == "completed"
    finally:
        await waiter.aclose()
        await writer.aclose()


async def test_a_read_only_store_behind_pgbouncer_says_to_go_direct(
    bouncer: PgBouncer, schema: str
) -> None:
    db = store(bouncer.url(_db(PG_URL), query=f"schema={schema}"), read_only=True)
    try:
        with pytest.raises(StoreError, match="unsupported startup parameter") as caught:
            await db.list_runs()
        assert "directly" in (caught.value.hint or "")
    finally:
        await db.aclose()


async def test_a_closed_store_refuses_to_watch(schema: str) -> None:
    db = store(f"{PG_URL}?schema={schema}")
    assert isinstance(db, PostgresStore)
    await db.aclose()
    with pytest.raises(StoreError, match="closed"):
        async with db.watch_run("r1"):
            pass
