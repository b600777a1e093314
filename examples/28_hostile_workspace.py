"""A hostile workspace: odd file names, a regex that never ends, a child that hides.

- ``b"caf\\xe9.txt"`` is not UTF-8: the model sees it as ``caf\\xe9.txt`` and opens the
  file by that name; the run and its checkpoint are not disturbed.
- ``grep`` with ``^(a+)+$`` would backtrack for minutes while holding the GIL: it runs
  in a worker process stopped after ``search_timeout`` seconds, and the model is told.
- ``setsid sleep 1000 &`` leaves the shell's process group, yet is killed when the
  command returns (on Linux: the shell's supervisor is a child subreaper).

Offline (a scripted model).

Run: python examples/28_hostile_workspace.py
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from lovia import Agent, Runner
from lovia.plugins.workspace import Workspace
from lovia.testing import ScriptedModel, call


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fd = os.open(os.path.join(os.fsencode(root), b"caf\xe9.txt"), os.O_CREAT | os.O_WRONLY)
        os.write(fd, b"espresso\n")
        os.close(fd)
        (root / "bait.txt").write_text("a" * 40 + "!\n", encoding="utf-8")
        model = ScriptedModel(
            [
                call("list_dir"),
                call("read_file", path="caf\\xe9.txt"),
                call("grep", pattern="^(a+)+$"),
                call("shell", command="setsid sleep 1000 & echo started a hidden child"),
                "Done: read the menu, gave up on a hopeless pattern, left nothing running.",
            ]
        )
        workspace = Workspace(root, search_timeout=1)
        result = await Runner.run(
            Agent(name="a", model=model),
            "Look around.",
            workspace=workspace,
            checkpointer=f"sqlite:///{root / 'runs.db'}",
        )
        for entry in result.entries:
            if entry.type == "tool_result":
                first = " | ".join(entry.content.splitlines()[:3])  # type: ignore[union-attr]
                error = " (error)" if entry.is_error else ""  # type: ignore[union-attr]
                print(f"[{entry.name}]{error} {first}")  # type: ignore[union-attr]
        print(result.output)


if __name__ == "__main__":
    asyncio.run(main())
