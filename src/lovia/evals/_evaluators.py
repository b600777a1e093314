"""Evaluators: what a re-run is scored on.

An evaluator is anything with a ``name`` and ``evaluate(sample) -> Score`` (sync or
async). Built-ins: :class:`Equals`, :class:`Contains`, :class:`Matches`,
:class:`ValidOutput`, :class:`ToolCalled`, :class:`Within` (and :class:`LLMJudge` in its own
module: it makes model calls).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from ..errors import UserError
from ..transcript import ToolCallEntry
from ._case import Case

__all__ = [
    "Contains",
    "Equals",
    "Evaluator",
    "Matches",
    "Sample",
    "Score",
    "ToolCalled",
    "ValidOutput",
    "Within",
    "from_spec",
    "score_sample",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Score:
    """One evaluator's verdict on one sample (``value`` in 0..1)."""

    name: str
    value: float
    passed: bool
    explanation: str = ""
    cost_usd: float = 0.0

    @property
    def label(self) -> str:
        return "pass" if self.passed else "fail"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "label": self.label,
            "passed": self.passed,
            "explanation": self.explanation,
            "cost_usd": self.cost_usd,
        }


@dataclass(kw_only=True)
class Sample:
    """What an evaluator sees: one re-run of one case."""

    case: Case
    output: Any
    error: str | None = None
    turns: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    tool_calls: list[ToolCallEntry] = field(default_factory=list[ToolCallEntry])
    """The tool calls the re-run made (not those of its pinned start)."""

    @property
    def text(self) -> str:
        if isinstance(self.output, str):
            return self.output
        return json.dumps(self.output, sort_keys=True, ensure_ascii=False, default=str)


@runtime_checkable
class Evaluator(Protocol):
    """``name`` and ``evaluate(sample) -> Score`` (may be ``async``)."""

    name: str

    def evaluate(self, sample: Sample) -> Any: ...


def _verdict(name: str, ok: bool, why: str) -> Score:
    return Score(name=name, value=1.0 if ok else 0.0, passed=ok, explanation=why)


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Equals:
    """The output equals ``expected`` (default: the recorded output)."""

    expected: Any = None
    name: str = "equals"

    def evaluate(self, sample: Sample) -> Score:
        want = self.expected if self.expected is not None else sample.case.expected.get("output")
        ok = sample.error is None and sample.output == want
        return _verdict(
            self.name, ok, f"expected {_short(repr(want))}, got {_short(repr(sample.output))}"
        )


@dataclass(frozen=True, slots=True)
class Contains:
    """The output text contains ``text``."""

    text: str
    case_sensitive: bool = False
    name: str = "contains"

    def evaluate(self, sample: Sample) -> Score:
        hay, needle = sample.text, self.text
        if not self.case_sensitive:
            hay, needle = hay.casefold(), needle.casefold()
        ok = sample.error is None and needle in hay
        return _verdict(self.name, ok, f"{'found' if ok else 'missing'} {self.text!r}")


@dataclass(frozen=True, slots=True)
class Matches:
    """The output text matches the regular expression ``pattern`` (``re.search``)."""

    pattern: str
    name: str = "matches"

    def __post_init__(self) -> None:
        try:
            re.compile(self.pattern)
        except re.error as exc:
            raise UserError(
                f"bad pattern {self.pattern!r}: {exc}", hint="Use Python re syntax."
            ) from None

    def evaluate(self, sample: Sample) -> Score:
        ok = sample.error is None and re.search(self.pattern, sample.text) is not None
        return _verdict(self.name, ok, f"/{self.pattern}/ {'matched' if ok else 'did not match'}")


@dataclass(frozen=True, slots=True)
class ValidOutput:
    """The output validates against ``output_type`` (default: the recorded output schema's
    JSON object shape, else: the run produced an output at all)."""

    output_type: Any = None
    name: str = "valid_output"

    def evaluate(self, sample: Sample) -> Score:
        if sample.error is not None:
            return _verdict(self.name, False, f"the run failed: {sample.error}")
        if self.output_type is not None:
            from pydantic import TypeAdapter, ValidationError

            try:
                TypeAdapter(self.output_type).validate_python(sample.output)
            except ValidationError as exc:
                return _verdict(self.name, False, _short(str(exc), 300))
            return _verdict(self.name, True, "valid")
        schema = sample.case.agent.get("output_schema")
        if schema is None:
            return _verdict(self.name, sample.output is not None, "an output was produced")
        required = cast(Mapping[str, Any], schema.get("schema", {})).get("required", [])
        output: Any = sample.output
        ok = isinstance(output, dict) and all(k in output for k in required)
        return _verdict(self.name, ok, f"required keys {list(required)}")


@dataclass(frozen=True, slots=True)
class ToolCalled:
    """Tool ``tool`` was called (``called=False``: never), with ``arguments`` a subset of
    the call's arguments when given."""

    tool: str
    arguments: Mapping[str, Any] | None = None
    called: bool = True
    name: str = ""

    def evaluate(self, sample: Sample) -> Score:
        label = self.name or (
            f"tool_called:{self.tool}" if self.called else f"tool_not_called:{self.tool}"
        )
        hits = [c for c in sample.tool_calls if c.name == self.tool and self._fits(c)]
        ok = bool(hits) == self.called
        what = f"{self.tool}({json.dumps(dict(self.arguments or {}), sort_keys=True)})"
        return _verdict(label, ok, f"{what} called {len(hits)} time(s)")

    def _fits(self, call: ToolCallEntry) -> bool:
        if not self.arguments:
            return True
        try:
            given = json.loads(call.arguments or "{}")
        except ValueError:
            return False
        return isinstance(given, dict) and all(
            cast(dict[str, Any], given).get(k) == v for k, v in self.arguments.items()
        )


@dataclass(frozen=True, slots=True)
class Within:
    """Turns, cost and latency of the re-run within bounds (None: unchecked)."""

    max_turns: int | None = None
    max_cost_usd: float | None = None
    max_latency_s: float | None = None
    name: str = "within"

    def evaluate(self, sample: Sample) -> Score:
        over: list[str] = []
        if self.max_turns is not None and sample.turns > self.max_turns:
            over.append(f"turns {sample.turns} > {self.max_turns}")
        if self.max_cost_usd is not None and sample.cost_usd > self.max_cost_usd:
            over.append(f"cost ${sample.cost_usd:.4f} > ${self.max_cost_usd:.4f}")
        if self.max_latency_s is not None and sample.latency_s > self.max_latency_s:
            over.append(f"latency {sample.latency_s:.2f}s > {self.max_latency_s}s")
        return _verdict(self.name, not over, "; ".join(over) or "within bounds")


_KINDS: dict[str, type[Any]] = {
    "equals": Equals,
    "contains": Contains,
    "matches": Matches,
    "valid_output": ValidOutput,
    "tool_called": ToolCalled,
    "within": Within,
}


def from_spec(spec: Mapping[str, Any]) -> Evaluator:
    """An evaluator from a case's JSON spec: ``{"kind": "contains", "text": "refund"}``."""
    data = dict(spec)
    kind = str(data.pop("kind", ""))
    if kind == "tool_not_called":
        kind, data["called"] = "tool_called", False
    cls = _KINDS.get(kind)
    if cls is None:
        raise UserError(
            f"unknown evaluator kind {kind!r}", hint=f"Known kinds: {', '.join(sorted(_KINDS))}."
        )
    try:
        return cast(Evaluator, cls(**data))
    except TypeError as exc:
        raise UserError(f"evaluator {kind!r}: {exc}", hint="Check the spec's keys.") from None


async def score_sample(evaluators: Sequence[Evaluator], sample: Sample) -> list[Score]:
    """Every evaluator's score (an evaluator that raises scores 0 with the error)."""
    scores: list[Score] = []
    for evaluator in evaluators:
        name = str(getattr(evaluator, "name", type(evaluator).__name__))
        try:
            result = evaluator.evaluate(sample)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            scores.append(
                _verdict(name, False, f"the evaluator failed: {type(exc).__name__}: {exc}")
            )
            continue
        if isinstance(result, Score):
            scores.append(result)
        elif isinstance(result, bool):
            scores.append(_verdict(name, result, ""))
        else:
            value = float(result)
            scores.append(Score(name=name, value=value, passed=value >= 0.5, explanation=""))
    return scores
