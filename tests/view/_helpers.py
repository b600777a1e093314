"""Shared helpers of the view tests: building views directly, checking pairing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lovia.providers.base import ModelProfile
from lovia.transcript import ToolCallEntry, ToolResultEntry, TranscriptEntry
from lovia.view import BuiltView, ViewInput
from lovia.view.base import ContextStrategy

SUMMARY_CALLS: list[list[TranscriptEntry]] = []


def assert_paired(messages: Sequence[TranscriptEntry]) -> None:
    """No orphan call, no orphan or duplicate result; each result after its call."""
    open_calls: set[str] = set()
    for m in messages:
        if isinstance(m, ToolCallEntry):
            assert m.call_id not in open_calls, f"duplicate open call {m.call_id}"
            open_calls.add(m.call_id)
        elif isinstance(m, ToolResultEntry):
            assert m.call_id in open_calls, f"orphan result {m.id} ({m.call_id})"
            open_calls.remove(m.call_id)
    assert not open_calls, f"orphan calls {open_calls}"


async def fake_summarize(
    entries: Sequence[TranscriptEntry], prompt: str, provider: Any = None
) -> str:
    assert_paired(entries)
    SUMMARY_CALLS.append(list(entries))
    return f"S{len(SUMMARY_CALLS)}: {len(entries)} messages"


async def build(
    strategy: ContextStrategy,
    state: Any,
    entries: Sequence[TranscriptEntry],
    *,
    window: int | None = None,
    attempt: int = 1,
    turn: int = 1,
    last_input_tokens: int | None = None,
    caps: dict[str, int] | None = None,
    summarize: Any = fake_summarize,
) -> BuiltView:
    inp = ViewInput(
        entries=entries,
        system="you are a test",
        agent_name="a",
        profile=ModelProfile(context_window=window),
        turn=turn,
        attempt=attempt,
        last_input_tokens=last_input_tokens,
        result_caps=caps or {},
    )
    built = await strategy.build(inp, state, summarize)
    check_built(built, entries)
    return built


def check_built(built: BuiltView, entries: Sequence[TranscriptEntry]) -> None:
    """The BuiltView contract: order = ids; non-replaced entries are transcript entries."""
    assert list(built.order) == [m.id for m in built.messages]
    by_id = {e.id: e for e in entries}
    for m in built.messages:
        if m.id in built.replaced:
            assert built.replaced[m.id] is m
        else:
            assert by_id[m.id] is m
    assert_paired(built.messages)
