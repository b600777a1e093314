"""CPU of the SSE decoder and the provider stream, never a unit-test timing.

- a typical stream: 2000 small ``data:`` events in 1 KiB network chunks, decoded alone and
  through ``OpenAIChat.stream`` over ``httpx.MockTransport`` (per-item cost of the seam,
  deadlines included);
- one 50 MB line in 64 KiB chunks (``max_event_size`` raised so it is decoded): linear
  decoding is a fraction of a second; re-joining the buffer per chunk was quadratic
  (73 s CPU, 403 MB RSS in the report).

    python bench/sse_decode.py
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable

import httpx

from lovia.providers._sse import SSEDecoder, iter_sse
from lovia.providers.base import ModelRequest
from lovia.providers.openai_chat import OpenAIChat
from lovia.transcript import InputEntry


def best(fn: Callable[[], object], repeat: int = 7) -> float:
    times: list[float] = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times)


def typical_chunks(events: int = 2000) -> list[bytes]:
    def event(delta: dict[str, object], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return f"data: {json.dumps({'id': 'c1', 'model': 'm', 'choices': [choice]})}\n\n"

    body = "".join(event({"content": f"w{i} "}) for i in range(events))
    raw = (body + event({}, "stop") + "data: [DONE]\n\n").encode()
    return [raw[i : i + 1024] for i in range(0, len(raw), 1024)]


async def provider_stream(chunks: list[bytes], calls: int = 30) -> float:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    headers = {"content-type": "text/event-stream"}
    transport = httpx.MockTransport(lambda r: httpx.Response(200, headers=headers, content=body()))
    request = ModelRequest(system="", messages=(InputEntry(content="hi"),))
    async with httpx.AsyncClient(transport=transport) as client:
        provider = OpenAIChat("m", api_key="sk-bench", http_client=client)
        times: list[float] = []
        for _ in range(calls):
            t0 = time.process_time()
            async for _item in provider.stream(request):
                pass
            times.append(time.process_time() - t0)
    return min(times)


def huge_line(size: int = 50 * 1024 * 1024) -> None:
    decoder = SSEDecoder(max_event_size=2 * size)
    decoder.feed("data: ")
    piece = "a" * 65536
    for _ in range(size // len(piece)):
        decoder.feed(piece)
    (event,) = decoder.feed("\n\n")
    assert len(event.data) == size


def main() -> None:
    chunks = typical_chunks()
    print(
        f"decode 2000 events, 1 KiB chunks:        {best(lambda: iter_sse(chunks)) * 1e3:7.2f} ms"
    )
    seam = asyncio.run(provider_stream(chunks))
    print(f"OpenAIChat.stream, 2000 events (mock):   {seam * 1e3:7.2f} ms")
    print(f"decode one 50 MB line, 64 KiB chunks:   {best(huge_line, 3) * 1e3:7.2f} ms")


if __name__ == "__main__":
    main()
