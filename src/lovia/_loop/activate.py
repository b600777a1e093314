# pyright: reportUnnecessaryIsInstance=false
# (runtime checks of user input are deliberate: not every caller runs a type checker)
"""Phase: make an agent the active one (at run start and after each handoff).

Resolves the provider and output mode, sets up the agent's plugins (names checked for
uniqueness before any ``setup``), merges tools from agent + plugins + workspace +
handoffs (a name clash is a ``UserError`` naming both sources) and renders the system
prompt in the seed's order: agent instructions (static, dynamic fragments,
``extra_instructions``), workspace instructions, plugin instructions, and the
structured-output contract when the provider lacks native JSON schema.

The prompt is rendered once per run (seed): a resumed run sets its agents up again
(their tools, hooks and injectors are per-run objects) but gives each agent the system
prompt its ``SystemEntry`` recorded, so a time- or counter-based instruction cannot make
the resumed views disagree with the transcript. Only an agent first activated after the
resume (a new handoff target) is rendered, and its new ``SystemEntry`` records that.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from .. import events as ev
from ..agent import Agent, Handoff, render_fragments
from ..errors import UserError
from ..guardrails import as_guardrail
from ..model import ModelSettings, Provider
from ..output import output_mode
from ..plugins.base import Plugin, PluginInstance
from ..tools import Tool, tool
from ..transcript import SystemEntry, clean_text
from .state import ActiveAgent, RunState

__all__ = ["activate", "resolve_provider"]


def resolve_provider(agent: Agent[Any, Any]) -> Provider:
    model = agent.model
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

    async def handoff() -> str:
        return f"Transferred to {target.name}."

    return tool(name=h.name, description=desc)(handoff)


async def _setup_plugin(
    state: RunState, plugin: Plugin, active: ActiveAgent, texts: dict[str, str]
) -> AsyncIterator[ev.Event]:
    t0 = time.perf_counter()
    try:
        instance = await plugin.setup(state.ctx)
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
        state.closers.append((plugin.name, instance.aclose))
    _merge_instance(active, plugin.name, instance)
    if instance.instructions:
        texts[plugin.name] = instance.instructions
    yield ev.PluginSetup(
        **state.base(),
        plugin=plugin.name,
        duration_s=time.perf_counter() - t0,
    )


def _merge_instance(active: ActiveAgent, name: str, inst: PluginInstance) -> None:
    source = "workspace" if name == "workspace" else f"plugin {name!r}"
    for t in inst.tools:
        _add_tool(active.tools, t, source)
    active.injectors.extend((name, inj) for inj in inst.view_injectors)
    if inst.hooks is not None:
        active.hooks.append((name, inst.hooks))
    active.input_guardrails.extend(as_guardrail(g) for g in inst.input_guardrails)
    active.output_guardrails.extend(as_guardrail(g) for g in inst.output_guardrails)


async def activate(state: RunState, agent: Agent[Any, Any]) -> AsyncIterator[ev.Event]:
    """Resolve ``agent`` into ``state.active`` (emitting a PluginSetup per plugin)."""
    again = state.activated.get(id(agent))
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
    active = ActiveAgent(agent=agent, provider=provider)
    if agent.hooks is not None:
        active.hooks.append((None, agent.hooks))
    for t in agent.tools:
        _add_tool(active.tools, t, "agent")
    state.ctx.agent = agent
    state.active = active
    instructions: dict[str, str] = {}
    live = state.ctx.entries
    if not state.activated:  # seed: at run start, setup() sees no entries
        state.ctx.entries = ()
    try:
        for plugin in plugins:
            async for event in _setup_plugin(state, plugin, active, instructions):
                yield event
    finally:
        state.ctx.entries = live
    for h in agent.handoff_targets():
        active.handoffs[h.name] = h
        _add_tool(active.tools, _handoff_tool(h), "handoff")
    active.specs = tuple(t.spec for t in active.tools.values())
    active.input_guardrails[:0] = [as_guardrail(g) for g in agent.input_guardrails]
    active.output_guardrails[:0] = [as_guardrail(g) for g in agent.output_guardrails]
    active.output = output_mode(agent.output_type, native=provider.profile.native_json_schema)
    active.settings = (agent.model_settings or ModelSettings()).merged(state.params.settings)
    recorded = _recorded_system(state, agent)
    if recorded is None:
        active.system = await _system_prompt(state, agent, plugins, instructions)
    else:
        active.system = recorded
    _set_strategy(active, agent)
    state.activated[id(agent)] = active


def _recorded_system(state: RunState, agent: Agent[Any, Any]) -> str | None:
    """The system prompt this run already recorded for ``agent`` (resume), if any."""
    for entry in reversed(state.new_entries()):
        if isinstance(entry, SystemEntry) and entry.agent == agent.name:
            return entry.content
    return None


def _set_strategy(active: ActiveAgent, agent: Agent[Any, Any]) -> None:
    strategy = agent.context
    if strategy is None:
        from ..view import default_strategy

        strategy = default_strategy()
    active.strategy = strategy
    active.strategy_state = strategy.new_state()


async def _system_prompt(
    state: RunState, agent: Agent[Any, Any], plugins: list[Plugin], plugin_text: dict[str, str]
) -> str:
    parts: list[str] = []
    if agent.instructions:
        parts.append(agent.instructions)
    parts.extend(await render_fragments(agent, state.ctx))
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
