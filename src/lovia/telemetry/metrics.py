"""lovia's metric instruments, created once per meter provider (names in ``attributes``).

Every label set is built here from a fixed allow-list (``attributes.METRIC_LABELS``):
agent, provider, model, tool name, token type, outcome, finish reason, error type,
compaction kind — never ids or content, so cardinality stays bounded.

Histograms are the SDK's synchronous instruments: one record per observation. The nine
counters are *observable* counters over sums lovia keeps (:class:`Totals`): an increment
is one dict update here instead of an SDK record (which copies, cleans, sorts and hashes
its attribute set: ≈55 k instructions more than this, ≈3.8 per model round-trip), and the
SDK reads every sum at each collection — the exported points (monotonic cumulative sums,
or their deltas for a delta reader) carry the same values at every collection.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from opentelemetry.metrics import CallbackOptions, Histogram, Meter, MeterProvider, Observation
from opentelemetry.util.types import AttributeValue

from . import attributes as A

__all__ = ["Instruments", "instruments_for"]

_lock = threading.Lock()
_by_provider: weakref.WeakKeyDictionary[Any, Instruments] = weakref.WeakKeyDictionary()
_pinned: dict[int, tuple[Any, Instruments]] = {}
"""Providers that cannot be weakly referenced: kept alive with their instruments (a
second set would register no second callback, and its sums would never be read)."""

LabelKey = frozenset[tuple[str, AttributeValue]]


class Totals:
    """The running sums of one counter, by label set; its observable counter reads them.

    ``add`` has a ``Counter.add`` signature. Negative amounts are dropped (a counter only
    goes up; the SDK's ``Counter`` drops them too). Safe across threads.
    """

    __slots__ = ("_lock", "_sums")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sums: dict[LabelKey, float] = {}

    def add(self, amount: float, attributes: Mapping[str, AttributeValue]) -> None:
        """Add ``amount`` to the sum of ``attributes``' label set."""
        self.add_key(amount, frozenset(attributes.items()))

    def add_key(self, amount: float, key: LabelKey) -> None:
        """``add`` for a label set already made a key (``frozenset(attributes.items())``):
        a caller that counts the same label set again and again builds it once."""
        if amount < 0:
            return
        with self._lock:
            self._sums[key] = self._sums.get(key, 0) + amount

    def observe(self, options: CallbackOptions | None = None) -> Iterable[Observation]:
        """The callback: one observation per label set, its sum so far."""
        with self._lock:
            items = list(self._sums.items())
        return [Observation(value, dict(key)) for key, value in items]


def _counter(meter: Meter, name: str, unit: str, desc: str) -> Totals:
    totals = Totals()
    meter.create_observable_counter(name, [totals.observe], unit=unit, description=desc)
    return totals


def _hist(meter: Meter, name: str, unit: str, desc: str, buckets: Sequence[float]) -> Histogram:
    return meter.create_histogram(
        name, unit=unit, description=desc, explicit_bucket_boundaries_advisory=list(buckets)
    )


RUNS_SEED: Final[Mapping[str, AttributeValue]] = {A.RUN_OUTCOME: "completed", A.RUN_NESTED: False}
"""The label set ``lovia.runs`` starts with, at 0, when the instruments are created (by
``configure``, before any run): ``absent(lovia_runs_total)`` then means "the pipeline is
broken", not "no run ended yet". It names no agent, so per-agent panels leave it out."""


class Instruments:
    """The 15 instruments of one meter provider."""

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
        "tool_recovered",
        "ttfc",
        "turns",
        "unpriced",
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
        self.runs = _counter(meter, A.M_RUNS, "{run}", "Runs that ended, by outcome.")
        self.runs.add(0, RUNS_SEED)  # exists from the start: absent() means a broken pipeline
        self.cost = _counter(meter, A.M_COST, "{USD}", "Priced cost of model calls in USD.")
        self.unpriced = _counter(
            meter, A.M_COST_UNPRICED, "{call}", "Model calls whose cost is unknown."
        )
        self.tokens = _counter(meter, A.M_TOKENS, "{token}", "Tokens by type (for spend).")
        self.tool_calls = _counter(meter, A.M_TOOL_CALLS, "{call}", "Tool calls executed.")
        self.tool_errors = _counter(
            meter, A.M_TOOL_ERRORS, "{error}", "Tool calls that returned errors."
        )
        self.tool_recovered = _counter(
            meter,
            A.M_TOOL_RECOVERED,
            "{call}",
            "Tool calls a resumed run answered from its ledger without running them.",
        )
        self.retries = _counter(
            meter, A.M_RETRIES, "{retry}", "Provider retries inside model calls."
        )
        self.compactions = _counter(
            meter, A.M_COMPACTIONS, "{compaction}", "Context compactions applied."
        )


def instruments_for(provider: MeterProvider) -> Instruments:
    """The cached instruments of ``provider`` (created on first use)."""
    found = _cached(provider)
    if found is None:
        with _lock:
            found = _cached(provider)
            if found is None:
                from .._version import __version__

                meter = provider.get_meter(A.SCOPE_NAME, __version__)
                found = Instruments(meter)
                try:
                    _by_provider[provider] = found
                except TypeError:  # not weak-referenceable: pinned for the process
                    _pinned[id(provider)] = (provider, found)
    return found


def _cached(provider: Any) -> Instruments | None:
    try:
        return _by_provider.get(provider)
    except TypeError:
        pinned = _pinned.get(id(provider))
        return pinned[1] if pinned is not None else None
