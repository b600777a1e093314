"""The plugin contract (see the Plugins guide).

Any object with a ``name`` and an async ``setup(ctx)`` returning a
:class:`PluginInstance` is a plugin. ``setup`` runs once per run per agent (again for a
handoff target); what it returns is merged into the loop's fixed extension points.
Plugins provide capabilities; only the loop controls flow.

State scope: per-run state is created inside ``setup`` and closed over; cross-run state
(a database, an index) lives on the plugin object, is shared by concurrent runs, and
must be safe for that.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from ..context import RunContext
from ..transcript import TranscriptEntry

if TYPE_CHECKING:
    from ..guardrails import Guardrail
    from ..hooks import AgentHooks
    from ..tools import Tool

__all__ = ["InjectorResult", "Plugin", "PluginInstance", "ViewInjector"]

InjectorResult: TypeAlias = "str | TranscriptEntry | Sequence[str | TranscriptEntry] | None"
"""What a view injector returns (a ``str`` is one reminder: a user message)."""

ViewInjector = Callable[
    [RunContext[Any]],
    "InjectorResult | Awaitable[InjectorResult]",
]
"""Called every turn after the context strategy; returned entries go into that view only.

It returns None, a ``str`` (one reminder: a user message), a TranscriptEntry, or a list
of those. Anything else, or an exception, is logged with the injector's and plugin's
names and skipped for that turn: an injector never aborts a run."""


@dataclass(frozen=True, kw_only=True)
class PluginInstance:
    """What one plugin contributes to one run of one agent."""

    tools: Sequence[Tool] = ()
    """Merged into the agent's tools (one namespace; a clash is an error)."""
    instructions: str | None = None
    """Appended to the system prompt, rendered once at run start."""
    view_injectors: Sequence[ViewInjector] = ()
    """Called each turn; entries go into that turn's view only, never persisted."""
    hooks: AgentHooks | None = None
    """Receive run events together with the agent's own hooks."""
    input_guardrails: Sequence[Guardrail | Callable[..., Any]] = ()
    output_guardrails: Sequence[Guardrail | Callable[..., Any]] = ()
    aclose: Callable[[], Awaitable[Any] | Any] | None = field(default=None, repr=False)
    """Called at run end, awaited when it returns an awaitable, so ``conn.close`` works
    whether it is sync or async (plugins close in LIFO order, best effort)."""


@runtime_checkable
class Plugin(Protocol):
    """Anything with a ``name`` and ``async setup(ctx) -> PluginInstance``."""

    @property
    def name(self) -> str: ...

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance: ...
