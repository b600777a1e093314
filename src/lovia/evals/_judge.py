"""An LLM judge: a model scores the output against a rubric (priced, traced, budgeted)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, cast

from ..model import ModelRequest, ModelSettings, Provider
from ..transcript import InputEntry, TextEntry
from ._evaluators import Sample, Score

__all__ = ["JUDGE_PROMPT", "LLMJudge"]

JUDGE_PROMPT = (
    "You grade the answer of an AI agent against a rubric. Reply with one JSON object "
    'and nothing else: {"score": <number from 0 to 1>, "explanation": "<one sentence>"}.'
)

_NUMBER = re.compile(r"\b(?:0(?:\.\d+)?|1(?:\.0+)?)\b")


@dataclass(frozen=True, kw_only=True)
class LLMJudge:
    """Ask ``model`` to score each sample's output against ``rubric`` (0..1).

    Its calls go through lovia's one model-call path with ``lovia.call.purpose=eval``:
    a priced ``chat`` span and metrics when OpenTelemetry is configured. ``max_cost_usd``
    is the judge's own budget across everything it scores: once spent, further samples
    score 0 with "judge budget exhausted" instead of calling the model.
    """

    model: str | Provider
    rubric: str
    name: str = "judge"
    threshold: float = 0.5
    max_cost_usd: float | None = None
    settings: ModelSettings = field(default_factory=lambda: ModelSettings(temperature=0.0))
    tracer_provider: Any = None
    meter_provider: Any = None
    _spent: list[float] = field(default_factory=lambda: [0.0], repr=False, compare=False)

    @property
    def spent_usd(self) -> float:
        return self._spent[0]

    def _provider(self) -> Provider:
        if isinstance(self.model, str):
            from ..providers.registry import resolve_model

            return resolve_model(self.model)
        return self.model

    async def evaluate(self, sample: Sample) -> Score:
        from ..replay import ask

        if self.max_cost_usd is not None and self._spent[0] >= self.max_cost_usd:
            return Score(
                name=self.name,
                value=0.0,
                passed=False,
                explanation=f"judge budget exhausted (${self._spent[0]:.4f} of "
                f"${self.max_cost_usd:.4f})",
            )
        expected = sample.case.expected.get("output")
        prompt = (
            f"Rubric:\n{self.rubric}\n\nRecorded answer (for reference):\n"
            f"{json.dumps(expected, ensure_ascii=False, default=str)}\n\n"
            f"Answer to grade:\n{sample.text}"
        )
        request = ModelRequest(
            system=JUDGE_PROMPT,
            messages=[InputEntry(content=prompt)],
            settings=self.settings,
        )
        response = await ask(
            self._provider(),
            request,
            purpose="eval",
            run_id=str(sample.case.source.get("run_id", "")),
            agent=self.name,
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
        )
        cost = response.usage.cost_usd
        self._spent[0] += cost
        text = "".join(e.text for e in response.entries if isinstance(e, TextEntry))
        value, why = _parse(text)
        return Score(
            name=self.name,
            value=value,
            passed=value >= self.threshold,
            explanation=why,
            cost_usd=cost,
        )


def _parse(text: str) -> tuple[float, str]:
    """(score, explanation) from the judge's reply: JSON, else the first 0..1 number."""
    start, end = text.find("{"), text.rfind("}")
    if start >= 0 and end > start:
        try:
            data: Any = json.loads(text[start : end + 1])
            if isinstance(data, dict) and "score" in data:
                reply = cast(dict[str, Any], data)
                value = min(1.0, max(0.0, float(reply["score"])))
                return value, str(reply.get("explanation", ""))
        except (ValueError, TypeError):
            pass
    found = _NUMBER.search(text)
    if found is None:
        return 0.0, f"unreadable judge reply: {text[:200]!r}"
    return float(found.group()), text.strip()[:300]
