"""Content capture of a run full of invalid Unicode exports cleanly (issue 15 §2).

Spans with captured content (messages, system instructions, tool arguments and
results, span events) must encode to the OTLP wire format and to the local span store:
a lone surrogate in any of them would make the exporter drop the whole batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from telemetry_helpers import Otel

from lovia import Agent, RunContext, Runner, tool
from lovia.plugins.base import PluginInstance
from lovia.telemetry import content
from lovia.telemetry.local import SQLiteSpanExporter, load_spans
from lovia.testing import ScriptedModel, reply
from lovia.testing._models import ToolCallSpec

BAD = "a\ud800b\ud83d\ude00c\udce9"


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
