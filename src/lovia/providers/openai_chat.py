"""OpenAI Chat Completions (``POST /chat/completions``) and every compatible server.

vLLM, llama.cpp's ``llama-server``, Ollama, DeepSeek, Groq, OpenRouter… all speak this
wire format; point ``base_url`` at them (``name=`` sets ``gen_ai.provider.name``).

Three separate parts, each a few small pure functions:

- request mapping: :func:`chat_messages`, :func:`chat_tools`, :func:`apply_settings`;
- response mapping: :func:`parse_chat_completion`, :func:`chat_usage`, :func:`chat_finish`;
- stream decoding: :class:`ChatStreamDecoder` (one ``chat.completion.chunk`` at a time).

Reasoning: DeepSeek's ``reasoning_content`` and Ollama/Groq/vLLM ``reasoning`` fields are
read into :class:`~lovia.transcript.ReasoningEntry`, but never sent back — DeepSeek's API
rejects ``reasoning_content`` in input messages and the others ignore it.
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
from ..transcript import EntryStamp, ReasoningEntry, TextEntry, ToolCallEntry, new_id
from ..usage import Usage
from ._client import client_module
from ._common import (
    NO_STAMP,
    AssistantTurn,
    HttpProvider,
    IdentityMemo,
    InputTurn,
    ToolResultsTurn,
    Turn,
    TurnCache,
    compat_profile,
    group_entries,
    new_message_id,
    openai_profile,
    partial_response,
    resolve_api_key,
)
from ._http import HttpSeam, RetryPolicy, StreamLimits, as_dict, as_list, error_from_payload

if TYPE_CHECKING:
    import httpx

__all__ = [
    "ChatStreamDecoder",
    "OpenAIChat",
    "apply_settings",
    "chat_finish",
    "chat_messages",
    "chat_tools",
    "chat_usage",
    "parse_chat_completion",
]

OPENAI_BASE_URL = "https://api.openai.com/v1"


# --------------------------------------------------------------------------- request


def _assistant_message(turn: AssistantTurn, null_content: bool = True) -> dict[str, Any]:
    text = "".join(e.text for e in turn.entries if isinstance(e, TextEntry) and not e.refusal)
    refusal = "".join(e.text for e in turn.entries if isinstance(e, TextEntry) and e.refusal)
    calls = [
        {
            "id": e.call_id,
            "type": "function",
            "function": {"name": e.name, "arguments": e.arguments},
        }
        for e in turn.entries
        if isinstance(e, ToolCallEntry)
    ]
    # OpenAI sends (and accepts) null beside tool_calls; llama.cpp's server rejects null
    # with HTTP 500, and every compatible server accepts "".
    message: dict[str, Any] = {
        "role": "assistant",
        "content": text or (None if calls and null_content else ""),
    }
    if refusal:
        message["refusal"] = refusal
    if calls:
        message["tool_calls"] = calls
    return message


def chat_messages(
    request: ModelRequest, cache: TurnCache | None = None, *, null_content: bool = True
) -> list[dict[str, Any]]:
    """The ``messages`` array: system prompt first, then one message per turn.

    With a ``cache`` (one per provider instance) only the turns that changed since the
    conversation's previous request are grouped and mapped again. ``null_content=False``
    sends ``"content": ""`` instead of ``null`` beside an assistant's ``tool_calls``
    (see :attr:`~lovia.model.ModelProfile.null_content_with_tool_calls`).
    """
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    render = _turn_messages if null_content else _compat_turn_messages
    if cache is not None:
        messages.extend(cache.flat(request.messages, render))
        return messages
    for turn in group_entries(request.messages):
        messages.extend(render(turn))
    return messages


def _turn_messages(turn: Turn, null_content: bool = True) -> list[dict[str, Any]]:
    if isinstance(turn, InputTurn):
        return [{"role": turn.role, "content": turn.content}]
    if isinstance(turn, ToolResultsTurn):
        return _tool_messages(turn)
    if any(not isinstance(e, ReasoningEntry) for e in turn.entries):
        return [_assistant_message(turn, null_content)]
    return []


def _compat_turn_messages(turn: Turn) -> list[dict[str, Any]]:
    return _turn_messages(turn, null_content=False)


def _tool_messages(turn: ToolResultsTurn) -> list[dict[str, Any]]:
    return [{"role": "tool", "tool_call_id": r.call_id, "content": r.content} for r in turn.results]


def chat_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Function tools with their JSON schemas."""
    out: list[dict[str, Any]] = []
    for tool in tools:
        function: dict[str, Any] = {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.parameters),
        }
        if tool.strict:
            function["strict"] = True
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: str) -> str | dict[str, Any]:
    if choice in ("auto", "required", "none"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def apply_settings(
    body: dict[str, Any], settings: ModelSettings, *, max_tokens_key: str, has_tools: bool
) -> None:
    """Copy the set fields of ``settings`` into ``body``; ``extra`` goes last."""
    simple = {
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        max_tokens_key: settings.max_tokens,
        "seed": settings.seed,
        "reasoning_effort": settings.reasoning_effort,
    }
    body.update({k: v for k, v in simple.items() if v is not None})
    if settings.stop is not None:
        body["stop"] = list(settings.stop)
    if has_tools and settings.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = settings.parallel_tool_calls
    if settings.tool_choice is not None:
        body["tool_choice"] = _tool_choice(settings.tool_choice)
    body.update(settings.extra)


# --------------------------------------------------------------------------- response


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def chat_usage(usage: Mapping[str, Any] | None) -> Usage:
    """Normalize a chat ``usage`` object (``None`` → ``Usage(missing=True)``)."""
    if not usage:
        return Usage(missing=True, requests=1)
    prompt_details: Mapping[str, Any] = usage.get("prompt_tokens_details") or {}
    completion_details: Mapping[str, Any] = usage.get("completion_tokens_details") or {}
    cached = _int(prompt_details.get("cached_tokens")) or _int(usage.get("prompt_cache_hit_tokens"))
    return Usage(
        input_tokens=_int(usage.get("prompt_tokens")),
        output_tokens=_int(usage.get("completion_tokens")),
        cache_read_tokens=cached,
        reasoning_tokens=_int(completion_details.get("reasoning_tokens")),
        requests=1,
    )


_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "end_turn": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "refusal": "refusal",
    "error": "error",
}


def chat_finish(raw: str | None, *, refused: bool = False) -> FinishReason:
    """Normalized finish reason; a refusal wins over the raw ``stop``."""
    if refused:
        return "refusal"
    return _FINISH.get(raw or "stop", "stop")


def _reasoning_text(message: Mapping[str, Any]) -> str:
    value = message.get("reasoning_content") or message.get("reasoning") or ""
    return value if isinstance(value, str) else ""


def _entries(
    *,
    reasoning: str,
    text: str,
    refusal: str,
    calls: Sequence[ToolCallEntry],
    message_id: str,
    provider: str,
    stamp: EntryStamp,
) -> tuple[ResponseEntry, ...]:
    entries: list[ResponseEntry] = []
    if reasoning:
        entries.append(
            ReasoningEntry(text=reasoning, provider=provider, message_id=message_id, **stamp)
        )
    if text:
        entries.append(TextEntry(text=text, message_id=message_id, **stamp))
    if refusal:
        entries.append(TextEntry(text=refusal, refusal=True, message_id=message_id, **stamp))
    entries.extend(calls)
    return tuple(entries)


def _tool_call(raw: Mapping[str, Any], message_id: str, stamp: EntryStamp) -> ToolCallEntry:
    function: Mapping[str, Any] = raw.get("function") or {}
    arguments = function.get("arguments")
    if not isinstance(arguments, str):  # a few servers send an object
        arguments = json.dumps(arguments) if arguments is not None else "{}"
    return ToolCallEntry(
        call_id=str(raw.get("id") or new_id("call")),
        name=str(function.get("name") or ""),
        arguments=arguments or "{}",
        message_id=message_id,
        **stamp,
    )


def parse_chat_completion(
    data: Mapping[str, Any], provider: str, stamp: EntryStamp = NO_STAMP
) -> ModelResponse:
    """Map a non-streaming ``chat.completion`` object to a :class:`ModelResponse`
    (``stamp``: what its entries are recorded with, see ``ModelRequest.stamp``)."""
    message_id = str(data.get("id") or new_message_id())
    choices = as_list(data.get("choices"))
    choice = as_dict(choices[0] if choices else None)
    message = as_dict(choice.get("message"))
    refusal = message.get("refusal") or ""
    raw_finish = choice.get("finish_reason")
    raw_calls = as_list(message.get("tool_calls"))
    calls = [_tool_call(as_dict(c), message_id, stamp) for c in raw_calls]
    entries = _entries(
        reasoning=_reasoning_text(message),
        text=message.get("content") or "",
        refusal=refusal,
        calls=calls,
        message_id=message_id,
        provider=provider,
        stamp=stamp,
    )
    return ModelResponse(
        entries=entries,
        usage=chat_usage(data.get("usage")),
        finish_reason=chat_finish(raw_finish, refused=bool(refusal)),
        raw_finish_reason=raw_finish,
        response_id=data.get("id"),
        model=data.get("model"),
    )


# --------------------------------------------------------------------------- stream


@dataclass(slots=True)
class _CallBuffer:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list[str])

    def entry(self, message_id: str, stamp: EntryStamp) -> ToolCallEntry:
        return ToolCallEntry(
            call_id=self.call_id or new_id("call"),
            name=self.name,
            arguments="".join(self.arguments) or "{}",
            message_id=message_id,
            **stamp,
        )

    def is_complete(self) -> bool:
        try:
            json.loads("".join(self.arguments) or "{}")
        except ValueError:
            return False
        return bool(self.name)


class ChatStreamDecoder:
    """Accumulates ``chat.completion.chunk`` events; yields chunks as they arrive
    (``stamp``: what the entries of its response are recorded with)."""

    def __init__(self, provider: str, stamp: EntryStamp = NO_STAMP) -> None:
        self._provider = provider
        self._stamp = stamp
        self._id: str | None = None
        self._model: str | None = None
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _CallBuffer] = {}
        self._finish: str | None = None
        self._usage: Mapping[str, Any] | None = None

    @property
    def complete(self) -> bool:
        return self._finish is not None

    @property
    def message_id(self) -> str:
        if self._id is None:
            self._id = new_message_id()
        return self._id

    def feed(self, data: dict[str, Any]) -> list[StreamItem]:
        if data.get("error") and not data.get("choices"):
            raise error_from_payload(data, self._provider)
        self._id = self._id or data.get("id")
        self._model = self._model or data.get("model")
        groq: Mapping[str, Any] = data.get("x_groq") or {}
        self._usage = data.get("usage") or groq.get("usage") or self._usage
        items: list[StreamItem] = []
        for raw in as_list(data.get("choices")):
            choice = as_dict(raw)
            if choice.get("index", 0) != 0:
                continue
            items.extend(self._delta(as_dict(choice.get("delta"))))
            finish = choice.get("finish_reason")
            self._finish = str(finish) if finish else self._finish
        return items

    def _delta(self, delta: Mapping[str, Any]) -> list[StreamItem]:
        items: list[StreamItem] = []
        reasoning = _reasoning_text(delta)
        if reasoning:
            self._reasoning.append(reasoning)
            items.append(ReasoningChunk(reasoning))
        for key, parts in (("content", self._text), ("refusal", self._refusal)):
            text = delta.get(key)
            if isinstance(text, str) and text:
                parts.append(text)
                items.append(TextChunk(text))
        for position, raw in enumerate(as_list(delta.get("tool_calls"))):
            items.append(self._tool_delta(position, as_dict(raw)))
        return items

    def _tool_delta(self, position: int, raw: Mapping[str, Any]) -> ToolCallChunk:
        index = raw.get("index")
        if not isinstance(index, int):
            index = len(self._calls) if raw.get("id") else max(self._calls, default=position)
        buffer = self._calls.setdefault(index, _CallBuffer())
        function: Mapping[str, Any] = raw.get("function") or {}
        call_id = raw.get("id") or None
        name = function.get("name") or None
        arguments = function.get("arguments") or ""
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        buffer.call_id = buffer.call_id or (call_id or "")
        buffer.name = buffer.name or (name or "")
        buffer.arguments.append(arguments)
        return ToolCallChunk(index, call_id, name, arguments)

    def _calls_in_order(self) -> list[_CallBuffer]:
        return [self._calls[i] for i in sorted(self._calls)]

    def finish(self) -> ModelResponse:
        refusal = "".join(self._refusal)
        entries = _entries(
            reasoning="".join(self._reasoning),
            text="".join(self._text),
            refusal=refusal,
            calls=[c.entry(self.message_id, self._stamp) for c in self._calls_in_order()],
            message_id=self.message_id,
            provider=self._provider,
            stamp=self._stamp,
        )
        return ModelResponse(
            entries=entries,
            usage=chat_usage(self._usage),
            finish_reason=chat_finish(self._finish, refused=bool(refusal)),
            raw_finish_reason=self._finish,
            response_id=self._id,
            model=self._model,
        )

    def partial(self) -> ModelResponse:
        stamp = self._stamp
        calls = [c.entry(self.message_id, stamp) for c in self._calls_in_order() if c.is_complete()]
        return partial_response("".join(self._text), calls, self.message_id, self._model, stamp)


# --------------------------------------------------------------------------- provider


class OpenAIChat(HttpProvider):
    """A model behind the Chat Completions API (OpenAI or any compatible server).

    Args:
        model: Model name, e.g. ``"gpt-4.1"`` or ``"qwen3:8b"``.
        base_url: API root; default ``$OPENAI_BASE_URL`` or ``https://api.openai.com/v1``.
        api_key: Default ``$OPENAI_API_KEY``; may be omitted for servers on localhost.
        http_client: An ``httpx.AsyncClient`` (or compatible) to use; not closed by us.
        stream: Use SSE streaming (``False``: one request, presented as a one-shot stream).
        profile: Override the model's capabilities (compatible servers get conservative ones).
        retry: Retry policy (default: 3 retries, exponential backoff with full jitter).
        headers: Extra request headers.
        name: ``gen_ai.provider.name`` (``"openai"``; e.g. ``"ollama"`` for a local server).
        timeout: Seconds (or an ``httpx.Timeout``) for a client we create (socket level).
        limits: :class:`~lovia.providers.StreamLimits`: the call deadline (default 30 min,
            retries included), the idle deadline between streamed events (default 120 s)
            and the largest event or non-streaming body (16 MiB). They hold against
            trickling servers too.
    """

    _path = "/chat/completions"

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
        key = resolve_api_key(api_key, "OPENAI_API_KEY", url, "OpenAI Chat Completions")
        self._official = client_module().URL(url).host == "api.openai.com"
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
        default = openai_profile(model) if self._official else compat_profile(model)
        super().__init__(model, name=name, profile=profile or default, stream=stream, seam=seam)
        null_content = self.profile.null_content_with_tool_calls
        self._null_content = self._official if null_content is None else null_content
        self._tools = IdentityMemo()  # request.tools (a run's tuple) -> its rendering
        self._with_tools = IdentityMemo()  # ModelSettings -> what it adds to a body
        self._without_tools = IdentityMemo()

    def render_request(self, request: ModelRequest) -> dict[str, Any]:
        """The exact JSON body for ``request`` (no headers, so no key)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(request, self._turns, null_content=self._null_content),
        }
        tools = request.tools
        if tools:
            body["tools"] = self._tools.get(tools, lambda: chat_tools(tools))
        if request.output_schema is not None:
            schema = request.output_schema
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": schema.name,
                    "schema": dict(schema.schema),
                    "strict": schema.strict,
                },
            }
        if self._stream:
            body["stream"] = True
            if self.profile.usage_in_stream:
                body["stream_options"] = {"include_usage": True}
        # OpenAI itself wants max_completion_tokens (reasoning models reject max_tokens);
        # compatible servers widely understand only max_tokens.
        body.update(self._settings_part(request.settings, bool(tools)))
        return body

    def _settings_part(self, settings: ModelSettings, has_tools: bool) -> dict[str, Any]:
        """What :func:`apply_settings` adds to a body, once per settings object: merged
        into the body in one ``update``, the keys land in the same order and places."""
        memo = self._with_tools if has_tools else self._without_tools
        key = "max_completion_tokens" if self._official else "max_tokens"

        def make() -> dict[str, Any]:
            part: dict[str, Any] = {}
            apply_settings(part, settings, max_tokens_key=key, has_tools=has_tools)
            return part

        return memo.get(settings, make)

    def _decoder(self, stamp: EntryStamp) -> ChatStreamDecoder:
        return ChatStreamDecoder(self.name, stamp)

    def _parse(self, data: dict[str, Any], stamp: EntryStamp) -> ModelResponse:
        if data.get("error") and not data.get("choices"):
            raise error_from_payload(data, self.name)
        return parse_chat_completion(data, self.name, stamp)
