"""Attribution labels: who a run is for (``tenant``, ``user``, ``feature``, …).

A run's labels are given to ``Runner.run(..., labels={"tenant": "acme"})`` (a worker
task's payload carries them too); a child run (an agent run as a tool) inherits its
parent's, and a run of a session the session's (recorded by its first run that gave
labels; a key the run gives keeps its value for that run). They land on the
``invoke_agent`` span (``lovia.label.<key>``), on the stored run (``lovia runs --label
tenant=acme``), on the cost and token metrics (capped, see :class:`LabelCap`) and are
what spend limits (:mod:`lovia.spend`) are counted by.

Checked, never silently changed: a key is 1-32 characters of ``a-z``, ``0-9`` and ``_``
starting with a letter; a value is 1-128 characters of printable Unicode; at most
``MAX_LABELS`` per run. Anything else raises :class:`~lovia.errors.UserError` naming the
label: a truncated value could merge two tenants' spend, so nothing is truncated.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from typing import Any, cast

from .errors import UserError

__all__ = [
    "MAX_LABELS",
    "MAX_VALUE_CHARS",
    "OTHER",
    "LabelCap",
    "check_labels",
    "label_cap",
    "parse_label",
]

MAX_LABELS = 8
MAX_VALUE_CHARS = 128
OTHER = "other"
"""The metric value that stands for every value past the cap."""
ENV_CAP = "LOVIA_LABEL_VALUES_MAX"
DEFAULT_CAP = 50

_KEY = re.compile(r"[a-z][a-z0-9_]{0,31}")
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")
"""Control characters, and invisible or direction-changing ones (a value shown in a
terminal or the web app reads as what it is)."""
_HINT = 'Pass e.g. labels={"tenant": "acme", "user": "u-42", "feature": "search"}.'


def check_labels(labels: Mapping[str, str] | None) -> dict[str, str]:
    """The labels as a plain dict, checked (``UserError`` naming the first bad one)."""
    if labels is None:
        return {}
    if not isinstance(cast("object", labels), Mapping):
        raise UserError(f"labels must be a mapping of str to str, got {labels!r:.60}", hint=_HINT)
    items = cast("Mapping[Any, Any]", labels)
    if len(items) > MAX_LABELS:
        raise UserError(
            f"a run has {len(items)} labels (at most {MAX_LABELS})",
            hint="Labels attribute spend (tenant, user, feature); put other data in deps.",
        )
    out: dict[str, str] = {}
    for key, value in items.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise UserError(
                f"label key {key!r:.60} is not a name of 1-32 characters a-z, 0-9, _ "
                "starting with a letter",
                hint=_HINT,
            )
        out[key] = check_value(key, value)
    return out


def text_problem(
    value: str, most: int, unprintable: re.Pattern[str], what: str, note: str = ""
) -> str:
    """Why ``value`` is not usable as a key (empty, longer than ``most``, holding what
    ``unprintable`` matches — said as ``what`` —, a lone surrogate); "" when it is."""
    if not value:
        return "is empty"
    if len(value) > most:
        return f"is {len(value)} characters long (at most {most}{note})"
    if unprintable.search(value):
        return what
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (it holds a lone surrogate)"
    return ""


def check_value(key: str, value: Any) -> str:
    """One label value, checked."""
    if not isinstance(value, str):
        problem = f"is a {type(value).__name__}, not a str"
    else:
        what = "holds a control character (or an invisible/bidi one)"
        problem = text_problem(value, MAX_VALUE_CHARS, _UNPRINTABLE, what, "; never truncated")
    if problem:
        raise UserError(f"label {key}={_excerpt(value)} {problem}", hint=_HINT)
    return value


def _excerpt(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_label(text: str) -> tuple[str, str]:
    """``tenant=acme`` (a command-line filter) as ``("tenant", "acme")``, checked."""
    key, sep, value = text.partition("=")
    if not sep:
        raise UserError(f"--label {text!r:.60} is not KEY=VALUE", hint="e.g. --label tenant=acme")
    checked = check_labels({key.strip(): value.strip()})
    return next(iter(checked.items()))


class LabelCap:
    """Keeps metric label values few: per key, the first ``limit`` values seen in the
    process keep their name, every later one is counted as ``other``. (An admitted value
    is never evicted: a counter series that changed its labels mid-flight would read as
    a reset.) ``limit`` defaults to ``$LOVIA_LABEL_VALUES_MAX`` or 50."""

    __slots__ = ("_lock", "_seen", "limit")

    def __init__(self, limit: int | None = None) -> None:
        self.limit = _env_cap() if limit is None else limit
        self._seen: dict[str, set[str]] = {}
        self._lock = threading.Lock()

    def value(self, key: str, value: str) -> str:
        """``value`` when it is (or can still be) admitted for ``key``, else ``other``."""
        seen = self._seen.get(key)
        if seen is not None and value in seen:
            return value
        with self._lock:
            seen = self._seen.setdefault(key, set())
            if value in seen:
                return value
            if len(seen) >= self.limit:
                return OTHER
            seen.add(value)
            return value

    def attributes(self, labels: Mapping[str, str]) -> dict[str, str]:
        """``lovia.label.<key>`` metric attributes of ``labels``, capped."""
        return {f"lovia.label.{k}": self.value(k, v) for k, v in labels.items()}


def _env_cap() -> int:
    raw = os.environ.get(ENV_CAP, "").strip()
    if not raw:
        return DEFAULT_CAP
    try:
        limit = int(raw)
    except ValueError:
        limit = -1
    if limit < 0:
        raise UserError(
            f"{ENV_CAP}={raw!r} is not a whole number >= 0",
            hint=f"e.g. {ENV_CAP}=50 (values per label key on metrics; the rest are 'other').",
        )
    return limit


_cap: LabelCap | None = None


def label_cap() -> LabelCap:
    """The process's cap (made on first use, so the environment is read then)."""
    global _cap
    if _cap is None:
        _cap = LabelCap()
    return _cap
