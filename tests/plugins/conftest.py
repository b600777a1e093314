"""Shared helpers for the plugin tests."""

from __future__ import annotations

import importlib.util
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
