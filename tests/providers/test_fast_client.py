"""The optional fast HTTP path (extra ``fast``): httpx2 by default when installed.

Parity of the adapters on both clients is in ``test_wire_replay.py`` (every recorded
exchange, through each client's ``MockTransport``) and ``test_local_server.py`` (real
sockets); here: who chooses the client, and httpx2's transport errors.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys

import httpx
import httpx2
import pytest

from lovia.errors import ProviderError
from lovia.providers._http import RetryPolicy
from lovia.providers.base import ModelRequest, ModelResponse
from lovia.providers.openai_chat import OpenAIChat
from lovia.transcript import InputEntry

from .wire import collect

REQUEST = ModelRequest(system="Be brief.", messages=[InputEntry(content="hi")])
ANSWER = json.dumps(
    {
        "id": "c1",
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }
).encode()


def test_import_lovia_does_not_import_httpx2() -> None:
    code = (
        "import sys, lovia, lovia.providers.openai_chat, lovia.providers.anthropic\n"
        "print('httpx2' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_building_providers_on_httpx2_never_imports_httpx() -> None:
    """With httpx2 installed, a process that builds lovia's adapters (and their default
    clients) never imports httpx: httpx loads its command line, and with it click, rich
    and pygments, whenever those are installed (a heavier heap for every collector pass)."""
    code = (
        "import sys, lovia\n"
        "from lovia.providers.openai_chat import OpenAIChat\n"
        "from lovia.providers.openai_responses import OpenAIResponses\n"
        "from lovia.providers.anthropic import Anthropic\n"
        "built = [OpenAIChat('m', api_key='k'), OpenAIResponses('m', api_key='k'),\n"
        "         Anthropic('m', api_key='k'), OpenAIChat('m', base_url='http://localhost:1/v1')]\n"
        "print(type(built[0]._seam._client).__module__.split('.')[0], 'httpx' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["httpx2", "False"]


async def test_a_timeout_object_keeps_its_four_parts_on_httpx2() -> None:
    given = httpx.Timeout(connect=1.0, read=2.0, write=3.0, pool=4.0)
    async with OpenAIChat("m", base_url="http://127.0.0.1:9/v1", timeout=given) as provider:
        t = provider._seam._client.timeout
        assert isinstance(t, httpx2.Timeout)
        assert (t.connect, t.read, t.write, t.pool) == (1.0, 2.0, 3.0, 4.0)


async def test_a_given_http_client_wins_over_httpx2() -> None:
    mine = httpx.AsyncClient()
    async with OpenAIChat("m", base_url="http://127.0.0.1:9/v1", http_client=mine) as provider:
        assert provider._seam._client is mine
    assert not mine.is_closed  # the caller's client stays the caller's
    await mine.aclose()


async def test_the_default_client_keeps_lovias_timeout_and_pool_limits() -> None:
    async with OpenAIChat("m", base_url="http://127.0.0.1:9/v1", timeout=7.0) as provider:
        client = provider._seam._client
        assert isinstance(client, httpx2.AsyncClient)
        assert (client.timeout.read, client.timeout.connect) == (7.0, 10.0)
        pool = client._transport._pool
        assert (pool._max_connections, pool._max_keepalive_connections) == (100, 20)
    async with OpenAIChat("m", base_url="http://127.0.0.1:9/v1") as provider:
        t = provider._seam._client.timeout
        assert (t.connect, t.read, t.write, t.pool) == (10.0, 600.0, 600.0, 600.0)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_httpx2_connection_refused_is_a_retryable_connect_error() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    retry = RetryPolicy(max_retries=0)
    async with OpenAIChat("m", base_url=url, api_key="sk-test", retry=retry) as provider:
        assert isinstance(provider._seam._client, httpx2.AsyncClient)
        with pytest.raises(ProviderError) as info:
            await collect(provider.stream(REQUEST))
    assert info.value.code == "connect_error"
    assert info.value.retryable
    assert info.value.hint


async def test_runs_beyond_the_pool_wait_in_lovias_queue_not_in_the_pool() -> None:
    """300 calls at once on a provider's own client (100 connections): all answer, and the
    pool never holds more requests than connections (its per-request rescan of waiting
    requests stays bounded however many runs are in flight)."""
    release = asyncio.Event()
    arrived = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal arrived
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                arrived += 1
                if arrived >= 100:
                    release.set()
                await release.wait()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
                writer.write(b"content-length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with (
        server,
        OpenAIChat("m", base_url=f"http://127.0.0.1:{port}/v1", stream=False) as provider,
    ):
        pool = provider._seam._client._transport._pool
        most = 0

        async def one() -> ModelResponse:
            nonlocal most
            most = max(most, len(pool._requests))
            _, response = await collect(provider.stream(REQUEST))
            most = max(most, len(pool._requests))
            return response

        answers = await asyncio.gather(*(one() for _ in range(300)))
    assert [a.entries[0].text for a in answers] == ["ok"] * 300  # type: ignore[union-attr]
    assert arrived == 300
    assert most <= 100


@pytest.mark.parametrize("given", [False, True])
async def test_the_key_and_extra_headers_reach_the_server_on_either_kind_of_client(
    given: bool,
) -> None:
    """A client lovia creates holds the headers as its defaults (not re-merged per call);
    a caller's client gets them with every request and is not changed."""
    seen: list[httpx2.Headers] = []

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers)
        return httpx2.Response(200, content=ANSWER)

    mine = httpx2.AsyncClient(transport=httpx2.MockTransport(answer))
    provider = OpenAIChat(
        "m",
        base_url="http://127.0.0.1:9/v1",
        api_key="sk-test",
        headers={"X-Extra": "1"},
        stream=False,
        http_client=mine if given else None,
    )
    if not given:
        provider._seam._client._transport = httpx2.MockTransport(answer)
    async with provider:
        for _ in range(2):
            items = await collect(provider.stream(REQUEST))
            assert isinstance(items[-1], ModelResponse)
    assert [(h["authorization"], h["x-extra"]) for h in seen] == [("Bearer sk-test", "1")] * 2
    assert "authorization" not in mine.headers
    assert "sk-test" not in repr(provider) and "sk-test" not in repr(provider._seam)
    await mine.aclose()
