"""Hooks as span processors: lovia spans that end are turned back into typed events."""

from __future__ import annotations

from typing import Any

from ..events import Event

__all__ = ["event_from_span"]


def event_from_span(span: Any) -> Event | None:
    """The typed event a finished lovia span stands for (None for other spans)."""
    return None
