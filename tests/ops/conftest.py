"""Fixtures for the ops tests (Prometheus rules, dashboards, compose stack)."""

from __future__ import annotations

import pytest
from ops_helpers import require_binary


@pytest.fixture(scope="session")
def promtool() -> str:
    return require_binary("promtool")


@pytest.fixture(scope="session")
def prometheus_binary() -> str:
    return require_binary("prometheus")
