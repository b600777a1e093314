"""Evaluation results as OpenTelemetry: one ``gen_ai.evaluation.result`` log event per
case × evaluator (parented to the evaluated run's span) and the ``lovia.eval.*`` metrics.

Metrics (Prometheus names after the OTLP → Prometheus translation):

- ``lovia.eval.results`` (``lovia_eval_results_total``) — counter of scored results by
  ``lovia.eval.mode`` (``baseline``, ``candidate``, ``online``), ``gen_ai.agent.name``,
  ``gen_ai.evaluation.name`` and ``gen_ai.evaluation.score.label`` (``pass``/``fail``);
  the quality SLO's failure ratio is ``fail`` over all.
- ``lovia.eval.score`` (``lovia_eval_score``) — histogram of score values (0..1), same
  labels but the label.
- ``lovia.eval.cost`` (``lovia_eval_cost_USD_total``) — priced cost of evaluation itself
  (LLM judges) and of candidate re-runs.

No ids or content are labels.
"""

from __future__ import annotations

import weakref
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry._logs import get_logger_provider

from ._evaluators import Score

__all__ = ["EVENT_NAME", "emit_result", "record_metrics"]

EVENT_NAME = "gen_ai.evaluation.result"
SCORE_BUCKETS = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


def _context(trace_id: str | None, span_id: str | None) -> Any:
    if not trace_id or not span_id:
        return None
    try:
        parent = trace.SpanContext(
            trace_id=int(trace_id, 16),
            span_id=int(span_id, 16),
            is_remote=False,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        )
    except ValueError:
        return None
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))


def emit_result(
    score: Score,
    *,
    trace_id: str | None,
    span_id: str | None,
    agent: str,
    logger_provider: Any = None,
) -> None:
    """One ``gen_ai.evaluation.result`` event in the evaluated run's trace."""
    provider = logger_provider if logger_provider is not None else get_logger_provider()
    logger = provider.get_logger("lovia.evals")
    attributes: dict[str, Any] = {
        "gen_ai.evaluation.name": score.name,
        "gen_ai.evaluation.score.value": float(score.value),
        "gen_ai.evaluation.score.label": score.label,
        "gen_ai.agent.name": agent,
    }
    if score.explanation:
        attributes["gen_ai.evaluation.explanation"] = score.explanation
    logger.emit(
        event_name=EVENT_NAME,
        context=_context(trace_id, span_id),
        attributes=attributes,
    )


_INSTRUMENTS: weakref.WeakKeyDictionary[Any, tuple[Any, Any, Any]] = weakref.WeakKeyDictionary()
"""Instruments by meter provider (weak: a provider shut down and freed takes its own)."""


def _instruments(meter_provider: Any) -> tuple[Any, Any, Any]:
    provider = meter_provider if meter_provider is not None else metrics.get_meter_provider()
    found = _INSTRUMENTS.get(provider)
    if found is None:
        meter = provider.get_meter("lovia.evals")
        found = (
            meter.create_counter("lovia.eval.results", "{result}", "Scored evaluation results."),
            meter.create_histogram(
                "lovia.eval.score",
                description="Evaluation score values (0..1).",
                explicit_bucket_boundaries_advisory=SCORE_BUCKETS,
            ),
            meter.create_counter("lovia.eval.cost", "USD", "Priced cost of evaluation."),
        )
        _INSTRUMENTS[provider] = found
    return found


def record_metrics(
    score: Score, *, mode: str, agent: str, cost_usd: float = 0.0, meter_provider: Any = None
) -> None:
    """Count one scored result (and what it cost)."""
    results, histogram, cost = _instruments(meter_provider)
    labels = {
        "lovia.eval.mode": mode,
        "gen_ai.agent.name": agent,
        "gen_ai.evaluation.name": score.name,
    }
    results.add(1, {**labels, "gen_ai.evaluation.score.label": score.label})
    histogram.record(float(score.value), labels)
    if cost_usd + score.cost_usd > 0:
        cost.add(cost_usd + score.cost_usd, labels)
