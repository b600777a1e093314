"""lovia: a typed, observability-first framework for LLM agents.

Every loop phase is an OpenTelemetry span, every token is counted and priced, every
run can resume after a crash, and ``lovia replay`` rebuilds exactly what the model saw.
"""

from . import events, transcript
from ._version import __version__
from .agent import Agent, Handoff
from .context import CancelToken, Mailbox, RunContext
from .errors import (
    ApprovalPending,
    BudgetExceeded,
    ContextOverflow,
    GuardrailTripped,
    LoviaError,
    MaxTurnsExceeded,
    ModelBehaviorError,
    OutputValidationError,
    ProviderError,
    RunCancelled,
    RunError,
    ToolError,
    UserError,
)
from .guardrails import GuardrailResult, guardrail
from .hooks import AgentHooks
from .plugins import Plugin, PluginInstance
from .providers import ModelProfile, ModelSettings
from .result import RunResult
from .runner import Runner, RunStream
from .tools import Tool, tool
from .transcript import InputEntry, TranscriptEntry
from .usage import RunBudget, Usage

__all__ = [
    "Agent",
    "AgentHooks",
    "ApprovalPending",
    "BudgetExceeded",
    "CancelToken",
    "ContextOverflow",
    "GuardrailResult",
    "GuardrailTripped",
    "Handoff",
    "InputEntry",
    "LoviaError",
    "Mailbox",
    "MaxTurnsExceeded",
    "ModelBehaviorError",
    "ModelProfile",
    "ModelSettings",
    "OutputValidationError",
    "Plugin",
    "PluginInstance",
    "ProviderError",
    "RunBudget",
    "RunCancelled",
    "RunContext",
    "RunError",
    "RunResult",
    "RunStream",
    "Runner",
    "Tool",
    "ToolError",
    "TranscriptEntry",
    "Usage",
    "UserError",
    "__version__",
    "events",
    "guardrail",
    "tool",
    "transcript",
]
