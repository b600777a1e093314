"""``@tool``: a typed Python function the model can call.

The JSON Schema of the parameters comes from the signature and the docstring (via
pydantic); arguments are validated before the call; a parameter annotated
``RunContext[...]`` (whatever its name) is injected and absent from the schema.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import dataclasses
import functools
import inspect
import json
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias, overload

import pydantic
from pydantic import BaseModel, ConfigDict, create_model
from pydantic_core import PydanticSerializationError, to_jsonable_python

from ..context import RunContext
from ..errors import UserError
from ..model import ToolSpec
from ..transcript import ToolCallEntry
from ._docstring import parse_docstring

__all__ = [
    "ApprovalPolicy",
    "ApprovalVerdict",
    "Approver",
    "ResultNotSerializable",
    "Tool",
    "ToolArgumentsError",
    "tool",
]

ApprovalPolicy: TypeAlias = (
    "bool | Callable[[RunContext[Any], ToolCallEntry], bool | Awaitable[bool]]"
)
"""Whether a tool's call needs approval: ``True`` = always ask; a callable
``(ctx, call) -> bool`` (sync or async) decides per call."""

ApprovalVerdict: TypeAlias = "bool | str | None"
"""An approver's answer: ``True`` / ``"approve"`` runs the call; ``False``, ``None`` or
``"deny"`` denies it; any other text denies it with that text as the reason."""

Approver: TypeAlias = (
    "Callable[[RunContext[Any], ToolCallEntry], ApprovalVerdict | Awaitable[ApprovalVerdict]]"
)
"""Decides calls that need approval (``Agent(approval=)``, ``Runner.run(approval=)``)."""


class ToolArgumentsError(Exception):
    """The model's arguments did not validate; the text goes back to the model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A tool the model can call. Build one with :func:`tool`."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    """JSON Schema of the arguments object."""
    fn: Callable[..., Any] = field(repr=False)
    args_model: type[BaseModel] = field(repr=False)
    ctx_param: str | None = None
    is_async: bool = False
    concurrency_safe: bool = False
    """Safe to run in parallel with other calls of the same turn."""
    timeout: float | None = None
    """Seconds before the call is abandoned with an error result."""
    retries: int = 0
    """Extra attempts after an unexpected exception (not after ``ToolError``)."""
    requires_approval: ApprovalPolicy = False
    """``True``, or a callable ``(ctx, call) -> bool`` deciding per call."""
    idempotent: bool = False
    """Safe to re-run after a crash left its outcome unknown."""
    max_result_chars: int | None = None
    """Results longer than this are stubbed in the view (kept whole in the transcript)."""
    strict: bool = False
    source: str = "agent"
    """Where the tool came from (``agent``, ``plugin:<name>``, ``handoff``…)."""

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=self.parameters,
            strict=self.strict,
        )

    def with_source(self, source: str) -> Tool:
        return dataclasses.replace(self, source=source)

    def validate(self, arguments: str) -> dict[str, Any]:
        """Validate the model's JSON arguments; raise :class:`ToolArgumentsError`."""
        try:
            model = self.args_model.model_validate_json(arguments or "{}")
        except pydantic.ValidationError as exc:
            raise ToolArgumentsError(_validation_text(self.name, exc)) from None
        return {name: getattr(model, name) for name in _field_names(type(model))}

    async def invoke(self, ctx: RunContext[Any], kwargs: dict[str, Any]) -> Any:
        """Call the function with validated arguments (sync functions run in a thread)."""
        return await self.start(ctx, kwargs)

    def start(self, ctx: RunContext[Any], kwargs: dict[str, Any]) -> Awaitable[Any]:
        """Start the call: a coroutine for an async function; for a sync one, the future of
        its thread (already running, with this context's variables, as ``to_thread``).
        A thread cannot be stopped: the run loop shields that future and, when the run
        ends while it runs, waits for it to record its outcome."""
        if self.ctx_param is not None:
            kwargs = {**kwargs, self.ctx_param: ctx}
        if self.is_async:
            return self.fn(**kwargs)
        call = functools.partial(contextvars.copy_context().run, self.fn, **kwargs)
        return asyncio.get_running_loop().run_in_executor(None, call)


@functools.lru_cache(maxsize=4096)  # bounded: tools made at run time (MCP) come and go
def _field_names(model: type[BaseModel]) -> tuple[str, ...]:
    """An arguments model's field names, read once (``model_fields`` builds its answer
    on every access: a quarter of validating a small call's arguments)."""
    return tuple(model.model_fields)


def _validation_text(name: str, exc: pydantic.ValidationError) -> str:
    problems: list[str] = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        problems.append(f"{loc}: {err['msg']}")
    return f"Invalid arguments for tool {name!r}: " + "; ".join(problems)


class ResultNotSerializable(Exception):
    """A tool returned something that cannot be turned into text for the model."""


_JSON_TEXT = json.JSONEncoder(ensure_ascii=False)
"""How a tool's JSON-compatible result becomes text (``json.dumps(..., ensure_ascii=False)``,
with one encoder for every call instead of a new one each time)."""
_INT_BITS = 13_000
"""Integers shorter than this many bits have < 4,000 digits (below str()'s limit)."""


def serialize_result(value: Any) -> str:
    """Turn a tool's return value into the text the model sees.

    ``str`` as is; pydantic models and JSON-compatible data as JSON; ``bytes`` as UTF-8
    text, or (not UTF-8) as a base64 block that says so. Anything else raises
    :class:`ResultNotSerializable` naming the type.
    """
    if isinstance(value, str):
        return value
    if type(value) is int and value.bit_length() < _INT_BITS:  # the common scalar, as dumps
        return str(value)  # would give it (past str()'s digit limit: the path below says so)
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if value is None:
        return ""
    if isinstance(value, bytes | bytearray):
        return _bytes_text(bytes(value))
    try:
        return _JSON_TEXT.encode(to_jsonable_python(value))
    except (ValueError, TypeError, PydanticSerializationError) as exc:
        raise ResultNotSerializable(
            f"returned a {type(value).__name__} that cannot be sent to the model ({exc}); "
            "return str, a pydantic model, or JSON-compatible data"
        ) from exc


def _bytes_text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        encoded = base64.b64encode(data).decode("ascii")
        return f"[{len(data)} bytes of binary data (not UTF-8), base64]\n{encoded}"


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    concurrency_safe: bool = False,
    timeout: float | None = None,
    retries: int = 0,
    requires_approval: ApprovalPolicy = False,
    idempotent: bool = False,
    max_result_chars: int | None = None,
    strict: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    concurrency_safe: bool = False,
    timeout: float | None = None,
    retries: int = 0,
    requires_approval: ApprovalPolicy = False,
    idempotent: bool = False,
    max_result_chars: int | None = None,
    strict: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a function a tool; use bare (``@tool``) or with options (``@tool(timeout=5)``)."""

    def build(func: Callable[..., Any]) -> Tool:
        return _build_tool(
            func,
            name=name,
            description=description,
            concurrency_safe=concurrency_safe,
            timeout=timeout,
            retries=retries,
            requires_approval=requires_approval,
            idempotent=idempotent,
            max_result_chars=max_result_chars,
            strict=strict,
        )

    return build(fn) if fn is not None else build


def _build_tool(
    func: Callable[..., Any], *, name: str | None, description: str | None, **options: Any
) -> Tool:
    if isinstance(func, Tool):
        raise UserError("@tool was applied twice", hint="Use @tool once per function.")
    if not callable(func):
        raise UserError(f"@tool needs a function, got {func!r}")
    tool_name = name or getattr(func, "__name__", "")
    if not tool_name or not _valid_name(tool_name):
        raise UserError(
            f"invalid tool name {tool_name!r}",
            hint="Tool names may use letters, digits, '_' and '-' (1-64 characters).",
        )
    doc_desc, param_docs = parse_docstring(inspect.getdoc(func))
    args_model, ctx_param = _args_model(func, tool_name, param_docs)
    return Tool(
        name=tool_name,
        description=description if description is not None else doc_desc,
        parameters=_clean_schema(args_model.model_json_schema()),
        fn=func,
        args_model=args_model,
        ctx_param=ctx_param,
        is_async=_is_async(func),
        **options,
    )


def _valid_name(name: str) -> bool:
    return 0 < len(name) <= 64 and all(c.isalnum() or c in "_-" for c in name)


def _is_async(func: Callable[..., Any]) -> bool:
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004
    )


def _is_context(annotation: Any) -> bool:
    if annotation is RunContext or typing.get_origin(annotation) is RunContext:
        return True
    return isinstance(annotation, str) and annotation.split("[", 1)[0].strip() in (
        "RunContext",
        "lovia.RunContext",
    )


def _hints(func: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(func, include_extras=True)
    except Exception:  # unresolvable forward refs (e.g. local types): fall back per param
        return dict(getattr(func, "__annotations__", {}))


def _args_model(
    func: Callable[..., Any], tool_name: str, docs: dict[str, str]
) -> tuple[type[BaseModel], str | None]:
    sig = inspect.signature(func)
    hints = _hints(func)
    fields: dict[str, Any] = {}
    ctx_param: str | None = None
    for param in sig.parameters.values():
        annotation = hints.get(param.name, param.annotation)
        if _is_context(annotation):
            ctx_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise UserError(
                f"tool {tool_name!r}: parameter {param.name!r} is *args/**kwargs or "
                "positional-only",
                hint="Tools take named parameters only, so the model can fill them as JSON.",
            )
        if annotation is inspect.Parameter.empty:
            annotation = Any
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (
            annotation,
            pydantic.Field(default=default, description=docs.get(param.name) or None),
        )
    try:
        model = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
        model.model_json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as e:
        raise UserError(
            f"tool {tool_name!r}: cannot build a JSON schema for its parameters ({e})",
            hint="Annotate parameters with JSON-friendly types (str, int, pydantic models…).",
        ) from e
    return model, ctx_param


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    schema = dict(schema)
    schema.pop("title", None)
    props = schema.get("properties")
    if isinstance(props, dict):
        clean: dict[str, Any] = {}
        for key, value in typing.cast(dict[str, Any], props).items():
            if isinstance(value, dict):
                value = {
                    k: v for k, v in typing.cast(dict[str, Any], value).items() if k != "title"
                }
            clean[key] = value
        schema["properties"] = clean
    schema.setdefault("properties", {})
    return schema
