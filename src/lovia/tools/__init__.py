"""Tools: typed functions the model can call."""

from .tool import (
    ApprovalPolicy,
    ApprovalVerdict,
    Approver,
    Tool,
    ToolArgumentsError,
    serialize_result,
    tool,
)

__all__ = [
    "ApprovalPolicy",
    "ApprovalVerdict",
    "Approver",
    "Tool",
    "ToolArgumentsError",
    "serialize_result",
    "tool",
]
