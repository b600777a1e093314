# pyright: reportUnnecessaryIsInstance=false
# (runtime checks of test scripts are deliberate: not every caller runs a type checker)
"""ScriptedModel and FunctionModel: providers for tests, speaking the real seam."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, cast

from ..errors import LoviaError
from ..model import (
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ProviderBase,
    ReasoningChunk,
    ResponseEntry,
    StreamItem,
    TextChunk,
    ToolCallChunk,
)
from ..transcript import ReasoningEntry, TextEntry, ToolCallEntry, new_id
from ..usage import Usage

__all__ = [
    "FunctionModel",
    "Reply",
    "ScriptError",
    "ScriptedModel",
    "Step",
    "ToolCallSpec",
    "call",
    "reply",
]


CREATED: list[list[ScriptedModel]] = []
"""Open tracking lists (the pytest plugin's): every ScriptedModel made while one is open."""


class ScriptError(LoviaError, AssertionError):
    """The script and the run disagree (an extra call, or steps left over)."""


@dataclass(frozen=True, slots=True)
class ToolCallSpec:
    name: str
    arguments: str
    call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One scripted model answer."""

    text: str | None = None
    tool_calls: tuple[ToolCallSpec, ...] = ()
    reasoning: str | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    delay: float = 0.0
    """Seconds to wait before the first chunk (cancellation tests)."""
    chunk_delay: float = 0.0
    """Seconds between chunks."""
    fail_after_text: BaseException | None = None
    """Raise this after streaming the text (a stream cut mid-way)."""


Step: TypeAlias = "str | ToolCallSpec | Sequence[ToolCallSpec] | Reply | BaseException"


def call(
    name: str,
    arguments: dict[str, Any] | str | None = None,
    /,
    *,
    id: str | None = None,
    **kwargs: Any,
) -> ToolCallSpec:
    """A scripted tool call: ``call("add", a=1, b=2)`` or ``call("add", {"a": 1})``.

    ``id=`` is the call's id; a tool argument named ``id`` goes in the dict form.
    """
    if id is not None and not isinstance(id, str):
        raise ScriptError(
            f"call({name!r}, id={id!r}): id= is the tool call's id (a str)",
            hint=f"For a tool argument named id write call({name!r}, {{'id': {id!r}, ...}}).",
        )
    if isinstance(arguments, str):
        return ToolCallSpec(name, arguments, id)
    args = {**(arguments or {}), **kwargs}
    return ToolCallSpec(name, json.dumps(args), id)


def reply(
    text: str | None = None,
    *,
    tool_calls: Sequence[ToolCallSpec] = (),
    reasoning: str | None = None,
    usage: Usage | None = None,
    finish_reason: str | None = None,
    delay: float = 0.0,
    chunk_delay: float = 0.0,
    fail_after_text: BaseException | None = None,
) -> Reply:
    """A full scripted answer (text, tool calls, reasoning, usage, timing)."""
    return Reply(
        text=text,
        tool_calls=tuple(tool_calls),
        reasoning=reasoning,
        usage=usage,
        finish_reason=finish_reason,
        delay=delay,
        chunk_delay=chunk_delay,
        fail_after_text=fail_after_text,
    )


def _as_reply(step: Any) -> Reply | BaseException:
    if isinstance(step, BaseException):
        return step
    if isinstance(step, Reply):
        return step
    if isinstance(step, str):
        return Reply(text=step)
    if isinstance(step, ToolCallSpec):
        return Reply(tool_calls=(step,))
    if isinstance(step, (list, tuple)):
        items = cast("Sequence[object]", step)  # a test's script: each item checked here
        calls = tuple(s for s in items if isinstance(s, ToolCallSpec))
        if len(calls) == len(items):
            return Reply(tool_calls=calls)
    raise ScriptError(
        f"cannot use {step!r} as a script step",
        hint="Use a str, call(...), a list of call(...), reply(...) or an exception.",
    )


def _estimate_tokens(request: ModelRequest) -> int:
    chars = len(request.system)
    for entry in request.messages:
        chars += len(getattr(entry, "content", "") or getattr(entry, "text", "") or "")
        chars += len(getattr(entry, "arguments", "") or "")
    return max(1, chars // 4)


def _chunks(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class FakeProvider(ProviderBase):
    """Shared streaming logic of the fake models."""

    _turn_calls: int

    def __init__(self, model: str, profile: ModelProfile | None, provider: str) -> None:
        profile = profile or ModelProfile(native_json_schema=False, usage_in_stream=True)
        super().__init__(provider, model, profile)
        self.requests: list[ModelRequest] = []
        self._turn_calls = 0

    server_address: str | None = None
    server_port: int | None = None

    def render_request(self, request: ModelRequest) -> dict[str, Any]:
        from ..view.base import canonical_request

        return {"model": self._model, **canonical_request(request)}

    async def _emit(self, request: ModelRequest, step: Reply) -> AsyncIterator[StreamItem]:
        if step.delay:
            await asyncio.sleep(step.delay)
        message_id = new_id("msg")
        stamp = request.stamp  # the entries are recorded as built (no copy per entry)
        entries: list[ResponseEntry] = []
        if step.reasoning:
            for piece in _chunks(step.reasoning):
                yield ReasoningChunk(piece)
            entries.append(
                ReasoningEntry(
                    text=step.reasoning, provider=self._name, message_id=message_id, **stamp
                )
            )
        if step.text:
            for piece in _chunks(step.text, 16):
                if step.chunk_delay:
                    await asyncio.sleep(step.chunk_delay)
                yield TextChunk(piece)
            entries.append(TextEntry(text=step.text, message_id=message_id, **stamp))
        if step.fail_after_text is not None:
            raise step.fail_after_text
        for index, spec in enumerate(step.tool_calls):
            self._turn_calls += 1
            call_id = spec.call_id or f"call_{self._turn_calls}"
            half = len(spec.arguments) // 2
            yield ToolCallChunk(index, call_id, spec.name, spec.arguments[:half])
            yield ToolCallChunk(index, None, None, spec.arguments[half:])
            entries.append(
                ToolCallEntry(
                    call_id=call_id,
                    name=spec.name,
                    arguments=spec.arguments,
                    message_id=message_id,
                    **stamp,
                )
            )
        yield self._response(request, step, tuple(entries))

    def _response(
        self, request: ModelRequest, step: Reply, entries: tuple[ResponseEntry, ...]
    ) -> ModelResponse:
        out_chars = len(step.text or "") + len(step.reasoning or "")
        out_chars += sum(len(c.arguments) + len(c.name) for c in step.tool_calls)
        usage = (
            step.usage.copy()
            if step.usage
            else Usage(input_tokens=_estimate_tokens(request), output_tokens=max(1, out_chars // 4))
        )
        usage.requests = 1
        finish = step.finish_reason or ("tool_calls" if step.tool_calls else "stop")
        return ModelResponse(
            entries=entries,
            usage=usage,
            finish_reason=finish,  # pyright: ignore[reportArgumentType] -- the script's value, passed through as given
            raw_finish_reason=finish,
            response_id=new_id("resp"),
            model=self._model,
        )


class ScriptedModel(FakeProvider):
    """A strict scripted model: each call consumes the next step.

    ``requests`` records every request; an extra call raises :class:`ScriptError`;
    :meth:`assert_consumed` (or ``unconsumed``) reports steps never used.
    """

    def __init__(
        self,
        steps: Sequence[Step],
        *,
        model: str = "scripted",
        profile: ModelProfile | None = None,
        provider: str = "test",
    ) -> None:
        super().__init__(model, profile, provider)
        self._steps: list[Reply | BaseException] = [_as_reply(s) for s in steps]
        self._next = 0
        for created in CREATED:
            created.append(self)

    def __repr__(self) -> str:
        return f"ScriptedModel({self._next}/{len(self._steps)} steps used)"

    @property
    def unconsumed(self) -> int:
        return len(self._steps) - self._next

    def assert_consumed(self) -> None:
        if self.unconsumed:
            raise ScriptError(
                f"{self.unconsumed} scripted step(s) were never used",
                hint="The run ended earlier than the script expected.",
            )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        if self._next >= len(self._steps):
            raise ScriptError(
                f"unexpected model call #{len(self.requests)}: the script has only "
                f"{len(self._steps)} step(s)",
                hint="Add a step to the ScriptedModel, or check why the run kept going.",
            )
        step = self._steps[self._next]
        self._next += 1
        if isinstance(step, BaseException):
            raise step
        async for item in self._emit(request, step):
            yield item


@dataclass(frozen=True, slots=True)
class CallInfo:
    """Passed to a FunctionModel function with each request."""

    index: int
    """0-based number of this call on this model."""
    requests: Sequence[ModelRequest] = field(default=())


class FunctionModel(FakeProvider):
    """A model whose replies come from ``fn(request, info) -> Step`` (sync or async)."""

    def __init__(
        self,
        fn: Callable[[ModelRequest, CallInfo], Step | Awaitable[Step]],
        *,
        model: str = "function",
        profile: ModelProfile | None = None,
        provider: str = "test",
    ) -> None:
        super().__init__(model, profile, provider)
        self._fn = fn

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        result = self._fn(request, CallInfo(len(self.requests) - 1, tuple(self.requests)))
        if inspect.isawaitable(result):
            result = await result
        step = _as_reply(result)
        if isinstance(step, BaseException):
            raise step
        async for item in self._emit(request, step):
            yield item
