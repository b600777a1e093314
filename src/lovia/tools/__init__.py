"""Tools: typed functions the model can call."""

from .tool import ApprovalPolicy, Tool, ToolArgumentsError, serialize_result, tool

__all__ = ["ApprovalPolicy", "Tool", "ToolArgumentsError", "serialize_result", "tool"]
