"""The provider seam's types, re-exported from :mod:`lovia.model` where they live.

``from lovia.providers.base import Provider, ModelRequest, ...`` keeps working; new code may
import them from ``lovia.providers`` or ``lovia.model``.
"""

from ..model import (
    FinishReason,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputSchema,
    Provider,
    ReasoningChunk,
    ResponseEntry,
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
    "ResponseEntry",
    "RetryNotice",
    "StreamItem",
    "TextChunk",
    "ToolCallChunk",
    "ToolSpec",
]
