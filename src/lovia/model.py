"""The model seam: what the loop asks of a model, in lovia types only.

A provider turns a :class:`ModelRequest` (system prompt, the view's entries, tool
specs, settings, an optional output schema) into an async stream of
:data:`StreamItem`: text / reasoning / tool-call chunks as they arrive, optional
:class:`RetryNotice` items when it retried before any content, and exactly one final
:class:`ModelResponse` holding the complete entries, usage and finish reason.
No vendor shape crosses this seam. Capabilities are data in :class:`ModelProfile`.

A core module (it imports only ``transcript`` and ``usage``), so tools, views, the engine
and the provider adapters all share these types without importing each other;
``lovia.providers`` and ``lovia.providers.base`` re-export them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Protocol, cast, runtime_checkable

from .transcript import EntryStamp, ReasoningEntry, TextEntry, ToolCallEntry, TranscriptEntry
from .usage import Usage

__all__ = [
    "FinishReason",
    "ModelProfile",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OutputSchema",
    "Provider",
    "ReasoningChunk",
    "ResponseEntry",
    "RetryNotice",
    "StreamItem",
    "TextChunk",
    "ToolCallChunk",
    "ToolSpec",
]

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "refusal", "error"]
"""Normalized finish reasons; the provider's raw value is kept beside it."""

ResponseEntry = TextEntry | ReasoningEntry | ToolCallEntry


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelProfile:
    """What a model can do; read by the loop instead of isinstance checks."""

    native_json_schema: bool = False
    """Structured output via a JSON-schema response format."""
    parallel_tool_calls: bool = True
    tools: bool = True
    reasoning: bool = False
    usage_in_stream: bool = True
    streaming: bool = True
    """The adapter sends streaming requests (HTTP adapters set it from ``stream=``);
    ``gen_ai.request.stream`` and time-to-first-chunk are reported only when True."""
    context_window: int | None = None
    """Tokens the model accepts (input + output), when known."""
    max_output_tokens: int | None = None
    null_content_with_tool_calls: bool | None = None
    """How an assistant message that only calls tools is sent back: ``"content": null``
    (OpenAI's own form) when True, ``"content": ""`` when False — llama.cpp's server
    answers ``null`` with HTTP 500, while it, vLLM, Ollama and LM Studio all accept ``""``.
    ``None``: the adapter decides (``null`` for api.openai.com, ``""`` for any other server)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """Sampling and request settings; ``None`` means the provider's default."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    parallel_tool_calls: bool | None = None
    tool_choice: str | None = None
    """``auto`` | ``required`` | ``none`` | a tool name."""
    reasoning_effort: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict[str, Any])
    """Vendor-specific body fields merged into the request as-is."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in _SETTINGS_FIELDS:
            value = getattr(self, name)
            if value is not None and value != {}:
                out[name] = (
                    list(cast(tuple[Any, ...], value)) if isinstance(value, tuple) else value
                )
        if "extra" in out:
            out["extra"] = dict(out["extra"])
        return out

    def merged(self, other: ModelSettings | None) -> ModelSettings:
        """These settings with every non-None field of ``other`` on top."""
        if other is None:
            return self
        from dataclasses import replace

        changes: dict[str, Any] = {
            name: getattr(other, name)
            for name in _SETTINGS_FIELDS
            if name != "extra" and getattr(other, name) is not None
        }
        return replace(self, **changes, extra={**self.extra, **other.extra})


_SETTINGS_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(ModelSettings))
"""Field names of :class:`ModelSettings`, in declaration order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool as the model sees it."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    strict: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputSchema:
    """A JSON schema the final answer must follow (native structured output)."""

    name: str
    schema: Mapping[str, Any]
    strict: bool = True


@dataclass(slots=True, kw_only=True)
class ModelRequest:
    """Everything one model call receives: the view, tools, settings."""

    system: str
    messages: Sequence[TranscriptEntry]
    tools: Sequence[ToolSpec] = ()
    settings: ModelSettings = field(default_factory=ModelSettings)
    output_schema: OutputSchema | None = None
    stamp: EntryStamp = field(default_factory=lambda: EntryStamp(), compare=False, repr=False)
    """The run id, turn and agent the entries of this call's response are recorded with
    (empty outside a run). Not sent to the model. A provider that builds its entries with
    them (``TextEntry(text=..., **request.stamp)``) spares the loop a copy of each; one
    that does not gets its entries copied with them."""


@dataclass(slots=True)
class TextChunk:
    text: str


@dataclass(slots=True)
class ReasoningChunk:
    text: str


@dataclass(slots=True)
class ToolCallChunk:
    """A piece of a tool call; parallel calls are told apart by ``index``."""

    index: int
    call_id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(slots=True)
class RetryNotice:
    """The provider is retrying after ``error`` (before any content), in ``delay`` s."""

    attempt: int
    error: Exception
    delay: float


@dataclass(slots=True, kw_only=True)
class ModelResponse:
    """The complete answer of one model call."""

    entries: tuple[ResponseEntry, ...]
    usage: Usage
    finish_reason: FinishReason
    raw_finish_reason: str | None = None
    response_id: str | None = None
    model: str | None = None
    """The model that actually answered, when the provider says."""


StreamItem = TextChunk | ReasoningChunk | ToolCallChunk | RetryNotice | ModelResponse


class ProviderBase:
    """What every provider states the same way: ``name``, ``model`` and ``profile``,
    read-only, and an ``aclose`` with nothing to close (a subclass holding a client
    overrides it). The HTTP adapters, the fake models of ``lovia.testing`` and the
    eval harness's providers derive from it; a :class:`Provider` need not."""

    def __init__(self, name: str, model: str, profile: ModelProfile) -> None:
        self._name = name
        self._model = model
        self._profile = profile

    @property
    def name(self) -> str:
        """``gen_ai.provider.name``."""
        return self._name

    @property
    def model(self) -> str:
        return self._model

    @property
    def profile(self) -> ModelProfile:
        return self._profile

    async def aclose(self) -> None:
        """Release what the provider holds: nothing, unless a subclass says otherwise."""
        return


@runtime_checkable
class Provider(Protocol):
    """A model behind some API. Implementations: see ``lovia.providers``."""

    @property
    def name(self) -> str:
        """Provider name as in ``gen_ai.provider.name`` (``openai``, ``anthropic``…)."""
        ...

    @property
    def model(self) -> str:
        """The model name requested."""
        ...

    @property
    def profile(self) -> ModelProfile: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        """Stream one model call; the last item is a :class:`ModelResponse`."""
        ...

    def render_request(self, request: ModelRequest) -> dict[str, Any]:
        """The exact body this provider would send for ``request`` (keys redacted)."""
        ...
