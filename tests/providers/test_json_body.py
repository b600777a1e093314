"""JSON on the wire goes through pydantic-core, with the standard library's results.

Request bodies: every recorded request of the wire corpus, and hostile text, encode to
exactly httpx's ``json=`` bytes; what JSON cannot carry fails as it did; the request says
``Content-Type: application/json`` unless the provider's headers name another type.
Answers: every recorded response body and streamed event parses to ``json.loads``'s
value, and what ``json.loads`` reads (a lone surrogate's escape) or refuses, it does too.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest

from lovia.model import ModelRequest
from lovia.providers._http import json_body
from lovia.providers._sse import iter_sse, load_json
from lovia.providers.openai_chat import OpenAIChat
from lovia.transcript import InputEntry

from .wire import collect

WIRE = Path(__file__).resolve().parents[1] / "fixtures" / "wire"
REQUESTS = [
    p for p in sorted(WIRE.glob("*/*/request.json")) if json.loads(p.read_text()) is not None
]
"""Every recorded request with a body (a few exchanges recorded only the response)."""


def httpx_bytes(body: Any) -> bytes:
    """What httpx itself puts on the wire for ``json=body``."""
    return httpx.Request("POST", "http://127.0.0.1/", json=body).content


def test_the_corpus_holds_requests() -> None:
    assert len(REQUESTS) >= 40


@pytest.mark.parametrize("path", REQUESTS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_every_recorded_request_encodes_to_httpx_bytes(path: Path) -> None:
    body = json.loads(path.read_text())
    assert json_body(body) == httpx_bytes(body)


HOSTILE = [
    "".join(map(chr, range(32))) + "\x7f",  # every control character, DEL
    "\x1b[31mred\x1b[0m\x07",  # terminal escapes
    '\u2028\u2029 é 😀 "quoted" back\\slash /slash',
    "x" * 1_000_000,  # a huge line
    "",
]


@pytest.mark.parametrize("text", HOSTILE, ids=["controls", "escapes", "unicode", "huge", "empty"])
def test_hostile_text_encodes_to_httpx_bytes(text: str) -> None:
    body = {"messages": [{"role": "user", "content": text}], "model": "m", "n": [1, 2.5, None]}
    assert json_body(body) == httpx_bytes(body)


def test_text_that_looks_like_nan_is_still_httpx_bytes() -> None:
    body = {"messages": [{"role": "user", "content": "NaN and -Infinity are words here"}]}
    assert json_body(body) == httpx_bytes(body)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"model": "m", "temperature": math.nan}, ValueError),
        ({"model": "m", "temperature": math.inf}, ValueError),
        ({"model": "m", "temperature": -math.inf}, ValueError),
        ({"content": "half a pair: \ud800"}, UnicodeEncodeError),
        ({"extra": object()}, TypeError),
    ],
    ids=["nan", "inf", "-inf", "lone-surrogate", "unknown-type"],
)
def test_what_json_cannot_carry_fails_as_with_httpx(
    body: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error) as ours:
        json_body(body)
    with pytest.raises(error) as theirs:
        httpx_bytes(body)
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value) == str(theirs.value)


def test_values_pydantic_core_writes_are_sent_as_it_writes_them() -> None:
    """``json=`` refused these; a vendor field in ``ModelSettings.extra`` may hold one."""
    from datetime import datetime
    from decimal import Decimal
    from uuid import UUID

    body = {"when": datetime(2026, 1, 2, 3, 4, 5), "price": Decimal("1.5"), "id": UUID(int=1)}
    assert json.loads(json_body(body)) == {
        "when": "2026-01-02T03:04:05",
        "price": "1.5",
        "id": "00000000-0000-0000-0000-000000000001",
    }
    with pytest.raises(TypeError):
        httpx_bytes(body)


ANSWER = {
    "id": "c1",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
    ],
}


async def _one_call(headers: dict[str, str]) -> httpx.Request:
    """The request one model call sends with these provider headers."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=ANSWER)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    url = "http://127.0.0.1:9/v1"
    async with OpenAIChat(
        "m", base_url=url, http_client=client, headers=headers, stream=False
    ) as provider:
        request = ModelRequest(system="s", messages=[InputEntry(content="hi")])
        await collect(provider.stream(request))
    await client.aclose()
    (sent,) = seen
    return sent


async def test_the_request_says_it_is_json() -> None:
    request = await _one_call({})
    assert request.headers["content-type"] == "application/json"
    assert request.headers["content-length"] == str(len(request.content))
    assert json.loads(request.content)["messages"][-1] == {"role": "user", "content": "hi"}


async def test_a_content_type_in_the_providers_headers_wins() -> None:
    request = await _one_call({"content-type": "application/json; charset=utf-8"})
    assert request.headers.get_list("content-type") == ["application/json; charset=utf-8"]


BODIES = sorted(WIRE.glob("*/*/response.body"))


def _json_texts(path: Path) -> list[bytes]:
    """The JSON texts of a recorded answer: its body, or each of its events' data."""
    raw = path.read_bytes()
    if b"data:" not in raw:
        return [raw]
    return [e.data.encode() for e in iter_sse([raw]) if e.data and e.data != "[DONE]"]


def test_the_corpus_holds_answers() -> None:
    assert sum(len(_json_texts(p)) for p in BODIES) >= 200


@pytest.mark.parametrize("path", BODIES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_every_recorded_answer_parses_as_json_loads_does(path: Path) -> None:
    for text in _json_texts(path):
        assert load_json(text) == json.loads(text)
        assert load_json(text.decode()) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    ['"half a pair: \\ud800"', '{"a": 1, "a": 2}', "12345678901234567890123456789", '"\\u001b[2J"'],
    ids=["lone-surrogate-escape", "repeated-key", "big-int", "escape"],
)
def test_what_json_loads_reads_it_reads_alike(text: str) -> None:
    assert load_json(text) == json.loads(text)
    assert type(load_json(text)) is type(json.loads(text))


@pytest.mark.parametrize("text", ["", "{", "nul", '{"a": 1} trailing', b"\xff\xfe"])
def test_what_json_loads_refuses_it_refuses(text: str | bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        load_json(text)
