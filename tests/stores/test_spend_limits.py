"""Attribution labels on stored runs, and spend limits shared by every run of a store.

Each test runs on memory, SQLite and PostgreSQL (``backend``). The concurrency test is
the promise: 50 runs racing for one tenant's daily limit spend at most one call's cost
past it, because each call reserves its estimate with one conditional update.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from store_backends import Backend

import lovia
from lovia import Agent, ModelSettings, Runner, SpendLimit, SpendLimitExceeded, Usage, pricing
from lovia.model import ModelRequest
from lovia.stores import MemoryStore
from lovia.stores.spend import SpendLedger
from lovia.testing import FunctionModel, capture_events, reply
from lovia.testing._models import CallInfo

MODEL = "spend-m"
CALL_COST = 0.2
"""100 input + 100 output tokens at $1,000 per million."""
SETTINGS = ModelSettings(max_tokens=200)
"""The estimate (max_tokens + the request's characters / 4) covers the call's real cost."""


@pytest.fixture(autouse=True)
def _priced() -> Iterator[None]:
    pricing.set_price("test", MODEL, input_per_mtok=1000.0, output_per_mtok=1000.0)
    yield
    lovia.configure(spend_limits=[])
    pricing.clear_prices()


def _model(delay: float = 0.0) -> FunctionModel:
    def answer(request: ModelRequest, info: CallInfo) -> Any:
        return reply("done", usage=Usage(input_tokens=100, output_tokens=100), delay=delay)

    return FunctionModel(answer, model=MODEL)


def _agent(delay: float = 0.0) -> Agent[Any, str]:
    return Agent(name="billing", model=_model(delay))


async def test_labels_land_on_the_run_row_and_filter_runs(backend: Backend) -> None:
    db = backend.open()
    try:
        for run_id, tenant in (("r1", "acme"), ("r2", "globex"), ("r3", "acme")):
            await Runner.run(
                _agent(), "hi", store=db, run_id=run_id, labels={"tenant": tenant, "user": "u1"}
            )
        acme = await db.list_runs(labels={"tenant": "acme"})
        assert sorted(r.run_id for r in acme) == ["r1", "r3"]
        assert acme[0].extra["labels"] == {"tenant": "acme", "user": "u1"}
        assert [r.run_id for r in await db.list_runs(labels={"tenant": "acme", "user": "u2"})] == []
        assert len(await db.list_runs(labels={"user": "u1"})) == 3
        # a label value that looks like SQL is a value, nothing else
        assert await db.list_runs(labels={"tenant": "x' OR '1'='1"}) == []
    finally:
        await db.aclose()


async def test_a_spend_limit_ends_the_run_naming_it(backend: Backend) -> None:
    db = backend.open()
    lovia.configure(
        spend_limits=[SpendLimit(label="tenant", value="acme", max_usd=0.5, window="day")]
    )
    try:
        outcomes: list[str] = []
        errors: list[SpendLimitExceeded] = []
        for i in range(5):
            try:
                await Runner.run(
                    _agent(), "hi", store=db, run_id=f"s{i}", labels={"tenant": "acme"},
                    settings=SETTINGS,
                )  # fmt: skip
                outcomes.append("ok")
            except SpendLimitExceeded as exc:
                outcomes.append("limit")
                errors.append(exc)
        # $0.2 a call: the third starts at $0.4 (room left), the fourth finds $0.6 >= $0.5
        assert outcomes == ["ok", "ok", "ok", "limit", "limit"]
        error = errors[0]
        assert "$0.5 per day for tenant=acme" in error.message
        assert error.hint and "lovia runs --label tenant=acme" in error.hint
        assert error.limit == SpendLimit(label="tenant", value="acme", max_usd=0.5, window="day")
        assert error.spent_usd == pytest.approx(3 * CALL_COST)
        assert error.window_start == SpendLimit(label="tenant", max_usd=1).window_start(time.time())
        assert isinstance(db, SpendLedger)
        assert await db.spent("tenant=acme/day", error.window_start) == pytest.approx(0.6)
        failed = (await db.list_runs(labels={"tenant": "acme"}, status="failed"))[0]
        assert failed.error_type == "SpendLimitExceeded"
        assert failed.finish_reason == "spend_limit"
        # another tenant is not limited, and neither is a run without the label
        await Runner.run(_agent(), "hi", store=db, labels={"tenant": "globex"}, settings=SETTINGS)
        await Runner.run(_agent(), "hi", store=db, settings=SETTINGS)
    finally:
        await db.aclose()


async def test_a_limit_per_each_value_counts_values_apart(backend: Backend) -> None:
    db = backend.open()
    lovia.configure(spend_limits=[SpendLimit(label="user", max_usd=0.3, window=60)])
    try:
        for user in ("ann", "bob"):
            for _ in range(2):  # $0.2, then $0.4: the second call started with room
                await Runner.run(_agent(), "hi", store=db, labels={"user": user})
            with pytest.raises(SpendLimitExceeded, match="user=" + user):
                await Runner.run(_agent(), "hi", store=db, labels={"user": user})
    finally:
        await db.aclose()


async def test_the_hit_is_reported_as_the_run_failing_with_its_reason() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    lovia.configure(spend_limits=[SpendLimit(label="tenant", max_usd=0.0)])
    db = MemoryStore()
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    with capture_events() as seen, pytest.raises(SpendLimitExceeded):
        await Runner.run(_agent(), "hi", store=db, labels={"tenant": "acme"}, meter_provider=meters)
    failed = [e for e in seen if isinstance(e, lovia.events.RunFailed)]
    assert failed and failed[0].error_type == "SpendLimitExceeded"
    assert not [e for e in seen if isinstance(e, lovia.events.ModelCallStarted)]  # never sent
    data: Any = reader.get_metrics_data()
    runs = [
        dict(p.attributes)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "lovia.runs"
        for p in m.data.data_points
        if p.value
    ]
    assert runs == [
        {
            "gen_ai.agent.name": "billing",
            "lovia.run.outcome": "failed",
            "lovia.run.finish_reason": "spend_limit",
            "lovia.run.nested": False,
            "error.type": "SpendLimitExceeded",
        }
    ]


async def test_a_limit_needs_a_store_and_a_price() -> None:
    lovia.configure(spend_limits=[SpendLimit(label="tenant", max_usd=1.0)])
    with pytest.raises(lovia.UserError, match="no store to count spend in"):
        await Runner.run(_agent(), "hi", store=None, labels={"tenant": "acme"})
    unpriced = Agent(name="u", model=FunctionModel(lambda r, i: "x", model="no-price"))
    with pytest.raises(lovia.UserError, match="has no known price"):
        await Runner.run(unpriced, "hi", store=MemoryStore(), labels={"tenant": "a"})


async def test_fifty_concurrent_runs_overshoot_by_at_most_one_call(backend: Backend) -> None:
    """Five "workers" (store objects: on PostgreSQL, five connection pools) run ten runs
    each at once against one $3 daily limit."""
    limit = 3.0
    lovia.configure(spend_limits=[SpendLimit(label="tenant", value="acme", max_usd=limit)])
    stores = [backend.open()]
    await stores[0].list_runs(limit=1)  # workers start on an existing schema
    stores += [backend.open() for _ in range(4)]

    async def one(i: int) -> str:
        try:
            await Runner.run(
                _agent(delay=0.01), "hi", store=stores[i % 5], run_id=f"c{i}",
                labels={"tenant": "acme"}, settings=SETTINGS,
            )  # fmt: skip
        except SpendLimitExceeded:
            return "limit"
        return "ok"

    try:
        results = await asyncio.gather(*(one(i) for i in range(50)), return_exceptions=True)
        assert [r for r in results if isinstance(r, BaseException)] == []
        outcomes = [str(r) for r in results]
        ledger = stores[0]
        assert isinstance(ledger, SpendLedger)
        start = SpendLimit(label="tenant", max_usd=1).window_start(time.time())
        spent = await ledger.spent("tenant=acme/day", start)
        done = outcomes.count("ok")
        assert spent == pytest.approx(done * CALL_COST)  # every call counted, once
        assert limit - CALL_COST <= spent <= limit + CALL_COST + 1e-9
        assert outcomes.count("limit") == 50 - done > 0
    finally:
        for db in stores:
            if db is not stores[0] or backend.name != "memory":
                await db.aclose()


async def test_a_worker_task_carries_its_labels_to_the_run() -> None:
    from lovia.workers.execute import execute_run

    db = MemoryStore()
    task = {"run_id": "w1", "input": "hi", "labels": {"tenant": "acme", "feature": "batch"}}
    assert await execute_run(_agent(), task, db) == "completed"
    assert (await db.list_runs(labels={"tenant": "acme"}))[0].extra["labels"] == task["labels"]
    hostile = {"run_id": "w2", "input": "hi", "labels": {"tenant": "a\x00b"}}
    assert await execute_run(_agent(), hostile, db) == "failed"  # refused, never stored
    assert await db.load("w2") is None
