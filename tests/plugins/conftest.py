"""Shared helpers for the plugin tests."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import pytest

from lovia.transcript import ToolCallEntry, ToolResultEntry, TranscriptEntry

REPO = Path(__file__).resolve().parents[2]
SKILLS_FIXTURES = REPO / "tests" / "fixtures" / "skills"


def load_example(filename: str) -> ModuleType:
    """Import ``examples/<filename>`` as a module (names start with digits)."""
    path = REPO / "examples" / filename
    name = "example_" + path.stem
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def skills_root() -> Path:
    assert SKILLS_FIXTURES.is_dir(), f"vendored skills fixtures missing at {SKILLS_FIXTURES}"
    return SKILLS_FIXTURES


def results(entries: Sequence[TranscriptEntry]) -> list[ToolResultEntry]:
    """Tool results in the order the model made the calls (parallel calls finish in any)."""
    order = [e.call_id for e in entries if isinstance(e, ToolCallEntry)]
    found = {e.call_id: e for e in entries if isinstance(e, ToolResultEntry)}
    return [found[c] for c in order if c in found]


def sleepers(token: str) -> list[int]:
    """Live ``sleep <token>`` processes (zombies count as gone)."""
    wanted = b"sleep\x00" + token.encode() + b"\x00"
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if cmdline == wanted and state != "Z":
            found.append(int(name))
    return found


def unique_token() -> str:
    return f"1000.{int.from_bytes(os.urandom(3), 'big'):08d}"  # a unique `sleep` argument
