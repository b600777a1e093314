"""The floor's telemetry: lovia's span tree and metric points, written by hand on the SDK.

``floor.py --otel`` runs the hand-written loop and emits, straight through the
OpenTelemetry API, what lovia emits for the same run: one ``invoke_agent`` span; per
model round-trip a ``lovia.turn`` span holding a ``lovia.view`` span, a ``chat`` span
and one ``execute_tool`` span per call; the same attribute keys with values of the same
types; the same histograms, and the counters kept as sums that observable counters read
(the cheapest way the SDK offers, and lovia's). ``tests`` keep the tree and the metric
names equal to lovia's.

Values lovia computes (the view's hash, the cost, ids it mints) are constants of the
same type and length here: this floor measures what the SDK costs to carry the
telemetry, so ``lovia+otel`` over ``floor+otel`` is lovia's own work with telemetry on,
and ``floor+otel`` over ``floor`` is the least any agent pays for this telemetry.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterable
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, Observation
from opentelemetry.trace import Span, SpanKind

VERSION = "5"
AGENT = "bench"
VIEW_HASH = "0" * 64
DURATION_BUCKETS = tuple(0.01 * 2**i for i in range(14))  # lovia's boundaries
TOKEN_BUCKETS = tuple(4**i for i in range(14))
AGENT_BUCKETS = tuple(0.1 * 2**i for i in range(13))
TURN_BUCKETS = tuple(2**i for i in range(10))


class Sums:
    """Counter sums by label set, read by an observable counter at each collection."""

    def __init__(self, meter: Any, name: str, unit: str) -> None:
        self._lock = threading.Lock()
        self._sums: dict[frozenset[tuple[str, Any]], float] = {}
        meter.create_observable_counter(name, [self._observe], unit=unit)

    def add(self, amount: float, key: frozenset[tuple[str, Any]]) -> None:
        """Add ``amount`` to the sum of label set ``key``."""
        with self._lock:
            self._sums[key] = self._sums.get(key, 0) + amount

    def _observe(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            return [Observation(v, dict(k)) for k, v in self._sums.items()]


class Telemetry:
    """The tracer, the instruments and the label sets of one workload (built once)."""

    def __init__(
        self,
        model: str,
        address: str,
        port: int,
        stream: bool,
        providers: tuple[Any, Any] = (None, None),
    ) -> None:
        """``providers``: the tracer and meter providers (default: the global ones)."""
        self.tracer = trace.get_tracer("lovia", tracer_provider=providers[0])
        meter = metrics.get_meter("lovia", meter_provider=providers[1])

        def hist(name: str, unit: str, buckets: tuple[float, ...]) -> Any:
            return meter.create_histogram(
                name, unit=unit, explicit_bucket_boundaries_advisory=buckets
            )

        self.op = hist("gen_ai.client.operation.duration", "s", DURATION_BUCKETS)
        self.ttfc = hist("gen_ai.client.operation.time_to_first_chunk", "s", DURATION_BUCKETS)
        self.tokens_h = hist("gen_ai.client.token.usage", "{token}", TOKEN_BUCKETS)
        self.tool_h = hist("gen_ai.execute_tool.duration", "s", DURATION_BUCKETS)
        self.agent_h = hist("gen_ai.invoke_agent.duration", "s", AGENT_BUCKETS)
        self.turns_h = hist("lovia.turns", "{turn}", TURN_BUCKETS)
        self.runs = Sums(meter, "lovia.runs", "{run}")
        self.tokens = Sums(meter, "lovia.tokens", "{token}")
        self.unpriced = Sums(meter, "lovia.cost.unpriced", "{call}")
        self.tool_calls = Sums(meter, "lovia.tool.calls", "{call}")
        seed = {"lovia.run.outcome": "completed", "lovia.run.nested": False}
        self.runs.add(0, frozenset(seed.items()))  # the series lovia starts at 0
        self.model, self.stream = model, stream
        self.chat_start = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
            "gen_ai.request.model": model, "lovia.view.hash": VIEW_HASH,
            "gen_ai.request.stream": stream, "lovia.call.purpose": "main",
            "server.address": address, "server.port": port,
        }  # fmt: skip
        self.chat_labels = {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
            "gen_ai.request.model": model, "gen_ai.agent.name": AGENT,
            "lovia.call.purpose": "main", "server.address": address, "server.port": port,
            "gen_ai.response.model": model,
        }  # fmt: skip
        self.token_in = {**self.chat_labels, "gen_ai.token.type": "input"}
        self.token_out = {**self.chat_labels, "gen_ai.token.type": "output"}
        spend = {
            "gen_ai.agent.name": AGENT, "gen_ai.provider.name": "openai",
            "gen_ai.request.model": model, "lovia.call.purpose": "main",
            "lovia.run.nested": False,
        }  # fmt: skip
        self.spend_key = frozenset(spend.items())
        self.tokens_in_key = frozenset({**spend, "gen_ai.token.type": "input"}.items())
        self.tokens_out_key = frozenset({**spend, "gen_ai.token.type": "output"}.items())
        tool = {"gen_ai.tool.name": "add", "gen_ai.agent.name": AGENT}
        self.tool_key = frozenset(tool.items())
        self.tool_labels = {**tool, "gen_ai.operation.name": "execute_tool"}
        self.agent_labels = {
            "gen_ai.agent.name": AGENT, "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": "openai", "gen_ai.request.model": model,
            "lovia.run.nested": False,
        }  # fmt: skip
        self.turns_labels = {
            "gen_ai.agent.name": AGENT, "lovia.run.nested": False,
            "lovia.run.outcome": "completed",
        }  # fmt: skip
        self.runs_key = frozenset({**self.turns_labels, "lovia.run.finish_reason": "stop"}.items())


class RunTrace:
    """The spans of one run and the figures its end reports."""

    def __init__(self, tel: Telemetry) -> None:
        self.tel = tel
        self.run_id = uuid.uuid4().hex
        self.base = {
            "lovia.telemetry.version": VERSION, "lovia.run.id": self.run_id,
            "gen_ai.agent.name": AGENT,
        }  # fmt: skip
        self.started = time.perf_counter()
        self.span = tel.tracer.start_span(
            f"invoke_agent {AGENT}",
            attributes={
                **self.base, "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": "openai", "gen_ai.request.model": tel.model,
            },
        )  # fmt: skip
        self.context = trace.set_span_in_context(self.span)
        self.turns = 0
        self.input_tokens = self.output_tokens = self.tool_calls = 0
        self.turn: Span | None = None
        self.turn_context: Any = None
        self.chat: Span | None = None
        self.chat_started = 0.0
        self.turn_tokens = (0, 0)

    def start_turn(self, entries: int) -> None:
        """Open the turn's span and record its view (a span that ends at once)."""
        self.turns += 1
        index = {**self.base, "lovia.turn.index": self.turns}
        tracer = self.tel.tracer
        self.turn = tracer.start_span("lovia.turn", context=self.context, attributes=index)
        self.turn_context = trace.set_span_in_context(self.turn)
        tracer.start_span(
            "lovia.view",
            context=self.turn_context,
            attributes={
                **index, "lovia.view.hash": VIEW_HASH, "lovia.view.entries": entries,
                "lovia.view.injected": 0, "lovia.view.attempt": 1,
            },
        ).end()  # fmt: skip
        self.chat_started = time.perf_counter()
        self.chat = tracer.start_span(
            f"chat {self.tel.model}",
            context=self.turn_context,
            kind=SpanKind.CLIENT,
            attributes={**index, **self.tel.chat_start},
        )

    def end_chat(self, data: dict[str, Any], usage: dict[str, Any]) -> None:
        """End the chat span with what the model answered (``data``: its id, model,
        finish reason and the time of its first chunk); record the call's metrics."""
        first_chunk: float = data["first_chunk"]
        tel, chat = self.tel, self.chat
        assert chat is not None
        finish = data.get("finish_reason") or "stop"
        tokens_in, tokens_out = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
        attrs: dict[str, Any] = {
            "gen_ai.response.finish_reasons": (finish,), "lovia.cost.unpriced": 1,
            "gen_ai.response.model": data.get("model") or tel.model,
            "gen_ai.response.id": data.get("id") or "",
            "lovia.finish_reason.raw": finish,
            "gen_ai.usage.input_tokens": tokens_in, "gen_ai.usage.output_tokens": tokens_out,
            "gen_ai.usage.cache_read.input_tokens": 0,
            "gen_ai.usage.cache_creation.input_tokens": 0,
            "gen_ai.usage.reasoning.output_tokens": 0,
        }  # fmt: skip
        if tel.stream:
            attrs["gen_ai.response.time_to_first_chunk"] = first_chunk - self.chat_started
        chat.set_attributes(attrs)
        chat.end()
        tel.op.record(time.perf_counter() - self.chat_started, tel.chat_labels)
        if tel.stream:
            tel.ttfc.record(first_chunk - self.chat_started, tel.chat_labels)
        tel.tokens_h.record(tokens_in, tel.token_in)
        tel.tokens_h.record(tokens_out, tel.token_out)
        tel.unpriced.add(1, tel.spend_key)
        tel.tokens.add(tokens_in, tel.tokens_in_key)
        tel.tokens.add(tokens_out, tel.tokens_out_key)
        self.input_tokens += tokens_in
        self.output_tokens += tokens_out
        self.turn_tokens = (tokens_in, tokens_out)

    def start_tool(self, call_id: str) -> Span:
        """The span of one ``add`` call."""
        self.tool_calls += 1
        return self.tel.tracer.start_span(
            "execute_tool add",
            context=self.turn_context,
            attributes={
                **self.base, "lovia.turn.index": self.turns,
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "add",
                "gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function",
                "gen_ai.tool.description": "Add two integers.",
                "lovia.tool.idempotency_key": f"{self.run_id}:{call_id}",
            },
        )  # fmt: skip

    def end_tool(self, span: Span, started: float) -> None:
        """End one tool span and record its metrics."""
        span.set_attributes({"lovia.tool.is_error": False, "lovia.tool.outcome": "executed"})
        span.end()
        self.tel.tool_h.record(time.perf_counter() - started, self.tel.tool_labels)
        self.tel.tool_calls.add(1, self.tel.tool_key)

    def end_turn(self, calls: int) -> None:
        """End the turn's span with its usage."""
        assert self.turn is not None
        tokens_in, tokens_out = self.turn_tokens
        self.turn.set_attributes(
            {
                "lovia.turn.usage.input_tokens": tokens_in,
                "lovia.turn.usage.output_tokens": tokens_out,
                "lovia.turn.usage.cache_read_tokens": 0,
                "lovia.turn.usage.cache_write_tokens": 0,
                "lovia.turn.usage.reasoning_tokens": 0, "lovia.turn.usage.requests": 1,
                "lovia.turn.usage.tool_calls": calls, "lovia.turn.usage.cost_usd": 0.0,
                "lovia.turn.tool_calls": calls, "lovia.cost.unpriced": 1,
            }
        )  # fmt: skip
        self.turn.end()

    def end(self) -> None:
        """End the run's span with its totals; record the run's metrics."""
        tel, turns = self.tel, self.turns
        self.span.set_attributes(
            {
                "lovia.price_table.version": "genai-prices==0.2.3",
                "lovia.run.usage.input_tokens": self.input_tokens,
                "lovia.run.usage.output_tokens": self.output_tokens,
                "lovia.run.usage.cache_read_tokens": 0, "lovia.run.usage.cache_write_tokens": 0,
                "lovia.run.usage.reasoning_tokens": 0, "lovia.run.usage.requests": turns,
                "lovia.run.usage.tool_calls": self.tool_calls, "lovia.run.usage.cost_usd": 0.0,
                "lovia.run.turns": turns, "lovia.run.finish_reason": "stop",
                "lovia.run.final_agent": AGENT, "lovia.cost.usd": 0.0,
                "lovia.cost.total_usd": 0.0, "lovia.cost.unpriced": turns,
                "lovia.run.outcome": "completed",
            }
        )  # fmt: skip
        self.span.end()
        tel.agent_h.record(time.perf_counter() - self.started, tel.agent_labels)
        tel.turns_h.record(turns, tel.turns_labels)
        tel.runs.add(1, tel.runs_key)
