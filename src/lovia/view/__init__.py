"""Context management: the view each model call receives (see the Context guide)."""

from __future__ import annotations

from typing import Any

from .base import (
    BuiltView,
    ContextStrategy,
    FullView,
    ViewHasher,
    ViewInput,
    ViewRecord,
    canonical_request,
    rebuild_messages,
)

__all__ = [
    "BuiltView",
    "ContextStrategy",
    "FullView",
    "ViewHasher",
    "ViewInput",
    "ViewRecord",
    "canonical_request",
    "default_strategy",
    "rebuild_messages",
    "recall_tool",
]


def default_strategy() -> ContextStrategy:
    """The strategy used when an agent sets none."""
    return FullView()


def recall_tool() -> Any:
    """The ``recall_tool_result`` tool (added when the strategy evicted something)."""
    raise NotImplementedError("recall_tool_result arrives with the Compaction strategy")
