"""Token usage accounting and the run budget.

``Usage`` follows the OpenTelemetry GenAI rule: ``input_tokens`` *includes* cache reads
and writes, ``output_tokens`` *includes* reasoning tokens; the detail fields are subsets.
A provider that reported no usage at all yields ``Usage(missing=True)`` rather than
zeros, and a call whose cost is unknown counts in ``unpriced``, so dashboards never
mistake "unknown" for "free".
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["RunBudget", "Usage"]


@dataclass(slots=True)
class Usage:
    """Tokens and requests used by one model call, a turn, or a whole run."""

    input_tokens: int = 0
    """Prompt tokens, including cached ones."""
    output_tokens: int = 0
    """Completion tokens, including reasoning."""
    cache_read_tokens: int = 0
    """Subset of ``input_tokens`` served from the provider's prompt cache."""
    cache_write_tokens: int = 0
    """Subset of ``input_tokens`` written to the provider's prompt cache."""
    reasoning_tokens: int = 0
    """Subset of ``output_tokens`` spent on reasoning."""
    requests: int = 0
    """Model calls that returned (retries not counted)."""
    tool_calls: int = 0
    """Tool calls executed."""
    cost_usd: float = 0.0
    """Priced cost when a price is known (0.0 otherwise)."""
    missing: bool = False
    """True when a provider reported no usage for at least one call."""
    unpriced: int = 0
    """Model calls whose cost is unknown (no price for the model, or no usage reported):
    when not 0, ``cost_usd`` is a lower bound (the priced calls only), never the cost."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        """Add ``other`` into this usage in place."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.reasoning_tokens += other.reasoning_tokens
        self.requests += other.requests
        self.tool_calls += other.tool_calls
        self.cost_usd += other.cost_usd
        self.missing = self.missing or other.missing
        self.unpriced += other.unpriced

    def minus(self, before: Usage) -> Usage:
        """What was used since ``before`` (a copy taken earlier): e.g. one turn's usage."""
        return Usage(
            input_tokens=self.input_tokens - before.input_tokens,
            output_tokens=self.output_tokens - before.output_tokens,
            cache_read_tokens=self.cache_read_tokens - before.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens - before.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens - before.reasoning_tokens,
            requests=self.requests - before.requests,
            tool_calls=self.tool_calls - before.tool_calls,
            cost_usd=self.cost_usd - before.cost_usd,
            missing=self.missing,
            unpriced=self.unpriced - before.unpriced,
        )

    def copy(self) -> Usage:
        # spelled out (several per turn): dataclasses.fields() walks the class each call;
        # tests/core check that it names every field
        return Usage(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cache_read_tokens=self.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens,
            requests=self.requests,
            tool_calls=self.tool_calls,
            cost_usd=self.cost_usd,
            missing=self.missing,
            unpriced=self.unpriced,
        )

    def to_dict(self) -> dict[str, int | float | bool]:
        return {name: getattr(self, name) for name in _FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, int | float | bool]) -> Usage:
        out = cls()
        for f in fields(cls):
            if f.name in data:
                setattr(out, f.name, data[f.name])
        return out


_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Usage))


@dataclass(frozen=True, slots=True, kw_only=True)
class RunBudget:
    """Limits for one run; ``None`` means unlimited.

    Checked before every turn, every model call (summaries included) and every tool
    call; exceeding one ends the run with :class:`~lovia.errors.BudgetExceeded` naming the limit.
    """

    max_turns: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    max_cost_usd: float | None = None
    max_tool_calls: int | None = None
    max_seconds: float | None = None

    def exceeded(
        self, usage: Usage, turns: int, elapsed: float, *, before: str = "model"
    ) -> tuple[str, float] | None:
        """The first limit reached, as ``(name, used)``, else ``None``.

        ``before="model"`` checks turns, tokens, cost and time before a turn;
        ``before="call"`` checks tokens, cost and time before each model call (the
        turn's main call and any summary call); ``before="tool"`` checks tool calls
        (``usage.tool_calls`` counting the one about to run), tokens, cost and time
        before a tool call.
        """
        checks: list[tuple[str, int | float | None, float]] = [
            ("max_input_tokens", self.max_input_tokens, usage.input_tokens),
            ("max_output_tokens", self.max_output_tokens, usage.output_tokens),
            ("max_total_tokens", self.max_total_tokens, usage.total_tokens),
            ("max_cost_usd", self.max_cost_usd, usage.cost_usd),
            ("max_seconds", self.max_seconds, elapsed),
        ]
        if before == "model":
            checks.insert(0, ("max_turns", self.max_turns, turns))
        elif before == "tool":
            checks.insert(0, ("max_tool_calls", self.max_tool_calls, usage.tool_calls))
        for name, limit, used in checks:
            if limit is not None and used >= limit:
                return name, used
        return None
