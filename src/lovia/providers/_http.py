"""HTTP for every adapter: the shared client, retries, and the stream driver.

This is the one place that retries and the one place where a call's transport and HTTP
failures become lovia errors (most specific first, always chained; the mapping itself
is :mod:`._error_map`, re-exported here):

- :class:`RetryPolicy` and :func:`retrying` (the one retry loop, streamed or not) retry
  retryable errors with exponential backoff and full jitter, honouring ``retry-after``;
  never after a content chunk was yielded.
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
import json
import random
import sys
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Mapping,
)
from contextlib import aclosing
from dataclasses import dataclass, field
from types import CoroutineType
from typing import TYPE_CHECKING, Any, Protocol, cast

import pydantic_core

from .._redact import excerpt, redact_error, redact_url, remember
from ..errors import AnswerTooLarge, ProviderError, ProviderServerError, StreamInterrupted
from ..model import ModelResponse, ReasoningChunk, RetryNotice, StreamItem, TextChunk, ToolCallChunk
from ..transcript import ReasoningEntry, TextEntry
from ._client import client_module
from ._deadline import Deadlines, StreamLimits
from ._error_map import (
    as_dict,
    as_list,
    error_from_payload,
    error_from_response,
    error_from_transport,
    is_transport_error,
    parse_duration,
    parse_retry_after,
)
from ._hints import rejected_format_hint, stream_cut_hint
from ._sse import ChunkDecoder, SSEEvent, load_json, parse_event_json

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


if TYPE_CHECKING:
    import httpx

DEFAULT_TIMEOUT_S = 600.0
"""Socket timeout (read, write, pool) of a client a provider creates; connect: below."""
CONNECT_TIMEOUT_S = 10.0
MAX_ERROR_BODY = 1024 * 1024
"""Bytes of an error response that are read (the rest is dropped unread)."""
MAX_CONNECTIONS = 100
"""Connections of a client a provider creates (more requests wait in lovia's FIFO)."""
MAX_KEEPALIVE = 20


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


_CONTENT = (TextChunk, ReasoningChunk, ToolCallChunk)  # a tuple: ``A | B`` is rebuilt per call


def _is_content(item: StreamItem) -> bool:
    return isinstance(item, _CONTENT)


AttemptItems = AsyncGenerator[StreamItem, None] | Coroutine[Any, Any, list[StreamItem]]
"""One try of a call: a streamed attempt yields its items as they arrive; a one-shot
attempt is a coroutine returning them all (no generator: it has nothing to stream)."""
Attempt = Callable[[], AttemptItems]


async def retrying(
    attempt: Attempt, policy: RetryPolicy, deadlines: Deadlines
) -> AsyncGenerator[StreamItem, None]:
    """Run ``attempt`` until it succeeds, retrying retryable errors raised before content.

    A :class:`RetryNotice` is yielded before each wait; the waits count toward the call
    deadline. Errors raised after a content chunk was yielded propagate unchanged (the
    caller already showed that content).
    """
    tries = 0
    while True:
        seen_content = False
        try:
            items = attempt()
            if isinstance(items, CoroutineType):  # one-shot: fails before any item is out
                fetched = cast("Coroutine[Any, Any, list[StreamItem]]", items)
                for item in await fetched:
                    yield item
                return
            async with aclosing(cast("AsyncGenerator[StreamItem, None]", items)) as stream:
                async for item in stream:
                    seen_content = seen_content or _is_content(item)
                    yield item
            return
        except ProviderError as error:
            if seen_content or not error.retryable or tries >= policy.max_retries:
                raise
            failed = error
        tries += 1
        wait = policy.delay(tries, failed.retry_after)
        yield RetryNotice(attempt=tries, error=failed, delay=wait)
        await deadlines.bound(policy.sleep(wait))


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

    The secret lives only in ``_headers`` (and, for a client the seam creates, in that
    client's default headers, so they are not re-merged per request; httpx masks
    ``authorization`` in a headers repr) and is never shown by ``repr``; every error
    leaving the seam, its cause chain included, went through :func:`~lovia._redact.redact`.
    """

    __slots__ = (
        "_client",
        "_endpoints",
        "_gate",
        "_headers",
        "_owns_client",
        "_request_headers",
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
        self._url = client_module().URL(self.base_url)  # parsed once, not per call
        self._endpoints: dict[str, Any] = {}
        self._headers = _with_json_type(headers)
        remember(secret)
        self.retry = retry or RetryPolicy()
        self.limits = limits or StreamLimits()
        self._owns_client = http_client is None
        # Requests wait for a connection here, in a FIFO, rather than in the pool: httpx's
        # and httpx2's pools rescan every queued request whenever one is added or done,
        # which costs O(waiting) per request (~10 ms each at 10,000 runs in flight).
        self._gate: asyncio.Semaphore | None = None
        # A caller's client gets the headers with every request; one the seam creates
        # holds them as its defaults (merging a dict into Headers costs ~30 kinstr a call).
        self._request_headers: dict[str, str] | None = self._headers
        if http_client is None:
            http_client = default_client(timeout, self._headers)
            self._gate = asyncio.Semaphore(_max_connections())
            self._request_headers = None
        self._client: Any = http_client

    def __repr__(self) -> str:
        return f"HttpSeam(provider={self.provider!r}, base_url={redact_url(self.base_url)!r})"

    @property
    def url(self) -> Any:
        """The base URL, parsed by the client module (``host``, ``port``, ``scheme``)."""
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
        deadlines = Deadlines(self.limits, self.provider)

        def attempt() -> AttemptItems:
            if streaming:
                return self._attempt(path, body, decoder(), deadlines)
            return self._fetched(path, body, parse, deadlines)

        return retrying(attempt, self.retry, deadlines)

    async def _send(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body``; the response with its body unread (what ``client.stream()`` does,
        without its context-manager generator): the caller closes it. An error status
        is raised as a lovia error (the response closed)."""
        client = self._client
        request = client.build_request(
            "POST", self.endpoint(path), content=json_body(body), headers=self._request_headers
        )
        response = await client.send(request, stream=True)
        try:
            await self._check_status(response)
        except BaseException:
            await response.aclose()
            raise
        return response

    async def _fetched(
        self,
        path: str,
        body: dict[str, Any],
        parse: Callable[[dict[str, Any]], ModelResponse],
        deadlines: Deadlines,
    ) -> list[StreamItem]:
        """One non-streamed attempt: the whole response (read within the call deadline,
        the wait for a connection included), presented as a stream's items."""
        try:
            return await deadlines.bound(self._fetch(path, body, parse))
        except BaseException as exc:
            raise self._explained(self._failure(exc, None, False), body)  # noqa: B904 -- chained in _failure

    async def _fetch(
        self, path: str, body: dict[str, Any], parse: Callable[[dict[str, Any]], ModelResponse]
    ) -> list[StreamItem]:
        gate = self._gate
        if gate is not None:
            await gate.acquire()
        try:
            response = await self._send(path, body)
            try:
                return one_shot(parse(await self._read_json(response)))
            finally:
                await response.aclose()
        finally:
            if gate is not None:
                gate.release()

    async def _attempt(
        self, path: str, body: dict[str, Any], state: StreamDecoder, deadlines: Deadlines
    ) -> AsyncGenerator[StreamItem, None]:
        """One streamed attempt: SSE events through the adapter's decoder as they arrive.
        The wait for a connection counts toward the call deadline only; the idle clock
        starts with the request."""
        seen_content = False
        feed = _EventFeed(state, self.limits, self.provider)
        gate = self._gate
        try:
            if gate is not None:
                await deadlines.bound(gate.acquire())
            try:
                deadlines.mark()
                response = await deadlines.bound(self._send(path, body), idle=True)
                try:
                    chunks = response.aiter_bytes()
                    while (items := await feed.read(chunks, deadlines)) is not None:
                        for item in items:
                            seen_content = seen_content or _is_content(item)
                            yield item
                            deadlines.check()  # the caller asks for more: the call's time left?
                            deadlines.mark()  # the caller's time is not the server's silence
                    yield feed.finish()
                finally:
                    await response.aclose()
            finally:
                if gate is not None:
                    gate.release()
        except BaseException as exc:
            failure = self._failure(exc, state, seen_content)
            raise self._explained(failure, body)  # noqa: B904 -- chained in _failure

    def _explained(self, error: BaseException, body: dict[str, Any]) -> BaseException:
        """``error`` with a hint naming what in ``body`` the server likely rejected."""
        if isinstance(error, ProviderError) and not isinstance(error, StreamInterrupted):
            rejected_format_hint(error, body, self.base_url)
        return error

    def _failure(
        self,
        exc: BaseException,
        state: StreamDecoder | None,
        seen_content: bool,
    ) -> BaseException:
        """What an attempt's failure leaves the seam as: a redacted lovia error, chained
        (``__cause__``) as ``raise ... from`` would; anything else unchanged."""
        if isinstance(exc, ProviderError):
            converted = _after_content(exc, state, seen_content, self.base_url)
            self.redact(exc)
            if converted is not exc:
                self.redact(converted).__cause__ = exc
            return converted
        if not isinstance(exc, Exception) or not is_transport_error(exc):
            return exc
        error = error_from_transport(exc, self.provider, self.base_url)
        converted = self.redact(_after_content(error, state, seen_content, self.base_url))
        converted.__cause__ = redact_error(exc)
        return converted

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
                raise _too_large(self.limits, self.provider, "response body", "max_body_size")
        try:
            data: Any = load_json(raw)
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


class _EventFeed:
    """One streamed attempt's SSE side: bytes to events, events to the adapter's decoder,
    read under the call's deadlines (no generator layer per event)."""

    __slots__ = ("_chunks", "ended", "failed", "limits", "provider", "room", "saw_done", "state")

    def __init__(self, state: StreamDecoder, limits: StreamLimits, provider: str) -> None:
        self._chunks = ChunkDecoder(limits.max_event_size)
        self.state = state
        self.limits = limits
        self.provider = provider
        self.room = limits.max_answer_size
        self.saw_done = False
        self.ended = False
        self.failed: Exception | None = None  # raised by the next read: items came first

    async def read(
        self, chunks: AsyncIterator[bytes], deadlines: Deadlines
    ) -> list[StreamItem] | None:
        """The items of the next chunks that give any, ``None`` once the body (and what
        its end completes) is read. Within the idle deadline, which every complete event
        moves (comments and unfinished lines do not), and the call deadline."""
        if self.failed is not None:
            raise self.failed
        if self.ended:
            return None
        scope = deadlines.scope(idle=True)
        try:
            async with scope:
                while True:
                    chunk = await anext(chunks, None)
                    if chunk is None:
                        self.ended = True
                        return self._items(self._chunks.end()) or None
                    self.room -= len(chunk)
                    if self.room < 0:  # stop reading: memory stays bounded by the limit
                        raise _too_large(
                            self.limits, self.provider, "streamed answer", "max_answer_size"
                        )
                    events = self._chunks.feed(chunk)
                    items = self._items(events)
                    if items:
                        return items
                    if events:
                        deadlines.mark()
                        scope.reschedule(deadlines.due(idle=True))
        except TimeoutError:
            if not scope.expired():
                raise
            raise deadlines.expired() from None

    def _items(self, events: list[SSEEvent]) -> list[StreamItem]:
        """The items of ``events``; an event that fails after some gave items fails the
        next read instead, so those items reach the caller first (as content)."""
        items: list[StreamItem] = []
        for event in events:
            try:
                items += self.items(event)
            except Exception as exc:
                if not items:
                    raise
                self.failed = exc
                break
        return items

    def items(self, event: SSEEvent) -> list[StreamItem]:
        # read to the end of the body even after [DONE]: a response closed early
        # cannot go back to the pool, and every call would open a new connection
        if self.saw_done:
            return []
        if event.data.strip() == "[DONE]":
            self.saw_done = True
            return []
        return self.state.feed(parse_event_json(event, self.provider))

    def finish(self) -> ModelResponse:
        if not (self.saw_done or self.state.complete):
            raise StreamInterrupted(
                f"The {self.provider} stream ended before the response was complete.",
                "The connection was closed early; what arrived is in .partial. Retry the call.",
                retryable=True,
                provider=self.provider,
                code="stream_ended_early",
            )
        return self.state.finish()


def _too_large(limits: StreamLimits, provider: str, what: str, setting: str) -> AnswerTooLarge:
    limit: int = getattr(limits, setting)
    return AnswerTooLarge(
        f"A {provider} {what} grew past {limit} bytes; the call was stopped.",
        "The server sends an enormous or endless answer. If such answers are "
        f"expected, raise StreamLimits({setting}=...) on the provider "
        "(limits=StreamLimits(...)).",
        provider=provider,
        code="body_too_large" if setting == "max_body_size" else "answer_too_large",
        limit=limit,
    )


def _after_content(
    error: ProviderError, state: StreamDecoder | None, seen_content: bool, base_url: str = ""
) -> ProviderError:
    """Once content was yielded an error may not be retried: turn it into StreamInterrupted.

    Content is only ever seen in a streamed attempt, which has a ``state``. An answer
    over its size limit stays :class:`AnswerTooLarge` (its partial is not kept). The
    hint names a full context window where that is the likely cause."""
    if not seen_content or state is None or isinstance(error, AnswerTooLarge):
        return error
    if isinstance(error, StreamInterrupted):
        error.partial = state.partial()
        error.retryable = False
        error.hint = stream_cut_hint(error, base_url, "")
        return error
    return StreamInterrupted(
        f"{error.message} (after partial output)",
        stream_cut_hint(
            error,
            base_url,
            "The stream failed midway; the partial answer is in .partial. Retry the call.",
        ),
        status=error.status,
        provider=error.provider,
        code=error.code,
        retry_after=error.retry_after,
        partial=state.partial(),
    )


def _max_connections() -> int:
    return MAX_CONNECTIONS


def json_body(body: Mapping[str, Any]) -> bytes:
    """``body`` as the bytes httpx's ``json=`` sends (compact, UTF-8, no NaN), encoded by
    pydantic-core: about a quarter of ``json.dumps``'s CPU, which grows with the
    conversation. A body with NaN or an infinity, a lone surrogate or a value neither
    encoder knows, and, to be safe, one whose text merely holds ``NaN`` or ``Infinity``,
    goes through ``json.dumps`` as before: the same bytes, or the same error. Values JSON
    has no type for but pydantic-core writes (a datetime, a ``Decimal``, a UUID, a set:
    only ``ModelSettings.extra`` can hold one) are sent as it writes them, where
    ``json=`` refused them."""
    try:
        data = pydantic_core.to_json(body)
    except pydantic_core.PydanticSerializationError:
        data = None
    if data is None or b"NaN" in data or b"Infinity" in data:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return text.encode()
    return data


def _with_json_type(headers: Mapping[str, str]) -> dict[str, str]:
    """The provider's headers, with ``Content-Type: application/json`` unless they name
    one (what ``json=`` set, and the caller's own type won)."""
    out = dict(headers)
    if not any(k.lower() == "content-type" for k in out):
        out["Content-Type"] = "application/json"
    return out


def default_client(
    timeout: float | httpx.Timeout | None, headers: Mapping[str, str] | None = None
) -> Any:
    """The client a provider creates when given none: ``httpx2`` when it is installed,
    else ``httpx`` (see :mod:`lovia.providers._client`).

    httpx2 has httpx's API (errors are matched by class name, see
    :func:`error_from_transport`) and costs about half of httpx's CPU per request with
    tens of requests in flight (``docs/performance.md``). ``timeout``: seconds, or a
    ``Timeout`` of either client; None: ``DEFAULT_TIMEOUT_S``.
    """
    module = client_module()
    return module.AsyncClient(
        headers=headers,
        timeout=_timeout(module, DEFAULT_TIMEOUT_S if timeout is None else timeout),
        limits=module.Limits(
            max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_KEEPALIVE
        ),
    )


def _timeout(module: Any, value: Any) -> Any:
    """``value`` as the client module's ``Timeout``: seconds (connect: 10 s), or the four
    parts of a ``Timeout`` (httpx's and httpx2's have the same)."""
    if isinstance(value, int | float):
        return module.Timeout(value, connect=CONNECT_TIMEOUT_S)
    return module.Timeout(
        connect=value.connect, read=value.read, write=value.write, pool=value.pool
    )


def _parsed_url(client: Any, text: str) -> Any:
    """``text`` parsed once by the client's own URL class (httpx re-parses strings per
    call); a client of another kind gets the text. A module nobody imported made no
    client, so it is not imported here."""
    for name in ("httpx2", "httpx"):
        module: Any = sys.modules.get(name)
        if module is not None and isinstance(client, module.AsyncClient):
            return module.URL(text)
    return text
