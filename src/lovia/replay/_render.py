"""Render a view as a provider's exact request body, and re-send it (what-if)."""

from __future__ import annotations

import re
from typing import Any, Literal, cast

from ..errors import UserError
from ..model import ModelRequest, ModelResponse, Provider
from ._views import ReplayedView

__all__ = ["ask", "provider_for", "redact", "render_request", "rerun"]

REDACTED = "[REDACTED]"
_SECRET_KEYS = re.compile(
    r"^(authorization|proxy-authorization|x-api-key|api[-_]?key|api[-_]?token|"
    r"access[-_]?token|secret|client[-_]?secret|password)$",
    re.IGNORECASE,
)
_SECRET_VALUES = re.compile(r"\b(sk-[A-Za-z0-9_-]{8,}|sk-ant-[A-Za-z0-9_-]{8,}|Bearer\s+\S{8,})")


def redact(value: Any) -> Any:
    """A copy of ``value`` with API keys (by field name or by shape) replaced."""
    if isinstance(value, dict):
        items = cast(dict[Any, Any], value).items()
        return {
            k: REDACTED if isinstance(k, str) and _SECRET_KEYS.match(k) else redact(v)
            for k, v in items
        }
    if isinstance(value, list):
        return [redact(v) for v in cast("list[Any]", value)]  # JSON being printed
    if isinstance(value, str):
        return _SECRET_VALUES.sub(REDACTED, value)
    return value


def _request(view: ReplayedView) -> ModelRequest:
    if view.request is None:
        raise UserError(
            f"the view of {view.label} could not be rebuilt: {'; '.join(view.problems)}",
            hint="Run `lovia replay RUN` to see what is missing.",
        )
    return view.request


def render_request(view: ReplayedView, provider: Provider) -> dict[str, Any]:
    """The exact body ``provider`` sends for this view (keys redacted)."""
    result: Any = redact(provider.render_request(_request(view)))
    return result


async def rerun(
    view: ReplayedView,
    provider: Provider,
    *,
    tracer_provider: Any = None,
    meter_provider: Any = None,
) -> ModelResponse:
    """Send this exact view to ``provider`` and return its answer (usage priced).

    A what-if: nothing is written to the run, no tool is executed. It is a model call
    like any other (purpose ``what_if``): a ``chat`` span and metrics when an
    OpenTelemetry SDK is configured (or the providers are given).
    """
    return await ask(
        provider,
        _request(view),
        purpose="what_if",
        run_id=view.record.run_id,
        agent=view.agent,
        turn=view.turn,
        view_hash=view.rebuilt_hash,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
    )


async def ask(
    provider: Provider,
    request: ModelRequest,
    *,
    purpose: Literal["what_if", "eval"],
    run_id: str,
    agent: str,
    turn: int = 0,
    view_hash: str = "",
    tracer_provider: Any = None,
    meter_provider: Any = None,
) -> ModelResponse:
    """One model call outside a run through the loop's one model-call path (priced,
    traced as a ``chat`` span with ``lovia.call.purpose``): a what-if, an LLM judge."""
    from .._loop.call import ModelCall, Returned, call_model
    from ..telemetry.tracer import make_run_tracer

    call = ModelCall(
        provider=provider,
        request=request,
        base={"run_id": run_id, "agent": agent, "turn": turn},
        purpose=purpose,
        view_hash=view_hash,
        deltas=False,
    )
    tracer = make_run_tracer(tracer_provider, meter_provider)
    out: Returned | None = None
    async for item in call_model(call, None):
        if isinstance(item, Returned):
            out = item
        elif tracer is not None:
            tracer.record(item)
    assert out is not None  # the call ends with its outcome or raises
    return out.response


_ADAPTERS = {
    "openai": "openai",
    "openai-chat": "openai",
    "openai-responses": "openai-responses",
    "anthropic": "anthropic",
}


def provider_for(
    spec: str, *, base_url: str | None = None, stream: bool | None = None, for_render: bool = False
) -> Provider:
    """A provider for ``"prefix:model"``.

    With ``base_url`` or ``stream`` (or ``for_render``: no API key is needed to render)
    a built-in adapter is built directly; otherwise the registry resolves ``spec``.
    """
    prefix, _, model = spec.partition(":")
    kind = _ADAPTERS.get(prefix)
    if kind is None or not (base_url or stream is not None or for_render):
        from ..providers.registry import resolve_model

        return resolve_model(spec)
    if not model:
        raise UserError(f"model {spec!r} names no model", hint="Write it as 'provider:model'.")
    options: dict[str, Any] = {"base_url": base_url, "stream": True if stream is None else stream}
    if for_render:
        options["api_key"] = "sk-render-only-not-sent"
    if kind == "anthropic":
        from ..providers.anthropic import Anthropic

        return Anthropic(model, **options)
    if kind == "openai-responses":
        from ..providers.openai_responses import OpenAIResponses

        return OpenAIResponses(model, **options)
    from ..providers.openai_chat import OpenAIChat

    return OpenAIChat(model, **options)
