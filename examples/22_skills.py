"""Skills: Agent Skills folders with progressive disclosure.

The system prompt lists only each skill's name and description; the model loads a
skill's body with ``load_skill`` and its files with ``read_skill_file``. This example
writes a small skill into a temporary folder.

Offline by default (a scripted model); set ``LOVIA_MODEL`` to try a real model.

Run: python examples/22_skills.py
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from lovia import Agent, Runner
from lovia.plugins.skills import Skills
from lovia.testing import ScriptedModel, call

SKILL = """\
---
name: release-notes
description: Writes release notes from a list of merged changes. Use when the user asks for release notes or a changelog entry.
---
# Release notes
1. Group changes under Added / Changed / Fixed.
2. Use the tone in `reference/style.md`.
"""


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        skill = Path(tmp) / "release-notes"
        (skill / "reference").mkdir(parents=True)
        (skill / "SKILL.md").write_text(SKILL, encoding="utf-8")
        (skill / "reference" / "style.md").write_text("Short, plain, no hype.\n", encoding="utf-8")
        model = os.environ.get("LOVIA_MODEL") or ScriptedModel(
            [
                call("load_skill", name="release-notes"),
                call("read_skill_file", name="release-notes", path="reference/style.md"),
                "### Fixed\n- Login button alignment (#42).",
            ]
        )
        agent = Agent(name="writer", model=model, plugins=[Skills(tmp)])
        result = await Runner.run(agent, "Release notes for: fixed login button (#42).")
        print(result.output)


if __name__ == "__main__":
    asyncio.run(main())
