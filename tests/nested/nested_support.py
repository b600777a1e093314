"""Names the agents-as-tools tests import (a conftest is not importable by name: several
test folders have one, and whichever loaded first would answer ``from conftest import``)."""

from __future__ import annotations

from typing import Any

PRICED = "nested-priced"
"""$1 per input token, $2 per output token: every cost is a whole number (sums are exact)."""


def otel_options(otel: Any) -> dict[str, Any]:
    """The private providers of the ``otel`` fixture, as Runner options."""
    return {"tracer_provider": otel.tp, "meter_provider": otel.mp}
