"""A tiny MCP server for the tests, written with the official SDK.

python mcp_test_server.py stdio
python mcp_test_server.py http <port>
"""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("lovia-test")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
def env() -> str:
    """The server's environment variable names."""
    return ",".join(sorted(os.environ))


@server.tool()
def traceparent(ctx: Context) -> str:
    """The W3C trace context the request carried in params._meta ("" when none)."""
    meta = ctx.request_context.meta or {}
    return str(meta.get("traceparent", ""))


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
