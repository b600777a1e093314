"""A custom stateful plugin: a cross-session glossary.

``GlossaryPlugin`` keeps terms across sessions. Its store is
cross-run state: it lives on the plugin object, is shared by every run (so it must be
safe for concurrent use) and is owned by whoever created it — the plugin never closes
it. Here the store is a dict guarded by an ``asyncio.Lock``; two runs share it.

Offline by default (a scripted model); set ``LOVIA_MODEL`` to use a real model.

Run: python examples/25_custom_plugin.py
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Protocol

from lovia import Agent, PluginInstance, RunContext, Runner, tool
from lovia.testing import ScriptedModel, call


class Glossary(Protocol):
    """Your shared backend: a DB, a file or an in-memory dict."""

    async def define(self, term: str, meaning: str) -> None: ...
    async def lookup(self, term: str) -> str | None: ...


@dataclass
class GlossaryPlugin:
    """A cross-session glossary the agent can read and write."""

    store: Glossary  # long-lived, shared by all runs
    name: str = "glossary"

    async def setup(self, ctx: RunContext) -> PluginInstance:
        store = self.store

        @tool
        async def define(term: str, meaning: str) -> str:
            """Record what a domain term means, for this and later sessions."""
            await store.define(term, meaning)
            return f"Recorded: {term}."

        @tool
        async def lookup(term: str) -> str:
            """Look up a domain term defined earlier."""
            return await store.lookup(term) or f"No definition for {term!r}."

        return PluginInstance(
            tools=[define, lookup],
            instructions="When the user explains a domain term, record it with `define`; "
            "before asking the user to explain one again, `lookup` it first.",
        )


class MyGlossary:
    """An in-memory Glossary, safe for concurrent runs (one lock around the dict)."""

    def __init__(self) -> None:
        self._terms: dict[str, str] = {}
        self._lock = asyncio.Lock()

    async def define(self, term: str, meaning: str) -> None:
        async with self._lock:
            self._terms[term.lower()] = meaning

    async def lookup(self, term: str) -> str | None:
        async with self._lock:
            return self._terms.get(term.lower())


async def main() -> None:
    store = MyGlossary()
    real = os.environ.get("LOVIA_MODEL")
    first = real or ScriptedModel(
        [call("define", term="SLO", meaning="service level objective"), "Noted."]
    )
    second = real or ScriptedModel(
        [call("lookup", term="SLO"), "SLO means service level objective."]
    )
    for model, question in [
        (first, "In our team, SLO means service level objective."),
        (second, "What does SLO mean again?"),
    ]:
        # Both runs share one store; each run sets the plugin up afresh.
        agent = Agent(name="assistant", model=model, plugins=[GlossaryPlugin(store)])
        result = await Runner.run(agent, question)
        print(f"> {question}\n{result.output}")


if __name__ == "__main__":
    asyncio.run(main())
