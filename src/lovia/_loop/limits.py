"""Phase 1 of a turn: limits. Hitting one ends the run with a typed failure, never a hang."""

from __future__ import annotations

from ..errors import BudgetExceeded, MaxTurnsExceeded, RunCancelled
from .state import RunState

__all__ = ["cancelled_error", "check_budget", "check_cancel", "check_limits", "out_of_time"]


def cancelled_error(state: RunState) -> RunCancelled:
    """The run's error once its cancel token is set."""
    return RunCancelled(
        f"run {state.run_id} was cancelled at turn {state.progress.turn} "
        f"({state.ctx.cancel_token.reason})",
        hint="Its checkpoint is resumable: run again with the same run_id.",
    )


def check_cancel(state: RunState) -> None:
    if state.ctx.cancel_token.cancelled:
        raise cancelled_error(state)


def check_budget(
    state: RunState, *, extra_tool_calls: int | None = None, before: str = "model"
) -> None:
    """Raise BudgetExceeded when a RunBudget limit is reached (before a turn, a model
    call — ``before="call"`` — or a tool).

    The usage counted is the run's own plus its child runs'. A child run also checks
    the budget of every run above it, so it never spends past what its parent has left.
    """
    run: RunState | None = state
    while run is not None:
        _check_one(run, state, extra_tool_calls, before)
        link = run.params.parent
        run = link.state if link is not None else None


def _check_one(run: RunState, caller: RunState, extra_tool_calls: int | None, before: str) -> None:
    budget = run.params.budget
    if budget is None:
        return
    usage = run.total_usage()
    if extra_tool_calls is not None:  # before a tool call: count the calls planned so far
        before = "tool"
        usage = usage.copy()
        usage.tool_calls += extra_tool_calls
    # an ancestor's max_turns counts its own turns, which a child's model call does not add to
    hit = budget.exceeded(
        usage, run.progress.turn if run is caller else 0, run.elapsed(), before=before
    )
    if hit is not None:
        raise _budget_error(run, caller, *hit)


def out_of_time(state: RunState) -> BudgetExceeded:
    """The run's error when ``max_seconds`` passed while a model call or tool was in flight."""
    return _budget_error(state, state, "max_seconds", state.elapsed(), " (stopped in flight)")


def _budget_error(
    run: RunState, caller: RunState, name: str, used: float, where: str = ""
) -> BudgetExceeded:
    """``run``'s budget was hit while ``caller`` (``run`` itself or a child) was running."""
    limit = getattr(run.params.budget, name)
    total = run.total_usage()
    whose = "" if run is caller else f" of parent run {run.run_id} (in child run {_path(caller)})"
    error = BudgetExceeded(
        f"run budget{whose} exceeded at turn {caller.progress.turn}{where}: {name}={limit} "
        f"(used {used:g}; tokens in/out {total.input_tokens}/{total.output_tokens}, "
        f"tool calls {total.tool_calls}, cost ${total.cost_usd:.4f})",
        hint=f"Raise RunBudget({name}=...) or make the task smaller.",
        limit=name,
        used=float(used),
    )
    error.budget_run_id = run.run_id
    return error


def _path(state: RunState) -> str:
    """``manager > researcher (call c1)``: the agents from the root run down to ``state``."""
    parts: list[str] = []
    run: RunState | None = state
    while run is not None:
        link = run.params.parent
        name = run.params.agent.name
        parts.append(f"{name} ({run.run_id}, call {link.call_id})" if link else name)
        run = link.state if link is not None else None
    return " > ".join(reversed(parts))


def check_limits(state: RunState) -> None:
    """Before each turn: cancellation, max_turns, budget."""
    check_cancel(state)
    if state.progress.turn >= state.params.max_turns:
        raise MaxTurnsExceeded(
            f"run {state.run_id} reached max_turns={state.params.max_turns} without a final answer",
            hint="Raise max_turns=..., or check why the model keeps calling tools "
            "(lovia show RUN_ID).",
        )
    check_budget(state)
