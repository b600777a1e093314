# pyright: reportUnnecessaryIsInstance=false
# (runtime checks of user input are deliberate: not every caller runs a type checker)
"""Agents as tools: ``agent.as_tool()`` runs an agent as a child run inside a tool call.

The child run goes through the same loop as any run, linked to the parent run:

- its ``run_id`` is derived from the parent's tool-call idempotency key and it uses the
  parent's checkpointer, so a parent resuming after a crash resumes the child from its
  checkpoint (or gets its stored result) instead of starting it over;
- the parent's ``RunBudget`` covers it: before each of its model and tool calls the
  child checks the budgets of every run above it, with their usage of the moment;
- its usage is part of the parent's ``RunResult.usage`` (``child_usage`` per call);
- its ``invoke_agent`` span is a child of the parent's ``execute_tool`` span;
- cancelling the parent cancels it; ``Runner.stream(..., nested=True)`` shows its events.

A child's failure becomes an error result the parent's model can react to, except a
trip of a parent's budget, the parent's own cancellation, a nesting limit and a
configuration mistake (``UserError``): those end the parent run.

Nesting is bounded by default: a child run deeper than ``max_depth`` below its
top-level run (``DEFAULT_MAX_DEPTH``), or a run's child run beyond ``max_children``
(``DEFAULT_MAX_CHILDREN``), is not started: ``NestingLimitExceeded`` ends the run that
asked and every run above it, each recorded as failed, so a self-calling agent stops
at the limit instead of recursing until the machine gives out.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pydantic
from pydantic import BaseModel, ConfigDict, create_model

from . import events as ev
from .agent import register_tool_maker
from .context import CancelToken, Mailbox, RunContext, call_key
from .errors import (
    BudgetExceeded,
    LoviaError,
    NestingLimitExceeded,
    RunCancelled,
    ToolError,
    UserError,
)
from .result import RunResult
from .runner import DEFAULT_MAX_TURNS, Runner, RunStream
from .tools import Tool
from .usage import RunBudget

if TYPE_CHECKING:
    from ._loop.state import RunState
    from .agent import Agent

__all__ = ["DEFAULT_MAX_CHILDREN", "DEFAULT_MAX_DEPTH", "agent_tool", "child_run_id"]

DEFAULT_MAX_DEPTH = 5
"""Deepest child run below its top-level run (depth 1: a child of a top-level run)."""

DEFAULT_MAX_CHILDREN = 50
"""Most child runs one run starts over its life (agents as tools, all calls)."""

_NAMESPACE = uuid.UUID("6f1d4f0e-5a8c-4c1e-9a57-1b6f3c2d9e10")


def child_run_id(parent_run_id: str, call_id: str) -> str:
    """The ``run_id`` of the child run that call ``call_id`` of run ``parent_run_id`` starts.

    A name-based UUID of the call's unambiguous key (:func:`lovia.context.call_key`):
    the same parent and call always give the same child (resume finds it), and two
    different (parent, call) pairs never share one, whatever ``:`` their ids hold.
    """
    return uuid.uuid5(_NAMESPACE, call_key(parent_run_id, call_id)).hex


@dataclass(frozen=True, slots=True, kw_only=True)
class _AgentCall:
    """The tool function: runs the agent as a child run of the run calling it."""

    agent: Agent[Any, Any]
    input_type: type[BaseModel] | None
    output: Callable[[RunResult[Any]], Any] | None
    max_turns: int
    budget: RunBudget | None
    max_depth: int
    max_children: int

    async def __call__(self, ctx: RunContext[Any], **fields: Any) -> Any:
        from ._loop.state import current_run

        if self.input_type is not None:
            text = self.input_type.model_validate(fields).model_dump_json()
        else:
            text = str(fields["input"])
        parent = current_run.get()
        if parent is None or ctx.tool_call is None:  # called outside a run: a plain run
            result = await Runner.run(
                self.agent, text, deps=ctx.deps, max_turns=self.max_turns, budget=self.budget
            )
        else:
            result = await self._child(parent, ctx.tool_call.call_id, text)
        return self.output(result) if self.output is not None else result.output

    async def _child(self, parent: RunState, call_id: str, text: str) -> RunResult[Any]:
        from ._loop.state import ParentLink, RunParams

        run_id = child_run_id(parent.run_id, call_id)
        self._admit(parent, call_id, run_id)
        token = CancelToken()
        parent_token = parent.ctx.cancel_token

        def forward() -> None:
            token.cancel(parent_token.reason or "the parent run was cancelled")

        stream: RunStream[Any] = RunStream(
            RunParams(
                agent=self.agent,
                input=text,
                deps=parent.params.deps,
                run_id=run_id,
                checkpointer=parent.checkpointer,
                max_turns=self.max_turns,
                budget=self.budget,
                cancel_token=token,
                mailbox=Mailbox(),
                workspace=parent.params.workspace,
                approval=parent.params.approval,
                tracer_provider=parent.params.tracer_provider,
                meter_provider=parent.params.meter_provider,
                nested=parent.params.nested,
                parent=ParentLink(state=parent, call_id=call_id),
                labels=parent.params.labels,
            )
        )
        parent_token.add_listener(forward)
        stop = asyncio.Event()
        drain = asyncio.ensure_future(_drain(stream, parent, call_id, run_id, stop))
        try:
            return await asyncio.shield(drain)
        except asyncio.CancelledError:
            # the call itself was cancelled (a sibling call ended the parent run): the
            # child ends through its own cancellation, recorded and resumable, not cut
            # off; the parent no longer reads its events
            stop.set()
            token.cancel(parent_token.reason or "the parent run stopped this call")
            await asyncio.gather(drain, return_exceptions=True)
            raise
        except LoviaError as exc:
            raise _failure(parent, self.agent.name, run_id, exc) from exc
        finally:
            parent_token.remove_listener(forward)

    def _admit(self, parent: RunState, call_id: str, run_id: str) -> None:
        """Refuse a child past the depth or fan-out limit (before anything starts), else
        claim its slot among the parent's children at once (parallel calls count)."""
        from ._loop.state import EndRun

        depth = 1
        link = parent.params.parent
        while link is not None:
            depth += 1
            link = link.state.params.parent
        started = parent.child_count() + (0 if parent.has_child(call_id) else 1)
        for limit, used, allowed in (
            ("max_depth", depth, self.max_depth),
            ("max_children", started, self.max_children),
        ):
            if used > allowed:
                raise EndRun(_nesting_error(parent, self.agent.name, run_id, limit, used, allowed))
        if not parent.has_child(call_id):  # the child's live state replaces it
            parent.child_started(call_id, None)


async def _drain(
    stream: RunStream[Any], parent: RunState, call_id: str, run_id: str, stop: asyncio.Event
) -> RunResult[Any]:
    """Run the child to its end, handing its events to a ``nested=True`` parent stream."""
    async for event in stream:
        if isinstance(event, ev.RunCompleted | ev.RunFailed):
            parent.child_ended(call_id, event.usage.copy())
        if parent.runtime.child_events is not None and not stop.is_set():
            wrapped = ev.ChildRunEvent(
                **parent.base(), call_id=call_id, child_run_id=run_id, event=event
            )
            await _hand_over(parent.runtime.child_events, wrapped, stop)
    return await stream.result()


async def _hand_over(queue: asyncio.Queue[Any], item: Any, stop: asyncio.Event) -> None:
    """Put ``item``, waiting while the parent's consumer is behind (backpressure,
    nothing dropped) — until ``stop``: then the parent reads no more."""
    try:
        queue.put_nowait(item)
        return
    except asyncio.QueueFull:
        pass
    put, halt = asyncio.ensure_future(queue.put(item)), asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((put, halt), return_when=asyncio.FIRST_COMPLETED)
    finally:
        put.cancel()
        halt.cancel()


def _nesting_error(
    parent: RunState, name: str, run_id: str, limit: str, used: int, allowed: int
) -> NestingLimitExceeded:
    what = (
        f"would be {used} levels below its top-level run"
        if limit == "max_depth"
        else f"would be child run number {used} of run {parent.run_id}"
    )
    return NestingLimitExceeded(
        f"agent {name!r} (child run {run_id}) {what}: {limit}={allowed}",
        hint=f"If the nesting is meant, raise it with as_tool({limit}=...); if an agent calls "
        "itself (directly or through others), make its instructions say when to stop.",
        limit=limit,
        used=used,
    )


def _failure(parent: RunState, name: str, run_id: str, exc: LoviaError) -> Exception:
    """What the parent makes of the child's failure: an error result, or its own end."""
    from ._loop.limits import cancelled_error
    from ._loop.state import EndRun

    if isinstance(exc, BudgetExceeded) and exc.budget_run_id not in (None, run_id):
        error = BudgetExceeded(exc.message, exc.hint, limit=exc.limit, used=exc.used)
        error.budget_run_id = exc.budget_run_id
        return EndRun(error)  # a parent's budget: the parent (and its parents) stop too
    if isinstance(exc, RunCancelled) and parent.ctx.cancel_token.cancelled:
        return EndRun(cancelled_error(parent))
    if isinstance(exc, NestingLimitExceeded):  # the whole tree stops; each run its own error
        return EndRun(NestingLimitExceeded(exc.message, exc.hint, limit=exc.limit, used=exc.used))
    if isinstance(exc, UserError):  # a configuration mistake: not the model's to handle
        return EndRun(exc)
    hint = f" Hint: {exc.hint}" if exc.hint else ""
    return ToolError(f"Agent {name!r} failed ({type(exc).__name__}): {exc.message}{hint}")


def agent_tool(
    agent: Agent[Any, Any],
    name: str | None = None,
    description: str | None = None,
    *,
    input_type: type[BaseModel] | None = None,
    output: Callable[[RunResult[Any]], Any] | None = None,
    max_turns: int | None = None,
    budget: RunBudget | None = None,
    concurrency_safe: bool = False,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_children: int = DEFAULT_MAX_CHILDREN,
) -> Tool:
    """The tool behind :meth:`Agent.as_tool` (see the module docs)."""
    tool_name = name or "".join(c if c.isalnum() or c in "_-" else "_" for c in agent.name)[:64]
    if not tool_name or not all(c.isalnum() or c in "_-" for c in tool_name):
        raise UserError(
            f"invalid tool name {tool_name!r}",
            hint="Tool names may use letters, digits, '_' and '-' (1-64 characters).",
        )
    if input_type is not None and not (
        isinstance(input_type, type) and issubclass(input_type, BaseModel)
    ):
        raise UserError(
            f"as_tool(input_type=...) needs a pydantic model class, got {input_type!r}",
            hint="Leave it out for a plain text input, or pass a pydantic BaseModel subclass.",
        )
    if max_turns is not None and max_turns < 1:
        raise UserError("as_tool(max_turns=...) must be at least 1")
    for option, value, default in (
        ("max_depth", max_depth, DEFAULT_MAX_DEPTH),
        ("max_children", max_children, DEFAULT_MAX_CHILDREN),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise UserError(
                f"as_tool({option}=...) must be a whole number of at least 1, got {value!r}",
                hint=f"The default is {default}.",
            )
    if budget is not None and not isinstance(budget, RunBudget):
        raise UserError(f"as_tool(budget=...) needs a RunBudget, got {budget!r}")
    if output is not None and not callable(output):
        raise UserError(
            "as_tool(output=...) needs a function RunResult -> tool result",
            hint="e.g. output=lambda result: result.output.summary",
        )
    args_model = input_type or _text_input(tool_name)
    schema = args_model.model_json_schema()
    schema.pop("title", None)
    return Tool(
        name=tool_name,
        description=description or agent.description or f"Ask the {agent.name} agent.",
        parameters=schema,
        fn=_AgentCall(
            agent=agent,
            input_type=input_type,
            output=output,
            max_turns=max_turns or DEFAULT_MAX_TURNS,
            budget=budget,
            max_depth=max_depth,
            max_children=max_children,
        ),
        args_model=args_model,
        ctx_param="ctx",
        is_async=True,
        concurrency_safe=concurrency_safe,
        idempotent=True,  # the child run's id is stable: running the call again resumes it
        source="agent_tool",
    )


def _text_input(tool_name: str) -> type[BaseModel]:
    field = pydantic.Field(description="The request for the agent, in plain words.")
    return create_model(
        f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), input=(str, field)
    )


register_tool_maker(agent_tool)
