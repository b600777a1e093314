"""Evaluation: from a postmortem to a regression test.

```python
from lovia import evals

case = await evals.pin("3f9c2a:4", "sqlite:///.lovia/lovia.db", to="evals")  # RUN[:TURN]
report = await evals.evaluate("evals", baseline=True)   # recorded answers only
assert report.ok()                                     # every view hash reproduced
report = await evals.evaluate(
    "evals", agent=new_agent, evaluators=[evals.Contains("refund")], samples=3
)
```

A case is a folder (``case.json`` + JSON Lines) holding the exact views, the recorded
model responses and tool results, and where the run came from. ``evaluate`` re-runs each
case through the real loop from its pinned start: the baseline with the recorded
answers (every view must reproduce its recorded ``lovia.view.hash``, with no tool or
model call made), a candidate with a new model, prompt or agent whose tool calls are
answered from the pinned results.
"""

from __future__ import annotations

from ._case import (
    FORMAT_VERSION,
    Case,
    CaseError,
    PinnedResponse,
    PinnedToolResult,
    load_case,
    load_cases,
)
from ._compare import Divergence
from ._evaluators import (
    Contains,
    Equals,
    Evaluator,
    Matches,
    Sample,
    Score,
    ToolCalled,
    ValidOutput,
    Within,
    from_spec,
)
from ._judge import LLMJudge
from ._pin import pin, pin_run
from ._run import CaseResult, EvalReport, SampleResult, evaluate

__all__ = [
    "FORMAT_VERSION",
    "Case",
    "CaseError",
    "CaseResult",
    "Contains",
    "Divergence",
    "Equals",
    "EvalReport",
    "Evaluator",
    "LLMJudge",
    "Matches",
    "PinnedResponse",
    "PinnedToolResult",
    "Sample",
    "SampleResult",
    "Score",
    "ToolCalled",
    "ValidOutput",
    "Within",
    "evaluate",
    "from_spec",
    "load_case",
    "load_cases",
    "pin",
    "pin_run",
]
