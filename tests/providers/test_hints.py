"""Hints where the cause is guessable: a stream cut mid-answer (a self-run server's context
window filling) and a server that rejects ``response_format``."""

from __future__ import annotations

import json

import httpx
import pytest

from lovia.errors import ProviderError, StreamInterrupted
from lovia.model import OutputSchema
from lovia.providers.base import ModelRequest
from lovia.providers.openai_chat import OpenAIChat
from lovia.transcript import InputEntry

from .wire import FAKE_KEY, NO_RETRY

LOCAL = "http://127.0.0.1:8080/v1"
OPENAI = "https://api.openai.com/v1"
ASK = ModelRequest(system="", messages=(InputEntry(content="Write a long story."),))


def _chunk(text: str) -> str:
    delta = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return f"data: {json.dumps(delta)}\n\n"


CUT = "".join(_chunk(w) for w in ("Once ", "upon ", "a "))  # no finish_reason, no [DONE]
LLAMA_FULL = CUT + (
    'data: {"error": {"code": 500, "message": "Context size has been exceeded.", '
    '"type": "exceed_context_size_error"}}\n\n'
)


def _model(url: str, status: int, body: str, content_type: str) -> OpenAIChat:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body.encode(), headers={"content-type": content_type})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return OpenAIChat("m", base_url=url, api_key=FAKE_KEY, http_client=client, retry=NO_RETRY)


async def _fail(model: OpenAIChat, request: ModelRequest = ASK) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        async for _ in model.stream(request):
            pass
    await model.aclose()
    return info.value


async def test_a_cut_stream_from_a_local_server_names_the_context_window() -> None:
    error = await _fail(_model(LOCAL, 200, CUT, "text/event-stream"))
    assert isinstance(error, StreamInterrupted)
    assert error.hint and "context window" in error.hint and "--ctx-size" in error.hint
    assert error.partial is not None and "Once upon a" in error.partial.entries[0].text


async def test_a_cut_stream_from_openai_keeps_the_plain_hint() -> None:
    error = await _fail(_model(OPENAI, 200, CUT, "text/event-stream"))
    assert isinstance(error, StreamInterrupted)
    assert error.hint and "context window" not in error.hint


async def test_a_context_error_mid_answer_says_the_window_filled() -> None:
    error = await _fail(_model(LOCAL, 200, LLAMA_FULL, "text/event-stream"))
    assert isinstance(error, StreamInterrupted)
    assert error.hint and error.hint.startswith("The context window filled while the model")
    assert "num_ctx" in error.hint


SCHEMA = OutputSchema(name="City", schema={"type": "object", "properties": {}})
STRUCTURED = ModelRequest(system="", messages=ASK.messages, output_schema=SCHEMA)


@pytest.mark.parametrize(
    ("url", "status", "message"),
    [
        (LOCAL, 400, "Unrecognized request argument: response_format"),
        (LOCAL, 500, "unsupported grammar"),
        (OPENAI, 400, "Invalid schema for response_format 'City'"),
    ],
)
async def test_a_rejected_response_format_points_at_prompted_output(
    url: str, status: int, message: str
) -> None:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}})
    error = await _fail(_model(url, status, body, "application/json"), STRUCTURED)
    assert error.hint and "ModelProfile(native_json_schema=False)" in error.hint


async def test_unrelated_errors_get_no_response_format_hint() -> None:
    body = json.dumps({"error": {"message": "bad temperature", "type": "invalid_request_error"}})
    error = await _fail(_model(OPENAI, 400, body, "application/json"), STRUCTURED)
    assert not (error.hint and "native_json_schema" in error.hint)
    plain = await _fail(_model(LOCAL, 400, body, "application/json"))  # no response_format
    assert not (plain.hint and "native_json_schema" in plain.hint)
