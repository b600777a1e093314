"""lovia: a typed, observability-first framework for LLM agents.

Every loop phase is an OpenTelemetry span, every token is counted and priced, every
run can resume after a crash, and ``lovia replay`` rebuilds exactly what the model saw.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from . import agent_tool as _agent_tool  # registers the builder Agent.as_tool() calls
from . import events, transcript
from ._defaults import configure, lease_ttl, tune_gc
from ._lazy import lazy_exports as _lazy_exports
from ._version import __version__
from .agent import Agent, Handoff
from .context import CancelToken, Mailbox, RunContext
from .errors import (
    AnswerTooLarge,
    ApprovalPending,
    BudgetExceeded,
    ContextOverflow,
    GuardrailTripped,
    LoviaError,
    MaxTurnsExceeded,
    ModelBehaviorError,
    NestingLimitExceeded,
    OutputValidationError,
    ProviderError,
    RunCancelled,
    RunError,
    SpendLimitExceeded,
    ToolError,
    TooManyToolCalls,
    UserError,
)
from .guardrails import GuardrailResult, guardrail
from .hooks import AgentHooks
from .model import ModelProfile, ModelSettings, Provider
from .plugins import Plugin, PluginInstance
from .pricing import load_prices, set_price
from .result import RunResult
from .runner import Runner, RunOptions, RunStream
from .spend import SpendLimit
from .tools import Tool, tool
from .transcript import InputEntry, TranscriptEntry
from .usage import RunBudget, Usage

del _agent_tool  # imported for its registration; lovia.agent_tool stays a submodule

if _TYPE_CHECKING:
    from .plugins.mcp import MCP
    from .plugins.memory import Memory
    from .plugins.skills import Skills
    from .plugins.todo import Todo
    from .plugins.workspace import Workspace
    from .providers.anthropic import Anthropic
    from .providers.openai_chat import OpenAIChat
    from .providers.openai_responses import OpenAIResponses
    from .tools import Tool as _Tool
    from .view.base import ContextStrategy
    from .view.compaction import Compaction

    recall_tool_result: _Tool

# Imported on first use, so `import lovia` stays fast (yaml, subprocess, adapters...).
__getattr__, __dir__ = _lazy_exports(
    __name__,
    {
        "MCP": ".plugins.mcp",
        "Memory": ".plugins.memory",
        "Skills": ".plugins.skills",
        "Todo": ".plugins.todo",
        "Workspace": ".plugins.workspace",
        "Anthropic": ".providers.anthropic",
        "OpenAIChat": ".providers.openai_chat",
        "OpenAIResponses": ".providers.openai_responses",
        "Compaction": ".view.compaction",
        "ContextStrategy": ".view.base",
        "recall_tool_result": ".view",
    },
)

__all__ = [
    "Agent",
    "AgentHooks",
    "AnswerTooLarge",
    "Anthropic",
    "ApprovalPending",
    "BudgetExceeded",
    "CancelToken",
    "Compaction",
    "ContextOverflow",
    "ContextStrategy",
    "GuardrailResult",
    "GuardrailTripped",
    "Handoff",
    "InputEntry",
    "LoviaError",
    "MCP",
    "Mailbox",
    "MaxTurnsExceeded",
    "Memory",
    "ModelBehaviorError",
    "ModelProfile",
    "ModelSettings",
    "NestingLimitExceeded",
    "OpenAIChat",
    "OpenAIResponses",
    "OutputValidationError",
    "Plugin",
    "PluginInstance",
    "Provider",
    "ProviderError",
    "RunBudget",
    "RunCancelled",
    "RunContext",
    "RunError",
    "RunOptions",
    "RunResult",
    "RunStream",
    "Runner",
    "Skills",
    "SpendLimit",
    "SpendLimitExceeded",
    "Todo",
    "TooManyToolCalls",
    "Tool",
    "ToolError",
    "TranscriptEntry",
    "Usage",
    "UserError",
    "Workspace",
    "__version__",
    "configure",
    "events",
    "guardrail",
    "lease_ttl",
    "load_prices",
    "recall_tool_result",
    "set_price",
    "tool",
    "transcript",
    "tune_gc",
]
