# pyright: reportUnnecessaryIsInstance=false
# (runtime checks of user input are deliberate: not every caller runs a type checker)
"""Phase: make an agent the active one (at run start and after each handoff).

Resolves the provider and output mode, sets up the agent's plugins (names checked for
uniqueness before any ``setup``), merges tools from agent + plugins + workspace +
handoffs (a name clash is a ``UserError`` naming both sources) and renders the system
prompt in a fixed order: agent instructions (static, dynamic fragments,
``extra_instructions``), workspace instructions, plugin instructions, and the
structured-output contract when the provider lacks native JSON schema.

What is the same in every run of an agent (its own tools' and handoff tools' specs,
the handoff tools, the output mode, the default settings and strategy) is built once
per agent and shared by its runs, so thousands of runs in flight keep one copy; each run
still gets its own tools dict (a run may add the recall tool) and strategy state.

The prompt is rendered once per run: a resumed run sets its agents up again
(their tools, hooks and injectors are per-run objects) but gives each agent the system
prompt its ``SystemEntry`` recorded, so a time- or counter-based instruction cannot make
the resumed views disagree with the transcript. Only an agent first activated after the
resume (a new handoff target) is rendered, and its new ``SystemEntry`` records that.
"""

from __future__ import annotations

import functools
import time
import weakref
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import events as ev
from ..agent import Agent, Handoff, model_of, render_fragments
from ..errors import UserError
from ..guardrails import Guardrail, as_guardrail
from ..hooks import AgentHooks
from ..model import ModelSettings, Provider, ToolSpec
from ..output import OutputMode, output_mode
from ..plugins.base import Plugin, PluginInstance, ViewInjector
from ..tools import Tool, tool
from ..transcript import SystemEntry, clean_text
from ..view.base import ContextStrategy
from .state import ActiveAgent, RunState

__all__ = ["activate", "resolve_provider"]


def resolve_provider(agent: Agent[Any, Any]) -> Provider:
    model = model_of(agent)  # an Agent.override() block in force, else agent.model
    if model is None:
        raise UserError(
            f"agent {agent.name!r} has no model",
            hint='Pass model="openai:gpt-4.1-mini" (or a Provider object) to Agent(...).',
        )
    if isinstance(model, str):
        from ..providers.registry import resolve_model

        return resolve_model(model)
    return model


def _check_plugin_names(agent: Agent[Any, Any], plugins: list[Plugin]) -> None:
    seen: set[str] = set()
    for plugin in plugins:
        name = getattr(plugin, "name", None)
        if not isinstance(name, str) or not name:
            raise UserError(
                f"agent {agent.name!r}: plugin {plugin!r} has no name",
                hint="A plugin needs a `name: str` attribute and `async setup(ctx)`.",
            )
        if not callable(getattr(plugin, "setup", None)):
            raise UserError(f"plugin {name!r} has no setup(ctx) method")
        if name in seen:
            raise UserError(
                f"agent {agent.name!r} has two plugins named {name!r}",
                hint="Plugin names must be unique per agent; pass name=... to one of them.",
            )
        seen.add(name)


def _add_tool(tools: dict[str, Tool], t: Tool, source: str) -> None:
    existing = tools.get(t.name)
    if existing is not None:
        raise UserError(
            f"tool name {t.name!r} is defined twice: by {existing.source} and by {source}",
            hint="Tool names share one namespace; rename one (e.g. @tool(name=...)).",
        )
    tools[t.name] = t if t.source == source else t.with_source(source)


def _handoff_tool(h: Handoff) -> Tool:
    target = h.agent
    desc = h.description or (
        f"Hand the conversation over to the agent {target.name!r}"
        + (f": {target.description}" if target.description else ".")
    )
    reply = f"Transferred to {target.name}."  # a string, not the agent: no cycle via a cache

    async def handoff() -> str:
        return reply

    return tool(name=h.name, description=desc)(handoff)


_NO_SETTINGS = ModelSettings()


@dataclass(slots=True, kw_only=True)
class _Shared:
    """What activating one agent yields in every run, built once and shared by its runs.

    Holds no agent (only tools, specs, strings and output modes), so the weak cache
    below frees it with its agent even when agents hand off to each other.
    """

    key: tuple[int, ...]
    """``id`` of the agent fields it was built from (a replaced field rebuilds it)."""
    tools: dict[str, Tool]
    """The agent's tools, then its handoff tools: copied into each run's own dict."""
    specs: Mapping[str, ToolSpec]
    """Spec of each tool in ``tools``, by name."""
    all_specs: tuple[ToolSpec, ...]
    outputs: dict[bool, OutputMode] = field(default_factory=dict[bool, OutputMode])
    """Output mode by ``native`` (the provider's JSON-schema support)."""
    system: str = ""
    """The last system prompt rendered: an equal one is replaced by it (one copy)."""


_SHARED: weakref.WeakKeyDictionary[Agent[Any, Any], _Shared] = weakref.WeakKeyDictionary()


def _shared(agent: Agent[Any, Any]) -> _Shared:
    """The shared part of ``agent``'s activation (a name clash raises ``UserError``)."""
    key = (id(agent.tools), id(agent.handoffs))
    shared = _SHARED.get(agent)
    if shared is not None and shared.key == key:
        return shared
    tools: dict[str, Tool] = {}
    for t in agent.tools:
        _add_tool(tools, t, "agent")
    for h in agent.handoff_targets():
        _add_tool(tools, _handoff_tool(h), "handoff")
    specs = {name: t.spec for name, t in tools.items()}
    shared = _Shared(key=key, tools=tools, specs=specs, all_specs=tuple(specs.values()))
    _SHARED[agent] = shared
    return shared


def _output(shared: _Shared, agent: Agent[Any, Any], native: bool) -> OutputMode:
    mode = shared.outputs.get(native)
    if mode is None:
        mode = shared.outputs[native] = output_mode(agent.output_type, native=native)
    return mode


def _strategy(agent: Agent[Any, Any]) -> ContextStrategy[Any]:
    return agent.context if agent.context is not None else _default_strategy()


@functools.cache
def _default_strategy() -> ContextStrategy[Any]:
    """The ``Compaction()`` of agents that set no ``context`` (frozen: one for all runs)."""
    from ..view import default_strategy

    return default_strategy()


async def _setup_plugin(
    state: RunState, plugin: Plugin, merged: _Merged, texts: dict[str, str]
) -> AsyncIterator[ev.Event]:
    t0 = time.perf_counter()
    watch = state.runtime.watch
    assert watch is not None
    try:
        instance = await watch.wait(plugin.setup(state.ctx))  # a cancel interrupts it
    except Exception as exc:
        yield ev.PluginSetup(
            **state.base(),
            plugin=plugin.name,
            duration_s=time.perf_counter() - t0,
            error=exc,
        )
        raise
    if not isinstance(instance, PluginInstance):
        raise UserError(
            f"plugin {plugin.name!r}: setup() returned {instance!r}",
            hint="setup(ctx) must return a PluginInstance.",
        )
    if instance.aclose is not None:
        state.add_closer(plugin.name, instance.aclose)
    merged.add(plugin.name, instance)
    if instance.instructions:
        texts[plugin.name] = instance.instructions
    yield ev.PluginSetup(
        **state.base(),
        plugin=plugin.name,
        duration_s=time.perf_counter() - t0,
    )


@dataclass(slots=True)
class _Merged:
    """Plugin contributions gathered while the plugins are set up (lists, then tuples)."""

    tools: dict[str, Tool]
    injectors: list[tuple[str, ViewInjector]] = field(
        default_factory=list[tuple[str, ViewInjector]]
    )
    hooks: list[tuple[str | None, AgentHooks]] = field(
        default_factory=list[tuple[str | None, AgentHooks]]
    )
    input_guardrails: list[Guardrail] = field(default_factory=list[Guardrail])
    output_guardrails: list[Guardrail] = field(default_factory=list[Guardrail])

    def add(self, name: str, inst: PluginInstance) -> None:
        source = "workspace" if name == "workspace" else f"plugin {name!r}"
        for t in inst.tools:
            _add_tool(self.tools, t, source)
        self.injectors.extend((name, inj) for inj in inst.view_injectors)
        if inst.hooks is not None:
            self.hooks.append((name, inst.hooks))
        self.input_guardrails.extend(as_guardrail(g) for g in inst.input_guardrails)
        self.output_guardrails.extend(as_guardrail(g) for g in inst.output_guardrails)


async def activate(state: RunState, agent: Agent[Any, Any]) -> AsyncIterator[ev.Event]:
    """Resolve ``agent`` into ``state.active`` (emitting a PluginSetup per plugin)."""
    again = state.runtime.activated.get(id(agent))
    if again is not None:  # back to an agent set up earlier in this run
        state.active = again
        state.ctx.agent = agent
        return
    provider = resolve_provider(agent)
    plugins: list[Plugin] = list(agent.plugins)
    workspace = state.params.workspace
    if workspace is not None and callable(getattr(workspace, "setup", None)):
        plugins.insert(0, workspace)
    _check_plugin_names(agent, plugins)
    shared = _shared(agent)
    active = ActiveAgent(agent=agent, provider=provider)
    state.ctx.agent = agent
    state.active = active
    instructions: dict[str, str] = {}
    if plugins:
        async for event in _setup_plugins(state, agent, plugins, shared, instructions):
            yield event
    else:
        active.tools = dict(shared.tools)
        active.specs = shared.all_specs
        if agent.hooks:  # an AgentHooks without handlers sees nothing: not a reader
            active.hooks = ((None, agent.hooks),)
        active.input_guardrails = tuple(as_guardrail(g) for g in agent.input_guardrails)
        active.output_guardrails = tuple(as_guardrail(g) for g in agent.output_guardrails)
    if agent.handoffs:
        active.handoffs = {h.name: h for h in agent.handoff_targets()}
    active.output = _output(shared, agent, provider.profile.native_json_schema)
    base = agent.model_settings or _NO_SETTINGS
    active.settings = base.merged(state.params.settings)
    recorded = _recorded_system(state, agent)
    if recorded is None:
        system = await _system_prompt(state, agent, plugins, instructions)
        if system != shared.system:
            shared.system = system
        active.system = shared.system  # equal prompts: one string for all runs
    else:
        active.system = recorded
    active.strategy = strategy = _strategy(agent)
    active.strategy_state = strategy.new_state()
    state.runtime.activated[id(agent)] = active


async def _setup_plugins(
    state: RunState,
    agent: Agent[Any, Any],
    plugins: list[Plugin],
    shared: _Shared,
    instructions: dict[str, str],
) -> AsyncIterator[ev.Event]:
    """Set the plugins up (in order) and merge their tools, hooks and guardrails."""
    active = state.active
    assert active is not None
    merged = _Merged({n: t for n, t in shared.tools.items() if t.source == "agent"})
    if agent.hooks:
        merged.hooks.append((None, agent.hooks))
    live = state.ctx.entries
    if not state.runtime.activated:  # seed: at run start, setup() sees no entries
        state.ctx.entries = ()
    try:
        for plugin in plugins:
            async for event in _setup_plugin(state, plugin, merged, instructions):
                yield event
    finally:
        state.ctx.entries = live
    tools = merged.tools
    for t in shared.tools.values():
        if t.source == "handoff":
            _add_tool(tools, t, "handoff")
    active.tools = tools
    active.specs = tuple(
        shared.specs[n] if shared.tools.get(n) is t else t.spec for n, t in tools.items()
    )
    active.injectors = tuple(merged.injectors)
    active.hooks = tuple(merged.hooks)
    active.input_guardrails = (
        *(as_guardrail(g) for g in agent.input_guardrails),
        *merged.input_guardrails,
    )
    active.output_guardrails = (
        *(as_guardrail(g) for g in agent.output_guardrails),
        *merged.output_guardrails,
    )


def _recorded_system(state: RunState, agent: Agent[Any, Any]) -> str | None:
    """The system prompt this run already recorded for ``agent`` (resume), if any."""
    for entry in reversed(state.new_entries()):
        if isinstance(entry, SystemEntry) and entry.agent == agent.name:
            return entry.content
    return None


async def _system_prompt(
    state: RunState, agent: Agent[Any, Any], plugins: list[Plugin], plugin_text: dict[str, str]
) -> str:
    parts: list[str] = []
    if agent.instructions:
        parts.append(agent.instructions)
    if agent.instruction_fragments:  # user code: a cancel or the deadline interrupts it
        assert state.runtime.watch is not None
        parts.extend(await state.runtime.watch.wait(render_fragments(agent, state.ctx)))
    if state.params.extra_instructions:
        parts.append(state.params.extra_instructions)
    for plugin in plugins:
        text = plugin_text.get(plugin.name)
        if text:
            parts.append(text)
    assert state.active is not None
    output = state.active.output
    contract = output.contract() if output is not None else None
    if contract:
        parts.append(contract)
    return clean_text("\n\n".join(p.strip() for p in parts if p.strip()))
