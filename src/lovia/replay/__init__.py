"""Replay: rebuild every model call's exact view of a stored run, and verify it.

```python
from lovia import replay

views = await replay.views(run_id, "sqlite:///.lovia/lovia.db")
for view in views:
    print(view.label, view.ok, view.recorded_hash)
body = replay.render_request(views[0], provider)      # the exact provider request body
changes = replay.diff_views(views[0], views[-1])       # what the model saw differently
answer = await replay.rerun(views[-1], other_provider) # what-if; nothing is written
```

The transcript of a run is the session history that preceded it plus the entries the
run appended (its checkpoint). Each view is rebuilt from that transcript and the run's
view record, and its ``sha256`` compared with the recorded hash, which is also the
``lovia.view.hash`` attribute of the run's ``chat`` span.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UserError
from ._diff import ViewDiff, diff_views, entry_text, explain_mismatch
from ._load import (
    NoViewRecords,
    RunData,
    StoreLike,
    load_run,
    open_store,
    require_views,
    resolve_run_id,
    run_from_snapshot,
)
from ._policy import WhatIfPolicy
from ._query import (
    Turn,
    brief,
    entry_label,
    failed_call,
    info_dict,
    recorded_answer,
    render_bodies,
    run_dict,
    turns,
    whatif,
    whatif_dict,
)
from ._refs import ContentRef, find_view, parse_ref
from ._render import ask, provider_for, redact, render_request, rerun
from ._spans import (
    AttemptPart,
    SpanRow,
    attempt_parts,
    build_tree,
    load_run_spans,
    normalize,
    normalize_all,
    span_json,
    spans_from_run,
)
from ._views import (
    HASH_ATTRIBUTE,
    ReplayedView,
    rebuild_request,
    rebuild_view,
    rebuild_views,
    select,
)

__all__ = [
    "HASH_ATTRIBUTE",
    "AttemptPart",
    "ContentRef",
    "Mismatch",
    "NoViewRecords",
    "ReplayedView",
    "RunData",
    "SpanRow",
    "StoreLike",
    "Turn",
    "Verification",
    "ViewDiff",
    "WhatIfPolicy",
    "ask",
    "attempt_parts",
    "brief",
    "build_tree",
    "diff_views",
    "entry_label",
    "entry_text",
    "explain_mismatch",
    "failed_call",
    "find_view",
    "info_dict",
    "load_run",
    "load_run_spans",
    "normalize",
    "normalize_all",
    "open_store",
    "parse_ref",
    "provider_for",
    "rebuild_request",
    "rebuild_view",
    "rebuild_views",
    "recorded_answer",
    "redact",
    "render_bodies",
    "render_request",
    "replay_run",
    "require_views",
    "rerun",
    "resolve_ref",
    "resolve_run_id",
    "run_dict",
    "run_from_snapshot",
    "select",
    "span_json",
    "spans_from_run",
    "turns",
    "verify_run",
    "views",
    "whatif",
    "whatif_dict",
]


@dataclass(slots=True, kw_only=True)
class Mismatch:
    """A view whose rebuilt hash differs from the recorded one, and why."""

    view: ReplayedView
    details: list[str] = field(default_factory=list[str])


@dataclass(slots=True, kw_only=True)
class Verification:
    """The outcome of :func:`verify_run`."""

    run: RunData
    views: list[ReplayedView]
    mismatches: list[Mismatch]

    @property
    def ok(self) -> bool:
        return not self.mismatches


async def replay_run(run_id: str, store: StoreLike) -> tuple[RunData, list[ReplayedView]]:
    """Load a run and rebuild all its views (raises when it has none)."""
    async with open_store(store) as db:
        run = await load_run(run_id, db)
    require_views(run)
    return run, rebuild_views(run)


async def views(run_id: str, store: StoreLike) -> list[ReplayedView]:
    """One :class:`ReplayedView` per model call of the run, overflow retries included.

    ``run_id`` may be a unique prefix of a recent run's id; ``store`` is a store or
    its URL.
    """
    return (await replay_run(run_id, store))[1]


def verify(run: RunData, rebuilt: list[ReplayedView]) -> Verification:
    """Compare every rebuilt view with its recorded hash and explain each mismatch."""
    mismatches = [
        Mismatch(view=v, details=explain_mismatch(v, run, rebuilt)) for v in rebuilt if not v.ok
    ]
    mismatches += [  # summary calls: what each summarizer saw, against its recorded hash
        Mismatch(view=s, details=s.problems or ["the summary call's view does not match"])
        for v in rebuilt
        for s in v.summaries
        if not s.ok
    ]
    return Verification(run=run, views=rebuilt, mismatches=mismatches)


async def verify_run(run_id: str, store: StoreLike) -> Verification:
    """Rebuild every view of the run and check each against its recorded hash."""
    run, rebuilt = await replay_run(run_id, store)
    return verify(run, rebuilt)


async def resolve_ref(ref: str, store: StoreLike) -> tuple[RunData, ReplayedView]:
    """The run and the verified view a content reference (``lovia.content.ref``) names."""
    parsed = parse_ref(ref)
    if parsed is None:
        raise UserError(
            f"{ref[:200]!r} is not a lovia content reference",
            hint="A reference reads lovia:run/<run id>/view/<view hash>.",
        )
    run, rebuilt = await replay_run(parsed.run_id, store)
    return run, find_view(rebuilt, parsed)
