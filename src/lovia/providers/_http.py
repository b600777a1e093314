"""HTTP for every adapter: the shared client, error mapping, retries, and the stream driver.

This is the one place where transport and HTTP failures become lovia errors
(most specific first, always chained) and the one place that retries:

- :func:`error_from_response` maps a non-2xx answer (status, headers, body) to a
  :class:`~lovia.errors.ProviderError` subclass; :func:`error_from_payload` maps an error
  object that arrived *inside* a stream (Anthropic ``event: error``, Responses
  ``response.failed``, a chat ``{"error": ...}`` chunk).
- :func:`error_from_transport` maps httpx (or an httpx-compatible client's) exceptions by
  class name, so ``httpx2`` and friends work too.
- :class:`RetryPolicy` and :func:`retrying` retry retryable errors with exponential backoff
  and full jitter, honouring ``retry-after``; never after a content chunk was yielded.
- :class:`HttpSeam` owns the client (``httpx2`` when installed, extra ``fast``: the same
  API with a connection pool that stays cheap with many requests in flight; else
  ``httpx``), headers and secret, and runs one call as a stream of
  :data:`~lovia.model.StreamItem`, feeding SSE events to an adapter's decoder,
  under the call's :class:`~lovia.providers._deadline.StreamLimits` (``_deadline``).

Every error leaving the seam went through :func:`~lovia._redact.redact`, cause chain
included, and every text is redacted before it is cut.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import re
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, aclosing, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import httpx

from .._redact import excerpt, redact_error, remember
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
from ..model import ModelResponse, ReasoningChunk, RetryNotice, StreamItem, TextChunk, ToolCallChunk
from ._deadline import StreamLimits, Watchdog
from ._sse import aiter_sse, parse_event_json

__all__ = [
    "HttpSeam",
    "RetryPolicy",
    "StreamDecoder",
    "StreamLimits",
    "as_dict",
    "as_list",
    "error_from_payload",
    "error_from_response",
    "error_from_transport",
    "parse_duration",
    "parse_retry_after",
    "retrying",
]


def _fast_fail_sniffio() -> None:
    """httpcore probes ``import sniffio`` on every request; when it is not installed each
    probe is a failed import that walks sys.path (~0.2 ms per model call, measured in
    bench/). Recording the absence makes the same ImportError immediate. Nothing changes
    when sniffio is installed."""
    import importlib.util
    import sys

    if "sniffio" not in sys.modules and importlib.util.find_spec("sniffio") is None:
        sys.modules["sniffio"] = None  # pyright: ignore[reportArgumentType] -- None in sys.modules is the documented "not installed" marker


_fast_fail_sniffio()

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
MAX_ERROR_BODY = 1024 * 1024
"""Bytes of an error response that are read (the rest is dropped unread)."""
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)


# --------------------------------------------------------------------------- retries


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How a provider retries a failed call before any content arrived.

    Delay for attempt ``n`` (1-based) is ``min(max_delay, initial_delay * 2**(n-1))``,
    drawn uniformly from ``[0, that]`` when ``jitter`` (full jitter). A ``retry-after``
    the API sent wins when it is at most ``max_retry_after`` seconds.
    """

    max_retries: int = 3
    initial_delay: float = 0.5
    max_delay: float = 30.0
    jitter: bool = True
    max_retry_after: float = 60.0
    """A longer ``retry-after`` (e.g. a daily quota) is not waited for; backoff is used."""
    sleep: Callable[[float], Awaitable[None]] = field(
        default=asyncio.sleep, repr=False, compare=False
    )
    """Injected in tests to avoid real waiting."""

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt``."""
        if retry_after is not None and 0 <= retry_after <= self.max_retry_after:
            return retry_after
        ceiling = min(self.max_delay, self.initial_delay * 2 ** (attempt - 1))
        return random.uniform(0, ceiling) if self.jitter else ceiling


def _is_content(item: StreamItem) -> bool:
    return isinstance(item, TextChunk | ReasoningChunk | ToolCallChunk)


async def retrying(
    attempt: Callable[[], AsyncGenerator[StreamItem, None]],
    policy: RetryPolicy,
    watch: Watchdog | None = None,
) -> AsyncGenerator[StreamItem, None]:
    """Run ``attempt`` until it succeeds, retrying retryable errors raised before content.

    A :class:`RetryNotice` is yielded before each wait. Errors raised after a content
    chunk was yielded propagate unchanged (the caller already showed that content).
    ``watch`` (the seam's deadlines) is disarmed while the caller holds an item; this is
    the outermost generator, so no extra layer is paid per item.
    """
    tries = 0
    try:
        while True:
            seen_content = False
            try:
                async with aclosing(attempt()) as items:
                    async for item in items:
                        seen_content = seen_content or _is_content(item)
                        if watch is None:
                            yield item
                        else:
                            watch.armed = False
                            yield item
                            watch.resume()
                return
            except ProviderError as error:
                if seen_content or not error.retryable or tries >= policy.max_retries:
                    raise
                tries += 1
                wait = policy.delay(tries, error.retry_after)
                if watch is not None:
                    watch.armed = False
                yield RetryNotice(attempt=tries, error=error, delay=wait)
                if watch is not None:
                    watch.resume()
                await _backoff(policy, wait, watch)
    finally:
        if watch is not None:
            watch.stop()


async def _backoff(policy: RetryPolicy, wait: float, watch: Watchdog | None) -> None:
    try:
        await policy.sleep(wait)
    except asyncio.CancelledError:
        reason = watch.take() if watch is not None else None
        if reason is None or watch is None:
            raise
        raise watch.error(reason) from None


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


# --------------------------------------------------------------------------- the seam


class StreamDecoder(Protocol):
    """Per-call state machine of one adapter: JSON events in, content chunks out."""

    @property
    def complete(self) -> bool:
        """The stream said it finished (finish reason / stop event seen)."""
        ...

    def feed(self, data: dict[str, Any]) -> list[StreamItem]: ...

    def finish(self) -> ModelResponse: ...

    def partial(self) -> ModelResponse:
        """What arrived so far (text, complete tool calls), for :class:`StreamInterrupted`."""
        ...


def one_shot(response: ModelResponse) -> list[StreamItem]:
    """Present a finished response as a stream: its chunks, then the response."""
    from ..transcript import ReasoningEntry, TextEntry

    items: list[StreamItem] = []
    call_index = 0
    for entry in response.entries:
        if isinstance(entry, TextEntry):
            items.append(TextChunk(entry.text))
        elif isinstance(entry, ReasoningEntry):
            if entry.text:
                items.append(ReasoningChunk(entry.text))
        else:
            items.append(ToolCallChunk(call_index, entry.call_id, entry.name, entry.arguments))
            call_index += 1
    items.append(response)
    return items


class HttpSeam:
    """One provider instance's HTTP side: client, auth headers, retries, stream driver.

    The secret lives only in ``_headers`` and is never shown by ``repr``; every error
    leaving the seam, its cause chain included, went through :func:`~lovia._redact.redact`.
    """

    __slots__ = (
        "_client",
        "_endpoints",
        "_gate",
        "_headers",
        "_owns_client",
        "_url",
        "base_url",
        "limits",
        "provider",
        "retry",
    )

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        headers: Mapping[str, str],
        secret: str | None,
        http_client: Any | None,
        retry: RetryPolicy | None,
        timeout: float | httpx.Timeout | None,
        limits: StreamLimits | None = None,
    ) -> None:
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self._url = httpx.URL(self.base_url)  # parsed once: httpx re-parses strings per call
        self._endpoints: dict[str, Any] = {}
        self._headers = dict(headers)
        remember(secret)
        self.retry = retry or RetryPolicy()
        self.limits = limits or StreamLimits()
        self._owns_client = http_client is None
        # Requests wait for a connection here, in a FIFO, rather than in the pool: httpx's
        # and httpx2's pools rescan every queued request whenever one is added or done,
        # which costs O(waiting) per request (~10 ms each at 10,000 runs in flight).
        self._gate: AbstractAsyncContextManager[Any] = _NO_GATE
        if http_client is None:
            to = DEFAULT_TIMEOUT if timeout is None else _timeout(timeout)
            http_client = default_client(to)
            self._gate = asyncio.Semaphore(_max_connections())
        self._client: Any = http_client

    def __repr__(self) -> str:
        return f"HttpSeam(provider={self.provider!r}, base_url={self.base_url!r})"

    @property
    def url(self) -> httpx.URL:
        return self._url

    def endpoint(self, path: str) -> Any:
        """The request URL, pre-parsed for an httpx client (other clients get the text)."""
        url = self._endpoints.get(path)
        if url is None:
            text = f"{self.base_url}{path}"
            url = _parsed_url(self._client, text)
            self._endpoints[path] = url
        return url

    async def aclose(self) -> None:
        """Close the client if this seam created it (a caller's client stays open)."""
        if self._owns_client:
            await self._client.aclose()

    def redact(self, error: ProviderError) -> ProviderError:
        """Scrub keys out of an error and its whole cause chain (servers may echo them)."""
        error.provider = error.provider or self.provider
        redact_error(error)
        return error

    def call(
        self,
        path: str,
        body: dict[str, Any],
        *,
        streaming: bool,
        decoder: Callable[[], StreamDecoder],
        parse: Callable[[dict[str, Any]], ModelResponse],
    ) -> AsyncIterator[StreamItem]:
        """One model call with retries and deadlines: chunks, then one ModelResponse."""
        watch = Watchdog(self.limits, self.provider)

        def attempt() -> AsyncGenerator[StreamItem, None]:
            return self._attempt(path, body, streaming, decoder, parse, watch)

        return retrying(attempt, self.retry, watch)

    async def _attempt(
        self,
        path: str,
        body: dict[str, Any],
        streaming: bool,
        decoder: Callable[[], StreamDecoder],
        parse: Callable[[dict[str, Any]], ModelResponse],
        watch: Watchdog,
    ) -> AsyncGenerator[StreamItem, None]:
        state = decoder()
        seen_content = False
        watch.attempt(self.limits.idle_timeout if streaming else None)
        try:
            async with (
                self._gate,
                self._client.stream(
                    "POST", self.endpoint(path), json=body, headers=self._headers
                ) as response,
            ):
                await self._check_status(response)
                if not streaming:
                    for item in one_shot(parse(await self._read_json(response))):
                        yield item
                    return
                async for item in self._decode(response, state, watch):
                    seen_content = seen_content or _is_content(item)
                    yield item
        except ProviderError as error:
            converted = _after_content(error, state, seen_content)
            self.redact(error)
            if converted is error:
                raise
            raise self.redact(converted) from error
        except asyncio.CancelledError:
            reason = watch.take()
            if reason is None:
                raise
            raise self.redact(_after_content(watch.error(reason), state, seen_content)) from None
        except Exception as exc:
            if not is_transport_error(exc):
                raise
            error = error_from_transport(exc, self.provider, self.base_url)
            raise self.redact(_after_content(error, state, seen_content)) from redact_error(exc)

    async def _check_status(self, response: Any) -> None:
        status: int = response.status_code
        if status < 400:
            return
        raw = bytearray()
        async for chunk in response.aiter_bytes():  # an error body is read up to a cap
            raw += chunk
            if len(raw) >= MAX_ERROR_BODY:
                break
        raise error_from_response(status, dict(response.headers), bytes(raw), self.provider)

    async def _read_json(self, response: Any) -> dict[str, Any]:
        raw = bytearray()
        async for chunk in response.aiter_bytes():  # a body is read up to a cap
            raw += chunk
            if len(raw) > self.limits.max_body_size:
                raise ProviderError(
                    f"A {self.provider} response body grew past "
                    f"{self.limits.max_body_size} bytes; the call was stopped.",
                    "The server sends an enormous or endless body. If such responses are "
                    "expected, raise StreamLimits(max_body_size=...) on the provider.",
                    provider=self.provider,
                    code="body_too_large",
                )
        try:
            data: Any = json.loads(raw)
        except ValueError as exc:
            text = excerpt(raw.decode("utf-8", "replace"), 120)
            raise ProviderServerError(
                f"{self.provider} returned a body that is not JSON: {text!r}.",
                "The server or a proxy answered with something else; check base_url.",
                retryable=True,
                provider=self.provider,
                code="malformed_response",
            ) from exc
        if not isinstance(data, dict):
            raise ProviderServerError(
                f"{self.provider} returned JSON that is not an object.",
                "Check base_url points at a compatible API.",
                provider=self.provider,
                code="malformed_response",
            )
        return cast("dict[str, Any]", data)  # a JSON object off the wire

    async def _decode(
        self, response: Any, state: StreamDecoder, watch: Watchdog
    ) -> AsyncIterator[StreamItem]:
        saw_done = False
        async for event in aiter_sse(response.aiter_bytes(), self.limits.max_event_size):
            watch.beat()
            # read to the end of the body even after [DONE]: a response closed early
            # cannot go back to the pool, and every call would open a new connection
            if saw_done:
                continue
            if event.data.strip() == "[DONE]":
                saw_done = True
                continue
            for item in state.feed(parse_event_json(event, self.provider)):
                yield item
        if not (saw_done or state.complete):
            raise StreamInterrupted(
                f"The {self.provider} stream ended before the response was complete.",
                "The connection was closed early; what arrived is in .partial. Retry the call.",
                retryable=True,
                provider=self.provider,
                code="stream_ended_early",
            )
        yield state.finish()


def _after_content(error: ProviderError, state: StreamDecoder, seen_content: bool) -> ProviderError:
    """Once content was yielded an error may not be retried: turn it into StreamInterrupted."""
    if isinstance(error, StreamInterrupted):
        error.partial = state.partial() if seen_content else error.partial
        error.retryable = error.retryable and not seen_content
        return error
    if not seen_content:
        return error
    return StreamInterrupted(
        f"{error.message} (after partial output)",
        "The stream failed midway; the partial answer is in .partial. Retry the call.",
        status=error.status,
        provider=error.provider,
        code=error.code,
        retry_after=error.retry_after,
        partial=state.partial(),
    )


_NO_GATE: AbstractAsyncContextManager[None] = nullcontext()


def _max_connections() -> int:
    return DEFAULT_LIMITS.max_connections or 100


def default_client(timeout: httpx.Timeout) -> Any:
    """The client a provider creates when given none: ``httpx2`` when it is installed.

    httpx2 has httpx's API (errors are matched by class name, see
    :func:`error_from_transport`) and costs about half of httpx's CPU per request with
    tens of requests in flight (``docs/performance.md``). It is imported here, when a
    provider is built, never by ``import lovia``.
    """
    try:
        import httpx2  # pyright: ignore[reportMissingImports] -- the optional extra "fast": absent unless installed
    except ImportError:
        return httpx.AsyncClient(timeout=timeout, limits=DEFAULT_LIMITS)
    fast: Any = httpx2
    return fast.AsyncClient(
        timeout=fast.Timeout(
            connect=timeout.connect, read=timeout.read, write=timeout.write, pool=timeout.pool
        ),
        limits=fast.Limits(
            max_connections=DEFAULT_LIMITS.max_connections,
            max_keepalive_connections=DEFAULT_LIMITS.max_keepalive_connections,
        ),
    )


def _parsed_url(client: Any, text: str) -> Any:
    """``text`` parsed once by the client's own URL class (httpx re-parses strings per
    call); a client of another kind gets the text."""
    if isinstance(client, httpx.AsyncClient):
        return httpx.URL(text)
    fast: Any = sys.modules.get("httpx2")
    if fast is not None and isinstance(client, fast.AsyncClient):
        return fast.URL(text)
    return text


def _timeout(value: float | httpx.Timeout) -> httpx.Timeout:
    return value if isinstance(value, httpx.Timeout) else httpx.Timeout(value, connect=10.0)
