"""Input and output guardrails.

A guardrail is a function ``(ctx, value) -> result`` (sync or async). Input guardrails
see the run's input entries once, after the transcript is built; output guardrails see
the final output before the checkpoint is completed. A guardrail trips by returning
``True``, a reason string, or ``GuardrailResult(tripped=True, reason=...)``; ``None``,
``False`` and ``GuardrailResult(tripped=False)`` pass. A trip ends the run with
:class:`~lovia.errors.GuardrailTripped` and writes nothing to the session.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .context import RunContext
from .errors import UserError

__all__ = ["Guardrail", "GuardrailResult", "as_guardrail", "guardrail"]


@dataclass(frozen=True, slots=True)
class GuardrailResult:
    tripped: bool
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Guardrail:
    """A named guardrail function."""

    name: str
    fn: Callable[..., Any]

    async def check(self, ctx: RunContext[Any], value: Any) -> GuardrailResult:
        result = self.fn(ctx, value)
        if inspect.isawaitable(result):
            result = await result
        return _normalize(result)


def _normalize(result: Any) -> GuardrailResult:
    if result is None or result is False:
        return GuardrailResult(False)
    if result is True:
        return GuardrailResult(True, "tripped")
    if isinstance(result, str):
        return GuardrailResult(True, result)
    if isinstance(result, GuardrailResult):
        return result
    raise UserError(
        f"a guardrail returned {result!r}",
        hint="Return None/False to pass, or True, a reason string, or GuardrailResult.",
    )


def guardrail(fn: Callable[..., Any] | None = None, /, *, name: str | None = None) -> Any:
    """Decorator naming a guardrail function (optional; plain functions work too)."""

    def build(f: Callable[..., Any]) -> Guardrail:
        return Guardrail(name=name or getattr(f, "__name__", "guardrail"), fn=f)

    return build(fn) if fn is not None else build


def as_guardrail(value: Guardrail | Callable[..., Any]) -> Guardrail:
    if isinstance(value, Guardrail):
        return value
    if not callable(value):
        raise UserError(f"{value!r} is not a guardrail", hint="Pass a function (ctx, value).")
    return Guardrail(name=getattr(value, "__name__", "guardrail"), fn=value)
