"""Stream liveness and bounded memory against hostile servers.

Real sockets on 127.0.0.1 (a server that trickles one byte per interval, one that sends
only ``: keep-alive`` comments, one that sends an endless line) and MockTransport streams.
The failure guarded against is a run held forever, so each call is wrapped in a generous
``wait_for`` (a hang fails the test instead of stalling the suite) and the bounds are
asserted against the configured limits with wide slack.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from lovia import Agent, BudgetExceeded, RunBudget, Runner
from lovia.errors import ProviderError, StreamInterrupted, UserError
from lovia.providers._http import RetryPolicy, StreamLimits
from lovia.providers._sse import DEFAULT_MAX_EVENT_SIZE, SSEDecoder
from lovia.providers.base import ModelRequest, RetryNotice, StreamItem, TextChunk
from lovia.providers.openai_chat import OpenAIChat
from lovia.transcript import InputEntry

from .wire import FAKE_KEY, no_sleep

REQ = ModelRequest(system="", messages=(InputEntry(content="hi"),))
HANG_GUARD_S = 30.0
"""A call that is still running after this long is the bug under test (it would hang)."""
SLACK_S = 5.0


def _chunk(text: str | None = None, finish: str | None = None) -> bytes:
    delta = {"content": text} if text is not None else {}
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    data = {"id": "c1", "model": "m", "choices": [choice]}
    return f"data: {json.dumps(data)}\n\n".encode()


Behaviour = Callable[[asyncio.StreamWriter], Awaitable[None]]


class HostileServer:
    """An HTTP/1.1 server on 127.0.0.1 that answers 200 text/event-stream, then misbehaves."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.requests = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def __aenter__(self) -> str:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            await reader.readexactly(length)
            self.requests += 1
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            await self.behaviour(writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()


def chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def trickle(data: bytes, interval: float) -> Behaviour:
    """One byte per interval, forever (the event never completes)."""

    async def run(writer: asyncio.StreamWriter) -> None:
        i = 0
        while True:
            writer.write(chunked(data[i % len(data) : i % len(data) + 1]))
            await writer.drain()
            i += 1
            await asyncio.sleep(interval)

    return run


def keep_alive(interval: float) -> Behaviour:
    async def run(writer: asyncio.StreamWriter) -> None:
        while True:
            writer.write(chunked(b": keep-alive\n\n"))
            await writer.drain()
            await asyncio.sleep(interval)

    return run


def slow_events(interval: float) -> Behaviour:
    """A valid content event every interval, never finishing (defeats any idle limit)."""

    async def run(writer: asyncio.StreamWriter) -> None:
        while True:
            writer.write(chunked(_chunk("tick ")))
            await writer.drain()
            await asyncio.sleep(interval)

    return run


def endless_line() -> Behaviour:
    async def run(writer: asyncio.StreamWriter) -> None:
        writer.write(chunked(b'data: {"x": "'))
        block = chunked(b"a" * 65536)
        while True:
            writer.write(block)
            await writer.drain()

    return run


SSE_HEADERS = {"content-type": "text/event-stream"}


def provider(base_url: str, limits: StreamLimits, retries: int = 1) -> OpenAIChat:
    retry = RetryPolicy(max_retries=retries, sleep=no_sleep)
    return OpenAIChat("m", base_url=base_url, api_key=FAKE_KEY, retry=retry, limits=limits)


async def drain(p: OpenAIChat) -> tuple[list[StreamItem], BaseException | None]:
    items: list[StreamItem] = []
    try:
        async with p:
            async for item in p.stream(REQ):
                items.append(item)
    except ProviderError as exc:
        return items, exc
    return items, None


async def timed(p: OpenAIChat) -> tuple[list[StreamItem], BaseException | None, float]:
    t0 = time.monotonic()
    items, error = await asyncio.wait_for(drain(p), HANG_GUARD_S)
    return items, error, time.monotonic() - t0


# --------------------------------------------------------------------------- idle deadline


@pytest.mark.parametrize(
    "behaviour",
    [trickle(b'data: {"choices": []}\n\n' * 4, 0.02), keep_alive(0.02)],
    ids=["one-byte-trickle", "keep-alive-only"],
)
async def test_idle_deadline_stops_a_server_that_never_completes_an_event(
    behaviour: Behaviour,
) -> None:
    # the trickle completes a (content-free) event only every ~0.5 s, one byte per 20 ms;
    # the keep-alive server sends a comment every 20 ms: neither resets the 0.4 s limit
    server = HostileServer(behaviour)
    limits = StreamLimits(idle_timeout=0.4, call_timeout=None)
    async with server as url:
        items, error, elapsed = await timed(provider(url, limits, retries=1))
    assert isinstance(error, ProviderError) and error.code == "idle_timeout", error
    assert "idle_timeout" in error.message
    assert [type(i) for i in items] == [RetryNotice]  # retried once, before any content
    assert server.requests == 2
    assert elapsed < 2 * 0.4 + SLACK_S


async def test_one_byte_trickle_of_a_never_ending_line_is_stopped() -> None:
    server = HostileServer(trickle(b'data: {"choices": [], "pad": "' + b"a" * 100, 0.01))
    async with server as url:
        _, error, elapsed = await timed(provider(url, StreamLimits(idle_timeout=0.3), 0))
    assert isinstance(error, ProviderError) and error.code == "idle_timeout"
    assert server.requests == 1 and elapsed < 0.3 + SLACK_S


async def test_call_deadline_stops_slow_valid_events_and_keeps_the_partial() -> None:
    server = HostileServer(slow_events(0.05))
    limits = StreamLimits(idle_timeout=5.0, call_timeout=0.5)
    async with server as url:
        items, error, elapsed = await timed(provider(url, limits))
    assert isinstance(error, StreamInterrupted) and error.code == "call_timeout", error
    assert not error.retryable
    assert error.partial is not None and "tick" in error.partial.entries[0].text  # type: ignore[union-attr]
    assert any(isinstance(i, TextChunk) for i in items)
    assert server.requests == 1  # content had arrived: never retried
    assert elapsed < 0.5 + SLACK_S


async def test_call_deadline_includes_retries() -> None:
    server = HostileServer(keep_alive(0.02))
    limits = StreamLimits(idle_timeout=0.2, call_timeout=0.7)
    async with server as url:
        _, error, elapsed = await timed(provider(url, limits, retries=100))
    assert isinstance(error, ProviderError) and error.code == "call_timeout"
    assert 2 <= server.requests < 100  # idle attempts were retried until the call deadline
    assert elapsed < 0.7 + SLACK_S


async def test_keep_alives_through_mock_transport_hit_the_idle_deadline() -> None:
    async def body() -> AsyncIterator[bytes]:
        while True:
            yield b": keep-alive\n\n"
            await asyncio.sleep(0.02)

    client = httpx.AsyncClient(
        transport=httpx.MockTransport(
            lambda r: httpx.Response(200, headers=SSE_HEADERS, content=body())
        )
    )
    retry = RetryPolicy(max_retries=2, sleep=no_sleep)
    limits = StreamLimits(idle_timeout=0.2)
    p = OpenAIChat("m", api_key=FAKE_KEY, http_client=client, retry=retry, limits=limits)
    items, error, _ = await timed(p)
    assert isinstance(error, ProviderError) and error.code == "idle_timeout"
    assert [type(i) for i in items] == [RetryNotice, RetryNotice]
    await client.aclose()


async def test_a_slow_consumer_is_not_idle_and_is_never_interrupted() -> None:
    """Time the caller spends with an item is not the server's silence."""
    sse = _chunk("a") + _chunk("b") + _chunk(finish="stop") + b"data: [DONE]\n\n"
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(
            lambda r: httpx.Response(200, headers=SSE_HEADERS, content=sse)
        )
    )
    p = OpenAIChat("m", api_key=FAKE_KEY, http_client=client, limits=StreamLimits(idle_timeout=0.1))
    texts: list[str] = []
    async for item in p.stream(REQ):
        if isinstance(item, TextChunk):
            texts.append(item.text)
        await asyncio.sleep(0.3)  # the caller's own await outlives the idle limit
    assert texts == ["a", "b"]
    await client.aclose()


async def test_call_deadline_passing_while_the_caller_holds_an_item_fails_the_next_read() -> None:
    """The caller's own await is never cancelled; the call fails when it asks for more."""
    sse = _chunk("a") + _chunk("b") + _chunk(finish="stop") + b"data: [DONE]\n\n"
    client = httpx.AsyncClient(
        transport=httpx.MockTransport(
            lambda r: httpx.Response(200, headers=SSE_HEADERS, content=sse)
        )
    )
    p = OpenAIChat("m", api_key=FAKE_KEY, http_client=client, limits=StreamLimits(call_timeout=0.2))
    stream = p.stream(REQ)
    first = await anext(stream)
    assert isinstance(first, TextChunk)
    await asyncio.sleep(0.4)  # not cancelled, although the deadline passes meanwhile
    with pytest.raises(ProviderError) as info:
        await anext(stream)
    assert info.value.code == "call_timeout"
    await client.aclose()


async def test_the_callers_cancellation_is_not_taken_for_a_deadline() -> None:
    """Cancelling the task that reads a stream (between events, under the deadlines'
    scope) ends it with CancelledError: not a timeout error, not retried."""
    server = HostileServer(slow_events(0.05))
    async with server as url:
        p = provider(url, StreamLimits(idle_timeout=5.0, call_timeout=10.0), retries=3)
        reading = asyncio.ensure_future(drain(p))
        await asyncio.sleep(0.3)  # some ticks arrived; the read now waits for the next
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(reading, HANG_GUARD_S)
    assert server.requests == 1


def test_stream_limits_are_validated() -> None:
    with pytest.raises(UserError) as info:
        StreamLimits(idle_timeout=0)
    assert "idle_timeout" in info.value.message and info.value.hint
    with pytest.raises(UserError):
        StreamLimits(call_timeout=-1.0)
    with pytest.raises(UserError):
        StreamLimits(max_event_size=0)
    assert StreamLimits(idle_timeout=None, call_timeout=None).idle_timeout is None


def test_defaults_bound_a_silent_server() -> None:
    """The documented defaults: a silent server cannot hold a call for 600 s x 4 attempts."""
    limits = StreamLimits()
    assert limits.idle_timeout == 120.0 and limits.call_timeout == 1800.0
    assert limits.max_event_size == DEFAULT_MAX_EVENT_SIZE == 16 * 1024 * 1024
    retry = RetryPolicy()
    assert limits.idle_timeout * (retry.max_retries + 1) < 600 * 4


# --------------------------------------------------------------------------- run deadline


async def test_max_seconds_ends_a_run_stuck_on_a_keep_alive_server() -> None:
    """Provider limits switched off: RunBudget(max_seconds) alone still ends the run."""
    server = HostileServer(keep_alive(0.02))
    async with server as url:
        limits = StreamLimits(idle_timeout=None, call_timeout=None)
        agent = Agent(name="a", model=provider(url, limits))
        t0 = time.monotonic()
        with pytest.raises(BudgetExceeded) as info:
            await asyncio.wait_for(
                Runner.run(agent, "hi", budget=RunBudget(max_seconds=0.4)), HANG_GUARD_S
            )
    assert info.value.limit == "max_seconds"
    assert time.monotonic() - t0 < 0.4 + SLACK_S


# --------------------------------------------------------------------------- huge events


async def test_endless_line_from_a_socket_is_a_clear_error_with_bounded_memory() -> None:
    server = HostileServer(endless_line())
    limit = 2 * 1024 * 1024
    tracemalloc.start()
    try:
        async with server as url:
            _, error, _ = await timed(provider(url, StreamLimits(max_event_size=limit), 0))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(error, ProviderError) and error.code == "event_too_large", error
    assert error.provider == "openai" and "max_event_size" in (error.hint or "")
    assert peak < 4 * limit + 8 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB"


def test_decoder_memory_stays_bounded_for_a_50_mb_line() -> None:
    decoder = SSEDecoder()
    piece = "a" * 65536
    tracemalloc.start()
    try:
        decoder.feed("data: ")
        with pytest.raises(ProviderError) as info:
            for _ in range(50 * 1024 * 1024 // len(piece)):
                decoder.feed(piece)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.code == "event_too_large"
    assert peak < DEFAULT_MAX_EVENT_SIZE * 1.5 + 4 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB"


def test_decoder_counts_multi_line_data_toward_the_event_size() -> None:
    decoder = SSEDecoder(max_event_size=1000)
    with pytest.raises(ProviderError):
        for _ in range(100):
            decoder.feed("data: " + "x" * 50 + "\n")
    ok = SSEDecoder(max_event_size=1000)
    for _ in range(100):  # the same data in separate events is fine
        assert len(ok.feed("data: " + "x" * 50 + "\n\n")) == 1


LINEAR = textwrap.dedent(
    """
    import resource, sys
    resource.setrlimit(resource.RLIMIT_CPU, (20, 20))
    from lovia.providers._sse import SSEDecoder
    size = 32 * 1024 * 1024
    decoder = SSEDecoder(max_event_size=2 * size)
    decoder.feed("data: ")
    piece = "a" * 1024
    for _ in range(size // len(piece)):
        assert decoder.feed(piece) == []
    events = decoder.feed("\\n\\n")
    assert len(events) == 1 and len(events[0].data) == size
    print("ok")
    """
)


def test_decoder_is_linear_a_32_mb_line_in_1_kb_chunks_decodes_in_bounded_work() -> None:
    """Bounded work, not a timing: the child may use 20 CPU-seconds. Linear decoding needs
    a fraction of one; re-joining the buffer per chunk copies ~550 GB and is killed."""
    proc = subprocess.run(
        [sys.executable, "-c", LINEAR], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def huge_body(size: int) -> Behaviour:
    """A non-streaming answer far past the cap (finite: the old reader took it whole)."""

    async def run(writer: asyncio.StreamWriter) -> None:
        writer.write(chunked(b'{"x": "'))
        block = chunked(b"a" * 65536)
        for _ in range(size // 65536):
            writer.write(block)
            await writer.drain()
        writer.write(chunked(b'"}') + b"0\r\n\r\n")
        await writer.drain()

    return run


async def test_a_non_streaming_body_past_the_cap_is_a_clear_error() -> None:
    limit = 1024 * 1024
    retry = RetryPolicy(max_retries=2, sleep=no_sleep)
    server = HostileServer(huge_body(8 * limit))
    async with server as url:
        p = OpenAIChat(
            "m",
            base_url=url,
            api_key=FAKE_KEY,
            retry=retry,
            limits=StreamLimits(max_body_size=limit),
            stream=False,
        )
        items, error, _ = await timed(p)
    assert items == []
    assert isinstance(error, ProviderError) and error.code == "body_too_large", error
    assert error.provider == "openai" and "max_body_size" in (error.hint or "")
    assert server.requests == 1  # not retried: the same server would send it again
    with pytest.raises(UserError):
        StreamLimits(max_body_size=0)


def events_then_finish(count: int, interval: float) -> Behaviour:
    """``count`` content events ``interval`` apart, then a finish and the end of the body."""

    async def run(writer: asyncio.StreamWriter) -> None:
        for _ in range(count):
            writer.write(chunked(_chunk("tick ")))
            await writer.drain()
            await asyncio.sleep(interval)
        writer.write(chunked(_chunk(finish="stop") + b"data: [DONE]\n\n") + chunked(b""))
        await writer.drain()

    return run


async def test_waiting_for_a_connection_is_not_idle_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # one connection: the second call waits at lovia's FIFO gate for the whole first stream
    # (~0.6 s, live events every 0.1 s), longer than the 0.3 s idle limit; only silence on
    # an open stream is idle, so both calls complete
    import lovia.providers._http as http

    monkeypatch.setattr(http, "_max_connections", lambda: 1)
    server = HostileServer(events_then_finish(6, 0.1))
    limits = StreamLimits(idle_timeout=0.3, call_timeout=None)

    async def call(p: OpenAIChat) -> BaseException | None:
        try:
            async for _ in p.stream(REQ):
                pass
        except ProviderError as exc:
            return exc
        return None

    async with server as url, provider(url, limits, retries=0) as p:
        errors = await asyncio.wait_for(asyncio.gather(call(p), call(p)), HANG_GUARD_S)
    assert errors == [None, None]
    assert server.requests == 2
