"""Memory and bytes read for a 100 MB streamed answer made of small events, with the
default ``StreamLimits`` (``max_answer_size`` = 32 MiB), never a unit-test timing.

The server side is an ``httpx.MockTransport`` whose body is generated lazily, 64 events
(~6 KiB) per chunk, so what the provider reads is what it asked for. Prints the bytes
the server produced before the call stopped, the error, the peak RSS of this process
and the CPU time.

    python bench/answer_limit.py
"""

from __future__ import annotations

import asyncio
import json
import resource
import time
from collections.abc import AsyncIterator

import httpx

from lovia.errors import AnswerTooLarge
from lovia.providers.base import ModelRequest
from lovia.providers.openai_chat import OpenAIChat
from lovia.transcript import InputEntry

TOTAL = 100 * 1024 * 1024


def event(text: str) -> bytes:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": None}
    data = {"id": "c1", "model": "m", "choices": [choice]}
    return f"data: {json.dumps(data)}\n\n".encode()


async def main() -> None:
    block = event("x") * 64
    produced = [0]

    async def body() -> AsyncIterator[bytes]:
        while produced[0] < TOTAL:
            produced[0] += len(block)
            yield block

    def handler(request: httpx.Request) -> httpx.Response:
        del request
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    provider = OpenAIChat("m", base_url="http://bench.invalid/v1", api_key="x", http_client=client)
    request = ModelRequest(system="", messages=(InputEntry(content="hi"),))
    items = 0
    error: BaseException | None = None
    t0 = time.process_time()
    try:
        async for _ in provider.stream(request):
            items += 1
    except AnswerTooLarge as exc:
        error = exc
    cpu = time.process_time() - t0
    await client.aclose()
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"server produced  {produced[0] / 2**20:8.1f} MiB of a {TOTAL / 2**20:.0f} MiB stream")
    print(f"items yielded    {items:8d}")
    print(
        f"error            {type(error).__name__ if error else None}: {getattr(error, 'code', '')}"
    )
    print(f"peak RSS         {peak_mb:8.1f} MiB")
    print(f"CPU              {cpu:8.2f} s")


if __name__ == "__main__":
    asyncio.run(main())
