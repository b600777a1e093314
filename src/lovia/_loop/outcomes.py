"""What each phase of a turn comes to: typed outcomes the driver dispatches on.

A phase is an async generator of events (the caller sees them as they happen); it ends
by yielding its outcome as its last item, and the driver takes it with :func:`split`
and ``match``es on it. Nothing a phase produces travels through ``RunState``.

- the model step ends with an :class:`Answer` (the model's entries, as appended);
- the answer is then :class:`ToolCalls`, a :class:`Final` output, or a :class:`Repair`
  request (an invalid structured output, retried in the next turn);
- the tool phase ends with a :class:`Transfer` (a handoff to switch to) or :data:`None`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..agent import Handoff
from ..model import ModelResponse
from ..transcript import InputEntry, ToolCallEntry, TranscriptEntry

__all__ = ["Answer", "Final", "Repair", "Step", "ToolCalls", "Transfer"]


@dataclass(slots=True)
class Answer:
    """The model step's outcome: its response and the entries appended for it."""

    response: ModelResponse
    entries: tuple[TranscriptEntry, ...]

    def calls(self) -> tuple[ToolCallEntry, ...]:
        return tuple(e for e in self.entries if isinstance(e, ToolCallEntry))


@dataclass(slots=True)
class ToolCalls:
    """The model asked for tools (or a resumed turn has calls without results)."""

    calls: tuple[ToolCallEntry, ...]


@dataclass(slots=True)
class Final:
    """The run's final output, parsed; the run ends after this turn."""

    output: Any
    """Of the agent's ``output_type``: unknown to the loop."""
    raw: str
    finish_reason: str


@dataclass(slots=True)
class Repair:
    """The final answer did not validate: ask again (the entry is already appended)."""

    entry: InputEntry


@dataclass(slots=True)
class Transfer:
    """The tool phase's outcome when a handoff was called: switch agents after the turn."""

    handoff: Handoff


Step = ToolCalls | Final | Repair
"""What a model answer comes to."""
