"""lovia's metric instruments, created once per meter provider (names in ``attributes``).

Every label set is built here from a fixed allow-list (``attributes.METRIC_LABELS``):
agent, provider, model, tool name, token type, outcome, finish reason, error type,
compaction kind — never ids or content, so cardinality stays bounded.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

from opentelemetry.metrics import Counter, Histogram, Meter, MeterProvider

from . import attributes as A

__all__ = ["Instruments", "instruments_for"]

_lock = threading.Lock()
_by_provider: weakref.WeakKeyDictionary[Any, Instruments] = weakref.WeakKeyDictionary()


def _hist(meter: Meter, name: str, unit: str, desc: str, buckets: Sequence[float]) -> Histogram:
    return meter.create_histogram(
        name, unit=unit, description=desc, explicit_bucket_boundaries_advisory=list(buckets)
    )


class Instruments:
    """The 13 instruments of one meter provider."""

    __slots__ = (
        "agent_duration",
        "compactions",
        "cost",
        "op_duration",
        "retries",
        "runs",
        "token_usage",
        "tokens",
        "tool_calls",
        "tool_duration",
        "tool_errors",
        "ttfc",
        "turns",
    )

    def __init__(self, meter: Meter) -> None:
        self.token_usage = _hist(
            meter,
            A.M_TOKEN_USAGE,
            "{token}",
            "Tokens per model call, by token type.",
            A.TOKEN_BUCKETS,
        )
        self.op_duration = _hist(
            meter,
            A.M_OPERATION_DURATION,
            "s",
            "Duration of a model call (with retries).",
            A.DURATION_BUCKETS,
        )
        self.ttfc = _hist(
            meter, A.M_TTFC, "s", "Time to the first streamed chunk.", A.DURATION_BUCKETS
        )
        self.agent_duration = _hist(
            meter, A.M_AGENT_DURATION, "s", "Duration of a run.", A.AGENT_BUCKETS
        )
        self.tool_duration = _hist(
            meter, A.M_TOOL_DURATION, "s", "Duration of a tool call.", A.DURATION_BUCKETS
        )
        self.turns = _hist(meter, A.M_TURNS, "{turn}", "Turns per run.", A.TURN_BUCKETS)
        self.runs: Counter = meter.create_counter(
            A.M_RUNS, unit="{run}", description="Runs that ended, by outcome."
        )
        self.cost = meter.create_counter(
            A.M_COST, unit="{USD}", description="Priced cost of model calls in USD."
        )
        self.tokens = meter.create_counter(
            A.M_TOKENS, unit="{token}", description="Tokens by type (for spend)."
        )
        self.tool_calls = meter.create_counter(
            A.M_TOOL_CALLS, unit="{call}", description="Tool calls executed."
        )
        self.tool_errors = meter.create_counter(
            A.M_TOOL_ERRORS, unit="{error}", description="Tool calls that returned errors."
        )
        self.retries = meter.create_counter(
            A.M_RETRIES, unit="{retry}", description="Provider retries inside model calls."
        )
        self.compactions = meter.create_counter(
            A.M_COMPACTIONS, unit="{compaction}", description="Context compactions applied."
        )


def instruments_for(provider: MeterProvider) -> Instruments:
    """The cached instruments of ``provider`` (created on first use)."""
    found = _by_provider.get(provider)
    if found is None:
        with _lock:
            found = _by_provider.get(provider)
            if found is None:
                from .._version import __version__

                meter = provider.get_meter(A.SCOPE_NAME, __version__)
                found = Instruments(meter)
                try:
                    _by_provider[provider] = found
                except TypeError:  # not weak-referenceable: do not cache
                    pass
    return found
