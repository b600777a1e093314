"""Anthropic Messages API (``POST /v1/messages``).

- request mapping: :func:`anthropic_messages`, :func:`anthropic_tools`,
  :func:`anthropic_settings`;
- response mapping: :func:`parse_message`, :func:`anthropic_usage`, :func:`anthropic_finish`;
- stream decoding: :class:`AnthropicStreamDecoder` (``message_start`` …
  ``content_block_*`` … ``message_delta`` / ``message_stop``, ``error`` events).

Thinking blocks keep their ``signature`` and redacted thinking its ``data`` (in
:attr:`ReasoningEntry.encrypted`), and go back verbatim to Anthropic only. There is no
native JSON-schema output: the profile says ``native_json_schema=False`` and the loop
uses a prompted contract. Server-side tool blocks (``server_tool_use``, web search
results) are not lovia entries and are skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..model import (
    FinishReason,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ReasoningChunk,
    ResponseEntry,
    StreamItem,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
)
from ..transcript import EntryStamp, ReasoningEntry, TextEntry, ToolCallEntry, ToolResultEntry
from ..usage import Usage
from ._common import (
    NO_STAMP,
    AssistantTurn,
    HttpProvider,
    InputTurn,
    ToolResultsTurn,
    TurnCache,
    anthropic_profile,
    group_entries,
    new_message_id,
    partial_response,
    resolve_api_key,
    same_provider,
)
from ._http import HttpSeam, RetryPolicy, StreamLimits, as_dict, as_list, error_from_payload

if TYPE_CHECKING:
    import httpx

__all__ = [
    "Anthropic",
    "AnthropicStreamDecoder",
    "anthropic_finish",
    "anthropic_messages",
    "anthropic_settings",
    "anthropic_tools",
    "anthropic_usage",
    "parse_message",
]

ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
THINKING_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}


# --------------------------------------------------------------------------- request


def _arguments(text: str) -> Any:
    try:
        return json.loads(text or "{}")
    except ValueError:
        return {}  # the model sent invalid JSON; the tool result already said so


def _assistant_blocks(turn: AssistantTurn, provider: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for entry in turn.entries:
        if isinstance(entry, ReasoningEntry):
            if not same_provider(entry, provider):
                continue
            if entry.redacted:
                blocks.append({"type": "redacted_thinking", "data": entry.encrypted or ""})
            elif entry.signature:
                blocks.append(
                    {"type": "thinking", "thinking": entry.text, "signature": entry.signature}
                )
        elif isinstance(entry, TextEntry):
            if entry.text:
                blocks.append({"type": "text", "text": entry.text})
        else:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": entry.call_id,
                    "name": entry.name,
                    "input": _arguments(entry.arguments),
                }
            )
    return blocks


def _tool_result(result: ToolResultEntry) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": result.call_id,
        "content": result.content,
    }
    if result.is_error:
        block["is_error"] = True
    return block


def _append(messages: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Add a message, merging into the previous one when the role repeats."""
    if not blocks:
        return
    if messages and messages[-1]["role"] == role:
        previous = messages[-1]["content"]
        if isinstance(previous, str):
            previous = [{"type": "text", "text": previous}]
        # a new dict: rendered blocks are cached and shared between requests
        messages[-1] = {"role": role, "content": [*previous, *blocks]}
    else:
        messages.append({"role": role, "content": blocks})


def anthropic_messages(
    request: ModelRequest, provider: str, cache: TurnCache | None = None
) -> list[dict[str, Any]]:
    """The ``messages`` array (user/assistant only; tool results grouped in one user turn).

    With a ``cache`` only the turns that changed since the previous request are mapped.
    """
    messages: list[dict[str, Any]] = []
    turns = cache.turns(request.messages) if cache else group_entries(request.messages)

    def render(turn: AssistantTurn | ToolResultsTurn) -> list[dict[str, Any]]:
        if isinstance(turn, AssistantTurn):
            return _assistant_blocks(turn, provider)
        return [_tool_result(r) for r in turn.results]

    for turn in turns:
        if isinstance(turn, InputTurn):
            role = "assistant" if turn.role == "assistant" else "user"
            if messages and messages[-1]["role"] == role:
                _append(messages, role, [{"type": "text", "text": turn.content}])
            else:
                messages.append({"role": role, "content": turn.content})
        else:
            role = "assistant" if isinstance(turn, AssistantTurn) else "user"
            _append(messages, role, cache.render(turn, render) if cache else render(turn))
    return messages


def anthropic_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
        for t in tools
    ]


def _tool_choice(settings: ModelSettings) -> dict[str, Any] | None:
    choice = settings.tool_choice
    kinds = {"auto": "auto", "required": "any", "none": "none"}
    out: dict[str, Any] | None = None
    if choice is not None:
        out = {"type": kinds[choice]} if choice in kinds else {"type": "tool", "name": choice}
    if settings.parallel_tool_calls is False:
        out = {**(out or {"type": "auto"}), "disable_parallel_tool_use": True}
    return out


def anthropic_settings(
    body: dict[str, Any], settings: ModelSettings, *, default_max_tokens: int, has_tools: bool
) -> None:
    """Settings in Anthropic's names (``stop_sequences``, ``thinking``); ``extra`` last."""
    body["max_tokens"] = settings.max_tokens or default_max_tokens
    simple = {"temperature": settings.temperature, "top_p": settings.top_p}
    body.update({k: v for k, v in simple.items() if v is not None})
    if settings.stop is not None:
        body["stop_sequences"] = list(settings.stop)
    choice = _tool_choice(settings)
    if has_tools and choice is not None:
        body["tool_choice"] = choice
    effort = settings.reasoning_effort
    if effort is not None and effort != "none":
        budget = THINKING_BUDGET.get(effort, THINKING_BUDGET["medium"])
        body["max_tokens"] = max(body["max_tokens"], budget + 1024)
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    body.update(settings.extra)


# --------------------------------------------------------------------------- response


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def anthropic_usage(usage: Any) -> Usage:
    """Input includes cache reads and writes (Anthropic reports them apart)."""
    data = as_dict(usage)
    if not data:
        return Usage(missing=True, requests=1)
    read = _int(data.get("cache_read_input_tokens"))
    write = _int(data.get("cache_creation_input_tokens"))
    return Usage(
        input_tokens=_int(data.get("input_tokens")) + read + write,
        output_tokens=_int(data.get("output_tokens")),
        cache_read_tokens=read,
        cache_write_tokens=write,
        requests=1,
    )


_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
}


def anthropic_finish(raw: str | None) -> FinishReason:
    return _FINISH.get(raw or "end_turn", "stop")


def _block_entry(
    block: Mapping[str, Any], message_id: str, provider: str, stamp: EntryStamp
) -> ResponseEntry | None:
    kind = block.get("type")
    if kind == "text":
        return TextEntry(text=str(block.get("text", "")), message_id=message_id, **stamp)
    if kind == "thinking":
        signature = block.get("signature")
        return ReasoningEntry(
            text=str(block.get("thinking", "")),
            signature=signature if isinstance(signature, str) else None,
            provider=provider,
            message_id=message_id,
            **stamp,
        )
    if kind == "redacted_thinking":
        return ReasoningEntry(
            redacted=True,
            encrypted=str(block.get("data", "")),
            provider=provider,
            message_id=message_id,
            **stamp,
        )
    if kind == "tool_use":
        return ToolCallEntry(
            call_id=str(block.get("id")),
            name=str(block.get("name", "")),
            arguments=json.dumps(block.get("input") or {}),
            message_id=message_id,
            **stamp,
        )
    return None


def parse_message(
    data: Mapping[str, Any], provider: str, stamp: EntryStamp = NO_STAMP
) -> ModelResponse:
    """Map a non-streaming ``message`` object (``stamp``: what its entries are recorded
    with, see ``ModelRequest.stamp``)."""
    message_id = str(data.get("id") or new_message_id())
    entries = [
        entry
        for block in as_list(data.get("content"))
        if (entry := _block_entry(as_dict(block), message_id, provider, stamp)) is not None
    ]
    raw = data.get("stop_reason")
    model = data.get("model")
    return ModelResponse(
        entries=tuple(entries),
        usage=anthropic_usage(data.get("usage")),
        finish_reason=anthropic_finish(raw),
        raw_finish_reason=raw,
        response_id=data.get("id"),
        model=str(model) if model else None,
    )


# --------------------------------------------------------------------------- stream


@dataclass(slots=True)
class _Block:
    start: Mapping[str, Any]
    call_index: int | None
    parts: list[str] = field(default_factory=list[str])
    data: dict[str, str] = field(default_factory=dict[str, str])
    done: bool = False

    def as_block(self) -> dict[str, Any]:
        block = dict(self.start)
        kind = block.get("type")
        text = "".join(self.parts)
        if kind == "text":
            block["text"] = str(block.get("text") or "") + text
        elif kind == "thinking":
            block["thinking"] = str(block.get("thinking") or "") + text
            block["signature"] = self.data.get("signature") or block.get("signature")
        elif kind == "tool_use" and text:
            block["input"] = _arguments(text)
        return block


class AnthropicStreamDecoder:
    """Anthropic stream events in, chunks out (``stamp``: what the entries of its
    response are recorded with)."""

    def __init__(self, provider: str, stamp: EntryStamp = NO_STAMP) -> None:
        self._provider = provider
        self._stamp = stamp
        self._message: dict[str, Any] = {}
        self._usage: dict[str, Any] = {}
        self._blocks: dict[int, _Block] = {}
        self._stop_reason: str | None = None
        self._stopped = False

    @property
    def complete(self) -> bool:
        return self._stopped or self._stop_reason is not None

    def feed(self, data: dict[str, Any]) -> list[StreamItem]:
        kind = data.get("type")
        if kind == "error":
            raise error_from_payload(data, self._provider)
        if kind == "message_start":
            self._message = as_dict(data.get("message"))
            self._usage.update(as_dict(self._message.get("usage")))
        elif kind == "content_block_start":
            return self._start(_index(data), as_dict(data.get("content_block")))
        elif kind == "content_block_delta":
            return self._delta(_index(data), as_dict(data.get("delta")))
        elif kind == "content_block_stop":
            self._block(_index(data)).done = True
        elif kind == "message_delta":
            reason = as_dict(data.get("delta")).get("stop_reason")
            self._stop_reason = str(reason) if reason else self._stop_reason
            self._usage.update(as_dict(data.get("usage")))
        elif kind == "message_stop":
            self._stopped = True
        return []

    def _block(self, index: int) -> _Block:
        if index not in self._blocks:  # a delta without a start (e.g. a stream fragment)
            self._blocks[index] = _Block({"type": "text", "text": ""}, None)
        return self._blocks[index]

    def _start(self, index: int, start: Mapping[str, Any]) -> list[StreamItem]:
        kind = start.get("type")
        call_index = None
        if kind == "tool_use":
            call_index = sum(1 for b in self._blocks.values() if b.call_index is not None)
        self._blocks[index] = _Block(start, call_index)
        if call_index is not None:
            return [ToolCallChunk(call_index, start.get("id"), start.get("name"), "")]
        text = start.get("text")
        return [TextChunk(text)] if kind == "text" and isinstance(text, str) and text else []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[StreamItem]:
        block = self._block(index)
        kind = delta.get("type")
        if kind == "signature_delta":
            block.data["signature"] = block.data.get("signature", "") + str(
                delta.get("signature", "")
            )
            return []
        field = {
            "text_delta": "text",
            "thinking_delta": "thinking",
            "input_json_delta": "partial_json",
        }
        key = field.get(str(kind))
        piece = delta.get(key) if key else None
        if not isinstance(piece, str) or not piece:
            return []  # citations_delta and unknown kinds carry no text
        block.parts.append(piece)
        if kind == "text_delta":
            return [TextChunk(piece)]
        if kind == "thinking_delta":
            return [ReasoningChunk(piece)]
        return (
            [] if block.call_index is None else [ToolCallChunk(block.call_index, None, None, piece)]
        )

    @property
    def message_id(self) -> str:
        if not self._message.get("id"):
            self._message["id"] = new_message_id()
        return str(self._message["id"])

    def finish(self) -> ModelResponse:
        message = {
            **self._message,
            "id": self.message_id,
            "content": [self._blocks[i].as_block() for i in sorted(self._blocks)],
            "stop_reason": self._stop_reason,
            "usage": self._usage,
        }
        return parse_message(message, self._provider, self._stamp)

    def partial(self) -> ModelResponse:
        text = "".join(
            "".join(b.parts)
            for _, b in sorted(self._blocks.items())
            if b.start.get("type") == "text"
        )
        calls = [
            e
            for _, b in sorted(self._blocks.items())
            if b.call_index is not None and b.done
            for e in [_block_entry(b.as_block(), self.message_id, self._provider, self._stamp)]
            if isinstance(e, ToolCallEntry)
        ]
        model = self._message.get("model")
        return partial_response(text, calls, self.message_id, model, self._stamp)


def _index(data: Mapping[str, Any]) -> int:
    index = data.get("index")
    return index if isinstance(index, int) else 0


# --------------------------------------------------------------------------- provider


class Anthropic(HttpProvider):
    """A Claude model behind the Anthropic Messages API.

    Args:
        model: e.g. ``"claude-sonnet-4-0"``.
        base_url: Default ``$ANTHROPIC_BASE_URL`` or ``https://api.anthropic.com``.
        api_key: Default ``$ANTHROPIC_API_KEY`` (optional for a server on localhost).
        max_tokens: Sent when the settings do not say (the API requires it).
        Others as for :class:`~lovia.providers.openai_chat.OpenAIChat`.
    """

    _path = "/v1/messages"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        http_client: Any | None = None,
        stream: bool = True,
        profile: ModelProfile | None = None,
        retry: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
        max_tokens: int = 4096,
        timeout: float | httpx.Timeout | None = None,
        limits: StreamLimits | None = None,
        name: str = "anthropic",
    ) -> None:
        url = (base_url or os.environ.get("ANTHROPIC_BASE_URL") or ANTHROPIC_BASE_URL).rstrip("/")
        key = resolve_api_key(api_key, "ANTHROPIC_API_KEY", url, "Anthropic")
        auth = {"x-api-key": key} if key else {}
        seam = HttpSeam(
            provider=name,
            base_url=url,
            headers={**auth, "anthropic-version": ANTHROPIC_VERSION, **(headers or {})},
            secret=key,
            http_client=http_client,
            retry=retry,
            timeout=timeout,
            limits=limits,
        )
        self._max_tokens = max_tokens
        default = anthropic_profile(model)
        super().__init__(model, name=name, profile=profile or default, stream=stream, seam=seam)

    def render_request(self, request: ModelRequest) -> dict[str, Any]:
        """The exact JSON body for ``request`` (no headers, so no key)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": anthropic_messages(request, self.name, self._turns),
        }
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = anthropic_tools(request.tools)
        if self._stream:
            body["stream"] = True
        anthropic_settings(
            body,
            request.settings,
            default_max_tokens=self._max_tokens,
            has_tools=bool(request.tools),
        )
        return body

    def _decoder(self, stamp: EntryStamp) -> AnthropicStreamDecoder:
        return AnthropicStreamDecoder(self.name, stamp)

    def _parse(self, data: dict[str, Any], stamp: EntryStamp) -> ModelResponse:
        if data.get("type") == "error":
            raise error_from_payload(data, self.name)
        return parse_message(data, self.name, stamp)
