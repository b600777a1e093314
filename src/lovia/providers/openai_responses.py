"""OpenAI Responses API (``POST /responses``).

- request mapping: :func:`responses_input`, :func:`responses_tools`, :func:`responses_settings`;
- response mapping: :func:`parse_response` (also used on the final ``response.completed``
  / ``response.incomplete`` event of a stream, so streamed and non-streamed calls end in
  the same entries), :func:`responses_usage`, :func:`responses_finish`;
- stream decoding: :class:`ResponsesStreamDecoder`.

Reasoning items round-trip to the same provider with their ``id``, summary and
``encrypted_content`` (requested with ``include: ["reasoning.encrypted_content"]`` for
reasoning models), kept in :attr:`ReasoningEntry.details` / ``encrypted``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
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
from ..transcript import EntryStamp, ReasoningEntry, TextEntry, ToolCallEntry
from ..usage import Usage
from ._client import client_module
from ._common import (
    NO_STAMP,
    AssistantTurn,
    HttpProvider,
    InputTurn,
    Turn,
    TurnCache,
    compat_profile,
    group_entries,
    new_message_id,
    openai_profile,
    partial_response,
    resolve_api_key,
    same_provider,
)
from ._http import HttpSeam, RetryPolicy, StreamLimits, as_dict, as_list, error_from_payload

if TYPE_CHECKING:
    import httpx

__all__ = [
    "OpenAIResponses",
    "ResponsesStreamDecoder",
    "parse_response",
    "responses_finish",
    "responses_input",
    "responses_settings",
    "responses_tools",
    "responses_usage",
]

OPENAI_BASE_URL = "https://api.openai.com/v1"


# --------------------------------------------------------------------------- request


def _reasoning_item(entry: ReasoningEntry) -> dict[str, Any] | None:
    details = entry.details or {}
    item_id = details.get("id")
    if not item_id:
        return None  # a Responses reasoning item cannot be sent without its id
    summary = details.get("summary")
    texts = [str(t) for t in as_list(summary)] if summary is not None else [entry.text]
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": t} for t in texts if t],
    }
    if entry.encrypted:
        item["encrypted_content"] = entry.encrypted
    return item


def _assistant_items(turn: AssistantTurn, provider: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for entry in turn.entries:
        if isinstance(entry, ReasoningEntry):
            item = _reasoning_item(entry) if same_provider(entry, provider) else None
            if item is not None:
                items.append(item)
        elif isinstance(entry, TextEntry):
            part = (
                {"type": "refusal", "refusal": entry.text}
                if entry.refusal
                else {"type": "output_text", "text": entry.text}
            )
            items.append({"type": "message", "role": "assistant", "content": [part]})
        else:
            items.append(
                {
                    "type": "function_call",
                    "call_id": entry.call_id,
                    "name": entry.name,
                    "arguments": entry.arguments,
                }
            )
    return items


def responses_input(
    request: ModelRequest, provider: str, cache: TurnCache | None = None
) -> list[dict[str, Any]]:
    """The ``input`` items; the system prompt goes to ``instructions`` instead.

    With a ``cache`` only the turns that changed since the previous request are mapped.
    """

    def render(turn: Turn) -> list[dict[str, Any]]:
        if isinstance(turn, InputTurn):
            return [{"role": turn.role, "content": turn.content}]
        if isinstance(turn, AssistantTurn):
            return _assistant_items(turn, provider)
        return [
            {"type": "function_call_output", "call_id": r.call_id, "output": r.content}
            for r in turn.results
        ]

    if cache is not None:
        return cache.flat(request.messages, render)
    return [item for turn in group_entries(request.messages) for item in render(turn)]


def responses_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Function tools (``strict`` is always sent: the API defaults it to true)."""
    return [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": dict(t.parameters),
            "strict": t.strict,
        }
        for t in tools
    ]


def responses_settings(body: dict[str, Any], settings: ModelSettings, *, has_tools: bool) -> None:
    """Settings the Responses API knows (it has no ``stop`` or ``seed``); ``extra`` last."""
    simple = {
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "max_output_tokens": settings.max_tokens,
    }
    body.update({k: v for k, v in simple.items() if v is not None})
    if has_tools and settings.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = settings.parallel_tool_calls
    if settings.tool_choice is not None:
        choice = settings.tool_choice
        body["tool_choice"] = (
            choice
            if choice in ("auto", "required", "none")
            else {"type": "function", "name": choice}
        )
    if settings.reasoning_effort is not None:
        body["reasoning"] = {**as_dict(body.get("reasoning")), "effort": settings.reasoning_effort}
    body.update(settings.extra)


# --------------------------------------------------------------------------- response


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def responses_usage(usage: Any) -> Usage:
    """Normalize a Responses ``usage`` object."""
    data = as_dict(usage)
    if not data:
        return Usage(missing=True, requests=1)
    return Usage(
        input_tokens=_int(data.get("input_tokens")),
        output_tokens=_int(data.get("output_tokens")),
        cache_read_tokens=_int(as_dict(data.get("input_tokens_details")).get("cached_tokens")),
        reasoning_tokens=_int(as_dict(data.get("output_tokens_details")).get("reasoning_tokens")),
        requests=1,
    )


def responses_finish(
    response: Mapping[str, Any], entries: Sequence[ResponseEntry]
) -> tuple[FinishReason, str | None]:
    """Normalized and raw finish reason from ``status`` / ``incomplete_details``."""
    status = response.get("status")
    if status == "incomplete":
        reason = as_dict(response.get("incomplete_details")).get("reason")
        normalized: FinishReason = "content_filter" if reason == "content_filter" else "length"
        return normalized, str(reason or status)
    if status == "failed":
        return "error", "failed"
    if any(isinstance(e, TextEntry) and e.refusal for e in entries):
        return "refusal", str(status)
    if any(isinstance(e, ToolCallEntry) for e in entries):
        return "tool_calls", str(status)
    return "stop", str(status) if status else None


def _reasoning_entry(
    item: Mapping[str, Any], message_id: str, provider: str, stamp: EntryStamp
) -> ReasoningEntry:
    summary = [str(as_dict(s).get("text", "")) for s in as_list(item.get("summary"))]
    content = [str(as_dict(c).get("text", "")) for c in as_list(item.get("content"))]
    encrypted = item.get("encrypted_content")
    return ReasoningEntry(
        text="\n\n".join(summary or content),
        encrypted=encrypted if isinstance(encrypted, str) else None,
        provider=provider,
        message_id=message_id,
        details={"id": item.get("id"), "summary": summary},
        **stamp,
    )


def _item_entries(
    item: Mapping[str, Any], message_id: str, provider: str, stamp: EntryStamp
) -> list[ResponseEntry]:
    kind = item.get("type")
    if kind == "reasoning":
        return [_reasoning_entry(item, message_id, provider, stamp)]
    if kind == "function_call":
        return [
            ToolCallEntry(
                call_id=str(item.get("call_id") or item.get("id")),
                name=str(item.get("name") or ""),
                arguments=str(item.get("arguments") or "{}"),
                message_id=message_id,
                **stamp,
            )
        ]
    if kind != "message":
        return []  # built-in tool items (web search, …) are not lovia entries
    entries: list[ResponseEntry] = []
    for part in map(as_dict, as_list(item.get("content"))):
        if part.get("type") == "refusal":
            refusal = str(part.get("refusal", ""))
            entries.append(TextEntry(text=refusal, refusal=True, message_id=message_id, **stamp))
        elif part.get("text"):
            entries.append(TextEntry(text=str(part["text"]), message_id=message_id, **stamp))
    return entries


def parse_response(
    data: Mapping[str, Any], provider: str, stamp: EntryStamp = NO_STAMP
) -> ModelResponse:
    """Map a ``response`` object (non-streamed, or from the final stream event);
    ``stamp``: what its entries are recorded with (see ``ModelRequest.stamp``)."""
    message_id = str(data.get("id") or new_message_id())
    entries: list[ResponseEntry] = []
    for item in as_list(data.get("output")):
        entries.extend(_item_entries(as_dict(item), message_id, provider, stamp))
    finish, raw = responses_finish(data, entries)
    model = data.get("model")
    return ModelResponse(
        entries=tuple(entries),
        usage=responses_usage(data.get("usage")),
        finish_reason=finish,
        raw_finish_reason=raw,
        response_id=data.get("id"),
        model=str(model) if model else None,
    )


# --------------------------------------------------------------------------- stream


class ResponsesStreamDecoder:
    """Typed Responses events in, chunks out; the final event carries the whole response
    (``stamp``: what the entries of its response are recorded with)."""

    def __init__(self, provider: str, stamp: EntryStamp = NO_STAMP) -> None:
        self._provider = provider
        self._stamp = stamp
        self._id: str | None = None
        self._model: str | None = None
        self._text: list[str] = []
        self._calls: dict[str, int] = {}
        self._done_calls: list[ToolCallEntry] = []
        self._final: ModelResponse | None = None

    @property
    def complete(self) -> bool:
        return self._final is not None

    def feed(self, data: dict[str, Any]) -> list[StreamItem]:
        kind = str(data.get("type", ""))
        if kind in ("error", "response.failed"):
            failed = as_dict(data.get("response")).get("error")
            raise error_from_payload(as_dict(failed) or data, self._provider)
        if kind in ("response.created", "response.in_progress"):
            response = as_dict(data.get("response"))
            self._id = self._id or response.get("id")
            self._model = self._model or response.get("model")
        elif kind in ("response.completed", "response.incomplete"):
            response = as_dict(data.get("response"))
            self._final = parse_response(response, self._provider, self._stamp)
        elif kind.startswith("response.output_item."):
            return self._item(kind, as_dict(data.get("item")))
        return self._delta(kind, data)

    def _delta(self, kind: str, data: Mapping[str, Any]) -> list[StreamItem]:
        delta = data.get("delta")
        if not isinstance(delta, str) or not delta:
            return []
        if kind in ("response.output_text.delta", "response.refusal.delta"):
            self._text.append(delta)
            return [TextChunk(delta)]
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            return [ReasoningChunk(delta)]
        if kind == "response.function_call_arguments.delta":
            index = self._calls.get(str(data.get("item_id")))
            return [] if index is None else [ToolCallChunk(index, None, None, delta)]
        return []

    def _item(self, kind: str, item: Mapping[str, Any]) -> list[StreamItem]:
        if item.get("type") != "function_call":
            return []
        if kind == "response.output_item.added":
            index = len(self._calls)
            self._calls[str(item.get("id"))] = index
            call_id, name = item.get("call_id"), item.get("name")
            return [ToolCallChunk(index, call_id, name, str(item.get("arguments") or ""))]
        self._done_calls.extend(
            e
            for e in _item_entries(item, self.message_id, self._provider, self._stamp)
            if isinstance(e, ToolCallEntry)
        )
        return []

    @property
    def message_id(self) -> str:
        if self._id is None:
            self._id = new_message_id()
        return self._id

    def finish(self) -> ModelResponse:
        assert self._final is not None  # the driver only calls finish() when complete
        return self._final

    def partial(self) -> ModelResponse:
        text = "".join(self._text)
        return partial_response(text, self._done_calls, self.message_id, self._model, self._stamp)


# --------------------------------------------------------------------------- provider


class OpenAIResponses(HttpProvider):
    """A model behind OpenAI's Responses API. Arguments as for :class:`OpenAIChat`."""

    _path = "/responses"

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
        name: str = "openai",
        timeout: float | httpx.Timeout | None = None,
        limits: StreamLimits | None = None,
    ) -> None:
        url = (base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL).rstrip("/")
        key = resolve_api_key(api_key, "OPENAI_API_KEY", url, "OpenAI Responses")
        auth = {"Authorization": f"Bearer {key}"} if key else {}
        seam = HttpSeam(
            provider=name,
            base_url=url,
            headers={**auth, **(headers or {})},
            secret=key,
            http_client=http_client,
            retry=retry,
            timeout=timeout,
            limits=limits,
        )
        official = client_module().URL(url).host == "api.openai.com"
        default = openai_profile(model) if official else compat_profile(model)
        super().__init__(model, name=name, profile=profile or default, stream=stream, seam=seam)

    def render_request(self, request: ModelRequest) -> dict[str, Any]:
        """The exact JSON body for ``request`` (no headers, so no key)."""
        body: dict[str, Any] = {
            "model": self.model,
            "input": responses_input(request, self.name, self._turns),
        }
        if request.system:
            body["instructions"] = request.system
        if request.tools:
            body["tools"] = responses_tools(request.tools)
        if request.output_schema is not None:
            schema = request.output_schema
            body["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": schema.name,
                    "schema": dict(schema.schema),
                    "strict": schema.strict,
                }
            }
        if self.profile.reasoning:
            body["include"] = ["reasoning.encrypted_content"]
        if self._stream:
            body["stream"] = True
        responses_settings(body, request.settings, has_tools=bool(request.tools))
        return body

    def _decoder(self, stamp: EntryStamp) -> ResponsesStreamDecoder:
        return ResponsesStreamDecoder(self.name, stamp)

    def _parse(self, data: dict[str, Any], stamp: EntryStamp) -> ModelResponse:
        if data.get("status") == "failed":
            raise error_from_payload(as_dict(data.get("error")) or data, self.name)
        return parse_response(data, self.name, stamp)
