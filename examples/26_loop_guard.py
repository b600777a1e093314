"""A plugin without tools: a hook (observe) plus a view injector (remind).

``LoopGuard`` is a plugin with a hook. When the model retries the same failing
tool call ``threshold`` times in a row, the next turn's view carries one
``<system-reminder>`` telling it to change approach. The reminder is a view entry: it
never reaches the transcript or the session.

Offline by default (a scripted model); set ``LOVIA_MODEL`` (e.g. ``openai:gpt-4.1-mini``)
to try it against a real model.

Run: python examples/26_loop_guard.py
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from typing import Any

from lovia import Agent, AgentHooks, PluginInstance, RunContext, Runner, ToolError, events, tool
from lovia.testing import ScriptedModel, call
from lovia.transcript import InputEntry, TranscriptEntry


@dataclass
class LoopGuard:
    """Nudge the model when it keeps retrying the same failing tool call."""

    threshold: int = 3
    name: str = "loop_guard"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        # Per-run state, closed over by the hook and the injector below.
        last: str | None = None  # signature of the latest failed call
        streak = 0
        pending: str | None = None  # a reminder owed to the next turn

        hooks = AgentHooks()

        @hooks.on(events.ToolCallCompleted)
        def track(ev: events.ToolCallCompleted, ctx: RunContext[Any]) -> None:
            nonlocal last, streak, pending
            if not ev.is_error:  # any success ends the streak
                last, streak, pending = None, 0, None
                return
            try:
                args = json.dumps(json.loads(ev.call.arguments), sort_keys=True)
            except json.JSONDecodeError:
                args = ev.call.arguments
            sig = f"{ev.call.name}:{args}"
            streak = streak + 1 if sig == last else 1
            last = sig
            if streak == self.threshold:  # == not >=: once per streak
                pending = (
                    f"You called `{ev.call.name}` with identical arguments "
                    f"{streak} times and it failed each time. Change approach "
                    "instead of retrying the same call."
                )

        @hooks.on(events.MessageCompleted)
        def delivered(ev: events.MessageCompleted, ctx: RunContext[Any]) -> None:
            nonlocal pending
            pending = None  # the model has answered a view that carried it

        def remind(ctx: RunContext[Any]) -> list[TranscriptEntry] | None:
            # Not cleared here: an overflow retry rebuilds the view and calls
            # the injector again, and must still see the reminder.
            if pending is None:
                return None
            content = f"<system-reminder>\n{pending}\n</system-reminder>"
            return [InputEntry(role="user", content=content)]

        return PluginInstance(hooks=hooks, view_injectors=[remind])


@tool
async def deploy(service: str) -> str:
    """Deploy a service (this one is always down)."""
    raise ToolError(f"{service}: connection refused")


async def main() -> None:
    retry = call("deploy", service="api")
    model = os.environ.get("LOVIA_MODEL") or ScriptedModel(
        [retry, retry, retry, "Deploy keeps failing; I'll check the service status first."]
    )
    agent = Agent(name="builder", model=model, tools=[deploy], plugins=[LoopGuard()])
    result = await Runner.run(agent, "Deploy the api service.")
    print(result.output)
    if isinstance(model, ScriptedModel):
        last_view = model.requests[-1].messages[-1]
        print("4th view ends with:", getattr(last_view, "content", "")[:60], "…")


if __name__ == "__main__":
    asyncio.run(main())
