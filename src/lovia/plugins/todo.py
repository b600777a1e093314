"""``Todo()``: an external checklist the model keeps, re-shown every turn.

The model plans with ``todo_add``, tracks progress with ``todo_update`` and can read the
list with ``todo_list``. Every turn a view injector appends the current list to the
model's view as a ``<system-reminder>`` — never to the transcript or the session, so
reminders do not pile up and the cached prompt prefix stays stable.

The list is per-run state: it is created inside ``setup()``, so two concurrent runs of
the same agent keep separate lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..context import RunContext
from ..errors import ToolError
from ..tools import tool
from ..transcript import InputEntry, TranscriptEntry
from .base import PluginInstance

__all__ = ["Todo", "TodoItem", "TodoStatus"]

TodoStatus = Literal["pending", "in_progress", "done"]

_MARK: dict[str, str] = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}

INSTRUCTIONS = """\
## Todo list
For any task with more than two steps, keep a todo list: add the steps with `todo_add`,
mark the one you work on `in_progress` and each finished one `done` with `todo_update`.
Work on one item at a time. The current list is shown to you every turn in a
<system-reminder>; keep it accurate."""


@dataclass(slots=True)
class TodoItem:
    """One checklist entry."""

    id: int
    text: str
    status: TodoStatus = "pending"


@dataclass(slots=True)
class _TodoList:
    """The per-run list (created in ``setup``; never stored on the plugin)."""

    items: list[TodoItem] = field(default_factory=list[TodoItem])
    next_id: int = 1

    def render(self) -> str:
        if not self.items:
            return "The todo list is empty."
        lines = [f"{_MARK[i.status]} {i.id}. {i.text}" for i in self.items]
        done = sum(1 for i in self.items if i.status == "done")
        return "\n".join([f"Todo list ({done}/{len(self.items)} done):", *lines])


@dataclass(frozen=True, slots=True)
class Todo:
    """A checklist tool whose current state is re-shown to the model every turn."""

    name: str = "todo"
    instructions: str | None = INSTRUCTIONS
    """Appended to the system prompt (``None`` = no instructions)."""
    max_items: int = 100

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        state = _TodoList()  # per run: closed over by the tools and the injector
        max_items = self.max_items

        @tool(name="todo_add")
        async def todo_add(items: list[str]) -> str:
            """Add steps to the todo list (in order); they start as `pending`.

            Args:
                items: One short imperative sentence per step.
            """
            texts = [t.strip() for t in items if t.strip()]
            if not texts:
                raise ToolError("Nothing to add: pass at least one non-empty item.")
            if len(state.items) + len(texts) > max_items:
                raise ToolError(f"The todo list is limited to {max_items} items.")
            for text in texts:
                state.items.append(TodoItem(state.next_id, text))
                state.next_id += 1
            return state.render()

        @tool(name="todo_update")
        async def todo_update(id: int, status: TodoStatus) -> str:
            """Set the status of one todo item.

            Args:
                id: The item's number, as shown in the list.
                status: `pending`, `in_progress` or `done`.
            """
            for item in state.items:
                if item.id == id:
                    item.status = status
                    return state.render()
            known = ", ".join(str(i.id) for i in state.items) or "none"
            raise ToolError(f"No todo item {id}; existing ids: {known}.")

        @tool(name="todo_list", concurrency_safe=True)
        async def todo_list() -> str:
            """Show the todo list with each item's status."""
            return state.render()

        def remind(ctx: RunContext[Any]) -> list[TranscriptEntry] | None:
            if not state.items:
                return None
            content = f"<system-reminder>\n{state.render()}\n</system-reminder>"
            return [InputEntry(role="user", content=content)]

        return PluginInstance(
            tools=[todo_add, todo_update, todo_list],
            instructions=self.instructions,
            view_injectors=[remind],
        )
