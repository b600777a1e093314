"""Content capture of a run full of invalid Unicode exports cleanly.

Spans with captured content (messages, system instructions, tool arguments and
results, span events) must encode to the OTLP wire format and to the local span store:
a lone surrogate in any of them would make the exporter drop the whole batch.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from telemetry_helpers import Otel

from lovia import Agent, RunContext, Runner, events, tool
from lovia.errors import ProviderServerError
from lovia.plugins.base import PluginInstance
from lovia.providers.base import ModelRequest, RetryNotice, StreamItem, ToolCallChunk
from lovia.telemetry import content
from lovia.telemetry.local import SQLiteSpanExporter, load_spans
from lovia.testing import ScriptedModel, capture_events, reply
from lovia.testing._models import ToolCallSpec

BAD = "a\ud800b\ud83d\ude00c\udce9"
CLEAN = "a\ufffdb\U0001f600c\ufffd"


@pytest.fixture(autouse=True)
def _capture_everything() -> Iterator[None]:
    content.set_policy("SPAN_AND_EVENT", None)
    yield
    content.set_policy(None, None)


@tool
def echo(text: str) -> str:
    """Echo with a lone surrogate added."""
    return text + "\udc80"


class _Plugin:
    name = "hostile"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        return PluginInstance(instructions=f"plugin {BAD}")


async def test_captured_content_encodes_for_otlp_and_the_local_store(
    otel: Otel, tmp_path: Path
) -> None:
    model = ScriptedModel(
        [
            reply(BAD, reasoning=BAD, tool_calls=[ToolCallSpec("echo", '{"text": "' + BAD + '"}')]),
            f"done {BAD}",
        ]
    )
    agent = Agent(name="a", model=model, tools=[echo], plugins=[_Plugin()])
    result = await Runner.run(agent, f"hi {BAD}")
    spans = otel.exporter.get_finished_spans()
    assert result.output == "done a\ufffdb\U0001f600c\ufffd" and spans

    wire = encode_spans(spans).SerializeToString()  # raises on a surrogate
    assert "a\ufffdb\U0001f600c\ufffd".encode() in wire

    local = SQLiteSpanExporter(tmp_path / "spans.db")
    local.export(spans)
    stored = load_spans(tmp_path / "spans.db", run_id=result.run_id)
    assert len(stored) == len(spans)
    local.shutdown()


class _HostileServer:
    """A provider whose server puts lone surrogates in a retry's error, a tool call's
    id and name, and the final error (JSON ``\\udc80`` escapes decode to these)."""

    name = "openai"
    model = "m"

    def __init__(self) -> None:
        self._fake = ScriptedModel([])
        self.profile = self._fake.profile

    def render_request(self, request: ModelRequest) -> dict[str, Any]:
        return self._fake.render_request(request)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        yield RetryNotice(attempt=1, error=ProviderServerError(f"busy {BAD}"), delay=0.0)
        yield ToolCallChunk(0, call_id=f"call {BAD}", name=f"echo{BAD}", arguments="{")
        raise ProviderServerError(f"down {BAD}", hint="try later", status=500)


async def test_error_texts_and_server_ids_are_clean_in_events_and_span_status(
    otel: Otel,
) -> None:
    with capture_events() as seen, pytest.raises(ProviderServerError):
        await Runner.run(Agent(name="a", model=_HostileServer(), tools=[echo]), "hi")
    (retry,) = [e for e in seen if isinstance(e, events.ProviderRetry)]
    (delta,) = [e for e in seen if isinstance(e, events.ToolCallDelta)]
    (failed,) = [e for e in seen if isinstance(e, events.ModelCallFailed)]
    assert retry.message == f"busy {CLEAN}"
    assert (delta.call_id, delta.name) == (f"call {CLEAN}", f"echo{CLEAN}")
    assert failed.message.startswith(f"down {CLEAN}")
    spans = otel.exporter.get_finished_spans()
    statuses = [s.status.description for s in spans if s.status.description]
    assert statuses and all(f"down {CLEAN}" in text for text in statuses)
    encode_spans(spans).SerializeToString()  # raises on a surrogate
