"""``MCP(...)``: tools from Model Context Protocol servers (extra ``mcp``).

```python
from lovia.plugins.mcp import MCP

everything = MCP.stdio("npx", ["-y", "@modelcontextprotocol/server-everything"],
                       name="everything", allow=["echo", "get-sum"])
docs = MCP.http("https://example.com/mcp", headers={"Authorization": "Bearer …"},
                name="docs", prefix="docs_")
agent = Agent(name="a", model="openai:gpt-4.1-mini", plugins=[everything, docs])
```

- Connection lifetime: **one connection per run**, opened in ``setup()`` and closed in
  ``aclose``. A stdio server is a new process per run (for Node servers roughly 0.2-1 s);
  an HTTP server costs one handshake. Nothing is shared between concurrent runs.
- ``MCP.stdio``: the child gets *only* ``env`` plus a minimal ``PATH`` (never your
  API keys). ``MCP.http``: streamable HTTP with optional ``headers``.
- Tools: ``allow=`` / ``deny=`` filter by the server's tool names; ``prefix=`` is put in
  front of every exposed name to avoid clashes (names are made safe: letters, digits,
  ``_``, ``-``, at most 64 characters). The server's ``inputSchema`` is the tool's
  JSON Schema; arguments are checked against it before the call.
- Results: text content is joined; images, audio and resources are described; an MCP
  ``isError`` result, a protocol error or a dead server becomes an ``is_error`` tool
  result — the run goes on and the model can react.
- ``mcp`` is imported only when a server is set up; without it you get a
  :class:`~lovia.UserError` whose hint is ``pip install 'lovia[mcp]'``.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO, cast

from pydantic import BaseModel, ConfigDict, model_validator

from ..context import RunContext
from ..errors import ToolError, UserError
from ..tools import Tool
from ._mcp_conn import Connection, ServerSpec, import_mcp
from .base import PluginInstance

if TYPE_CHECKING:
    from mcp.types import CallToolResult
    from mcp.types import Tool as MCPTool

__all__ = ["MCP"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True, kw_only=True)
class MCP:
    """A Model Context Protocol server as a plugin; build with :meth:`stdio` or :meth:`http`."""

    spec: ServerSpec
    name: str = "mcp"
    allow: frozenset[str] | None = None
    deny: frozenset[str] = field(default_factory=frozenset[str])
    prefix: str = ""
    call_timeout: float | None = 300.0
    """Seconds to wait for one tool call's answer."""
    connect_timeout: float = 30.0
    server_instructions: bool = False
    """Append the server's own ``instructions`` (from initialize) to the system prompt."""

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        name: str = "mcp",
        cwd: str | None = None,
        allow: Sequence[str] | None = None,
        deny: Sequence[str] = (),
        prefix: str = "",
        errlog: TextIO | None = None,
        **options: Any,
    ) -> MCP:
        """A server started as a child process speaking MCP over stdin/stdout."""
        spec = ServerSpec(
            label=name,
            command=command,
            args=tuple(args),
            env=dict(env or {}),
            cwd=cwd,
            errlog=errlog,
        )
        return cls._make(spec, name, allow, deny, prefix, options)

    @classmethod
    def http(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        name: str = "mcp",
        allow: Sequence[str] | None = None,
        deny: Sequence[str] = (),
        prefix: str = "",
        **options: Any,
    ) -> MCP:
        """A server reached over streamable HTTP at ``url``."""
        if not url.startswith(("http://", "https://")):
            raise UserError(f"MCP.http needs an http(s) URL, got {url!r}")
        spec = ServerSpec(label=name, url=url, headers=dict(headers or {}))
        return cls._make(spec, name, allow, deny, prefix, options)

    @classmethod
    def _make(
        cls,
        spec: ServerSpec,
        name: str,
        allow: Sequence[str] | None,
        deny: Sequence[str],
        prefix: str,
        options: dict[str, Any],
    ) -> MCP:
        if isinstance(allow, str) or isinstance(deny, str):
            raise UserError("MCP allow=/deny= take a list of tool names, not a string")
        return cls(
            spec=spec,
            name=name,
            allow=None if allow is None else frozenset(allow),
            deny=frozenset(deny),
            prefix=prefix,
            **options,
        )

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        import_mcp()
        conn = await Connection.open(
            self.spec, connect_timeout=self.connect_timeout, call_timeout=self.call_timeout
        )
        try:
            listed = await conn.list_tools()
        except BaseException:
            await conn.close()
            raise
        tools: list[Tool] = []
        for t in listed:
            if (self.allow is not None and t.name not in self.allow) or t.name in self.deny:
                continue
            tools.append(_to_tool(conn, t, _exposed_name(self.prefix, t.name)))
        text = conn.instructions if self.server_instructions else None
        return PluginInstance(tools=tools, instructions=text, aclose=conn.close)


def _exposed_name(prefix: str, name: str) -> str:
    return _UNSAFE.sub("_", prefix + name)[:64] or "tool"


def _validator(schema: Mapping[str, Any]) -> Any:
    try:
        jsonschema: Any = importlib.import_module("jsonschema")  # a dependency of the mcp SDK
        cls: Any = jsonschema.validators.validator_for(schema)
        return cls(schema)
    except Exception:  # no jsonschema, or a schema it cannot read: the server checks
        return None


def _args_model(name: str, schema: Mapping[str, Any]) -> type[BaseModel]:
    validator = _validator(schema)

    class Arguments(BaseModel):
        model_config = ConfigDict(extra="forbid")
        arguments: dict[str, Any]

        @model_validator(mode="before")
        @classmethod
        def _wrap(cls, data: Any) -> Any:
            if not isinstance(data, dict):
                raise ValueError("the arguments must be a JSON object")
            if validator is not None:
                errors = sorted(validator.iter_errors(data), key=lambda e: list(e.path))
                if errors:
                    where = ".".join(str(p) for p in errors[0].path)
                    raise ValueError(
                        f"{where}: {errors[0].message}" if where else errors[0].message
                    )
            return {"arguments": cast(dict[str, Any], data)}

    Arguments.__name__ = f"{name}_arguments"
    return Arguments


def _to_tool(conn: Connection, remote: MCPTool, name: str) -> Tool:
    schema = {k: v for k, v in dict(remote.input_schema or {}).items() if k != "$schema"}
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    remote_name = remote.name

    async def call(arguments: dict[str, Any]) -> str:
        try:
            result = await conn.call_tool(remote_name, arguments)
        except ToolError:
            raise
        except Exception as exc:
            raise ToolError(
                f"MCP server {conn.spec.label} failed on {remote_name!r}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        text = render_result(result)
        if result.is_error:
            raise ToolError(text or f"MCP tool {remote_name!r} reported an error")
        return text

    annotations = remote.annotations
    read_only = bool(annotations and annotations.read_only_hint)
    return Tool(
        name=name,
        description=remote.description or remote.title or remote_name,
        parameters=schema,
        fn=call,
        args_model=_args_model(name, schema),
        is_async=True,
        concurrency_safe=read_only,
        idempotent=bool(annotations and annotations.idempotent_hint),
    )


def render_result(result: CallToolResult) -> str:
    """The text the model sees for an MCP tool result."""
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        elif kind in ("image", "audio"):
            data = str(getattr(block, "data", ""))
            parts.append(
                f"[{kind}: {getattr(block, 'mime_type', '?')}, {len(data) * 3 // 4} bytes]"
            )
        elif kind == "resource_link":
            parts.append(
                f"[resource link: {getattr(block, 'uri', '')} ({getattr(block, 'name', '')})]"
            )
        elif kind == "resource":
            res: Any = getattr(block, "resource", None)
            text = getattr(res, "text", None)
            parts.append(
                text if isinstance(text, str) else f"[resource: {getattr(res, 'uri', '')}, binary]"
            )
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)
