"""The view seam: what one model call receives, and the record that reproduces it.

A :class:`ContextStrategy` turns the transcript into the messages of one model call.
It never changes the transcript. Whatever it does is written to a :class:`ViewRecord`,
from which :func:`rebuild_messages` (a pure function) gives back the exact same
messages; ``sha256`` of the canonical serialization of the request is the view hash,
stored in the record and put on the ``chat`` span as ``lovia.view.hash``.

A strategy may also define the optional resume hook (not part of the protocol, so
strategies without it still satisfy :class:`ContextStrategy`; the loop looks it up with
``getattr``)::

    def restore(self, state, last_record: ViewRecord, transcript_entries) -> None: ...

When a run resumes from its checkpoint, the loop calls it once per restored agent, right
after ``new_state()``, with that agent's last stored view record (resolved:
``delta=False``) and the transcript (session history + the run's stored entries, the
same objects later builds receive). It should put ``state`` back to where the crashed
worker's state was after building that view, so the resumed run's next view is the one
the crashed worker would have built. If it raises, the state is made fresh again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, runtime_checkable

from ..model import ModelProfile, Provider
from ..transcript import SystemEntry, TranscriptEntry
from .record import (
    VIEW_RECORD_VERSION,
    ViewHasher,
    ViewRecord,
    canonical_request,
    rebuild_messages,
)

__all__ = [
    "VIEW_RECORD_VERSION",
    "BuiltView",
    "ContextStrategy",
    "FullView",
    "ViewHasher",
    "ViewInput",
    "ViewRecord",
    "canonical_request",
    "rebuild_messages",
]


@dataclass(slots=True, kw_only=True)
class ViewInput:
    """What a strategy sees when building one view."""

    entries: Sequence[TranscriptEntry]
    """The whole transcript (session history + this run), read-only."""
    system: str
    agent_name: str
    profile: ModelProfile
    turn: int
    attempt: int = 1
    """1 for the first try; 2+ after a context overflow (compact harder)."""
    last_input_tokens: int | None = None
    """Input tokens the provider reported for the previous call of this run."""
    last_view_size: int = 0
    """Number of entries in the previous view (to estimate tokens added since)."""
    result_caps: Mapping[str, int] = field(default_factory=dict[str, int])
    """Tool name -> the tool's own ``max_result_chars`` (results above it are stubbed)."""


@dataclass(slots=True, kw_only=True)
class BuiltView:
    """A strategy's output: the messages and how they relate to the transcript."""

    messages: Sequence[TranscriptEntry]
    order: Sequence[str]
    replaced: Mapping[str, TranscriptEntry] = field(default_factory=dict[str, TranscriptEntry])
    summary: str | None = None
    compactions: Sequence[tuple[str, tuple[str, ...]]] = ()
    """``(kind, entry_ids)`` for each transformation applied this time."""
    evicted: bool = False
    """True when ``recall_tool_result`` should be offered (something was evicted)."""
    compacted: bool | None = None
    """The view differs from the transcript; ``None``: derive from replaced/summary."""
    tokens_before: int | None = None
    """The strategy's token estimate of the view as it would be without this build's
    changes (``CompactionApplied.tokens_before``); None: the strategy does not say."""
    tokens_after: int | None = None
    """The strategy's token estimate of the view it built."""


StateT = TypeVar("StateT")


class Summarize(Protocol):
    """What a strategy's ``build`` gets to ask a model for a summary: a model call of the
    run like any other (events, usage, cost, budget)."""

    async def __call__(
        self, entries: Sequence[TranscriptEntry], prompt: str, provider: Provider | None = None
    ) -> str:
        """A summary of ``entries`` by the active model (or ``provider``)."""
        ...


@runtime_checkable
class ContextStrategy(Protocol[StateT]):
    """Builds the view of each model call. Per-run state goes in ``state`` (of type
    ``StateT``, made by ``new_state``), never on self.

    Optional: ``restore(state, last_record, transcript_entries) -> None``, the resume hook
    (see the module docstring); :class:`~lovia.view.Compaction` defines it.
    """

    def new_state(self) -> StateT:
        """Fresh per-run state (passed back to every ``build`` of that run)."""
        ...

    async def build(self, inp: ViewInput, state: StateT, summarize: Summarize) -> BuiltView:
        """Build the view; ``await summarize(entries, prompt, provider=None) -> str``
        calls a model (the active one, or ``provider``) when the strategy needs one."""
        ...


class FullView:
    """The whole transcript, unchanged (no compaction)."""

    def new_state(self) -> None:
        return None

    async def build(self, inp: ViewInput, state: None, summarize: Summarize) -> BuiltView:
        messages = [e for e in inp.entries if not isinstance(e, SystemEntry)]
        return BuiltView(messages=messages, order=[e.id for e in messages])
