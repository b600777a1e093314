"""Which GenAI semantic conventions lovia follows, and the opt-in to the newest names.

The GenAI and MCP conventions live in the ``semantic-conventions-genai`` registry (they
left the core ``semantic-conventions`` after v1.41). lovia follows its release
``v1.42.0-dev`` (:data:`REGISTRY`, schema URL :data:`SCHEMA_URL` on lovia's tracer) and
checks every ``gen_ai.*`` / ``mcp.*`` name, type, unit, instrument, span kind and
requirement level it emits against the registry's model files in its test suite.

``OTEL_SEMCONV_STABILITY_OPT_IN`` (a comma-separated list, read when a run starts) switches
to the newest experimental set when it contains ``gen_ai_latest_experimental``: the token
histogram ``gen_ai.client.token.usage`` gives way to the registry main branch's counters
``gen_ai.client.inference.usage.*`` (by ``gen_ai.token.modality``) and per-call histograms
``gen_ai.client.inference.operation.{input,output}_tokens``, recorded for failed calls too.
Without it lovia keeps the released set. Spans are the same in both modes; lovia's own
``lovia.*`` names never move.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Mapping
from typing import Any, Final

from opentelemetry.metrics import Histogram, Meter
from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue

from ..usage import Usage
from . import attributes as A
from .metrics import Totals

__all__ = [
    "LATEST_OPT_IN",
    "REGISTRY",
    "SCHEMA_URL",
    "STABILITY_ENV",
    "LatestInstruments",
    "latest_experimental",
    "latest_for",
]

STABILITY_ENV: Final = "OTEL_SEMCONV_STABILITY_OPT_IN"
LATEST_OPT_IN: Final = "gen_ai_latest_experimental"
REGISTRY: Final = A.SEMCONV_VERSION  # "semantic-conventions-genai v1.42.0-dev"
SCHEMA_URL: Final = "https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev"

SPAN_TYPES: Final[Mapping[str, tuple[str, SpanKind]]] = {
    A.SPAN_RUN: ("gen_ai.invoke_agent.internal", SpanKind.INTERNAL),
    A.SPAN_CHAT: ("gen_ai.inference.client", SpanKind.CLIENT),
    A.SPAN_TOOL: ("gen_ai.execute_tool.internal", SpanKind.INTERNAL),
}
"""lovia span name (first word) → the registry's span type and the kind it prescribes.
MCP client spans (``{mcp.method.name} {target}``) are ``mcp.client`` spans, kind CLIENT."""

EXTENSIONS: Final[Mapping[str, str]] = {
    A.CONVERSATION_COMPACTED: "proposed on the registry's main branch; not in a release yet",
}
"""``gen_ai.*`` names lovia emits that the followed registry does not define, and why."""

SPAN_EXTENSIONS: Final[Mapping[str, str]] = {
    A.AGENT_NAME: "on every lovia span (chat and tool spans too), so a trace filters by agent",
    A.CONVERSATION_ID: "on every span of a run with a session, so a trace filters by session",
    A.CONVERSATION_COMPACTED: EXTENSIONS[A.CONVERSATION_COMPACTED],
}
"""Registry attributes lovia sets on span types whose attribute lists omit them."""

METRIC_EXTENSIONS: Final = frozenset({A.AGENT_NAME, A.CALL_PURPOSE, A.RUN_NESTED})
"""Labels lovia adds to the registry's metrics beyond their attribute lists (bounded:
agent names, call purposes, a flag), so per-agent and per-purpose panels work."""

# -- the newest experimental metrics (OTEL_SEMCONV_STABILITY_OPT_IN) ------------------

M_USAGE_INPUT: Final = "gen_ai.client.inference.usage.input_tokens"
M_USAGE_OUTPUT: Final = "gen_ai.client.inference.usage.output_tokens"
M_USAGE_CACHE_READ: Final = "gen_ai.client.inference.usage.cache_read.input_tokens"
M_USAGE_CACHE_WRITE: Final = "gen_ai.client.inference.usage.cache_write.input_tokens"
M_USAGE_REASONING: Final = "gen_ai.client.inference.usage.reasoning.output_tokens"
M_OP_INPUT: Final = "gen_ai.client.inference.operation.input_tokens"
M_OP_OUTPUT: Final = "gen_ai.client.inference.operation.output_tokens"
TOKEN_MODALITY: Final = "gen_ai.token.modality"
UNKNOWN_MODALITY: Final = "unknown"
"""Providers report no per-modality split to lovia: every count is ``unknown``."""

_USAGE_COUNTERS: Final = (
    (M_USAGE_INPUT, "input_tokens", "Input tokens used, cached ones included."),
    (M_USAGE_OUTPUT, "output_tokens", "Output tokens used, reasoning ones included."),
    (M_USAGE_CACHE_READ, "cache_read_tokens", "Input tokens served from a provider cache."),
    (M_USAGE_CACHE_WRITE, "cache_write_tokens", "Input tokens written to a provider cache."),
    (M_USAGE_REASONING, "reasoning_tokens", "Output tokens used for reasoning."),
)


def latest_experimental(environ: Mapping[str, str] | None = None) -> bool:
    """True when ``OTEL_SEMCONV_STABILITY_OPT_IN`` lists ``gen_ai_latest_experimental``."""
    raw = (os.environ if environ is None else environ).get(STABILITY_ENV, "")
    return LATEST_OPT_IN in {part.strip().lower() for part in raw.split(",")}


class LatestInstruments:
    """The newest token metrics of one meter provider (counters kept as :class:`Totals`)."""

    __slots__ = ("counters", "op_input", "op_output")

    def __init__(self, meter: Meter) -> None:
        self.counters: list[tuple[str, Totals]] = []
        for name, field, desc in _USAGE_COUNTERS:
            totals = Totals()
            meter.create_observable_counter(
                name, [totals.observe], unit="{token}", description=desc
            )
            self.counters.append((field, totals))
        self.op_input: Histogram = meter.create_histogram(
            M_OP_INPUT,
            unit="{token}",
            description="Input tokens per model call.",
            explicit_bucket_boundaries_advisory=list(A.TOKEN_BUCKETS),
        )
        self.op_output: Histogram = meter.create_histogram(
            M_OP_OUTPUT,
            unit="{token}",
            description="Output tokens per model call.",
            explicit_bucket_boundaries_advisory=list(A.TOKEN_BUCKETS),
        )

    def record(
        self, labels: Mapping[str, AttributeValue], usage: Usage | None, error_type: str | None
    ) -> None:
        """One model call: its usage (None or missing: zeros, modality ``unknown``)."""
        known = usage is not None and not usage.missing
        counted = {**labels, TOKEN_MODALITY: UNKNOWN_MODALITY}
        for field, totals in self.counters:
            totals.add(getattr(usage, field) if known else 0, counted)
        per_call = dict(labels)
        if error_type is not None:
            per_call[A.ERROR_TYPE] = error_type
        self.op_input.record(usage.input_tokens if known and usage else 0, per_call)
        self.op_output.record(usage.output_tokens if known and usage else 0, per_call)


_lock = threading.Lock()
_latest: weakref.WeakKeyDictionary[Any, LatestInstruments] = weakref.WeakKeyDictionary()
_pinned: dict[int, tuple[Any, LatestInstruments]] = {}


def latest_for(provider: Any) -> LatestInstruments:
    """The cached newest-name instruments of a meter ``provider`` (made on first use)."""
    with _lock:
        try:
            found = _latest.get(provider)
        except TypeError:
            pinned = _pinned.get(id(provider))
            found = pinned[1] if pinned is not None else None
        if found is None:
            from .._version import __version__

            found = LatestInstruments(provider.get_meter(A.SCOPE_NAME, __version__))
            try:
                _latest[provider] = found
            except TypeError:  # not weak-referenceable: kept for the process
                _pinned[id(provider)] = (provider, found)
        return found
