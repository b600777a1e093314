"""Content capture without prompts in the trace: events on the Logs API, or references.

Offline: a scripted model plays the model's part; spans and log records go to in-memory
exporters and are printed. Two runs of the same agent:

- ``EVENT_ONLY``: the spans carry no content; each model call's messages go out as a
  ``gen_ai.client.inference.operation.details`` log record (and each tool call's
  arguments and result as ``lovia.tool.call.*``) with the span's trace context;
- ``REFERENCE``: nothing of the content leaves the process; each ``chat`` span carries
  ``lovia.content.ref``, which ``lovia.replay.resolve_ref`` (or ``lovia show REF``)
  turns back into the exact, hash-verified view from the run's store.

Run: python examples/44_content_by_reference.py
"""

from __future__ import annotations

import asyncio
import os
import tempfile

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from lovia import Agent, Runner, replay, tool
from lovia.stores import store
from lovia.telemetry import content, events_log
from lovia.testing import ScriptedModel, call


@tool
def order_status(order_id: str) -> str:
    """The shipping status of an order."""
    return f"{order_id}: shipped on Monday"


def agent() -> Agent[None, str]:
    model = ScriptedModel([call("order_status", order_id="A1"), "Your order A1 shipped."])
    return Agent(name="support", model=model, tools=[order_status], instructions="Be kind.")


async def events_only() -> None:
    tp, spans, logs = TracerProvider(), InMemorySpanExporter(), InMemoryLogRecordExporter()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    lp = LoggerProvider()
    lp.add_log_record_processor(SimpleLogRecordProcessor(logs))
    events_log.pair(tp, lp)  # configure() does this for its own providers
    content.set_policy("EVENT_ONLY", None)
    await Runner.run(agent(), "Where is my order A1?", tracer_provider=tp)
    on_spans = [k for s in spans.get_finished_spans() for k in (s.attributes or {})]
    print("EVENT_ONLY: content keys on spans:", [k for k in on_spans if "messages" in k])
    for record in logs.get_finished_logs():
        log = record.log_record
        keys = sorted(k for k in (log.attributes or {}) if k.startswith("gen_ai."))
        print(f"  log event {log.event_name} (span {log.span_id:016x}): {', '.join(keys)}")


async def by_reference(path: str) -> None:
    tp, spans = TracerProvider(), InMemorySpanExporter()
    tp.add_span_processor(SimpleSpanProcessor(spans))
    content.set_policy("REFERENCE", None)
    url = f"sqlite:///{path}"
    db = store(url)
    try:
        await Runner.run(agent(), "Where is my order A1?", checkpointer=db, tracer_provider=tp)
    finally:
        await db.aclose()
    chats = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    for span in chats:
        ref = str((span.attributes or {})["lovia.content.ref"])
        _run, view = await replay.resolve_ref(ref, url)
        last = replay.entry_text(view.messages[-1])
        print(f"REFERENCE: {span.name} -> {ref[:40]}…")
        print(f"  resolved: {view.label}, {len(view.messages)} messages, verified={view.ok}")
        print(f"  last message the model saw: {last!r}")


async def main() -> None:
    try:
        await events_only()
        with tempfile.TemporaryDirectory() as tmp:
            await by_reference(os.path.join(tmp, "lovia.db"))
    finally:
        content.set_policy(None, None)


if __name__ == "__main__":
    asyncio.run(main())
