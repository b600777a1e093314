"""Context management: the view each model call receives (see the Context guide).

- :class:`Compaction` — the default strategy (evict / clear / summarize, view only);
  :class:`FullView` — the whole transcript, unchanged.
- :func:`recall_tool` — the ``recall_tool_result`` tool, offered once something was
  evicted.
- Replay (pure functions, see :mod:`lovia.view.record`): :func:`resolve_records`
  (or :class:`ResolvedRecords`, resolving each record when read, and
  :func:`stored_records`), :func:`rebuild_messages`, :func:`rebuild_request`,
  :func:`rebuild_view`, :func:`verify`, :func:`view_records`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._lazy import lazy_exports
from .base import BuiltView, ContextStrategy, FullView, Summarize, ViewInput
from .compaction import (
    DEFAULT_SUMMARY_PROMPT,
    RECALL_TOOL_NAME,
    Compaction,
    CompactionState,
    estimate_tokens,
)
from .record import (
    VIEW_RECORD_VERSION,
    ResolvedRecords,
    ViewHasher,
    ViewRecord,
    canonical_request,
    rebuild_messages,
    rebuild_request,
    rebuild_view,
    resolve_records,
    stored_records,
    verify,
    view_records,
)

if TYPE_CHECKING:
    from ..tools import Tool

    recall_tool_result: Tool
    """The ``recall_tool_result`` tool (same object as :func:`recall_tool`)."""

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "RECALL_TOOL_NAME",
    "VIEW_RECORD_VERSION",
    "BuiltView",
    "Compaction",
    "CompactionState",
    "ContextStrategy",
    "FullView",
    "ResolvedRecords",
    "Summarize",
    "ViewHasher",
    "ViewInput",
    "ViewRecord",
    "canonical_request",
    "default_strategy",
    "estimate_tokens",
    "rebuild_messages",
    "rebuild_request",
    "rebuild_view",
    "recall_tool",
    "recall_tool_result",
    "resolve_records",
    "stored_records",
    "verify",
    "view_records",
]


def default_strategy() -> ContextStrategy[Any]:
    """The strategy used when an agent sets none: ``Compaction()`` with its defaults."""
    return Compaction()


def recall_tool() -> Tool:
    """The ``recall_tool_result`` tool (added when the strategy evicted something)."""
    from .recall import recall_tool as make

    return make()


# built on first use: keeps `import lovia` fast
__getattr__, __dir__ = lazy_exports(__name__, {"recall_tool_result": ".recall"})
