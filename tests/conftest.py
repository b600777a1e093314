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


@pytest.fixture(autouse=True)
def _process_wide_settings_restored() -> Iterator[None]:
    """Price overrides, the default store and the content-capture policy are process-wide:
    whatever a test sets is put back after it, so no test passes because of another's
    leftovers (the suite also runs in random order)."""
    from lovia import _defaults, pricing
    from lovia.telemetry import content

    saved = (_defaults._configured, content._configured, content._scrub)
    prices = dict(pricing._overrides)
    yield
    _defaults._configured, content._configured, content._scrub = saved
    pricing.clear_prices()
    pricing._overrides.update(prices)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(autouse=True, scope="session")
def _otlp_retry_jitter_off_the_global_random() -> None:
    """Tests of bounded shutdown leave OTLP exporter threads retrying after the test
    (by design: shutdown returns, the abandoned export gives up later). Their back-off
    jitter drew from the global ``random``, and a Hypothesis test running meanwhile
    failed with "Inconsistent data generation" (it watches the global random). The
    exporters get a private generator for the whole session."""
    import random

    try:
        from opentelemetry.exporter.otlp.common import http as otlp_http
    except ImportError:  # the exporter extra is not installed: nothing retries
        return
    otlp_http.random = random.Random()  # type: ignore[attr-defined]
