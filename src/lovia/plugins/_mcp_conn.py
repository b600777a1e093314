"""Private: one MCP client connection, owned by a dedicated asyncio task.

The official SDK's transports and ``ClientSession`` are anyio context managers whose
task groups must be entered and exited in one task. A run's ``setup`` and ``aclose``
may not share a task, and a crashing server must never cancel the run. So a background
task owns the whole connection: it opens transport + session, signals ready, waits for
``close()``, and exits the contexts itself. Tool calls use the session from any task
and race the owner task, so a server that dies mid-call gives an error, not a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import shutil
import sys
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO, cast

from ..errors import ToolError, UserError
from ..telemetry.mcp import TOOL_ERROR, McpClientTelemetry
from ..transcript import clean_text

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult
    from mcp.types import Tool as MCPTool

__all__ = ["Connection", "ServerSpec", "import_mcp"]

logger = logging.getLogger("lovia.plugins.mcp")

MINIMAL_PATH = "/usr/local/bin:/usr/bin:/bin"
SESSION_ID_MAX = 128
"""Longest ``mcp.session.id`` recorded (the protocol's ids are far shorter)."""


def import_mcp() -> Any:
    """Import the optional ``mcp`` package or raise a UserError with the install hint."""
    try:
        return importlib.import_module("mcp")
    except ImportError as exc:
        raise UserError(
            f"the MCP plugin needs the 'mcp' package ({exc})",
            hint="pip install 'lovia[mcp]'",
        ) from None


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """Where the server is: a command (stdio) or a URL (streamable HTTP)."""

    label: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] | None = None
    errlog: TextIO | None = None


def child_env(command: str, env: Mapping[str, str] | None) -> tuple[str, dict[str, str]]:
    """Resolve ``command``; return it and the child's whole environment.

    The child gets only ``env`` plus a minimal ``PATH`` (the command's own folder and
    the system folders) unless ``env`` sets ``PATH`` itself.
    """
    resolved = shutil.which(command)
    if resolved is None:
        raise UserError(
            f"MCP server command {command!r} not found", hint="Install it or pass an absolute path."
        )
    out = {"PATH": f"{os.path.dirname(resolved)}:{MINIMAL_PATH}"}
    for key, value in (env or {}).items():
        if not key or "=" in key or "\x00" in key + value:
            raise UserError(f"invalid environment variable name {key!r} for the MCP server")
        out[key] = value
    return resolved, out


def _stdio_params(spec: ServerSpec) -> Any:
    mcp = import_mcp()
    assert spec.command is not None
    command, env = child_env(spec.command, spec.env)
    if os.name != "posix":  # pragma: no cover - the SDK adds its default variables
        return mcp.StdioServerParameters(
            command=command, args=list(spec.args), env=env, cwd=spec.cwd
        )
    # The SDK merges its default variables (HOME, USER, ...) into the child's env;
    # `env -i` replaces the whole environment with exactly ours.
    env_bin = shutil.which("env") or "/usr/bin/env"
    assignments = [f"{k}={v}" for k, v in env.items()]
    return mcp.StdioServerParameters(
        command=env_bin, args=["-i", *assignments, command, *spec.args], cwd=spec.cwd
    )


def _telemetry(spec: ServerSpec) -> McpClientTelemetry:
    if spec.url is None:
        return McpClientTelemetry(transport="pipe")
    from urllib.parse import urlsplit

    url = urlsplit(spec.url)
    port = url.port or (443 if url.scheme == "https" else 80)
    return McpClientTelemetry(server_address=url.hostname, server_port=port, transport="tcp")


@contextlib.asynccontextmanager
async def _transport(
    spec: ServerSpec, telemetry: McpClientTelemetry
) -> AsyncGenerator[tuple[Any, Any]]:
    if spec.url is not None:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        async def session_id(response: Any) -> None:  # the server's Mcp-Session-Id
            found = response.headers.get("mcp-session-id")
            if found:  # a hostile server's header must not bloat or break every span
                telemetry.session_id = clean_text(str(found))[:SESSION_ID_MAX]

        async with (
            create_mcp_http_client(headers=dict(spec.headers or {})) as client,
            streamable_http_client(spec.url, http_client=client) as streams,
        ):
            client.event_hooks["response"].append(session_id)
            yield streams[0], streams[1]
        return
    from mcp.client.stdio import stdio_client

    async with stdio_client(_stdio_params(spec), errlog=spec.errlog or sys.stderr) as streams:
        yield streams[0], streams[1]


class Connection:
    """A live MCP client session owned by a background task (see the module docs)."""

    def __init__(self, spec: ServerSpec, call_timeout: float | None) -> None:
        self.spec = spec
        self.call_timeout = call_timeout
        self.session: ClientSession | None = None
        self.instructions: str | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self.telemetry = _telemetry(spec)

    @classmethod
    async def open(
        cls, spec: ServerSpec, *, connect_timeout: float, call_timeout: float | None
    ) -> Connection:
        import_mcp()
        conn = cls(spec, call_timeout)
        conn._task = asyncio.create_task(conn._own(), name=f"lovia-mcp-{spec.label}")
        ready = asyncio.create_task(conn._ready.wait())
        try:
            await asyncio.wait(
                {conn._task, ready}, timeout=connect_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ready.cancel()
        if not conn._ready.is_set():
            await conn.close()
            why = repr(conn._error) if conn._error else f"no answer in {connect_timeout:g} s"
            raise UserError(
                f"could not connect to MCP server {spec.label}: {why}",
                hint="Check the command/URL; run the server by hand to see its log.",
            )
        return conn

    async def _own(self) -> None:
        from mcp import ClientSession

        try:
            async with (
                _transport(self.spec, self.telemetry) as (read, write),
                ClientSession(read, write) as session,
            ):
                with self.telemetry.operation("initialize"):
                    result = await session.initialize()
                self.telemetry.protocol_version = getattr(result, "protocol_version", None)
                self.instructions = getattr(result, "instructions", None)
                self.session = session
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:  # the server failed or went away: calls now fail
            self._error = exc
            logger.debug("MCP connection %s ended: %r", self.spec.label, exc)
        finally:
            self.session = None

    @property
    def alive(self) -> bool:
        return self.session is not None and self._task is not None and not self._task.done()

    async def list_tools(self) -> list[MCPTool]:
        session = self._session()
        tools: list[MCPTool] = []
        cursor: str | None = None
        for _ in range(100):  # a paginator that never ends cannot hang setup
            from mcp.types import PaginatedRequestParams

            params = PaginatedRequestParams(cursor=cursor) if cursor else None
            with self.telemetry.operation("tools/list"):
                page = await self._race(session.list_tools(params=params))
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """Call a tool; its trace context goes to the server in ``params._meta``."""
        session = self._session()
        with self.telemetry.operation("tools/call", tool=name) as op:
            result: CallToolResult = await self._race(
                session.call_tool(
                    name,
                    arguments,
                    read_timeout_seconds=self.call_timeout,
                    meta=cast("Any", op.meta) or None,
                )
            )
            if result.is_error:
                op.error_type = TOOL_ERROR
        return result

    def _session(self) -> ClientSession:
        if self.session is None or not self.alive:
            why = f": {self._error!r}" if self._error else ""
            raise ToolError(f"MCP server {self.spec.label} is not connected (it exited){why}")
        return self.session

    async def _race(self, coro: Any) -> Any:
        """Await ``coro`` unless the connection dies first (then raise ToolError)."""
        assert self._task is not None
        call = asyncio.ensure_future(coro)
        try:
            await asyncio.wait({call, self._task}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            call.cancel()
            raise
        if not call.done():
            call.cancel()
            raise ToolError(
                f"MCP server {self.spec.label} went away during the call"
                + (f": {self._error!r}" if self._error else "")
            )
        return call.result()

    async def close(self) -> None:
        """Close the session and transport (stops a stdio server); safe to call twice."""
        if not self._stop.is_set() and self._ready.is_set():
            self.telemetry.session_ended(type(self._error).__name__ if self._error else None)
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout=10)
            except TimeoutError:
                task.cancel()
                logger.warning("MCP server %s did not close in 10 s; cancelled", self.spec.label)
