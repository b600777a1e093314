"""``recall_tool_result``: the tool that gives the model back an evicted tool result.

Offered automatically (the loop adds it to the request) as soon as a view contains an
evicted or cleared result. It reads the full content from the transcript
(``ctx.entries``), which is never changed by compaction, and pages through huge results.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ..context import RunContext
from ..errors import ToolError
from ..tools import Tool, tool
from ..transcript import ToolResultEntry

__all__ = ["MAX_PAGE_CHARS", "recall_tool"]

MAX_PAGE_CHARS = 20_000
"""Most characters one call returns; larger results are paged with ``offset``."""


def _find(entries: Any, key: str) -> ToolResultEntry | None:
    """The tool result with this entry id, else the latest one with this call_id."""
    by_call: ToolResultEntry | None = None
    for i in range(len(entries) - 1, -1, -1):
        entry = entries[i]
        if isinstance(entry, ToolResultEntry):
            if entry.id == key:
                return entry
            if by_call is None and entry.call_id == key:
                by_call = entry
    return by_call


async def _recall_tool_result(
    ctx: RunContext[Any], id: str, offset: int = 0, limit: int = MAX_PAGE_CHARS
) -> str:
    """Get back a tool result that was evicted from your context to save space.

    Args:
        id: The id named in the eviction note (or the tool call id).
        offset: First character to return, for paging through a large result.
        limit: How many characters to return (at most 20000).
    """
    entry = _find(ctx.entries, id.strip().strip('"'))
    if entry is None:
        raise ToolError(
            f"no tool result with id {id!r} in this conversation",
            hint="Use the id from the eviction note.",
        )
    content = entry.content
    size = len(content)
    start = min(max(0, offset), size)
    end = min(size, start + max(1, min(limit, MAX_PAGE_CHARS)))
    if start == 0 and end == size:
        return content
    more = f"call again with offset={end}" if end < size else "end of result"
    return f"[showing chars {start}–{end} of {size}; {more}]\n{content[start:end]}"


@cache
def recall_tool() -> Tool:
    """The ``recall_tool_result`` tool (one shared, stateless instance)."""
    return tool(name="recall_tool_result", concurrency_safe=True, idempotent=True)(
        _recall_tool_result
    )


recall_tool_result: Tool = recall_tool()
"""The tool itself, also ``lovia.view.recall_tool_result`` and ``lovia.recall_tool_result``."""
