"""The API key never leaves through any output channel, whatever the server sends back.

A fault corpus (a 401 echoing the key, a 500 whose body puts the key across the 500-char
cut, an error event mid-stream echoing it, a connection reset whose error text carries
it, a refusal) runs through a real provider, with OTLP export to a receiver on
127.0.0.1, the local span store and a SQLite checkpoint store in one file. Every channel
is then searched for the key and its first 8 characters: the raised exception with its
``__cause__``/``__context__`` chain and formatted traceback, logs at DEBUG, the OTLP wire
bodies (spans, span events, metrics), the SQLite file, and the CLI's output.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import threading
import traceback
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import lovia._loop as loop_module
from lovia import Agent, Runner
from lovia._redact import excerpt, redact, redact_error
from lovia.errors import LoviaError, ProviderError
from lovia.providers._http import RetryPolicy
from lovia.providers.openai_chat import OpenAIChat
from lovia.stores.sqlite import SQLiteStore
from lovia.telemetry import configure, load_spans
from lovia.telemetry import tracer as tracer_module
from lovia.telemetry.local import SQLiteSpanExporter

KEY = "lvk-9f8e7d6c5b4a39281706f5e4d3c2b1a0ZZ"
"""Not an ``sk-`` shape: only the configured-key redaction can catch it."""
PREFIX = KEY[:8]
SRC = Path(__file__).resolve().parents[2] / "src"
MARKER = "REFUSAL-TEXT-7f3a"


async def no_sleep(delay: float) -> None:
    del delay


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)


def _delta(**delta: Any) -> dict[str, Any]:
    return {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta}]}


SSE = {"content-type": "text/event-stream"}
Handler = Callable[[httpx.Request], httpx.Response]


def echo_401(_: httpx.Request) -> httpx.Response:
    body = {"error": {"message": f"Incorrect API key provided: {KEY}.", "code": "invalid_api_key"}}
    return httpx.Response(401, json=body)


def echo_500_at_the_cut(_: httpx.Request) -> httpx.Response:
    # not JSON: the message is the body cut at 500 characters, which falls inside the key
    return httpx.Response(500, text="upstream said: " + "x" * 472 + f" {KEY} and more")


def error_event_mid_stream(_: httpx.Request) -> httpx.Response:
    error = {"error": {"message": f"proxy rejected key {KEY}", "type": "server_error"}}
    return httpx.Response(200, headers=SSE, content=_sse(_delta(content="Hel"), error))


def reset_mid_stream(_: httpx.Request) -> httpx.Response:
    async def body() -> AsyncIterator[bytes]:
        yield _sse(_delta(content="Hel"))
        raise httpx.RemoteProtocolError(f"peer closed connection (auth {KEY})")

    return httpx.Response(200, headers=SSE, content=body())


def refusal(_: httpx.Request) -> httpx.Response:
    done = {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return httpx.Response(
        200, headers=SSE, content=_sse(_delta(refusal=f"I cannot do that {MARKER}"), done)
    )


FAULTS: dict[str, Handler] = {
    "401-echo": echo_401,
    "500-echo-at-cut": echo_500_at_the_cut,
    "error-event-mid-stream": error_event_mid_stream,
    "connection-reset": reset_mid_stream,
    "refusal": refusal,
}


class Answer(pydantic.BaseModel):
    value: str


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[bytes]]]:
    bodies: list[bytes] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    server.shutdown()
    server.server_close()


def exception_texts(error: BaseException) -> str:
    parts = ["".join(traceback.format_exception(error))]
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        exc = pending.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        parts += [
            repr(exc),
            str(exc),
            repr(exc.args),
            repr(vars(exc) if hasattr(exc, "__dict__") else ""),
        ]
        pending += [e for e in (exc.__cause__, exc.__context__) if e is not None]
    return "\n".join(parts)


def cli_outputs(*commands: list[str]) -> str:
    """What the ``lovia`` command prints (stdout and stderr)."""
    env = {**os.environ, "PYTHONPATH": str(SRC), "NO_COLOR": "1"}
    texts: list[str] = []
    for args in commands:
        proc = subprocess.run(
            [sys.executable, "-m", "lovia.cli", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        texts.append(f"[exit {proc.returncode}]\n{proc.stdout}\n{proc.stderr}")
    return "\n".join(texts)


@pytest.mark.parametrize("capture", ["NO_CONTENT", "SPAN_AND_EVENT"])
@pytest.mark.parametrize("fault", FAULTS, ids=list(FAULTS))
async def test_the_key_leaks_through_no_channel(
    fault: str,
    capture: str,
    receiver: tuple[str, list[bytes]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    url, bodies = receiver
    db = tmp_path / "lovia.db"
    store_url = f"sqlite:///{db}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", capture)
    handle = configure("lovia-secrets", "otlp", set_global=False)
    handle.tracer_provider.add_span_processor(SimpleSpanProcessor(SQLiteSpanExporter(db)))
    real = tracer_module.make_run_tracer
    monkeypatch.setattr(
        loop_module,
        "make_run_tracer",
        lambda *_a, **_k: real(handle.tracer_provider, handle.meter_provider),
    )
    caplog.set_level(logging.DEBUG)
    client = httpx.AsyncClient(transport=httpx.MockTransport(FAULTS[fault]))
    model = OpenAIChat(
        "gpt-4o",
        api_key=KEY,
        http_client=client,
        retry=RetryPolicy(max_retries=1, sleep=no_sleep),
    )
    agent = Agent(name="secretive", model=model, output_type=Answer)
    store = SQLiteStore(store_url)
    with pytest.raises(LoviaError) as info:
        await Runner.run(agent, "hi", checkpointer=store, run_id=f"run-{fault}")
    await client.aclose()
    assert handle.force_flush()
    handle.shutdown()

    channels = {
        "exception": exception_texts(info.value),
        "logs": caplog.text,
        "otlp wire (spans, events, metrics)": b"".join(bodies).decode("latin-1"),
        "sqlite file (store + span store)": b"".join(
            p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("lovia.db")
        ).decode("latin-1"),
        "cli runs/show": await asyncio.to_thread(
            cli_outputs,
            ["runs", "--store", store_url, "--json"],
            ["show", f"run-{fault}", "--full", "--store", store_url],
        ),
        "cli trace": await asyncio.to_thread(
            cli_outputs, ["trace", f"run-{fault}", "--store", store_url]
        ),
    }
    assert bodies, "nothing reached the OTLP receiver"
    assert f"run-{fault}" in channels["cli runs/show"]
    assert "invoke_agent secretive" in channels["cli trace"]
    for name, text in channels.items():
        assert KEY not in text, f"the key leaked through {name}"
        assert PREFIX not in text, f"the key's prefix leaked through {name}"
    if fault == "refusal" and capture == "NO_CONTENT":  # the refusal text is content
        for name in ("otlp wire (spans, events, metrics)", "cli trace"):
            assert MARKER not in channels[name], f"refusal text in {name}"
        assert "ModelBehaviorError" in channels["otlp wire (spans, events, metrics)"]
        spans = json.dumps(load_spans(db, run_id=f"run-{fault}"), default=str)
        assert spans != "[]" and MARKER not in spans
    if fault != "refusal":
        assert isinstance(info.value, ProviderError)


def test_redaction_happens_before_the_cut() -> None:
    text = "x" * 495 + KEY
    assert PREFIX not in excerpt(text, 500)
    assert excerpt("short", 500) == "short"
    assert excerpt("y" * 600, 500).endswith("…") and len(excerpt("y" * 600, 500)) == 501


@pytest.mark.parametrize(
    "text",
    [
        "sk-proj-AbCdEfGhIjKlMnOpQrStUv0123",
        "sk-ant-api03-AbCdEfGhIjKlMnOp-Qr_St",
        "sk-0123456789abcdefghij",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
        '{"api_key": "abcdefgh12345678"}',
        "x-api-key: abcdefgh12345678",
    ],
)
def test_common_key_shapes_are_redacted_without_being_configured(text: str) -> None:
    out = redact(text)
    assert "***" in out
    for secret in ("AbCdEfGh", "0123456789ab", "eyJhbGci", "abcdefgh1234"):
        assert secret not in out


def test_ordinary_text_is_left_alone() -> None:
    text = "the model refused: ask again (sk is not a key, nor is bearer)"
    assert redact(text) == text


def test_the_whole_cause_chain_is_redacted() -> None:
    OpenAIChat("m", base_url="http://127.0.0.1:9/v1", api_key=KEY)  # configures the key
    try:
        try:
            raise ValueError(f"inner {KEY}")
        except ValueError as inner:
            raise ProviderError(f"outer {KEY}", f"hint {KEY}") from inner
    except ProviderError as exc:
        error = exc
    redact_error(error)
    assert KEY not in exception_texts(error)
    assert error.message == "outer ***" and error.hint == "hint ***"
