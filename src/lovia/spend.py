"""Spend limits shared by every run: USD per label value and window.

``SpendLimit(label="tenant", value="acme", max_usd=50, window="day")`` caps what every
run labelled ``tenant=acme`` spends together in a UTC day, across processes and workers,
counted in the store the runs are recorded in. ``value=None`` puts the same cap on each
value of the label on its own. Set them process-wide with
``lovia.configure(spend_limits=[...])``; every model call of a labelled run checks them
first (the engine's ``_loop/spend.py``) and a reached limit ends the run with
:class:`~lovia.errors.SpendLimitExceeded` naming it.

Windows are fixed and aligned to UTC (an hour from :00, a day from midnight UTC, a week
from Monday 00:00 UTC), or any number of seconds aligned to the Unix epoch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

from .errors import UserError
from .labels import check_labels, check_value

__all__ = ["SpendLimit", "Window", "check_spend_limits"]

Window = Literal["hour", "day", "week"]
_SECONDS: dict[str, float] = {"hour": 3600.0, "day": 86400.0, "week": 7 * 86400.0}
_MONDAY = 4 * 86400.0
"""The Unix epoch was a Thursday: weeks start 4 days later (a Monday)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpendLimit:
    """At most ``max_usd`` per ``window`` for runs labelled ``label=value``."""

    label: str
    max_usd: float
    value: str | None = None
    """None: each value of ``label`` has its own ``max_usd`` (e.g. every tenant)."""
    window: Window | float = "day"
    """``hour``, ``day``, ``week`` (UTC) or a number of seconds (epoch-aligned)."""

    def __post_init__(self) -> None:
        check_labels({self.label: self.value or "x"})  # the key (and the value) as labels
        if self.value is not None:
            check_value(self.label, self.value)
        amount = cast("object", self.max_usd)
        if isinstance(amount, bool) or not isinstance(amount, int | float):
            raise UserError(f"SpendLimit max_usd={amount!r} is not a number", hint=_HINT)
        if not math.isfinite(amount) or amount < 0:
            raise UserError(f"SpendLimit max_usd={amount!r} is not finite and >= 0", hint=_HINT)
        window = self.window
        if isinstance(window, str):
            if window not in _SECONDS:
                raise UserError(f"SpendLimit window={window!r} is unknown", hint=_HINT)
        elif isinstance(window, bool) or not (math.isfinite(window) and window >= 1):
            raise UserError(f"SpendLimit window={window!r} is not >= 1 second", hint=_HINT)

    @property
    def seconds(self) -> float:
        return _SECONDS[self.window] if isinstance(self.window, str) else float(self.window)

    def applies(self, labels: dict[str, str]) -> str | None:
        """The label value this limit counts for a run with ``labels`` (None: not it)."""
        found = labels.get(self.label)
        if found is None or (self.value is not None and found != self.value):
            return None
        return found

    def window_start(self, now: float) -> float:
        """Unix time the window holding ``now`` began."""
        offset = _MONDAY if self.window == "week" else 0.0
        size = self.seconds
        return math.floor((now - offset) / size) * size + offset

    def key(self, value: str) -> str:
        """The ledger key: ``tenant=acme/day`` (what the store counts under)."""
        window = self.window if isinstance(self.window, str) else f"{self.seconds:g}s"
        return f"{self.label}={value}/{window}"

    def describe(self, value: str) -> str:
        window = self.window if isinstance(self.window, str) else f"{self.seconds:g} s"
        return f"${self.max_usd:g} per {window} for {self.label}={value}"


_HINT = 'e.g. SpendLimit(label="tenant", value="acme", max_usd=50.0, window="day")'


def check_spend_limits(limits: Sequence[SpendLimit]) -> tuple[SpendLimit, ...]:
    """``limits`` as a tuple, each a :class:`SpendLimit` (``UserError`` otherwise)."""
    out = tuple(limits)
    for item in out:
        if not isinstance(item, SpendLimit):  # pyright: ignore[reportUnnecessaryIsInstance] -- user input
            raise UserError(f"spend_limits holds {item!r:.60}, not a SpendLimit", hint=_HINT)
    return out


_limits: tuple[SpendLimit, ...] = ()


def spend_limits() -> tuple[SpendLimit, ...]:
    """The process's limits (``lovia.configure(spend_limits=...)``)."""
    return _limits


def set_spend_limits(limits: Sequence[SpendLimit]) -> None:
    global _limits
    _limits = check_spend_limits(limits)
