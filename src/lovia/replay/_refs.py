"""Content references: what a chat span carries instead of messages in ``REFERENCE``
capture (``lovia:run/<run id>/view/<view hash>``), resolved to the verified view."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import RunNotFound, UserError
from ._views import ReplayedView

__all__ = ["ContentRef", "find_view", "parse_ref"]

PREFIX = "lovia:run/"
_REF = re.compile(r"lovia:run/([A-Za-z0-9_.:-]{1,128})/view/([0-9a-f]{64})")


@dataclass(frozen=True, slots=True)
class ContentRef:
    """A reference to one model call's view in a stored run."""

    run_id: str
    view_hash: str


def parse_ref(text: str) -> ContentRef | None:
    """The reference ``text`` names, or None when it is not one (a plain run id).

    A string that starts like a reference but is malformed is a :class:`UserError`."""
    if not text.startswith(PREFIX):
        return None
    found = _REF.fullmatch(text.strip())
    if found is None:
        raise UserError(
            f"{text[:200]!r} is not a lovia content reference",
            hint="A reference reads lovia:run/<run id>/view/<64 hex digits> "
            "(the lovia.content.ref attribute of a chat span).",
        )
    return ContentRef(found.group(1), found.group(2))


def find_view(views: Iterable[ReplayedView], ref: ContentRef) -> ReplayedView:
    """The view (a turn's call or a summary call) whose recorded hash ``ref`` names."""
    turns: list[str] = []
    for view in views:
        turns.append(view.label)
        for candidate in (view, *view.summaries):
            if candidate.recorded_hash == ref.view_hash:
                return candidate
    raise RunNotFound(
        f"run {ref.run_id} has no model call with view hash {ref.view_hash[:16]}…",
        hint="The reference may come from another store, or the run's checkpoint was "
        f"pruned. Its recorded views: {', '.join(turns) or '(none)'}.",
    )
