"""What the three adapters share: entry grouping, keys, profiles, the base class.

- :func:`group_entries` turns the view's flat entries into conversation turns: a user
  (or other role) input, one assistant message (consecutive model entries sharing a
  ``message_id``), or a run of tool results. Adapters map turns, not entries.
- :func:`resolve_api_key` applies the official SDKs' environment defaults.
- ``*_profile`` functions hold model-family facts as data.
- :class:`HttpProvider` holds the properties every adapter exposes.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Self, TypeVar

from ..errors import UserError
from ..model import (
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ProviderBase,
    ResponseEntry,
    StreamItem,
)
from ..transcript import (
    EntryStamp,
    InputEntry,
    ReasoningEntry,
    TextEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    new_id,
)
from ..usage import Usage
from ._client import client_module
from ._http import HttpSeam, RetryPolicy, StreamDecoder

__all__ = [
    "NO_STAMP",
    "AssistantTurn",
    "HttpProvider",
    "InputTurn",
    "ToolResultsTurn",
    "IdentityMemo",
    "Turn",
    "TurnCache",
    "anthropic_profile",
    "compat_profile",
    "group_entries",
    "is_local",
    "openai_profile",
    "resolve_api_key",
]

log = logging.getLogger("lovia.providers")


# --------------------------------------------------------------------------- turns


@dataclass(slots=True)
class InputTurn:
    role: str
    content: str


@dataclass(slots=True)
class AssistantTurn:
    message_id: str
    entries: list[ResponseEntry] = field(default_factory=list[ResponseEntry])


@dataclass(slots=True)
class ToolResultsTurn:
    results: list[ToolResultEntry] = field(default_factory=list[ToolResultEntry])


Turn = InputTurn | AssistantTurn | ToolResultsTurn


_MODEL_ENTRIES = (TextEntry, ReasoningEntry, ToolCallEntry)  # a tuple: ``A | B`` is rebuilt per use


def _group(entries: Sequence[TranscriptEntry], start: int) -> tuple[list[Turn], list[int]]:
    """Group ``entries[start:]`` into turns; also return where each turn starts."""
    turns: list[Turn] = []
    starts: list[int] = []
    last: Turn | None = None
    for index in range(start, len(entries)):
        entry = entries[index]
        if isinstance(entry, InputEntry):
            last = InputTurn(entry.role, entry.content)
        elif isinstance(entry, _MODEL_ENTRIES):
            if isinstance(last, AssistantTurn) and last.message_id == entry.message_id:
                last.entries.append(entry)
                continue
            last = AssistantTurn(entry.message_id, [entry])
        elif isinstance(entry, ToolResultEntry):
            if isinstance(last, ToolResultsTurn):
                last.results.append(entry)
                continue
            last = ToolResultsTurn([entry])
        else:
            continue  # system and handoff entries are not messages
        turns.append(last)
        starts.append(index)
    return turns, starts


def group_entries(entries: Sequence[TranscriptEntry]) -> list[Turn]:
    """Group entries into turns; system and handoff entries are not messages."""
    return _group(entries, 0)[0]


class TurnCache:
    """Incremental :func:`group_entries` and per-turn rendering for one provider instance.

    Successive views of a conversation are mostly the previous view plus new entries
    (the same entry objects), so only the turns after the longest common prefix are
    regrouped and re-rendered: mapping a request costs in proportion to what changed,
    not to the whole conversation. Keyed by entry identity (never by content), bounded,
    and safe to share between concurrent runs. Rendered values are shared: callers must
    not mutate them.
    """

    __slots__ = ("_chains", "_flat", "_keep", "_memo", "chains", "memo_size")

    def __init__(self, chains: int = 256, memo_size: int = 50_000) -> None:
        self.chains = chains
        self.memo_size = memo_size
        self._chains: dict[int, tuple[list[TranscriptEntry], list[Turn], list[int]]] = {}
        self._memo: dict[int, tuple[Turn, Any]] = {}
        # per chain: the flattened rendering and where each turn's part starts in it
        self._flat: dict[int, tuple[list[Turn], list[Any], list[int]]] = {}
        self._keep = 0

    def turns(self, entries: Sequence[TranscriptEntry]) -> list[Turn]:
        if not entries:
            return []
        key = id(entries[0])
        chain = self._chains.pop(key, None)
        if chain is None or chain[0][0] is not entries[0]:
            (turns, starts), self._keep = _group(entries, 0), 0
        else:
            turns, starts, self._keep = _regroup(chain, entries)
        self._chains[key] = (list(entries), turns, starts)
        if len(self._chains) > self.chains:
            oldest = next(iter(self._chains))
            del self._chains[oldest]
            self._flat.pop(oldest, None)
        return turns

    def flat(self, entries: Sequence[TranscriptEntry], fn: Callable[[Any], list[Any]]) -> list[Any]:
        """The concatenation of ``fn(turn)`` over the view's turns, reusing the previous
        request's rendering for the turns they share (one renderer per cache)."""
        turns = self.turns(entries)
        if not turns:
            return []
        key = id(entries[0])
        prev = self._flat.get(key)
        keep = self._keep
        # the kept turns are a prefix of one lineage: the last one's identity vouches for all
        if prev is not None and 0 < keep <= len(prev[0]) and prev[0][keep - 1] is turns[keep - 1]:
            out, offsets = prev[1][: prev[2][keep]], prev[2][:keep]
        else:
            out, offsets, keep = [], [], 0
        for turn in turns[keep:]:
            offsets.append(len(out))
            out.extend(self.render(turn, fn))
        offsets.append(len(out))
        self._flat[key] = (turns, out, offsets)
        return list(out)

    def render(self, turn: Turn, fn: Callable[[Any], Any]) -> Any:
        """``fn(turn)``, computed once per turn object."""
        hit = self._memo.get(id(turn))
        if hit is not None and hit[0] is turn:
            return hit[1]
        value = fn(turn)
        if len(self._memo) >= self.memo_size:
            self._memo.clear()
        self._memo[id(turn)] = (turn, value)
        return value


_V = TypeVar("_V")


class IdentityMemo:
    """``make()`` computed once per key object, told apart by identity (never by content).

    For what a provider renders from a request's parts that stay the same objects from
    call to call (a run's tool specs, an agent's settings). The key is held with its
    value, so an id is never reused while cached; bounded (cleared when full). Values are
    shared: callers must not mutate them.
    """

    __slots__ = ("_items", "size")

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._items: dict[int, tuple[object, Any]] = {}

    def get(self, key: object, make: Callable[[], _V]) -> _V:
        hit = self._items.get(id(key))
        if hit is not None and hit[0] is key:
            return hit[1]
        value = make()
        if len(self._items) >= self.size:
            self._items.clear()
        self._items[id(key)] = (key, value)
        return value


def _regroup(
    chain: tuple[list[TranscriptEntry], list[Turn], list[int]],
    entries: Sequence[TranscriptEntry],
) -> tuple[list[Turn], list[int], int]:
    old, turns, starts = chain
    limit = min(len(old), len(entries))
    same = 0
    while same < limit and old[same] is entries[same]:
        same += 1
    # keep the turns that start before the last common entry's turn: that turn may grow
    keep = bisect.bisect_right(starts, same - 1) - 1
    if keep <= 0:
        return (*_group(entries, 0), 0)
    tail, tail_starts = _group(entries, starts[keep])
    return turns[:keep] + tail, starts[:keep] + tail_starts, keep


def same_provider(entry: ReasoningEntry, provider: str) -> bool:
    """Reasoning is only sent back to the provider that produced it."""
    if entry.provider == provider:
        return True
    log.debug(
        "dropping reasoning entry %s from provider %r when calling %r",
        entry.id,
        entry.provider,
        provider,
    )
    return False


NO_STAMP: EntryStamp = EntryStamp()
"""No stamp (a provider called outside a run): entries keep the defaults. Shared: never
changed."""


def partial_response(
    text: str,
    calls: Sequence[ToolCallEntry],
    message_id: str,
    model: str | None,
    stamp: EntryStamp = NO_STAMP,
) -> ModelResponse:
    """What arrived before a stream broke: text so far and the complete tool calls."""
    entries: list[ResponseEntry] = []
    if text:
        entries.append(TextEntry(text=text, message_id=message_id, **stamp))
    entries.extend(calls)
    return ModelResponse(
        entries=tuple(entries),
        usage=Usage(missing=True, requests=1),
        finish_reason="error",
        raw_finish_reason=None,
        response_id=message_id or None,
        model=model,
    )


def new_message_id() -> str:
    return new_id("msg")


# --------------------------------------------------------------------------- keys, urls


def is_local(base_url: str) -> bool:
    """True for servers on this machine (local compatible servers need no key)."""
    host: str = client_module().URL(base_url).host
    return host in {"localhost", "127.0.0.1", "::1", "0.0.0.0"} or host.endswith(".localhost")


def resolve_api_key(explicit: str | None, env_var: str, base_url: str, what: str) -> str | None:
    key = explicit if explicit is not None else os.environ.get(env_var)
    if key or is_local(base_url):
        return key or None
    raise UserError(
        f"No API key for {what} at {base_url}.",
        f"Set the {env_var} environment variable or pass api_key=...",
    )


# --------------------------------------------------------------------------- profiles

_OPENAI_FAMILIES: tuple[tuple[str, ModelProfile], ...] = (
    (
        "gpt-4.1",
        ModelProfile(native_json_schema=True, context_window=1_047_576, max_output_tokens=32_768),
    ),
    (
        "gpt-4o",
        ModelProfile(native_json_schema=True, context_window=128_000, max_output_tokens=16_384),
    ),
    (
        "gpt-5",
        ModelProfile(
            native_json_schema=True,
            reasoning=True,
            context_window=400_000,
            max_output_tokens=128_000,
        ),
    ),
    (
        "o1",
        ModelProfile(
            native_json_schema=True,
            reasoning=True,
            context_window=200_000,
            max_output_tokens=100_000,
        ),
    ),
    (
        "o3",
        ModelProfile(
            native_json_schema=True,
            reasoning=True,
            context_window=200_000,
            max_output_tokens=100_000,
        ),
    ),
    (
        "o4",
        ModelProfile(
            native_json_schema=True,
            reasoning=True,
            context_window=200_000,
            max_output_tokens=100_000,
        ),
    ),
    ("gpt-4-turbo", ModelProfile(context_window=128_000, max_output_tokens=4_096)),
    ("gpt-3.5-turbo", ModelProfile(context_window=16_385, max_output_tokens=4_096)),
)


def openai_profile(model: str) -> ModelProfile:
    """Facts about an OpenAI model family (unknown names: JSON schema on, no window)."""
    for prefix, profile in _OPENAI_FAMILIES:
        if model.startswith(prefix):
            return profile
    return ModelProfile(native_json_schema=True)


def compat_profile(model: str) -> ModelProfile:
    """Conservative defaults for an OpenAI-compatible server; override with ``profile=``."""
    del model
    return ModelProfile(native_json_schema=False, parallel_tool_calls=False)


def anthropic_profile(model: str) -> ModelProfile:
    """Claude: no native JSON schema (prompted contract), extended thinking from 3.7 on."""
    older = model.startswith(("claude-3-", "claude-2", "claude-instant")) and not model.startswith(
        "claude-3-7"
    )
    return ModelProfile(native_json_schema=False, reasoning=not older, context_window=200_000)


# --------------------------------------------------------------------------- base class


class HttpProvider(ProviderBase):
    """Shared surface of the HTTP adapters (name, model, profile, address, closing)."""

    _kind = "provider"

    def __init__(
        self,
        model: str,
        *,
        name: str,
        profile: ModelProfile,
        stream: bool,
        seam: HttpSeam,
    ) -> None:
        if not model:
            raise UserError(f"{type(self).__name__} needs a model name.", "Pass model='...'.")
        # profile.streaming says what this adapter sends (read by tracing and TTFC)
        if profile.streaming != stream:
            profile = replace(profile, streaming=stream)
        super().__init__(name, model, profile)
        self._stream = stream
        self._seam = seam
        self._turns = TurnCache()
        url = seam.url  # read on every call (span attributes): parsed once here
        self._address: str = url.host
        self._port: int = url.port or (443 if url.scheme == "https" else 80)

    @property
    def base_url(self) -> str:
        return self._seam.base_url

    @property
    def server_address(self) -> str:
        """Host of the API (``server.address`` span attribute)."""
        return self._address

    @property
    def server_port(self) -> int:
        """Port of the API (``server.port``), defaulting by scheme."""
        return self._port

    @property
    def retry(self) -> RetryPolicy:
        return self._seam.retry

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self._model!r}, name={self._name!r}, "
            f"base_url={self._seam.base_url!r}, stream={self._stream})"
        )

    async def aclose(self) -> None:
        """Close the HTTP client if this provider created it."""
        await self._seam.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # Subclasses supply these four.
    _path: str = ""

    def render_request(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _decoder(self, stamp: EntryStamp) -> StreamDecoder:
        """A decoder for one streamed attempt; its entries are built with ``stamp``."""
        raise NotImplementedError

    def _parse(self, data: dict[str, Any], stamp: EntryStamp) -> ModelResponse:
        """The response of a one-shot call; its entries are built with ``stamp``."""
        raise NotImplementedError

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one call: chunks, retry notices, then exactly one ModelResponse."""
        stamp = request.stamp
        return self._seam.call(
            self._path,
            self.render_request(request),
            streaming=self._stream,
            decoder=partial(self._decoder, stamp),
            parse=partial(self._parse, stamp=stamp),
        )
