"""Providers: one call streamed through an adapter, offline or against a real model.

Offline (default): a tiny fake OpenAI-compatible server is started on 127.0.0.1 inside
this script and ``OpenAIChat`` streams from it. With ``LOVIA_MODEL`` set (e.g.
``openai:gpt-4.1-mini``, ``anthropic:claude-sonnet-4-0``, ``openai-responses:gpt-5-mini``)
the same code talks to the real provider (keys from ``OPENAI_API_KEY`` /
``ANTHROPIC_API_KEY``).

Run: python examples/30_providers.py
"""

from __future__ import annotations

import asyncio
import json
import os

from lovia.providers.base import ModelRequest, ModelResponse, Provider, RetryNotice, TextChunk
from lovia.providers.openai_chat import OpenAIChat
from lovia.providers.registry import resolve_model
from lovia.transcript import InputEntry


async def fake_server(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(h.split(b":")[1])
        for h in head.split(b"\r\n")
        if h.lower().startswith(b"content-length")
    )
    await reader.readexactly(length)
    events = [
        {"id": "c1", "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]}
        for w in ("Hello", " from", " 127.0.0.1!")
    ]
    events.append(
        {
            "id": "c1",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 3},
        }
    )
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    writer.write(
        f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n{body}".encode()
    )
    await writer.drain()
    writer.close()


async def call(provider: Provider) -> None:
    request = ModelRequest(
        system="Answer in one short sentence.", messages=[InputEntry(content="Say hello.")]
    )
    print("request body:", json.dumps(provider.render_request(request)))
    async for item in provider.stream(request):
        if isinstance(item, TextChunk):
            print(item.text, end="", flush=True)
        elif isinstance(item, RetryNotice):
            print(f"\n[retry {item.attempt} in {item.delay:.1f}s: {item.error}]")
        elif isinstance(item, ModelResponse):
            print(f"\nfinish={item.finish_reason} usage={item.usage.to_dict()}")


async def main() -> None:
    spec = os.environ.get("LOVIA_MODEL")
    if spec:
        await call(resolve_model(spec))
        return
    server = await asyncio.start_server(fake_server, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with (
        server,
        OpenAIChat("fake-model", base_url=f"http://127.0.0.1:{port}/v1", name="local") as provider,
    ):
        await call(provider)


if __name__ == "__main__":
    asyncio.run(main())
