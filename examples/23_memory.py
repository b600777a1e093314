"""Memory: long-term memory across sessions, kept as files in one folder.

Two runs (think: two conversations days apart) share a memory folder: the first
records a preference, the second reads it back.

Offline by default (a scripted model); set ``LOVIA_MODEL`` to try a real model.

Run: python examples/23_memory.py
"""

from __future__ import annotations

import asyncio
import os
import tempfile

from lovia import Agent, Runner
from lovia.plugins.memory import Memory
from lovia.testing import ScriptedModel, call


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        memory = Memory(tmp)  # the folder is yours; the plugin never deletes it
        real = os.environ.get("LOVIA_MODEL")
        first = real or ScriptedModel(
            [
                call(
                    "memory_create",
                    path="user/preferences.md",
                    file_text="- Prefers metric units\n",
                ),
                "Noted: metric units from now on.",
            ]
        )
        second = real or ScriptedModel(
            [
                call("memory_view", path="."),
                call("memory_view", path="user/preferences.md"),
                "It is 21 °C in Lisbon.",
            ]
        )
        for model, text in [
            (first, "Please always use metric units."),
            (second, "How warm is it in Lisbon?"),
        ]:
            result = await Runner.run(Agent(name="assistant", model=model, plugins=[memory]), text)
            print(f"> {text}\n{result.output}")


if __name__ == "__main__":
    asyncio.run(main())
