"""The documentation is tested like code.

- Every ```python block of ``docs/*.md`` and ``README.md`` runs. The blocks of one page
  run in order in one namespace (a fresh module), with top-level ``await`` allowed, in a
  temporary working directory. A block preceded by ``<!-- not-run -->`` is skipped, and
  fewer than 10% of all blocks may be.
- ``docs/api.md`` names every entry of ``lovia.__all__``.
- ``docs/troubleshooting.md`` names every ``LoviaError`` subclass in ``lovia.errors``.
- ``mkdocs.yml``'s nav lists exactly the pages in ``docs/``.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import lovia
from lovia import errors

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"]
NOT_RUN = "<!-- not-run -->"
MAX_SKIPPED_RATIO = 0.10

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$")


@dataclass(frozen=True, slots=True)
class Block:
    page: Path
    line: int
    """1-based line of the opening fence."""
    source: str
    skipped: bool


def extract_blocks(page: Path) -> list[Block]:
    """The ```python blocks of a Markdown page, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent = m["fence"], len(m["indent"])
        lang = m["info"].strip().split(" ")[0].lower() if m["info"].strip() else ""
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        if lang in ("python", "py"):
            prev = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), "")
            blocks.append(Block(page, i + 1, "\n".join(body) + "\n", prev == NOT_RUN))
        i = j + 1
    return blocks


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _runnable_pages() -> list[Path]:
    """Pages with at least one python block that is not marked not-run."""
    return [p for p in PAGES if any(not b.skipped for b in extract_blocks(p))]


def _page_ids() -> list[str]:
    return [_rel(p) for p in _runnable_pages()]


def _run_blocks(blocks: list[Block], module: types.ModuleType) -> None:
    """Run the blocks in one event loop; the loop runs only while a block awaits.

    A block with top-level ``await`` runs inside the page's loop; any other block runs
    with no loop running, so it may call ``asyncio.run()`` or ``Runner.run_sync()``.
    """
    with asyncio.Runner() as runner:
        for block in blocks:
            if block.skipped:
                continue
            name = f"{_rel(block.page)}:{block.line}"
            # Offset the code so tracebacks point at the page's own line numbers.
            src = "\n" * (block.line) + block.source
            flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            try:
                code = compile(src, name, "exec", flags=flags, dont_inherit=True)
                if code.co_flags & inspect.CO_COROUTINE:
                    runner.run(eval(code, module.__dict__))
                else:
                    exec(code, module.__dict__)
            except BaseException as exc:
                raise AssertionError(f"the code block at {name} failed: {exc!r}") from exc


@pytest.fixture
def docs_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch working directory and an environment without a real model."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOVIA_MODEL", raising=False)
    monkeypatch.setenv("LOVIA_STORE", f"sqlite:///{tmp_path / 'lovia.db'}")
    return tmp_path


@pytest.mark.timeout(120)
@pytest.mark.parametrize("page", _runnable_pages(), ids=_page_ids())
def test_code_blocks_run(page: Path, docs_sandbox: Path) -> None:
    blocks = extract_blocks(page)
    mod_name = "lovia_docs_" + re.sub(r"\W", "_", _rel(page))
    module = types.ModuleType(mod_name)
    module.__file__ = str(page)
    sys.modules[mod_name] = module  # dataclasses and pydantic look classes' modules up
    try:
        _run_blocks(blocks, module)
    finally:
        sys.modules.pop(mod_name, None)


def test_few_blocks_are_skipped() -> None:
    blocks = [b for page in PAGES for b in extract_blocks(page)]
    skipped = [f"{_rel(b.page)}:{b.line}" for b in blocks if b.skipped]
    assert blocks, "no python code blocks found in the docs"
    ratio = len(skipped) / len(blocks)
    assert ratio < MAX_SKIPPED_RATIO, (
        f"{len(skipped)} of {len(blocks)} python blocks are marked {NOT_RUN} "
        f"({ratio:.0%} >= {MAX_SKIPPED_RATIO:.0%}): {skipped}"
    )


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) is not None


def test_api_reference_covers_all_public_names() -> None:
    text = (DOCS / "api.md").read_text(encoding="utf-8")
    missing = [n for n in lovia.__all__ if not _mentions(text, n)]
    assert not missing, f"docs/api.md does not mention: {missing}"


def _error_classes() -> list[type[Any]]:
    return sorted(
        (
            obj
            for obj in vars(errors).values()
            if isinstance(obj, type) and issubclass(obj, errors.LoviaError)
        ),
        key=lambda c: c.__name__,
    )


def test_troubleshooting_covers_every_error() -> None:
    text = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    missing = [c.__name__ for c in _error_classes() if not _mentions(text, c.__name__)]
    assert not missing, f"docs/troubleshooting.md does not mention: {missing}"


def _nav_pages(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node] if node.endswith(".md") else []
    if isinstance(node, dict):
        return [p for v in node.values() for p in _nav_pages(v)]  # type: ignore[union-attr]
    if isinstance(node, list):
        return [p for v in node for p in _nav_pages(v)]  # type: ignore[union-attr]
    return []


def test_mkdocs_nav_lists_every_page() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_pages(config.get("nav", []))
    duplicates = sorted({p for p in nav if nav.count(p) > 1})
    assert not duplicates, f"pages listed twice in the mkdocs.yml nav: {duplicates}"
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert not (on_disk - set(nav)), f"pages missing from the nav: {sorted(on_disk - set(nav))}"
    assert not (set(nav) - on_disk), f"nav entries with no page: {sorted(set(nav) - on_disk)}"
