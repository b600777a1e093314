"""MCP: tools from a Model Context Protocol server (needs ``pip install 'lovia[mcp]'``).

Uses the reference server ``@modelcontextprotocol/server-everything`` over stdio when it
is installed (``scripts/ci-install-mcp.sh``), else a tiny server written with the
``mcp`` SDK (tests/plugins/mcp_test_server.py). The connection is opened when the run
starts and closed when it ends; the server process gets only the env you pass.

Offline by default (a scripted model); set ``LOVIA_MODEL`` to try a real model.

Run: python examples/24_mcp.py
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from lovia import Agent, Runner
from lovia.plugins.mcp import MCP
from lovia.testing import ScriptedModel, call

REPO = Path(__file__).resolve().parents[1]
EVERYTHING = (
    REPO / ".mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


def server() -> tuple[MCP, str]:
    quiet = open(os.devnull, "w")  # noqa: SIM115 - the server's log goes nowhere
    if EVERYTHING.is_file():
        return MCP.stdio(
            "node", [str(EVERYTHING), "stdio"], name="everything", allow=["get-sum"], errlog=quiet
        ), "get-sum"
    script = REPO / "tests/plugins/mcp_test_server.py"
    return MCP.stdio(
        sys.executable, [str(script), "stdio"], name="py", allow=["add"], errlog=quiet
    ), "add"


async def main() -> None:
    plugin, tool_name = server()
    model = os.environ.get("LOVIA_MODEL") or ScriptedModel(
        [call(tool_name, a=19, b=23), "19 + 23 = 42"]
    )
    agent = Agent(name="calc", model=model, plugins=[plugin])
    result = await Runner.run(agent, "What is 19 + 23? Use the tool.")
    for entry in result.entries:
        if entry.type == "tool_result":
            print(f"[{entry.name}] {entry.content}")  # type: ignore[union-attr]
    print(result.output)


if __name__ == "__main__":
    asyncio.run(main())
