"""A user can paste every docs code block: into a file, or into ``python -m asyncio``.

A block that compiles as a plain module runs as a file. A block with top-level ``await``
does not (SyntaxError in a file), so its page must say how to run it (``python -m
asyncio``) before that block. ``test_docs.py`` runs every block.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .test_docs import PAGES, ROOT, Block, extract_blocks

MARKER = "python -m asyncio"


def needs_asyncio_repl(block: Block) -> bool:
    """True when the block only compiles with top-level ``await`` allowed."""
    try:
        compile(block.source, "block", "exec", dont_inherit=True)
        return False
    except SyntaxError:
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        compile(block.source, "block", "exec", flags=flags, dont_inherit=True)
        return True


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_top_level_await_is_announced_before_its_block(page: Path) -> None:
    lines = page.read_text(encoding="utf-8").splitlines()
    for block in extract_blocks(page):
        if not block.skipped and needs_asyncio_repl(block):
            before = "\n".join(lines[: block.line - 1])
            assert MARKER in before, (
                f"{page.name}:{block.line} uses top-level await; say before it that it "
                f"runs in `{MARKER}` (or in a file inside asyncio.run(main()))"
            )


def test_the_check_tells_files_from_repl_blocks() -> None:
    page = ROOT / "docs" / "quickstart.md"
    block = Block(page, 1, "import asyncio\nprint(1)\n", False)
    assert not needs_asyncio_repl(block)
    awaiting = Block(page, 1, "import asyncio\nawait asyncio.sleep(0)\n", False)
    assert needs_asyncio_repl(awaiting)
