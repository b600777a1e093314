"""``Todo()``: an external checklist the model keeps, re-shown every turn.

The model plans with ``todo_add``, tracks progress with ``todo_update`` and can read the
list with ``todo_list``. Every turn a view injector appends the current list to the
model's view as a ``<system-reminder>`` — never to the transcript or the session, so
reminders do not pile up and the cached prompt prefix stays stable.

The list is per-run state: it is created inside ``setup()``, so two concurrent runs of
the same agent keep separate lists.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ..context import RunContext
from ..errors import ToolError
from ..tools import tool
from ..transcript import InputEntry, ToolCallEntry, ToolResultEntry, TranscriptEntry
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


@dataclass(slots=True)
class _Replay:
    """Applies todo operations, live or from the transcript.

    A resumed run starts with a fresh list; its todo calls from before the crash are in
    the transcript, so they are applied again, once each (by call id), in order.
    """

    state: _TodoList
    max_items: int
    applied: set[str] = field(default_factory=set[str])
    calls: dict[str, ToolCallEntry] = field(default_factory=dict[str, ToolCallEntry])
    cursor: int = 0

    def add(self, items: list[str]) -> None:
        texts = [t.strip() for t in items if t.strip()]
        if not texts:
            raise ToolError("Nothing to add: pass at least one non-empty item.")
        if len(self.state.items) + len(texts) > self.max_items:
            raise ToolError(f"The todo list is limited to {self.max_items} items.")
        for text in texts:
            self.state.items.append(TodoItem(self.state.next_id, text))
            self.state.next_id += 1

    def update(self, id: int, status: TodoStatus) -> None:
        for item in self.state.items:
            if item.id == id:
                item.status = status
                return
        known = ", ".join(str(i.id) for i in self.state.items) or "none"
        raise ToolError(f"No todo item {id}; existing ids: {known}.")

    def done(self, ctx: RunContext[Any]) -> None:
        if ctx.tool_call is not None:
            self.applied.add(ctx.tool_call.call_id)

    def catch_up(self, ctx: RunContext[Any]) -> None:
        entries = ctx.entries
        for index in range(self.cursor, len(entries)):
            entry = entries[index]
            if entry.run_id != ctx.run_id:
                continue
            if isinstance(entry, ToolCallEntry) and entry.name in _MUTATING:
                self.calls[entry.call_id] = entry
            elif isinstance(entry, ToolResultEntry) and not entry.is_error:
                call = self.calls.pop(entry.call_id, None)
                if call is not None and entry.call_id not in self.applied:
                    self._replay(call)
        self.cursor = len(entries)

    def _replay(self, call: ToolCallEntry) -> None:
        self.applied.add(call.call_id)
        try:
            args = json.loads(call.arguments or "{}")
            if call.name == "todo_add":
                self.add(list(args.get("items", [])))
            else:
                self.update(int(args["id"]), args["status"])
        except (ToolError, ValueError, KeyError, TypeError):
            return  # it failed the first time too: it left no trace in the list


_MUTATING = ("todo_add", "todo_update")


@dataclass(frozen=True, slots=True)
class Todo:
    """A checklist tool whose current state is re-shown to the model every turn."""

    name: str = "todo"
    instructions: str | None = INSTRUCTIONS
    """Appended to the system prompt (``None`` = no instructions)."""
    max_items: int = 100

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        state = _TodoList()  # per run: closed over by the tools and the injector
        sync = _Replay(state, self.max_items)

        @tool(name="todo_add")
        async def todo_add(ctx: RunContext[Any], items: list[str]) -> str:
            """Add steps to the todo list (in order); they start as `pending`.

            Args:
                items: One short imperative sentence per step.
            """
            sync.catch_up(ctx)
            sync.add(items)
            sync.done(ctx)
            return state.render()

        @tool(name="todo_update")
        async def todo_update(ctx: RunContext[Any], id: int, status: TodoStatus) -> str:
            """Set the status of one todo item.

            Args:
                id: The item's number, as shown in the list.
                status: `pending`, `in_progress` or `done`.
            """
            sync.catch_up(ctx)
            sync.update(id, status)
            sync.done(ctx)
            return state.render()

        @tool(name="todo_list", concurrency_safe=True)
        async def todo_list(ctx: RunContext[Any]) -> str:
            """Show the todo list with each item's status."""
            sync.catch_up(ctx)
            return state.render()

        def remind(ctx: RunContext[Any]) -> list[TranscriptEntry] | None:
            sync.catch_up(ctx)
            if not state.items:
                return None
            content = f"<system-reminder>\n{state.render()}\n</system-reminder>"
            return [InputEntry(role="user", content=content)]

        return PluginInstance(
            tools=[todo_add, todo_update, todo_list],
            instructions=self.instructions,
            view_injectors=[remind],
        )
