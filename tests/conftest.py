"""Suite-wide fixtures: no test may reach a real (non-loopback) host."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from lovia.testing import block_network

REPO = Path(__file__).resolve().parents[1]
pytest_plugins = ["lovia.testing.pytest_plugin"]

FIXTURES = REPO / "tests" / "fixtures"
"""Third-party data the tests read (vendored, with licences: see its README.md)."""


@pytest.fixture(autouse=True)
def _no_real_network() -> Iterator[None]:
    with block_network():
        yield


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")
