"""Model providers: the seam (lovia types only) and the httpx adapters."""

from typing import TYPE_CHECKING

from ..model import (
    FinishReason,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputSchema,
    Provider,
    ReasoningChunk,
    RetryNotice,
    StreamItem,
    TextChunk,
    ToolCallChunk,
    ToolSpec,
)

if TYPE_CHECKING:  # imported lazily at run time (see __getattr__), typed for checkers
    from ._http import RetryPolicy as RetryPolicy
    from ._http import StreamLimits as StreamLimits

__all__ = [
    "FinishReason",
    "ModelProfile",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OutputSchema",
    "Provider",
    "ReasoningChunk",
    "RetryNotice",
    "StreamItem",
    "TextChunk",
    "ToolCallChunk",
    "ToolSpec",
]


def __getattr__(name: str) -> object:
    # adapters are imported on first use so `import lovia` stays fast
    lazy = {
        "OpenAIChat": "openai_chat",
        "OpenAIResponses": "openai_responses",
        "Anthropic": "anthropic",
        "RetryPolicy": "_http",
        "StreamLimits": "_http",
        "resolve_model": "registry",
        "register_provider": "registry",
    }
    if name in lazy:
        import importlib

        return getattr(importlib.import_module(f".{lazy[name]}", __name__), name)
    raise AttributeError(name)
