"""RunWatch: the run's cancel token and deadline stop the loop's own awaits only.

A stop ends an armed await with the run's own error (not a bare CancelledError); a
token set while the block is paused (the consumer's code runs) acts at the next armed
await; the caller's own cancellation of the task is left to asyncio.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from lovia._loop.watch import RunWatch
from lovia.context import CancelToken


class Stopped(Exception):
    pass


def _watch(deadline: float | None = None) -> tuple[RunWatch, CancelToken]:
    token = CancelToken()
    watch = RunWatch(token, deadline, lambda: Stopped("run stopped"))
    token.add_listener(watch.fire)
    return watch, token


async def test_the_token_ends_an_armed_await_with_the_runs_error() -> None:
    watch, token = _watch()
    asyncio.get_running_loop().call_later(0.01, token.cancel, "stop")
    with pytest.raises(Stopped):
        async with watch.armed():
            await asyncio.sleep(5)
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_the_deadline_ends_an_armed_await() -> None:
    watch, _ = _watch(time.monotonic() + 0.01)
    t0 = time.monotonic()
    with pytest.raises(Stopped):
        async with watch.armed():
            await asyncio.sleep(5)
    assert time.monotonic() - t0 < 2


async def test_a_paused_block_lets_the_consumers_code_finish() -> None:
    watch, token = _watch()
    consumer_done = False
    with pytest.raises(Stopped):
        async with watch.armed() as armed:
            armed.pause()
            token.cancel("while the consumer runs")
            await asyncio.sleep(0.02)  # the consumer's own await: not interrupted
            consumer_done = True
            armed.resume()  # acts at the next armed await
            await asyncio.sleep(5)
    assert consumer_done


async def test_a_passed_deadline_acts_at_the_next_arm() -> None:
    watch, _ = _watch(time.monotonic() - 1)
    await asyncio.sleep(0)  # disarmed: nothing happens
    with pytest.raises(Stopped):
        async with watch.armed():
            await asyncio.sleep(5)


async def test_the_callers_cancellation_propagates_untouched() -> None:
    watch, _ = _watch()

    async def armed_wait() -> None:
        async with watch.armed():
            await asyncio.sleep(5)

    task = asyncio.ensure_future(armed_wait())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert watch.stopped is None


async def test_after_a_nested_wait_the_token_still_reaches_the_enclosing_await() -> None:
    """A user-code wait inside an armed block (a hook on an event a phase hands out
    while armed) gives the token back to the enclosing block when it ends."""
    watch, token = _watch()
    with pytest.raises(Stopped):
        async with watch.armed():
            assert await watch.wait(asyncio.sleep(0, "hook done")) == "hook done"
            asyncio.get_running_loop().call_later(0.01, token.cancel, "stop")
            await asyncio.sleep(5)  # the token must still end this
    assert watch.timeout is None
