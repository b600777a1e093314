"""Workspace: a folder the agent works in — its AGENTS.md, file tools and a shell.

A failing command is *output*, not a tool error: the model sees ``exit code: 1`` and
the test log, and fixes the code. Commands run in their own process group with a
timeout and an output cap.

Offline by default (a scripted model); set ``LOVIA_MODEL`` to try a real model.

Run: python examples/27_workspace.py
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from lovia import Agent, Runner
from lovia.plugins.workspace import Workspace
from lovia.testing import ScriptedModel, call

CHECK = "python3 -c 'import calc; assert calc.add(2, 2) == 4, calc.add(2, 2)' && echo ok"


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "AGENTS.md").write_text(f"Check your work with: {CHECK}\n", encoding="utf-8")
        (root / "calc.py").write_text("def add(a, b):\n    return a - b\n", encoding="utf-8")
        model = os.environ.get("LOVIA_MODEL") or ScriptedModel(
            [
                call("shell", command=CHECK),
                call("edit_file", path="calc.py", old_string="a - b", new_string="a + b"),
                call("shell", command=CHECK),
                "Fixed: add() subtracted; the check passes now.",
            ]
        )
        workspace = Workspace(root, shell_timeout=20)
        result = await Runner.run(
            Agent(name="coder", model=model), "Make the check pass.", workspace=workspace
        )
        for entry in result.entries:
            if entry.type == "tool_result":
                print(f"[{entry.name}] {entry.content.splitlines()[0]}")  # type: ignore[union-attr]
        print(result.output)


if __name__ == "__main__":
    asyncio.run(main())
