# pyright: reportUnnecessaryIsInstance=false
# (runtime checks of user input are deliberate: not every caller runs a type checker)
"""``Agent``: immutable configuration of an agent. It holds no conversation state.

The same instance can serve any number of concurrent runs. ``agent.clone(**changes)``
derives a new one; ``@agent.instruction`` registering a dynamic instruction fragment is
the only mutation allowed.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Generator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Generic, Self, TypeAlias, cast

from typing_extensions import TypeVar

from .errors import UserError
from .guardrails import Guardrail
from .hooks import AgentHooks
from .model import ModelSettings, Provider
from .tools import Approver, Tool, tool

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .context import RunContext
    from .plugins.base import Plugin
    from .result import RunResult
    from .usage import RunBudget
    from .view.base import ContextStrategy

__all__ = ["Agent", "Handoff", "InstructionFn", "model_of"]

# Inferred from ``Agent(deps_type=..., output_type=...)``; without them an agent is
# ``Agent[None, str]``: no dependencies, text output.
DepsT = TypeVar("DepsT", default=None)
OutputT = TypeVar("OutputT", default=str)

InstructionFn = Callable[["RunContext[Any]"], "str | None | Awaitable[str | None]"]
"""A dynamic instruction fragment: ``fn(ctx) -> str | None``, sync or async."""


HandoffRef: TypeAlias = "Agent[Any, Any] | Handoff | Callable[[], Agent[Any, Any] | Handoff]"
"""An entry of ``handoffs``: an agent, a ``Handoff`` with options, or a function returning
either, called when a run starts, so two agents can hand off to each other
(``handoffs=[lambda: triage]`` names an agent defined further down)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class Handoff:
    """A handoff target with options; a bare ``Agent`` in ``handoffs`` works too."""

    agent: Agent[Any, Any]
    description: str | None = None
    """Shown to the model in the handoff tool's description."""
    tool_name: str | None = None
    """Defaults to ``transfer_to_<agent name>``."""
    input_filter: Callable[[Sequence[Any]], Sequence[Any]] | None = None
    """Filters the view entries the target agent sees (the transcript is unchanged)."""

    @property
    def name(self) -> str:
        if self.tool_name:
            return self.tool_name
        safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in self.agent.name)
        return f"transfer_to_{safe}"[:64]


@dataclass(frozen=True, kw_only=True, eq=False)
class Agent(Generic[DepsT, OutputT]):
    """Declarative configuration: name, instructions, model, tools, plugins and policies.

    ``Agent(output_type=City, deps_type=Shop)`` is an ``Agent[Shop, City]`` to a type
    checker: ``Runner.run`` returns a ``RunResult[City]`` whose ``output`` is a ``City``.
    """

    name: str
    """Identifies the agent in transcripts, spans and metrics (keep it stable)."""
    instructions: str = ""
    """Static system prompt text."""
    model: str | Provider | None = None
    """``"openai:gpt-4.1-mini"``, ``"anthropic:claude-sonnet-4-5"``… or a Provider."""
    description: str = ""
    """What this agent does (used when another agent hands off to it)."""
    tools: Sequence[Tool] = ()
    """Tools: ``@tool`` functions, or plain functions (schema from the signature and
    docstring; use ``@tool(...)`` for options such as ``concurrency_safe``)."""
    plugins: Sequence[Plugin] = ()
    handoffs: Sequence[HandoffRef] = ()
    """Agents (or ``Handoff`` options) this agent may transfer the conversation to; a
    function returning an agent is resolved when a run starts (cycles)."""
    output_type: Any = str
    """``str`` (default), a pydantic model, dataclass, TypedDict, union or scalar."""
    deps_type: Any = None
    """The type of ``Runner.run(..., deps=...)``: ``RunContext[DepsT].deps`` in tools and
    instructions. A class is checked at run start; for type checkers it sets ``DepsT``."""
    output_repairs: int = 1
    """Repair turns after an invalid structured output (0 = fail at once)."""
    input_guardrails: Sequence[Guardrail | Callable[..., Any]] = ()
    output_guardrails: Sequence[Guardrail | Callable[..., Any]] = ()
    hooks: AgentHooks | None = None
    context: ContextStrategy[Any] | None = None
    """How the view is built each turn (default: ``Compaction()``)."""
    model_settings: ModelSettings | None = None
    approval: Approver | None = None
    """Approval policy ``(ctx, call) -> bool | str`` for tools that require approval."""
    max_parallel_tools: int = 8
    """Concurrency-safe tools of one turn run in parallel, at most this many at once."""
    max_tool_calls_per_turn: int = 128
    """An answer asking for more tool calls than this ends the run with
    :class:`~lovia.errors.TooManyToolCalls` before any of them runs."""
    _fragments: list[InstructionFn] = field(default_factory=list[InstructionFn], repr=False)

    if TYPE_CHECKING:
        # What a type checker sees of the generated __init__: the type parameters come
        # from output_type= and deps_type=, and tools= takes plain functions too (they
        # are made tools in __post_init__). tests/core/test_agent_typing_runtime.py
        # keeps this list equal to the fields.
        def __init__(
            self,
            *,
            name: str,
            instructions: str = "",
            model: str | Provider | None = None,
            description: str = "",
            tools: Sequence[Tool | Callable[..., Any]] = (),
            plugins: Sequence[Plugin] = (),
            handoffs: Sequence[HandoffRef] = (),
            output_type: type[OutputT] = str,  # pyright: ignore[reportArgumentType] -- str is OutputT's default
            deps_type: type[DepsT] | None = None,
            output_repairs: int = 1,
            input_guardrails: Sequence[Guardrail | Callable[..., Any]] = (),
            output_guardrails: Sequence[Guardrail | Callable[..., Any]] = (),
            hooks: AgentHooks | None = None,
            context: ContextStrategy[Any] | None = None,
            model_settings: ModelSettings | None = None,
            approval: Approver | None = None,
            max_parallel_tools: int = 8,
            max_tool_calls_per_turn: int = 128,
        ) -> None: ...

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        if args:
            raise UserError(
                "Agent takes keyword arguments only",
                hint='Write Agent(name="...", instructions="...", model="...").',
            )
        known = {f.name for f in fields(cls)} - {"_fragments"}
        for key in kwargs:
            if key not in known:
                import difflib  # only for this error's hint

                close = difflib.get_close_matches(key, sorted(known), n=1)
                hint = f"Did you mean {close[0]!r}?" if close else f"Known: {sorted(known)}."
                raise UserError(f"Agent got an unknown option {key!r}", hint=hint)
        return super().__new__(cls)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise UserError("Agent needs a non-empty name", hint='Agent(name="support", ...)')
        object.__setattr__(self, "tools", tuple(_as_tool(self.name, t) for t in self.tools))
        object.__setattr__(self, "plugins", tuple(self.plugins))
        for h in self.handoffs:
            if not (isinstance(h, Agent | Handoff) or callable(h)):
                raise UserError(
                    f"agent {self.name!r}: handoff {h!r} is not an agent",
                    hint="handoffs=[other_agent, Handoff(agent=...), lambda: later_agent].",
                )
        object.__setattr__(self, "handoffs", tuple(self.handoffs))
        if self.output_repairs < 0:
            raise UserError("output_repairs must be >= 0")
        if self.max_tool_calls_per_turn < 1:
            raise UserError(
                f"max_tool_calls_per_turn must be >= 1, got {self.max_tool_calls_per_turn}",
                hint="The default, 128, bounds what one answer can make the agent do.",
            )

    def clone(self, **changes: Any) -> Agent[DepsT, OutputT]:
        """A new agent with ``changes`` applied; dynamic instructions are carried over."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_fragments"}
        values.update(changes)
        new: Agent[DepsT, OutputT] = type(self)(**values)
        new._fragments.extend(self._fragments)
        return new

    def instruction(self, fn: InstructionFn) -> InstructionFn:
        """Register a dynamic instruction fragment, rendered at run start, in order."""
        if not callable(fn):
            raise UserError("@agent.instruction needs a function (ctx) -> str | None")
        self._fragments.append(fn)
        return fn

    @property
    def instruction_fragments(self) -> tuple[InstructionFn, ...]:
        return tuple(self._fragments)

    @contextmanager
    def override(self, *, model: str | Provider) -> Generator[None]:
        """Runs of this agent started inside the block use ``model`` instead (tests).

        The agent itself is unchanged: the override lives in the current context
        (a ``ContextVar``), so concurrent tests and other tasks are not affected, and it
        ends with the block, even when the block raises.
        """
        token = _OVERRIDES.set(((self, model), *_OVERRIDES.get()))
        try:
            yield
        finally:
            _OVERRIDES.reset(token)

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        input_type: type[BaseModel] | None = None,
        output: Callable[[RunResult[Any]], Any] | None = None,
        max_turns: int | None = None,
        budget: RunBudget | None = None,
        concurrency_safe: bool = False,
        max_depth: int | None = None,
        max_children: int | None = None,
    ) -> Tool:
        """A tool that runs this agent as a child run of the run calling it.

        The model passes ``input`` (a string), or the fields of ``input_type`` (a pydantic
        model, sent to this agent as JSON). The tool result is the child's final output
        (a structured output as JSON), or ``output(result)`` when given. The child is
        linked, priced, traced and resumed with its parent (see :mod:`lovia.agent_tool`);
        ``max_turns`` and ``budget`` limit the child alone (the parent's budget applies
        too). ``concurrency_safe=True`` lets several calls of one turn run in parallel.
        ``max_depth`` (default 5) bounds how deep below its top-level run the child may
        be, ``max_children`` (default 50) how many child runs the calling run may start:
        past either, ``NestingLimitExceeded`` ends the calling run and those above it.
        """
        return _agent_tool_maker()(
            self,
            name,
            description,
            input_type=input_type,
            output=output,
            max_turns=max_turns,
            budget=budget,
            concurrency_safe=concurrency_safe,
            **{
                k: v
                for k, v in (("max_depth", max_depth), ("max_children", max_children))
                if v is not None
            },
        )

    def handoff_targets(self) -> tuple[Handoff, ...]:
        """The handoffs as ``Handoff`` objects (lazy references called now)."""
        return tuple(_resolve_handoff(self.name, h) for h in self.handoffs)


def _resolve_handoff(agent: str, ref: HandoffRef) -> Handoff:
    if isinstance(ref, Handoff):
        return ref
    if isinstance(ref, Agent):
        return Handoff(agent=cast("Agent[Any, Any]", ref))
    target = ref()  # a lazy reference: any callable, so its result is checked
    if isinstance(target, Handoff):
        return target
    if isinstance(target, Agent):
        return Handoff(agent=target)
    raise UserError(
        f"agent {agent!r}: a handoff reference returned {target!r}, not an Agent",
        hint="A lazy handoff is a function of no arguments returning an Agent or a "
        "Handoff: handoffs=[lambda: billing].",
    )


_OVERRIDES: ContextVar[tuple[tuple[Agent[Any, Any], str | Provider], ...]] = ContextVar(
    "lovia_model_overrides", default=()
)
"""``Agent.override`` blocks open in this context, innermost first."""


def model_of(agent: Agent[Any, Any]) -> str | Provider | None:
    """The model a run of ``agent`` uses here: an ``override`` in force, else ``agent.model``."""
    for overridden, model in _OVERRIDES.get():
        if overridden is agent:
            return model
    return agent.model


def _as_tool(agent: str, value: Any) -> Tool:
    if isinstance(value, Tool):
        return value
    if callable(value) and not isinstance(value, type):
        return tool(value)
    raise UserError(
        f"agent {agent!r}: {value!r} is not a tool",
        hint="Pass functions (plain or decorated with @tool) in tools=[...].",
    )


_TOOL_MAKER: list[Callable[..., Tool]] = []
"""The builder behind :meth:`Agent.as_tool`. It runs the engine, which sits above this
module, so :mod:`lovia.agent_tool` registers it on import (``import lovia`` imports it)."""


def register_tool_maker(maker: Callable[..., Tool]) -> None:
    """Set the builder :meth:`Agent.as_tool` calls (done once, by :mod:`lovia.agent_tool`)."""
    _TOOL_MAKER[:] = [maker]


def _agent_tool_maker() -> Callable[..., Tool]:
    if not _TOOL_MAKER:  # only when lovia.agent was loaded without the lovia package
        raise UserError(
            "Agent.as_tool() needs lovia.agent_tool, which is not imported",
            hint="Import lovia (import lovia) before calling as_tool().",
        )
    return _TOOL_MAKER[0]


async def render_fragments(agent: Agent[Any, Any], ctx: RunContext[Any]) -> list[str]:
    """Render the agent's dynamic instruction fragments, skipping ``None``/empty."""
    out: list[str] = []
    for fn in agent.instruction_fragments:
        value = fn(ctx)
        if inspect.isawaitable(value):
            value = await value
        if value:
            out.append(str(value))
    return out
