"""Run an evaluation: every case (× samples) re-run, scored, reported."""

from __future__ import annotations

import difflib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..agent import Agent
from ..errors import LoviaError, UserError
from ..model import Provider
from ..runner import Runner, resume_options
from ..transcript import ToolCallEntry
from ..usage import Usage
from ._case import Case, load_cases
from ._compare import Divergence
from ._evaluators import Equals, Evaluator, Sample, Score, from_spec, score_sample
from ._harness import (
    Execution,
    ReplayModel,
    candidate_agent,
    start_store,
    synthetic_agent,
    watched,
)
from ._telemetry import emit_result, record_metrics

__all__ = ["CaseResult", "EvalReport", "SampleResult", "evaluate", "run_case"]


@dataclass(kw_only=True)
class SampleResult:
    """One re-run of one case and its scores."""

    sample: Sample
    execution: Execution
    scores: list[Score]
    trace_id: str | None = None
    span_id: str | None = None

    @property
    def passed(self) -> bool:
        ex = self.execution
        return (
            self.sample.error is None
            and ex.divergence is None
            and not ex.unmatched
            and all(s.passed for s in self.scores)
        )

    @property
    def score(self) -> float:
        if not self.passed and not self.scores:
            return 0.0
        return sum(s.value for s in self.scores) / len(self.scores) if self.scores else 1.0

    def to_dict(self) -> dict[str, Any]:
        ex = self.execution
        return {
            "passed": self.passed,
            "score": self.score,
            "output": self.sample.output,
            "error": self.sample.error,
            "turns": self.sample.turns,
            "cost_usd": self.sample.cost_usd,
            "latency_s": round(self.sample.latency_s, 4),
            "scores": [s.to_dict() for s in self.scores],
            "views_checked": ex.views_checked,
            "views_reproduced": ex.views_reproduced,
            "view_hashes": ex.hashes,
            "pinned_model_calls": ex.pinned_model_calls,
            "live_model_calls": ex.live_model_calls,
            "start_view_matches": ex.start_matches,
            "pinned_tool_calls": ex.pinned_tool_calls,
            "live_tool_calls": ex.live_tool_calls,
            "unmatched_tool_calls": ex.unmatched,
            "divergence": ex.divergence.to_dict() if ex.divergence else None,
            "trace_id": self.trace_id,
        }


@dataclass(kw_only=True)
class CaseResult:
    """A case's samples (several for a nondeterministic candidate)."""

    case: Case
    samples: list[SampleResult]
    baseline_passed: bool | None = None
    """Candidate mode: whether the recorded output passes the same evaluators."""

    @property
    def pass_rate(self) -> float:
        return sum(s.passed for s in self.samples) / len(self.samples) if self.samples else 0.0

    @property
    def passed(self) -> bool:
        return self.pass_rate >= 0.5 if len(self.samples) > 1 else self.pass_rate == 1.0

    @property
    def mean_score(self) -> float:
        return sum(s.score for s in self.samples) / len(self.samples) if self.samples else 0.0

    @property
    def cost_usd(self) -> float:
        return sum(s.sample.cost_usd + sum(x.cost_usd for x in s.scores) for s in self.samples)

    def diff(self) -> str:
        """The first failing sample's reason: the divergence, or the output diff."""
        for s in self.samples:
            if s.execution.divergence is not None:
                return s.execution.divergence.explain()
            if s.passed:
                continue
            reasons = [f"unmatched tool call {u}" for u in s.execution.unmatched]
            if s.sample.error:
                reasons.append(f"error: {s.sample.error}")
            reasons += [f"{x.name}: {x.explanation}" for x in s.scores if not x.passed]
            return "\n".join(
                [*reasons, *output_diff(self.case.expected.get("output"), s.sample.output)]
            )
        return ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case.name,
            "path": str(self.case.path) if self.case.path else None,
            "source": self.case.source,
            "passed": self.passed,
            "pass_rate": self.pass_rate,
            "mean_score": self.mean_score,
            "cost_usd": self.cost_usd,
            "baseline_passed": self.baseline_passed,
            "recorded_output": self.case.expected.get("output"),
            "diff": self.diff(),
            "samples": [s.to_dict() for s in self.samples],
        }


def output_diff(recorded: Any, got: Any) -> list[str]:
    def lines(v: Any) -> list[str]:
        text = v if isinstance(v, str) else json.dumps(v, indent=2, sort_keys=True, default=str)
        return text.splitlines()

    if recorded == got:
        return []
    return list(
        difflib.unified_diff(lines(recorded), lines(got), "recorded", "candidate", lineterm="", n=1)
    )


@dataclass(kw_only=True)
class EvalReport:
    """The outcome of :func:`evaluate`."""

    mode: str
    cases: list[CaseResult]
    duration_s: float = 0.0

    @property
    def pass_rate(self) -> float:
        return sum(c.passed for c in self.cases) / len(self.cases) if self.cases else 0.0

    @property
    def baseline_pass_rate(self) -> float | None:
        known = [c.baseline_passed for c in self.cases if c.baseline_passed is not None]
        return sum(known) / len(known) if known else None

    @property
    def mean_score(self) -> float:
        return sum(c.mean_score for c in self.cases) / len(self.cases) if self.cases else 0.0

    @property
    def cost_usd(self) -> float:
        return sum(c.cost_usd for c in self.cases)

    def ok(self, min_pass_rate: float = 1.0) -> bool:
        """At least ``min_pass_rate``, and not below the baseline's pass rate."""
        base = self.baseline_pass_rate
        return self.pass_rate >= min_pass_rate and (base is None or self.pass_rate >= base)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "pass_rate": self.pass_rate,
            "baseline_pass_rate": self.baseline_pass_rate,
            "mean_score": self.mean_score,
            "cost_usd": self.cost_usd,
            "duration_s": round(self.duration_s, 3),
            "cases": [c.to_dict() for c in self.cases],
        }


@dataclass(frozen=True, kw_only=True)
class _Options:
    baseline: bool
    agent: Agent[Any, Any] | None = None
    model: str | Provider | None = None
    instructions: str | None = None
    safe_live: frozenset[str] = frozenset()
    max_turns: int | None = None
    tracer_provider: Any = None
    meter_provider: Any = None
    logger_provider: Any = None


async def run_case(
    case: Case, options: _Options
) -> tuple[Sample, Execution, str | None, str | None]:
    """Re-run ``case`` once from its pinned start; (sample, execution, trace id, span id)."""
    ex = Execution(case=case, safe_live=options.safe_live)
    agent = _agent_for(case, ex, options)
    db, info = await start_store(case, agent.name, fresh_prompts=not options.baseline)
    recorded_turns = int(case.expected.get("turns") or 0)
    run = resume_options(info, db)  # the pinned start is a stored run: continue it
    run.update(
        max_turns=options.max_turns or max(recorded_turns + 5, 25),
        tracer_provider=options.tracer_provider,
        meter_provider=options.meter_provider,
    )
    error: str | None = None
    started = time.perf_counter()
    try:
        await Runner.run(agent, None, **run)
    except LoviaError as exc:
        error = f"{type(exc).__name__}: {exc.message}"
    latency = time.perf_counter() - started
    if options.baseline:
        _check_all_calls(ex, error)
    snapshot = await db.load(info.run_id)
    await db.aclose()
    assert snapshot is not None
    result = snapshot.result or {}
    added = snapshot.entries()[case.start_entries :]
    used = Usage.from_dict(result.get("usage") or {}).minus(case.start_usage) if result else Usage()
    sample = Sample(
        case=case,
        output=result.get("output") if error is None else None,
        error=error if ex.divergence is None else f"diverged: {ex.divergence.where}",
        turns=max(0, int(result.get("turns", 0)) - case.start_turn + 1) if result else 0,
        cost_usd=used.cost_usd,
        latency_s=latency,
        tool_calls=[e for e in added if isinstance(e, ToolCallEntry)],
    )
    return sample, ex, snapshot.info.trace_id, snapshot.info.span_id


def _check_all_calls(ex: Execution, error: str | None) -> None:
    """A baseline that ended before making every recorded model call diverged too."""
    views = ex.case.views
    if ex.divergence is None and ex.pinned_model_calls < len(views):
        last = views[max(0, ex.pinned_model_calls - 1)]
        ex.divergence = Divergence(
            turn=last.turn,
            attempt=last.attempt,
            where="model calls",
            recorded=f"{len(views)} model calls",
            rerun=f"{ex.pinned_model_calls} model calls, then {error or 'the run finished'}",
        )


def _agent_for(case: Case, ex: Execution, options: _Options) -> Agent[Any, Any]:
    if options.baseline:
        return synthetic_agent(case, ex, model=ReplayModel(ex), instructions=None, baseline=True)
    if options.agent is not None:
        agent = options.agent
        changes: dict[str, Any] = {}
        model = watched(options.model if options.model is not None else agent.model, ex)
        if model is not None:
            changes["model"] = model
        if options.instructions is not None:
            changes["instructions"] = options.instructions
        return candidate_agent(agent.clone(**changes) if changes else agent, case, ex)
    if options.model is None:
        raise UserError(
            "a candidate needs a model or an agent",
            hint="Pass --model provider:model, --agent module:attr, or --baseline.",
        )
    return synthetic_agent(
        case,
        ex,
        model=watched(options.model, ex),
        instructions=options.instructions,
        baseline=False,
    )


def recorded_sample(case: Case) -> Sample:
    """The recording itself as a sample (what the baseline pass rate is scored on)."""
    after = case.transcript[case.start_entries :]
    return Sample(
        case=case,
        output=case.expected.get("output"),
        error=None if case.expected.get("status") == "completed" else "the recorded run failed",
        turns=max(0, int(case.expected.get("turns") or 0) - case.start_turn + 1),
        tool_calls=[e for e in after if isinstance(e, ToolCallEntry)],
    )


def _evaluators_for(case: Case, given: Sequence[Evaluator], baseline: bool) -> list[Evaluator]:
    found = [*given, *(from_spec(s) for s in case.evaluators)]
    if not found and not baseline:
        found = [cast(Evaluator, Equals())]
    return found


async def evaluate(
    cases: str | Path | Sequence[Case] | Sequence[str | Path],
    *,
    baseline: bool = False,
    agent: Agent[Any, Any] | None = None,
    model: str | Provider | None = None,
    instructions: str | None = None,
    evaluators: Sequence[Evaluator] = (),
    samples: int = 1,
    safe_live: Sequence[str] = (),
    max_turns: int | None = None,
    on_case: Callable[[int, int, CaseResult], None] | None = None,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    logger_provider: Any = None,
) -> EvalReport:
    """Re-run every case and score it (see the module docstring of :mod:`lovia.evals`).

    ``baseline=True``: recorded model responses and tool results only; a case passes when
    every view reproduces its recorded hash. Otherwise a candidate (``agent``, ``model``,
    ``instructions``) runs ``samples`` times per case, scored by ``evaluators`` plus the
    case's own (default: the output equals the recorded one).
    """
    loaded = _load(cases)
    if isinstance(model, str):  # a bad model name is one clear error, not one per case
        from ..providers.registry import resolve_model

        model = resolve_model(model)
    options = _Options(
        baseline=baseline,
        agent=agent,
        model=model,
        instructions=instructions,
        safe_live=frozenset(safe_live),
        max_turns=max_turns,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
    )
    if samples < 1:
        raise UserError("samples must be at least 1", hint="--samples 5 re-runs each case 5 times.")
    started = time.perf_counter()
    results: list[CaseResult] = []
    for index, case in enumerate(loaded, 1):
        result = await _evaluate_case(case, options, evaluators, 1 if baseline else samples)
        results.append(result)
        if on_case is not None:
            on_case(index, len(loaded), result)
    mode = "baseline" if baseline else "candidate"
    return EvalReport(mode=mode, cases=results, duration_s=time.perf_counter() - started)


def _load(cases: str | Path | Sequence[Case] | Sequence[str | Path]) -> list[Case]:
    if isinstance(cases, (str, Path)):
        return load_cases(cases)
    out: list[Case] = []
    for c in cases:
        out.extend([c] if isinstance(c, Case) else load_cases(c))
    return out


async def _evaluate_case(
    case: Case, options: _Options, given: Sequence[Evaluator], samples: int
) -> CaseResult:
    chosen = _evaluators_for(case, given, options.baseline)
    mode = "baseline" if options.baseline else "candidate"
    runs: list[SampleResult] = []
    for _ in range(samples):
        sample, ex, trace_id, span_id = await run_case(case, options)
        scores = await score_sample(chosen, sample)
        for score in scores:
            emit_result(
                score,
                trace_id=trace_id,
                span_id=span_id,
                agent=case.start_agent,
                logger_provider=options.logger_provider,
            )
            record_metrics(
                score, mode=mode, agent=case.start_agent, meter_provider=options.meter_provider
            )
        runs.append(
            SampleResult(
                sample=sample, execution=ex, scores=scores, trace_id=trace_id, span_id=span_id
            )
        )
    base: bool | None = None
    if not options.baseline:
        base = all(s.passed for s in await score_sample(chosen, recorded_sample(case)))
    return CaseResult(case=case, samples=runs, baseline_passed=base)
