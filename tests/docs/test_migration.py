"""The migration guides: lovia's side of each task is the tested example, verbatim.

``examples/80_five_tasks.py`` runs in ``test_examples.py``; here every ``python`` block of
the two guides must be a piece of it, so the guides cannot drift from code that runs.
The peers' blocks (fenced ``python3``, each after a ``<!-- peer: NAME -->`` line) are
shown for comparison and not run: they appear nowhere but in these guides.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .test_docs import PAGES, ROOT, extract_blocks

EXAMPLE = ROOT / "examples" / "80_five_tasks.py"
GUIDES = [
    ROOT / "docs" / "migrating-from-openai-agents.md",
    ROOT / "docs" / "migrating-from-pydantic-ai.md",
]
TASKS = ["Two tools", "Structured output", "Streaming", "Handoff", "Kill and resume"]


@pytest.mark.parametrize("guide", GUIDES, ids=[g.name for g in GUIDES])
def test_lovia_blocks_are_the_tested_example(guide: Path) -> None:
    example = EXAMPLE.read_text(encoding="utf-8")
    blocks = extract_blocks(guide)
    assert len(blocks) == 6, [b.line for b in blocks]  # the setup and the five tasks
    for block in blocks:
        assert not block.skipped
        assert block.source.strip() in example, (
            f"{guide.name}:{block.line} is not in {EXAMPLE.name}"
        )


@pytest.mark.parametrize("guide", GUIDES, ids=[g.name for g in GUIDES])
def test_every_task_is_shown_for_both_sides(guide: Path) -> None:
    text = guide.read_text(encoding="utf-8")
    headings = re.findall(r"^### \d\. (.+)$", text, flags=re.M)
    assert headings == TASKS
    assert "## Name map" in text
    for section in re.split(r"^### ", text, flags=re.M)[1:]:
        assert "```python\n" in section, section.splitlines()[0]


def test_peer_code_only_in_the_guides_and_labelled() -> None:
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.strip() == "```python3":
                assert page in GUIDES, f"{page.name}:{i + 1}: python3 fences are for peer code"
                assert lines[i - 1].startswith("<!-- peer: "), f"{page.name}:{i + 1}"
