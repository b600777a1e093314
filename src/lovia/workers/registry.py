# pyright: reportUnnecessaryIsInstance=false
# (runtime checks of user input are deliberate: not every caller runs a type checker)
"""``AgentRegistry``: the only agents a worker runs, fixed when the worker starts.

A task names its agent; whoever can publish to the broker (or write to the Redis
stream) chooses that name. So a worker never imports or calls what a message names:
it looks the name up in the registry its operator gave it, and a name not there is
refused before anything is imported (``UnknownAgent``). The registry is built from

- a mapping ``{"support": support_agent}``: names to agents, or to the import path
  (``"myapp.agents:support"``) of an agent, or of a zero-argument function returning
  one, imported and called once, when the first task names it;
- a list of allowed import paths ``["myapp.agents:support"]``: each path is its own name.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any, cast

from .._imports import import_object
from ..agent import Agent
from ..errors import UserError

__all__ = ["AgentRegistry", "AgentsArg", "UnknownAgent"]

AgentsArg = Mapping[str, Any] | Iterable[str]
"""What a worker's ``agents=`` takes: ``{name: agent or path}`` or ``[path, ...]``."""

_SHOWN = 100
"""At most this many characters of a name a task gave are quoted in errors and the store."""


class UnknownAgent(UserError):
    """A task named an agent the worker was not started with; nothing was imported or run."""


class AgentRegistry:
    """Names to agents, checked at start-up; resolving an unknown name imports nothing."""

    __slots__ = ("_lock", "_resolved", "_sources")

    def __init__(self, agents: AgentsArg | AgentRegistry, *, owner: str) -> None:
        if isinstance(agents, AgentRegistry):
            self._sources: dict[str, Agent[Any, Any] | str] = dict(agents._sources)
        else:
            self._sources = _sources(agents, owner)
        self._resolved: dict[str, Agent[Any, Any]] = {
            name: source for name, source in self._sources.items() if isinstance(source, Agent)
        }
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        """The names tasks may give, sorted."""
        return sorted(self._sources)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._sources

    def check(self, name: Any, where: str) -> str:
        """``name`` if it is registered, else ``UnknownAgent`` (nothing imported)."""
        if not isinstance(name, str) or name not in self._sources:
            shown = repr(name)[:_SHOWN] if isinstance(name, str) else type(name).__name__
            raise UnknownAgent(
                f"no agent named {shown} on {where} (registered: {', '.join(self.names())})",
                hint="A worker runs only the agents it was started with: add it to "
                "agents={...} where the worker is built, or submit one of the names above.",
            )
        return name

    def resolve(self, name: Any, where: str) -> Agent[Any, Any]:
        """The agent registered as ``name``; an import path is imported on first use."""
        key = self.check(name, where)
        agent = self._resolved.get(key)
        if agent is not None:
            return agent
        with self._lock:
            agent = self._resolved.get(key)
            if agent is None:
                agent = self._resolved[key] = _load(key, cast("str", self._sources[key]))
            return agent


def _sources(agents: Any, owner: str) -> dict[str, Agent[Any, Any] | str]:
    """The registry's entries from ``agents=``, refused with a clear error when malformed."""
    hint = (
        f'Pass {owner}(agents={{"support": support_agent}}) or a list of import paths, '
        'e.g. agents=["myapp.agents:support"]: a worker runs only these.'
    )
    if isinstance(agents, str) or agents is None:
        raise UserError(f"{owner}(agents=...) needs a mapping or a list, got {agents!r}", hint=hint)
    if isinstance(agents, Mapping):
        pairs = list(cast("Mapping[Any, Any]", agents).items())
    elif isinstance(agents, Iterable):
        pairs = [(path, path) for path in cast("Iterable[Any]", agents)]
    else:
        raise UserError(f"{owner}(agents=...) needs a mapping or a list, got {agents!r}", hint=hint)
    if not pairs:
        raise UserError(f"{owner}(agents=...) is empty: the worker could run nothing", hint=hint)
    found: dict[str, Agent[Any, Any] | str] = {}
    for name, source in pairs:
        if not isinstance(name, str) or not name:
            raise UserError(f"{owner}(agents=...): {name!r} is not a name", hint=hint)
        if isinstance(source, str) and ":" not in source and "." not in source:
            raise UserError(f"{owner}(agents=...): {source!r} is not an import path", hint=hint)
        if not isinstance(source, Agent | str):
            raise UserError(
                f"{owner}(agents=...): {name!r} maps to a {type(source).__name__}, "
                "not an Agent or an import path",
                hint=hint,
            )
        found[name] = cast("Agent[Any, Any] | str", source)
    return found


def _load(name: str, path: str) -> Agent[Any, Any]:
    """Import the registered path; call it once when it is a factory."""
    obj = import_object(
        path, hint="The worker imports registered agents by path: the module must be importable."
    )
    if not isinstance(obj, Agent) and callable(obj):
        obj = obj()
    if not isinstance(obj, Agent):
        raise UserError(
            f"agent {name!r} ({path}) is a {type(obj).__name__}, not an Agent",
            hint="Register an Agent, or a function with no arguments returning one.",
        )
    return cast("Agent[Any, Any]", obj)
