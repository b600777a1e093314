"""Relay.run_inline: a build that needs no model call runs in the loop's own task; one
that summarizes moves to its own task before its first model call (events still flow,
in order, errors and cancellation still reach the loop)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from lovia import events as ev
from lovia._loop.call import Done, Relay


def _event(n: int) -> ev.Event:
    return ev.TurnStarted(run_id="r", agent="a", turn=n)


async def _drain(
    it: AsyncIterator[ev.Event | Done[Any]], out: list[Any] | None = None
) -> list[int]:
    """The events' turns; the step's result (the stream's last item) goes into ``out``."""
    turns: list[int] = []
    async for item in it:
        if isinstance(item, Done):
            if out is not None:
                out.append(item.value)
        else:
            turns.append(item.turn)
    return turns


async def test_a_build_that_never_suspends_runs_in_the_callers_task() -> None:
    relay = Relay()
    seen: list[Any] = []

    async def build() -> str:
        seen.append(asyncio.current_task())
        return "view"

    out: list[Any] = []
    assert await _drain(relay.run_inline(build()), out) == []
    assert out == ["view"]
    assert seen == [asyncio.current_task()]


async def test_a_summarizing_build_moves_to_its_own_task_before_its_model_call() -> None:
    relay = Relay()
    tasks: list[Any] = []

    async def summarize(n: int) -> int:
        await relay.detach()
        tasks.append(asyncio.current_task())  # where the model call would start
        await relay.send(_event(n))
        await asyncio.sleep(0)
        await relay.send(_event(n + 1))
        return n * 10

    async def build() -> int:
        tasks.append(asyncio.current_task())
        first = await summarize(1)
        second = await summarize(3)
        return first + second

    out: list[Any] = []
    assert await _drain(relay.run_inline(build()), out) == [1, 2, 3, 4]
    assert out == [40]
    me = asyncio.current_task()
    assert tasks[0] is me  # the inline first step
    assert tasks[1] is not me and tasks[2] is tasks[1]  # the rest: one task of its own


async def test_errors_reach_the_loop_inline_and_after_the_hand_off() -> None:
    relay = Relay()

    async def fails_inline() -> None:
        raise ValueError("inline")

    with pytest.raises(ValueError, match="inline"):
        await _drain(relay.run_inline(fails_inline()))

    relay = Relay()

    async def fails_later() -> None:
        await relay.detach()
        await relay.send(_event(1))
        raise KeyError("later")

    got: list[int] = []
    with pytest.raises(KeyError, match="later"):
        async for e in relay.run_inline(fails_later()):
            assert not isinstance(e, Done)
            got.append(e.turn)
    assert got == [1]


async def test_closing_the_stream_cancels_the_moved_build() -> None:
    relay = Relay()
    cancelled = asyncio.Event()

    async def stalls() -> None:
        await relay.detach()
        try:
            await relay.send(_event(1))
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    it = relay.run_inline(stalls())
    first = await anext(it)
    assert not isinstance(first, Done) and first.turn == 1
    await it.aclose()
    await asyncio.wait_for(cancelled.wait(), 5)
