"""``RunResult``: what a finished run returns."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .transcript import TranscriptEntry
from .usage import Usage

if TYPE_CHECKING:
    from .agent import Agent
    from .stores.base import RunSnapshot

__all__ = ["RunResult"]

OutputT = TypeVar("OutputT")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult(Generic[OutputT]):
    """The outcome of one run."""

    output: OutputT
    """The final text, or the validated ``output_type`` object."""
    usage: Usage
    """Everything the run used: its own model and tool calls plus its child runs'."""
    turns: int
    """Model steps taken (provider retries are not turns)."""
    finish_reason: str
    final_agent: Agent[Any, Any]
    """The agent active at the end (differs from the first after a handoff)."""
    entries: Sequence[TranscriptEntry]
    """Only the entries this run added (not the session history)."""
    run_id: str
    session_id: str | None = None
    undelivered: Sequence[Any] = field(default_factory=tuple[Any, ...])
    """Mailbox messages put after the final answer (never delivered to the model)."""
    replayed: bool = False
    """True when the run_id was already completed and the stored result was returned."""
    own_usage: Usage = field(default_factory=Usage)
    """This run's own model and tool calls (``usage`` without the child runs)."""
    child_usage: Mapping[str, Usage] = field(default_factory=dict[str, Usage])
    """Each child run's total usage (agents run as tools), by the tool call's ``call_id``."""

    @classmethod
    def from_stored(
        cls,
        snapshot: RunSnapshot,
        agent: Agent[Any, Any],
        find: Callable[[Agent[Any, Any], str], Agent[Any, Any] | None],
    ) -> RunResult[Any]:
        """Rebuild a completed run's result from the store (no model call)."""
        from .output import output_mode

        data = snapshot.result or {}
        final = find(agent, str(data.get("final_agent", agent.name))) or agent
        mode = output_mode(final.output_type, native=False)
        usage = Usage.from_dict(data.get("usage", {}))
        children = {k: Usage.from_dict(v) for k, v in data.get("child_usage", {}).items()}
        return cls(
            output=mode.load(data.get("output")),
            usage=usage,
            own_usage=Usage.from_dict(data["own_usage"]) if "own_usage" in data else usage,
            child_usage=children,
            turns=int(data.get("turns", 0)),
            finish_reason=str(data.get("finish_reason", "stop")),
            final_agent=final,
            entries=tuple(snapshot.entries()),
            run_id=snapshot.info.run_id,
            session_id=snapshot.info.session_id,
            replayed=True,
        )
