"""Model providers: the seam (lovia types only) and the httpx adapters."""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
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


# adapters are imported on first use so `import lovia` stays fast
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "OpenAIChat": ".openai_chat",
        "OpenAIResponses": ".openai_responses",
        "Anthropic": ".anthropic",
        "RetryPolicy": "._http",
        "StreamLimits": "._http",
        "resolve_model": ".registry",
        "register_provider": ".registry",
    },
)
