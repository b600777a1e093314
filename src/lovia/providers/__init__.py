"""Model providers: the seam (lovia types only) and the httpx adapters."""

from .base import (
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
