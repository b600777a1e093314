"""Todo: an external checklist the model keeps, re-shown to it every turn.

The current list reaches the model as a ``<system-reminder>`` at the end of each view;
it is never written to the transcript or the session.

Offline by default (a scripted model); set ``LOVIA_MODEL`` (e.g. ``openai:gpt-4.1-mini``)
to try a real model.

Run: python examples/21_todos.py
"""

from __future__ import annotations

import asyncio
import os

from lovia import Agent, Runner
from lovia.plugins.todo import Todo
from lovia.testing import ScriptedModel, call


async def main() -> None:
    model = os.environ.get("LOVIA_MODEL") or ScriptedModel(
        [
            call("todo_add", items=["Read the ticket", "Write the fix", "Run the tests"]),
            call("todo_update", {"id": 1, "status": "done"}),
            call("todo_update", {"id": 2, "status": "in_progress"}),
            "Ticket read; working on the fix now.",
        ]
    )
    agent = Agent(name="builder", model=model, plugins=[Todo()])
    result = await Runner.run(agent, "Fix ticket #42: the login button is misaligned.")
    print(result.output)
    if isinstance(model, ScriptedModel):
        print("The last view ended with:\n" + model.requests[-1].messages[-1].content)  # type: ignore[union-attr]


if __name__ == "__main__":
    asyncio.run(main())
