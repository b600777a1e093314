"""Phase 1 of a turn: limits. Hitting one ends the run with a typed failure, never a hang."""

from __future__ import annotations

from ..errors import BudgetExceeded, MaxTurnsExceeded, RunCancelled
from .state import RunState

__all__ = ["cancelled_error", "check_budget", "check_cancel", "check_limits", "out_of_time"]


def cancelled_error(state: RunState) -> RunCancelled:
    """The run's error once its cancel token is set."""
    return RunCancelled(
        f"run {state.run_id} was cancelled at turn {state.turn} ({state.ctx.cancel_token.reason})",
        hint="Its checkpoint is resumable: run again with the same run_id.",
    )


def check_cancel(state: RunState) -> None:
    if state.ctx.cancel_token.cancelled:
        raise cancelled_error(state)


def check_budget(
    state: RunState, *, extra_tool_calls: int | None = None, before: str = "model"
) -> None:
    """Raise BudgetExceeded when a RunBudget limit is reached (before a turn, a model
    call — ``before="call"`` — or a tool)."""
    budget = state.params.budget
    if budget is None:
        return
    usage = state.usage
    if extra_tool_calls is not None:  # before a tool call: count the calls planned so far
        before = "tool"
        usage = usage.copy()
        usage.tool_calls += extra_tool_calls
    hit = budget.exceeded(usage, state.turn, state.elapsed(), before=before)
    if hit is not None:
        raise _budget_error(state, *hit)


def out_of_time(state: RunState) -> BudgetExceeded:
    """The run's error when ``max_seconds`` passed while a model call or tool was in flight."""
    return _budget_error(state, "max_seconds", state.elapsed(), " (stopped in flight)")


def _budget_error(state: RunState, name: str, used: float, where: str = "") -> BudgetExceeded:
    limit = getattr(state.params.budget, name)
    return BudgetExceeded(
        f"run budget exceeded at turn {state.turn}{where}: {name}={limit} (used {used:g}; "
        f"tokens in/out {state.usage.input_tokens}/{state.usage.output_tokens}, "
        f"tool calls {state.usage.tool_calls}, cost ${state.usage.cost_usd:.4f})",
        hint=f"Raise RunBudget({name}=...) or make the task smaller.",
        limit=name,
        used=float(used),
    )


def check_limits(state: RunState) -> None:
    """Before each turn: cancellation, max_turns, budget."""
    check_cancel(state)
    if state.turn >= state.params.max_turns:
        raise MaxTurnsExceeded(
            f"run {state.run_id} reached max_turns={state.params.max_turns} without a final answer",
            hint="Raise max_turns=..., or check why the model keeps calling tools "
            "(lovia show RUN_ID).",
        )
    check_budget(state)
