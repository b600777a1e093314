"""Stream limits: a server that stalls cannot hold a call, or a run, forever.

A hostile server on 127.0.0.1 answers ``200 text/event-stream`` and then sends nothing
but ``: keep-alive`` comments. Comments are not progress:

- ``StreamLimits(idle_timeout=...)`` fails the attempt when no complete event arrived
  for that long (retried before any content), ``call_timeout`` bounds the whole call,
  retries included (defaults: 120 s idle, 30 min per call);
- ``RunBudget(max_seconds=...)`` is a hard wall-clock limit of the run, even while a
  model call or a tool is in flight.

Run: python examples/31_stream_limits.py
"""

from __future__ import annotations

import asyncio
import time

from lovia import Agent, BudgetExceeded, RunBudget, Runner
from lovia.errors import ProviderError
from lovia.providers import RetryPolicy, StreamLimits
from lovia.providers.base import ModelRequest, RetryNotice
from lovia.providers.openai_chat import OpenAIChat
from lovia.transcript import InputEntry


async def keep_alive_forever(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        while True:
            writer.write(b": keep-alive\n\n")
            await writer.drain()
            await asyncio.sleep(0.05)
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main() -> None:
    server = await asyncio.start_server(keep_alive_forever, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    request = ModelRequest(system="", messages=[InputEntry(content="hi")])

    # 1. the provider's own limits: one retry, then a clear error
    limits = StreamLimits(idle_timeout=0.5, call_timeout=5.0)
    retry = RetryPolicy(max_retries=1, initial_delay=0.1)
    t0 = time.monotonic()
    async with OpenAIChat("m", base_url=url, limits=limits, retry=retry) as model:
        try:
            async for item in model.stream(request):
                if isinstance(item, RetryNotice):
                    print(f"retry {item.attempt} after: {item.error}")
        except ProviderError as exc:
            print(f"after {time.monotonic() - t0:.1f}s: {exc.code}: {exc.message}")

    # 2. provider limits off: the run's max_seconds still ends it, mid-call
    off = StreamLimits(idle_timeout=None, call_timeout=None)
    async with OpenAIChat("m", base_url=url, limits=off) as model:
        t0 = time.monotonic()
        try:
            await Runner.run(Agent(name="a", model=model), "hi", budget=RunBudget(max_seconds=1))
        except BudgetExceeded as exc:
            print(f"after {time.monotonic() - t0:.1f}s: {exc.limit}: {exc.message}")
    server.close()


if __name__ == "__main__":
    asyncio.run(main())
