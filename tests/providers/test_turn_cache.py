"""The incremental request mapping gives exactly what mapping from scratch gives."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lovia.providers._common import TurnCache
from lovia.providers.anthropic import anthropic_messages
from lovia.providers.base import ModelRequest
from lovia.providers.openai_chat import chat_messages
from lovia.providers.openai_responses import responses_input
from lovia.transcript import (
    InputEntry,
    ReasoningEntry,
    TextEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
)


def _turn(i: int, calls: int, text: bool, reasoning: bool) -> list[TranscriptEntry]:
    msg = f"m{i}"
    out: list[TranscriptEntry] = []
    if reasoning:
        out.append(
            ReasoningEntry(text=f"think {i}", provider="anthropic", signature="s", message_id=msg)
        )
    if text or not calls:
        out.append(TextEntry(text=f"say {i}", message_id=msg))
    out.extend(
        ToolCallEntry(call_id=f"c{i}_{k}", name="f", arguments="{}", message_id=msg)
        for k in range(calls)
    )
    out.extend(
        ToolResultEntry(call_id=f"c{i}_{k}", name="f", content=f"r{i}{k}") for k in range(calls)
    )
    return out


steps = st.lists(
    st.tuples(
        st.integers(0, 3),
        st.booleans(),
        st.booleans(),
        st.booleans(),
        st.sampled_from(["none", "stub", "inject", "mailbox"]),
    ),
    min_size=1,
    max_size=12,
)


def _views(plan: list[tuple[int, bool, bool, bool, str]]) -> list[list[TranscriptEntry]]:
    """Growing views like the loop builds: appends, middle stubs, trailing reminders."""
    transcript: list[TranscriptEntry] = [InputEntry(content="go")]
    stubs: dict[int, TranscriptEntry] = {}
    views: list[list[TranscriptEntry]] = []
    for i, (calls, text, reasoning, _, action) in enumerate(plan):
        transcript.extend(_turn(i, calls, text, reasoning))
        if action == "mailbox":
            transcript.append(InputEntry(content=f"steer {i}", origin="mailbox"))
        results = [k for k, e in enumerate(transcript) if e.type == "tool_result"]
        if action == "stub" and results:
            k = results[len(results) // 2]
            old = transcript[k]
            stubs[k] = ToolResultEntry(call_id=old.call_id, name="f", content="[evicted]")  # type: ignore[union-attr]
        view = [stubs.get(k, e) for k, e in enumerate(transcript)]
        if action == "inject":
            view.append(InputEntry(content=f"<reminder {i}>", origin="injected"))
        views.append(view)
    return views


def _mappers() -> list[tuple[str, Any]]:
    return [
        ("chat", lambda r, c: chat_messages(r, c)),
        ("anthropic", lambda r, c: anthropic_messages(r, "anthropic", c)),
        ("responses", lambda r, c: responses_input(r, "openai", c)),
    ]


@settings(max_examples=120, deadline=None)
@given(steps)
def test_cached_mapping_equals_fresh_mapping(plan: list[tuple[int, bool, bool, bool, str]]) -> None:
    views = _views(plan)
    for name, mapper in _mappers():
        cache = TurnCache()
        for view in views:
            request = ModelRequest(system="sys", messages=view)
            assert mapper(request, cache) == mapper(request, None), name


def test_cache_is_bounded_and_keyed_by_identity() -> None:
    cache = TurnCache(chains=2)
    runs = [[InputEntry(content="same text")] for _ in range(3)]
    for view in runs:
        cache.turns(view)
    assert len(cache._chains) == 2
    # equal content but different objects never share a chain
    a, b = runs[1], runs[2]
    assert cache.turns(a)[0] is not cache.turns(b)[0]
