"""Every exception lovia raises, and nothing else.

Each error says what happened (``message``) and what to do about it (``hint``).
Logging and redaction happen where errors are handled, never here.

```
LoviaError                      base: .message, .hint
├── UserError                   a configuration or usage mistake (fix your code)
├── ToolError                   raised by a tool to send a chosen error text to the model
├── RunError                    a run ended without an answer; .run_id, .turn
│   ├── MaxTurnsExceeded        the model kept calling tools past max_turns
│   ├── BudgetExceeded          a RunBudget limit (.limit) was hit
│   ├── SpendLimitExceeded      a SpendLimit shared by runs (.limit) was reached
│   ├── RunCancelled            the cancel token was set
│   ├── GuardrailTripped        an input/output guardrail said no (.guardrail, .reason)
│   ├── ApprovalPending         tool calls wait for approval (.pending); resumable
│   ├── OutputValidationError   the final output failed output_type validation (.raw, .errors)
│   ├── ModelBehaviorError      the model answered with something unusable
│   │   └── TooManyToolCalls    one answer asked for more tool calls than the agent allows
│   └── HookError               a handler of the agent's AgentHooks(strict=True) raised
├── ProviderError               the model API failed (.status, .retryable, .provider)
│   ├── RateLimited             429; .retry_after seconds when the API said so
│   ├── ProviderOverloaded      529 / 503: the provider is busy
│   ├── AuthenticationError     401 / 403: the API key is wrong or missing rights
│   ├── ModelNotFound           404 / unknown model
│   ├── BadRequest              400: the request was rejected
│   │   └── ContextOverflow     the view is larger than the model's context window
│   ├── ProviderServerError     5xx
│   ├── AnswerTooLarge          one answer grew past StreamLimits (.limit bytes)
│   └── StreamInterrupted       the connection or stream broke (.partial kept)
└── StoreError                  a session/checkpoint store failed
    ├── SchemaVersionError      a record was written by a newer lovia
    ├── RunNotFound             no such run_id in the store
    └── RunLeaseHeld            another worker is running this run_id
        └── LeaseLost           this worker's lease was taken over mid-run (fenced out)
```
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AnswerTooLarge",
    "ApprovalPending",
    "AuthenticationError",
    "BadRequest",
    "BudgetExceeded",
    "ContextOverflow",
    "GuardrailTripped",
    "HookError",
    "LeaseLost",
    "LoviaError",
    "MaxTurnsExceeded",
    "ModelBehaviorError",
    "ModelNotFound",
    "OutputValidationError",
    "ProviderError",
    "ProviderOverloaded",
    "ProviderServerError",
    "RateLimited",
    "RunCancelled",
    "RunError",
    "NestingLimitExceeded",
    "RunLeaseHeld",
    "RunNotFound",
    "SchemaVersionError",
    "SpendLimitExceeded",
    "StoreError",
    "StreamInterrupted",
    "TooManyToolCalls",
    "ToolError",
    "UserError",
]


class LoviaError(Exception):
    """Base of every lovia error: ``message`` says what happened, ``hint`` what to do."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class UserError(LoviaError):
    """A mistake in how lovia is configured or called; fix the calling code."""


class ToolError(LoviaError):
    """Raise from a tool to send ``message`` to the model as an error result."""


class RunError(LoviaError):
    """A run ended without a final answer."""

    run_id: str | None = None
    turn: int | None = None
    finish_reason: str = "error"


class MaxTurnsExceeded(RunError):
    """The run reached ``max_turns`` model steps without a final answer."""

    finish_reason = "max_turns"


class BudgetExceeded(RunError):
    """A :class:`~lovia.RunBudget` limit was reached."""

    finish_reason = "budget"

    def __init__(
        self, message: str, hint: str | None = None, *, limit: str = "", used: float = 0
    ) -> None:
        super().__init__(message, hint)
        self.limit = limit
        self.used = used
        self.budget_run_id: str | None = None
        """The run whose budget was hit: this run's or, in a child run, a parent's."""


class SpendLimitExceeded(RunError):
    """A :class:`~lovia.SpendLimit` (spend per label value and window, shared by every
    run on the store) was reached before a model call."""

    finish_reason = "spend_limit"

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        limit: Any = None,
        spent_usd: float = 0.0,
        window_start: float = 0.0,
    ) -> None:
        super().__init__(message, hint)
        self.limit = limit
        """The :class:`~lovia.SpendLimit` that was reached."""
        self.spent_usd = spent_usd
        """Spent plus reserved by calls in flight, in the window, when it was refused."""
        self.window_start = window_start
        """Unix time the limit's window began (UTC-aligned)."""


class NestingLimitExceeded(RunError):
    """Agents as tools nested deeper (``max_depth``), or one run started more child runs
    (``max_children``), than allowed: the whole tree of runs ends."""

    def __init__(self, message: str, hint: str | None = None, *, limit: str = "", used: int = 0):
        super().__init__(message, hint)
        self.limit = limit
        self.used = used


class RunCancelled(RunError):
    """The run's cancel token was set, or its host (a durable engine, the task's owner)
    stopped it; the checkpoint stays resumable."""

    finish_reason = "cancelled"
    cancelled_by: str | None = None
    """Who stopped it, when not the cancel token (``host: <exception type>``)."""


class GuardrailTripped(RunError):
    """A guardrail's tripwire fired; nothing was written to the session."""

    finish_reason = "guardrail"

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        guardrail: str = "",
        reason: str = "",
        kind: str = "input",
    ) -> None:
        super().__init__(message, hint)
        self.guardrail = guardrail
        self.reason = reason
        self.kind = kind


class ApprovalPending(RunError):
    """Tool calls wait for a human decision; resume with ``approvals=``."""

    finish_reason = "approval_pending"

    def __init__(
        self, message: str, hint: str | None = None, *, pending: tuple[Any, ...] = ()
    ) -> None:
        super().__init__(message, hint)
        self.pending = pending


class OutputValidationError(RunError):
    """The final answer did not validate against ``output_type`` (after repair turns)."""

    def __init__(
        self, message: str, hint: str | None = None, *, raw: str = "", errors: Any = None
    ) -> None:
        super().__init__(message, hint)
        self.raw = raw
        self.errors = errors


class ModelBehaviorError(RunError):
    """The model produced something the run cannot use (e.g. an empty answer)."""


class TooManyToolCalls(ModelBehaviorError):
    """One model answer asked for more tool calls than ``Agent.max_tool_calls_per_turn``;
    none of them ran."""

    finish_reason = "too_many_tool_calls"

    def __init__(
        self, message: str, hint: str | None = None, *, calls: int = 0, limit: int = 0
    ) -> None:
        super().__init__(message, hint)
        self.calls = calls
        self.limit = limit


class HookError(RunError):
    """A handler of the agent's own ``AgentHooks(strict=True)`` raised (``__cause__``).

    Plugin hooks never fail a run (plugins provide capabilities, not control flow):
    their errors are logged with the plugin's name and the run goes on.
    """

    def __init__(
        self, message: str, hint: str | None = None, *, hook: str = "", event: str = ""
    ) -> None:
        super().__init__(message, hint)
        self.hook = hook
        self.event = event


class ProviderError(LoviaError):
    """The model API call failed."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        status: int | None = None,
        retryable: bool = False,
        provider: str = "",
        code: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, hint)
        self.status = status
        self.retryable = retryable
        self.provider = provider
        self.code = code
        self.retry_after = retry_after


class RateLimited(ProviderError):
    """HTTP 429: slow down; ``retry_after`` says how long when the API told us."""


class ProviderOverloaded(ProviderError):
    """The provider is overloaded (Anthropic 529, 503)."""


class AuthenticationError(ProviderError):
    """The API key is missing, wrong, or lacks permission."""


class ModelNotFound(ProviderError):
    """The model name is unknown to the provider."""


class BadRequest(ProviderError):
    """The provider rejected the request as malformed."""


class ContextOverflow(BadRequest):
    """The request is larger than the model's context window."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        tokens: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, hint, **kwargs)
        self.tokens = tokens
        self.limit = limit


class ProviderServerError(ProviderError):
    """The provider answered with a 5xx error."""


class AnswerTooLarge(ProviderError):
    """One model answer (a streamed response's bytes, or a non-streamed body) grew past
    its limit (``limit`` bytes); reading stopped there and the call is not retried."""

    def __init__(
        self, message: str, hint: str | None = None, *, limit: int = 0, **kwargs: Any
    ) -> None:
        super().__init__(message, hint, **kwargs)
        self.limit = limit


class StreamInterrupted(ProviderError):
    """The connection or the event stream broke; ``partial`` holds what arrived."""

    def __init__(self, message: str, hint: str | None = None, **kwargs: Any) -> None:
        partial = kwargs.pop("partial", None)
        super().__init__(message, hint, **kwargs)
        self.partial: Any = partial


class StoreError(LoviaError):
    """A session or checkpoint store failed."""


class SchemaVersionError(StoreError):
    """A stored record was written by a newer lovia than this one."""


class RunNotFound(StoreError):
    """No run with that id is in the store."""


class RunLeaseHeld(StoreError):
    """Another worker holds the lease on this run_id."""


class LeaseLost(RunLeaseHeld):
    """This worker's lease on a run was taken over: its writes are refused (fenced out).

    Raised by a store write carrying a stale fencing token, and by the loop when the
    lease cannot be confirmed before a tool starts. The run stops at once and writes
    nothing more: the run now belongs to the worker that holds the lease.
    """
