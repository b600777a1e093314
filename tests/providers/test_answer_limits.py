"""Unbounded answers: a stream of small events is cut at ``max_answer_size`` (reading
stops there, memory stays bounded, the call is not retried), and an answer asking for
more tool calls than ``Agent.max_tool_calls_per_turn`` ends the run before any runs."""

from __future__ import annotations

import asyncio
import tracemalloc
from pathlib import Path

import pytest

from lovia import Agent, AnswerTooLarge, Runner, TooManyToolCalls, UserError, tool
from lovia import events as ev
from lovia.providers._deadline import DEFAULT_MAX_ANSWER_SIZE
from lovia.providers._http import StreamLimits
from lovia.stores import store
from lovia.testing import ScriptedModel, call

from .test_liveness import Behaviour, HostileServer, _chunk, chunked, provider, timed

HUNDRED_MB = 100 * 1024 * 1024


def small_events(total: int, sent: list[int]) -> Behaviour:
    """``total`` bytes of tiny content events (then a finish), counting what was sent."""
    block = chunked(_chunk("x") * 64)  # ~6 KiB of 64 one-character events

    async def run(writer: asyncio.StreamWriter) -> None:
        while sent[0] < total:
            writer.write(block)
            sent[0] += len(block)
            await writer.drain()
        writer.write(chunked(_chunk(finish="stop")) + b"0\r\n\r\n")
        await writer.drain()

    return run


async def test_a_100_mb_stream_of_small_events_stops_at_the_answer_limit() -> None:
    limit = 1024 * 1024
    sent = [0]
    server = HostileServer(small_events(HUNDRED_MB, sent))
    tracemalloc.start()
    try:
        async with server as url:
            items, error, _ = await timed(provider(url, StreamLimits(max_answer_size=limit), 2))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(error, AnswerTooLarge), error
    assert error.code == "answer_too_large" and error.limit == limit
    assert error.provider == "openai" and "max_answer_size" in (error.hint or "")
    assert server.requests == 1  # not retried: the same server would send it again
    assert sent[0] < 16 * limit  # reading stopped: the rest of the 100 MB was never sent
    assert 0 < len(items) < limit // 90  # each event is over 90 bytes on the wire
    assert peak < 12 * limit, peak  # memory bounded by the limit, not by the stream


def test_the_default_answer_limit_is_32_mib() -> None:
    assert StreamLimits().max_answer_size == DEFAULT_MAX_ANSWER_SIZE == 32 * 1024 * 1024
    with pytest.raises(UserError, match="max_answer_size"):
        StreamLimits(max_answer_size=0)


async def test_an_answer_under_the_limit_is_whole() -> None:
    sent = [0]
    server = HostileServer(small_events(64 * 1024, sent))
    async with server as url:
        items, error, _ = await timed(provider(url, StreamLimits(max_answer_size=1024 * 1024)))
    assert error is None and items[-1].finish_reason == "stop"  # type: ignore[union-attr]


ran: list[str] = []


@tool
def touch(n: int) -> str:
    """Record a call."""
    ran.append(str(n))
    return "ok"


@pytest.mark.lovia_unconsumed  # the run fails before the follow-up answer is asked for
async def test_10000_tool_calls_in_one_answer_end_the_run_before_any_runs(
    tmp_path: Path,
) -> None:
    ran.clear()
    db = store(f"sqlite:///{tmp_path / 'l.db'}")
    calls = [call("touch", n=i, id=f"c{i}") for i in range(10_000)]
    agent = Agent(name="a", model=ScriptedModel([calls, "done"]), tools=[touch])
    stream = Runner.stream(agent, "go", checkpointer=db, run_id="r-many")
    seen = [e async for e in stream]
    with pytest.raises(TooManyToolCalls) as info:
        await stream.result()
    assert ran == []  # not one call ran
    assert info.value.calls == 10_000 and info.value.limit == 128
    assert "max_tool_calls_per_turn" in (info.value.hint or "")
    failed = [e for e in seen if isinstance(e, ev.RunFailed)]
    assert len(failed) == 1 and failed[0].error_type == "TooManyToolCalls"
    assert failed[0].finish_reason == "too_many_tool_calls"
    assert not any(isinstance(e, ev.ToolCallStarted) for e in seen)
    stored = await db.load("r-many")
    assert stored is not None and stored.info.status == "failed"
    assert stored.info.error_type == "TooManyToolCalls"
    await db.aclose()


async def test_the_tool_call_limit_is_configurable() -> None:
    ran.clear()
    three = [call("touch", n=i, id=f"c{i}") for i in range(3)]
    agent = Agent(
        name="a", model=ScriptedModel([three, "done"]), tools=[touch], max_tool_calls_per_turn=3
    )
    result = await Runner.run(agent, "go")
    assert result.output == "done" and sorted(ran) == ["0", "1", "2"]
    ran.clear()
    with pytest.raises(TooManyToolCalls, match="asked for 3 tool calls in one answer"):
        await Runner.run(agent.clone(model=ScriptedModel([three]), max_tool_calls_per_turn=2), "go")
    assert ran == []
    with pytest.raises(UserError, match="max_tool_calls_per_turn must be >= 1"):
        Agent(name="a", max_tool_calls_per_turn=0)
