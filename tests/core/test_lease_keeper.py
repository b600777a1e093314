"""One lease keeper per (event loop, store, TTL): it renews every run's lease in one
``renew_many`` call per third of the TTL, instead of a heartbeat task per run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from lovia import Agent, Runner, tool
from lovia._loop import lease as lease_mod
from lovia.errors import LeaseLost, StoreError
from lovia.stores import MemoryStore
from lovia.stores.base import renew_many
from lovia.testing import ScriptedModel, call

TTL = 0.3


@pytest.fixture(autouse=True)
def _short_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOVIA_LEASE_TTL_S", str(TTL))


class CountingStore(MemoryStore):
    """Counts lease renewals; ``fail``: how many ``renew_many`` calls raise first."""

    def __init__(self, fail: int = 0) -> None:
        super().__init__()
        self.batches: list[list[str]] = []
        self.single = 0
        self.fail = fail

    async def renew(self, run_id: str, owner: str, fence: int, ttl_s: float) -> bool:
        self.single += 1
        return await super().renew(run_id, owner, fence, ttl_s)

    async def renew_many(self, leases: Sequence[tuple[str, str, int]], ttl_s: float) -> set[str]:
        self.batches.append([run_id for run_id, _, _ in leases])
        if self.fail:
            self.fail -= 1
            raise StoreError("store down")
        return {r for r, o, f in leases if not await MemoryStore.renew(self, r, o, f, ttl_s)}


def _keeper_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "lovia-lease-keeper"]


def _waiting_agent(gate: asyncio.Event, started: list[str]) -> Agent[Any, Any]:
    @tool
    async def wait(name: str) -> str:
        """Wait for the gate."""
        started.append(name)
        await gate.wait()
        return "waited"

    return Agent(name="a", model=ScriptedModel([call("wait", name="x"), "done"]), tools=[wait])


async def _until(cond: Any, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_runs_share_one_keeper_and_one_renew_many_call_per_tick() -> None:
    store, gate, started = CountingStore(), asyncio.Event(), list[str]()
    runs = [
        asyncio.ensure_future(
            Runner.run(_waiting_agent(gate, started), "go", run_id=f"r{i}", checkpointer=store)
        )
        for i in range(5)
    ]
    await _until(lambda: len(started) == 5)
    # a tool start may renew its lease itself when the keeper's tick was late (a loaded
    # machine): count only what happens while every run waits
    store.batches.clear()
    store.single = 0
    await asyncio.sleep(TTL * 1.2)  # at least three ticks
    assert len(_keeper_tasks()) == 1 and len(lease_mod._keepers) == 1  # pyright: ignore[reportPrivateUsage]
    assert 2 <= len(store.batches) <= 5
    assert all(sorted(batch) == [f"r{i}" for i in range(5)] for batch in store.batches)
    assert store.single == 0  # no per-run renewal
    gate.set()
    results = await asyncio.gather(*runs)
    assert [r.output for r in results] == ["done"] * 5
    # the keeper goes away with the last run, and comes back on demand
    await asyncio.sleep(0)
    assert _keeper_tasks() == [] and lease_mod._keepers == {}  # pyright: ignore[reportPrivateUsage]
    gate.clear()
    again = asyncio.ensure_future(
        Runner.run(_waiting_agent(gate, started), "go", run_id="r9", checkpointer=store)
    )
    await _until(lambda: len(started) == 6)
    store.batches.clear()
    await asyncio.sleep(TTL * 0.7)
    assert store.batches and all(batch == ["r9"] for batch in store.batches)
    gate.set()
    assert (await again).output == "done"
    await asyncio.sleep(0)
    assert _keeper_tasks() == []


async def test_runs_on_different_stores_do_not_share_a_keeper() -> None:
    stores, gate, started = (CountingStore(), CountingStore()), asyncio.Event(), list[str]()
    runs = [
        asyncio.ensure_future(
            Runner.run(_waiting_agent(gate, started), "go", run_id="r", checkpointer=s)
        )
        for s in stores
    ]
    await _until(lambda: len(started) == 2)
    assert len(_keeper_tasks()) == 2
    await asyncio.sleep(TTL * 0.5)
    assert all(s.batches and all(b == ["r"] for b in s.batches) for s in stores)
    gate.set()
    await asyncio.gather(*runs)


@pytest.mark.lovia_unconsumed  # the run whose lease was taken ends before its script does
async def test_one_runs_lost_lease_cancels_that_run_only(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="lovia.lease")
    store, gate, started = CountingStore(), asyncio.Event(), list[str]()
    lost = asyncio.ensure_future(
        Runner.run(_waiting_agent(gate, started), "go", run_id="lost", checkpointer=store)
    )
    kept = asyncio.ensure_future(
        Runner.run(_waiting_agent(gate, started), "go", run_id="kept", checkpointer=store)
    )
    await _until(lambda: len(started) == 2)
    holder = await store.lease_holder("lost")
    assert holder is not None
    await store.release("lost", holder)  # another worker takes the run over
    assert await store.acquire("lost", "thief", 30) is not None
    with pytest.raises(LeaseLost):
        await asyncio.wait_for(lost, 5)
    assert "run lost: lease lost to another worker; stopping" in caplog.text
    assert not kept.done()
    store.batches.clear()
    await asyncio.sleep(TTL * 0.7)
    assert store.batches and all(batch == ["kept"] for batch in store.batches)
    gate.set()
    assert (await kept).output == "done"
    assert await store.lease_holder("lost") == "thief"


async def test_a_store_error_renews_nobody_that_tick_and_the_keeper_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="lovia.lease")
    store, gate, started = CountingStore(fail=2), asyncio.Event(), list[str]()
    runs = [
        asyncio.ensure_future(
            Runner.run(_waiting_agent(gate, started), "go", run_id=f"r{i}", checkpointer=store)
        )
        for i in range(2)
    ]
    await _until(lambda: len(started) == 2)
    await _until(lambda: len(store.batches) >= 4)
    assert "could not renew the leases of 2 run(s) (StoreError: store down)" in caplog.text
    assert store.fail == 0 and not any(r.done() for r in runs)
    assert await store.lease_holder("r0") is not None  # renewed again after the errors
    gate.set()
    assert [r.output for r in await asyncio.gather(*runs)] == ["done", "done"]


async def test_renew_many_falls_back_to_renew_on_a_store_without_it() -> None:
    class Plain:
        def __init__(self) -> None:
            self.inner = MemoryStore()
            self.calls = 0

        async def renew(self, run_id: str, owner: str, fence: int, ttl_s: float) -> bool:
            self.calls += 1
            return await self.inner.renew(run_id, owner, fence, ttl_s)

    plain = Plain()
    token = await plain.inner.acquire("a", "w1", 30)
    assert token is not None
    lost = await renew_many(plain, [("a", "w1", token), ("b", "w1", 1)], 30)  # type: ignore[arg-type]
    assert lost == {"b"} and plain.calls == 2
