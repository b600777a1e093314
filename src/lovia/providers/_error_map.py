"""What a failed call means: HTTP answers, in-stream error objects and transport
exceptions mapped to the most specific :class:`~lovia.errors.ProviderError`.

Pure functions, no I/O: :mod:`._http` (the seam) calls them and retries what they mark
retryable.

- :func:`error_from_response` maps a non-2xx answer (status, headers, body) to a
  :class:`~lovia.errors.ProviderError` subclass; :func:`error_from_payload` maps an error
  object that arrived *inside* a stream (Anthropic ``event: error``, Responses
  ``response.failed``, a chat ``{"error": ...}`` chunk).
- :func:`error_from_transport` maps httpx (or an httpx-compatible client's) exceptions by
  class name, so ``httpx2`` and friends work too.
- :func:`parse_retry_after` reads how long the API asked us to wait.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from .._redact import excerpt
from ..errors import (
    AuthenticationError,
    BadRequest,
    ContextOverflow,
    ModelNotFound,
    ProviderError,
    ProviderOverloaded,
    ProviderServerError,
    RateLimited,
    StreamInterrupted,
)

__all__ = [
    "as_dict",
    "as_list",
    "error_from_payload",
    "error_from_response",
    "error_from_transport",
    "is_transport_error",
    "parse_duration",
    "parse_retry_after",
]


# --------------------------------------------------------------------------- retry-after

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_TRY_AGAIN = re.compile(r"try again in\s+((?:\d+(?:\.\d+)?(?:ms|h|m|s))+)", re.IGNORECASE)


def parse_duration(text: str) -> float | None:
    """Seconds in an OpenAI-style duration: ``6ms``, ``1s``, ``1.5s``, ``2m0s``, ``1h2m``."""
    text = text.strip()
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(number) * scale[unit] for number, unit in parts)


def _seconds_header(value: str) -> float | None:
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def parse_retry_after(headers: Mapping[str, str], message: str = "") -> float | None:
    """How long the API asked us to wait, from headers or the error text, if it said."""
    lower = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lower:
        try:
            return max(0.0, float(lower["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    if "retry-after" in lower:
        seconds = _seconds_header(lower["retry-after"])
        if seconds is not None:
            return seconds
    match = _TRY_AGAIN.search(message)
    if match:
        return parse_duration(match.group(1))
    resets = [parse_duration(v) for k, v in lower.items() if k.startswith("x-ratelimit-reset-")]
    known = [r for r in resets if r is not None]
    return max(known) if known else None


# --------------------------------------------------------------------------- error mapping

_OVERFLOW_CODES = {"context_length_exceeded", "exceed_context_size_error", "request_too_large"}
_OVERFLOW_TEXT = re.compile(
    r"maximum context length|context[ _]length|context window|context size|prompt is too long"
    r"|prompt too long|too many tokens|input is too long|exceeds? the (?:model's )?context"
    r"|input length .* exceeds|reduce the length of the messages",
    re.IGNORECASE,
)
_TOKEN_PATTERNS = (
    # Anthropic: "prompt is too long: 208310 tokens > 200000 maximum"
    re.compile(r"(?P<tokens>[\d,]+) tokens > (?P<limit>[\d,]+) maximum"),
    # OpenAI / DeepSeek / vLLM: "maximum context length is 4097 tokens. However, you
    # requested 4120 tokens" or "... and your request has 3500 input tokens"
    re.compile(
        r"maximum context length is (?P<limit>[\d,]+) tokens"
        r".*?(?P<tokens>[\d,]+) (?:input )?tokens",
        re.S,
    ),
    re.compile(
        r"(?P<tokens>[\d,]+) tokens exceeds? .*?(?:limit|maximum|context)[^\d]*(?P<limit>[\d,]+)",
        re.S,
    ),
)
_TYPE_STATUS = {
    "overloaded_error": 529,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "api_error": 500,
    "server_error": 500,
    "internal_error": 500,
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "model_not_found": 404,
    "request_too_large": 413,
    "timeout_error": 504,
}


@dataclass(slots=True)
class _ErrorInfo:
    status: int | None
    message: str
    type: str | None
    code: str | None
    body: Mapping[str, Any]


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else ``{}`` (typed access to parsed JSON)."""
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}  # parsed JSON


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a JSON array, else ``[]``."""
    return cast("list[Any]", value) if isinstance(value, list) else []  # parsed JSON


def _error_info(status: int | None, payload: Any, text: str) -> _ErrorInfo:
    """Pull message/type/code out of any of the error shapes seen in the wild."""
    top = as_dict(payload)
    err: Any = top.get("error", top) if top else None
    if isinstance(err, str):
        return _ErrorInfo(status, excerpt(err, 1000), None, None, {})
    if not isinstance(err, dict) or not err:
        return _ErrorInfo(status, excerpt(text.strip(), 500) or "(empty body)", None, None, {})
    body = as_dict(err)
    message = excerpt(str(body.get("message") or top.get("message") or text.strip()), 1000)
    etype = body.get("type")
    code = body.get("code")
    return _ErrorInfo(
        status,
        message,
        str(etype) if etype is not None else None,
        str(code) if code is not None else None,
        body,
    )


def _as_int(text: str | None) -> int | None:
    return int(text.replace(",", "")) if text else None


def _overflow_numbers(info: _ErrorInfo) -> tuple[int | None, int | None]:
    tokens, limit = info.body.get("n_prompt_tokens"), info.body.get("n_ctx")
    if isinstance(tokens, int) and isinstance(limit, int):
        return tokens, limit
    for pattern in _TOKEN_PATTERNS:
        match = pattern.search(info.message)
        if match:
            return _as_int(match.group("tokens")), _as_int(match.group("limit"))
    return None, None


def _is_overflow(info: _ErrorInfo) -> bool:
    if info.code in _OVERFLOW_CODES or info.type in _OVERFLOW_CODES:
        return True
    if info.status not in (None, 400, 413, 422, 500):
        return False
    return bool(_OVERFLOW_TEXT.search(info.message))


def _classify(
    info: _ErrorInfo, provider: str, headers: Mapping[str, str], request_id: str | None
) -> ProviderError:
    status = info.status
    effective = (
        status
        if status not in (None, 200)
        else _TYPE_STATUS.get(info.type or "") or _TYPE_STATUS.get(info.code or "")
    )
    code = info.code or info.type
    where = f" (request id {request_id})" if request_id else ""
    what = f"{provider} API error{f' {status}' if status else ''}: {info.message}{where}"
    common: dict[str, Any] = {"status": status, "provider": provider, "code": code}
    if _is_overflow(info):
        tokens, limit = _overflow_numbers(info)
        return ContextOverflow(
            what,
            "The conversation no longer fits the model's context window: compact or trim "
            "the history, lower max_tokens, or use a model with a larger window.",
            tokens=tokens,
            limit=limit,
            **common,
        )
    if info.code == "model_not_found" or info.type == "not_found_error" or effective == 404:
        return ModelNotFound(
            what,
            "Check the model name (and that your key has access to it) and the base_url.",
            **common,
        )
    return _classify_status(what, effective, info, headers, common)


def _classify_status(
    what: str,
    effective: int | None,
    info: _ErrorInfo,
    headers: Mapping[str, str],
    common: dict[str, Any],
) -> ProviderError:
    if info.code == "insufficient_quota":
        return RateLimited(
            what, "Your account is out of quota: check billing and plan limits.", **common
        )
    if effective == 429:
        return RateLimited(
            what,
            "Rate limited: lovia retries with backoff; lower concurrency or raise your limits.",
            retryable=True,
            retry_after=parse_retry_after(headers, info.message),
            **common,
        )
    if effective in (503, 529) or info.type == "overloaded_error":
        return ProviderOverloaded(
            what,
            "The provider is overloaded; it was retried with backoff. Try again later or "
            "fall back to another model.",
            retryable=True,
            retry_after=parse_retry_after(headers, info.message),
            **common,
        )
    if effective in (401, 403):
        return AuthenticationError(
            what,
            "Check the API key (environment variable or api_key=) and its permissions.",
            **common,
        )
    if effective in (400, 413, 422):
        return BadRequest(
            what, "The provider rejected the request; the message above says which part.", **common
        )
    retryable = effective is None or effective in (408, 409) or effective >= 500
    if effective is not None and effective >= 500:
        return ProviderServerError(
            what,
            "The provider failed on its side; lovia retried. Try again later.",
            retryable=True,
            retry_after=parse_retry_after(headers, info.message),
            **common,
        )
    return ProviderError(
        what, "Unexpected provider answer; see the message.", retryable=retryable, **common
    )


def _should_retry_override(error: ProviderError, headers: Mapping[str, str]) -> ProviderError:
    flag = {k.lower(): v for k, v in headers.items()}.get("x-should-retry")
    if flag == "true" and not isinstance(error, BadRequest):
        error.retryable = True
    elif flag == "false":
        error.retryable = False
    return error


def error_from_response(
    status: int, headers: Mapping[str, str], body: bytes | str, provider: str
) -> ProviderError:
    """Map a non-2xx HTTP answer to the most specific :class:`ProviderError`."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        payload: Any = json.loads(text)
    except ValueError:
        payload = None
    info = _error_info(status, payload, text)
    lower = {k.lower(): v for k, v in headers.items()}
    request_id = lower.get("x-request-id") or lower.get("request-id")
    return _should_retry_override(_classify(info, provider, headers, request_id), headers)


def error_from_payload(payload: Mapping[str, Any], provider: str) -> ProviderError:
    """Map an error object that arrived inside a 200 stream (status taken from its type)."""
    info = _error_info(None, dict(payload), json.dumps(payload))
    return _classify(info, provider, {}, None)


_CONNECT = ("ConnectError", "ConnectTimeout", "PoolTimeout")
_TIMEOUT = ("ReadTimeout", "WriteTimeout", "TimeoutException")
_BROKEN = ("ReadError", "WriteError", "RemoteProtocolError", "NetworkError", "CloseError")


def error_from_transport(exc: BaseException, provider: str, base_url: str) -> ProviderError:
    """Map an httpx-like transport exception (matched by class name) or an ``OSError``."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    detail = f"{type(exc).__name__}: {excerpt(str(exc), 300)}" if str(exc) else type(exc).__name__
    if names & set(_CONNECT):
        return ProviderError(
            f"Could not connect to {provider} at {base_url} ({detail}).",
            "Check base_url, your network and proxy settings; lovia retried.",
            retryable=True,
            provider=provider,
            code="connect_error",
        )
    if names & set(_TIMEOUT):
        return ProviderError(
            f"{provider} did not answer in time ({detail}).",
            "The request timed out and was retried; raise timeout= for long generations.",
            retryable=True,
            provider=provider,
            code="timeout",
        )
    return StreamInterrupted(
        f"The connection to {provider} broke ({detail}).",
        "The connection was reset; lovia retries when nothing had arrived yet.",
        retryable=True,
        provider=provider,
        code="connection_reset",
    )


def is_transport_error(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return (
        "TransportError" in names
        or bool(names & {*_CONNECT, *_TIMEOUT, *_BROKEN})
        or (isinstance(exc, OSError))
    )
