"""``Compaction``: the default context strategy (see the Context management guide).

Three transforms, applied to the view only — the transcript is never changed:

1. **Evict** a tool result larger than ``max_result_tokens`` (or than the tool's own
   ``max_result_chars``): it is replaced by a stub with the same id and ``call_id`` that
   names the id and tells the model to call ``recall_tool_result``.
2. **Clear** tool results older than ``clear_after_turns`` model turns the same way.
3. **Summarize** the early conversation with a model call when the estimated view
   exceeds ``summarize_at`` × the model's context window, keeping the most recent
   ``keep_recent_turns`` turns and every tool call/result pair intact. The summary is a
   ``user`` entry with ``origin="summary"`` (in the view and the view record only).

Decisions are stable: what was evicted, cleared or summarized stays so in every later
view of the run, so the provider's cached prompt prefix stays valid. Building a view
costs O(new entries + view size): per-run state (cursors, the current view items, token
counts) lives in :class:`CompactionState`, made by ``new_state()``, never on the
strategy object, which is a frozen configuration shared by concurrent runs.

On a retry after a context overflow (``attempt >= 2``) the thresholds are halved and
the early conversation is summarized at once.

On resume, :meth:`Compaction.restore` rebuilds the state from the run's last stored view
record, so the resumed run keeps the crashed worker's stubs and summary (no new summary
call) and its next view is the one the crashed worker would have built.
"""

from __future__ import annotations

import bisect
import json
import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import RunError, UserError
from ..model import Provider
from ..transcript import (
    InputEntry,
    ReasoningEntry,
    SystemEntry,
    TextEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    entry_from_dict,
    new_id,
)
from .base import BuiltView, Summarize, ViewInput
from .record import ViewRecord

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "RECALL_TOOL_NAME",
    "Compaction",
    "CompactionState",
    "estimate_tokens",
]

logger = logging.getLogger("lovia.view")

RECALL_TOOL_NAME = "recall_tool_result"

DEFAULT_SUMMARY_PROMPT = (
    "You compress the early part of a conversation between a user and an AI agent that "
    "uses tools, so the agent can continue the task without it. Write a concise summary "
    "that keeps: the user's goals and constraints, decisions made, facts learned from "
    "tool results (with ids, names, numbers and paths verbatim), what was tried and "
    "failed, and the work still open. If the conversation starts with an earlier "
    "summary, merge it in. Answer with the summary only."
)
_SUMMARY_REQUEST = "Summarize the conversation above as instructed."

_MODEL_TYPES = frozenset(("text", "reasoning", "tool_call"))


def estimate_tokens(entry: TranscriptEntry) -> int:
    """Rough token count of one entry: characters / 4, plus a few tokens of framing."""
    if isinstance(entry, (InputEntry, ToolResultEntry, SystemEntry)):
        chars = len(entry.content)
    elif isinstance(entry, TextEntry):
        chars = len(entry.text)
    elif isinstance(entry, ToolCallEntry):
        chars = len(entry.arguments) + len(entry.name)
    elif isinstance(entry, ReasoningEntry):
        chars = len(entry.text) + len(entry.encrypted or "") + len(entry.signature or "")
    else:
        chars = 16
    return chars // 4 + 4


class CompactionState:
    """Per-run state of :class:`Compaction` (one per run and agent)."""

    __slots__ = (
        "base",
        "builds",
        "calls_open",
        "clear_q",
        "cursor",
        "dropped",
        "hidden",
        "ids",
        "items",
        "last",
        "last_estimate",
        "model_msg",
        "overhead",
        "pair",
        "replaced",
        "responses",
        "retry",
        "seen_input",
        "starts",
        "stubbed",
        "summary",
        "summary_tokens",
        "toks",
        "total",
    )

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.cursor = 0
        """Transcript entries already taken in."""
        self.last: TranscriptEntry | None = None
        self.items: list[TranscriptEntry] = []
        """The view after the summary: transcript entries or their stubs, in order."""
        self.ids: list[str] = []
        self.toks: list[int] = []
        self.base = 0
        """Absolute position of ``items[0]`` (entries before it are summarized)."""
        self.total = 0
        self.replaced: dict[str, TranscriptEntry] = {}
        self.hidden: dict[str, int] = {}
        """Entry id -> position of tool calls left out of the view (no result yet)."""
        self.calls_open: dict[str, str] = {}
        """call_id -> entry id of the call waiting for its result."""
        self.pair: dict[str, int] = {}
        """Result entry id -> position of its call."""
        self.starts: list[int] = []
        """Positions where each model response starts."""
        self.model_msg: str | None = None
        self.responses = 0
        self.clear_q: deque[tuple[int, int]] = deque()
        self.summary: InputEntry | None = None
        self.summary_tokens = 0
        self.stubbed = False
        self.dropped = 0
        self.builds = 0
        self.last_estimate = 0
        self.seen_input: int | None = None
        self.overhead = 0
        self.retry = False
        """Restored from a call that got no response: the next build repeats that call."""


@dataclass(slots=True)
class _Limits:
    max_result: int | None
    clear_after: int | None
    keep_turns: int
    threshold: int | None
    target: int | None
    force: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Compaction:
    """Evict huge tool results, clear old ones, summarize early turns — in the view only.

    Defaults (see the Context management guide): results over 8,000 tokens (or over a
    quarter of the context window, if smaller) are evicted; results of 256+ tokens are
    cleared after 30 turns; past 80% of a known context window the conversation before
    the last 6 turns is summarized by the active model (or ``summary_model``). With an
    unknown window, summarization waits for a context overflow.
    """

    max_result_tokens: int | None = 8_000
    """Evict results above this estimate (capped at a quarter of the window); None: off."""
    clear_after_turns: int | None = 30
    """Clear results older than this many model turns; None: never."""
    clear_min_tokens: int = 256
    """Results smaller than this are never cleared (the stub would save nothing)."""
    summarize_at: float | None = 0.8
    """Summarize past this fraction of the context window; None: only after an overflow."""
    keep_recent_turns: int = 6
    """Model turns (a response + its tool results) always kept verbatim."""
    summary_model: Provider | None = None
    """A (cheaper) model for summaries; default: the agent's own model."""
    summary_prompt: str = DEFAULT_SUMMARY_PROMPT
    preview_chars: int = 200
    """Characters of the evicted result shown in its stub."""
    estimator: Callable[[TranscriptEntry], int] = estimate_tokens
    """Token estimate of one entry (calibrated against the provider's reported usage)."""

    def __post_init__(self) -> None:
        if self.summarize_at is not None and not 0 < self.summarize_at <= 1:
            raise UserError(
                f"Compaction(summarize_at={self.summarize_at!r}) is out of range",
                hint="Use a fraction of the context window, e.g. 0.8.",
            )
        if self.keep_recent_turns < 1:
            raise UserError("Compaction(keep_recent_turns=...) must be at least 1")
        for name in ("max_result_tokens", "clear_after_turns"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UserError(f"Compaction({name}={value!r}) must be positive or None")

    def new_state(self) -> CompactionState:
        return CompactionState()

    async def build(
        self, inp: ViewInput, state: CompactionState, summarize: Summarize
    ) -> BuiltView:
        st: CompactionState = state
        lim = self._limits(inp)
        log: list[tuple[str, tuple[str, ...]]] = []
        retry, st.retry = st.retry, False
        cursor = st.cursor
        saved = self._take_in(inp, st, lim, log)
        # the view without this build's changes: as taken in, with its evicted results whole
        before = st.total + st.summary_tokens + saved
        # a restored state repeating the crashed call with nothing new: the same view
        repeat = retry and st.cursor == cursor and st.builds > 0 and not lim.force
        self._clear(st, lim, log)
        if lim.force:
            self._evict_all(st, lim, inp, log)
        summary: str | None = None
        estimate = self._estimate(inp, st, adopt=retry)
        if lim.force or (not repeat and lim.threshold is not None and estimate > lim.threshold):
            summary = await self._summarize(inp, st, lim, summarize, log)
        st.builds += 1
        st.last_estimate = st.total + st.summary_tokens
        built = _output(st, log, summary)
        if log:
            built.tokens_before, built.tokens_after = before, st.last_estimate
        return built

    # -------------------------------------------------------------------- resume

    def restore(
        self, state: Any, last_record: ViewRecord, transcript_entries: Sequence[TranscriptEntry]
    ) -> None:
        """Rebuild ``state`` as it was after the build of ``last_record`` (on resume).

        ``last_record`` is this agent's last stored view record, resolved (``delta=False``);
        ``transcript_entries`` the run's whole transcript (session history + the run's
        stored entries: the same objects later builds receive). The stubs and the summary
        are taken from the record verbatim (no model call); cursors, clear queue, turn
        counts and pairing are recomputed from the transcript. Token calibration is
        re-derived: exact from the next reported usage on (see the Context guide for the
        limits). When the record cannot be matched (another strategy, a handoff filter
        that rewrote entries, a transcript that does not hold the view) the state stays
        fresh, as for a new run.
        """
        st: CompactionState = state
        st.reset()
        if last_record.delta:
            return
        entries = list(transcript_entries)
        pos = {e.id: i for i, e in enumerate(entries)}
        shown = [i for i in last_record.order if i in pos]
        if not shown:
            return
        cursor = max(pos[i] for i in shown) + 1
        # entries of earlier turns after the last shown one were taken in but left out
        while cursor < len(entries) and entries[cursor].turn < last_record.turn:
            cursor += 1
        summary, stubs = _restored_parts(last_record, pos)
        ignored: list[str] = []

        def evict(entry: ToolResultEntry, tokens: int) -> ToolResultEntry | None:
            return stubs.get(entry.id)

        for i in range(cursor):
            self._add(entries[i], st, evict, ignored, ignored)
        st.cursor = cursor
        st.last = entries[cursor - 1]
        if summary is not None:
            _drop_prefix(st, st.ids.index(shown[0]) if shown[0] in st.ids else len(st.ids))
            st.summary = summary
            st.summary_tokens = self.estimator(summary)
            st.replaced[summary.id] = summary
        view = _output(st, (), None).order
        if not _is_subsequence(last_record.order, view):
            logger.warning(
                "view record of turn %s does not match the transcript; the resumed run "
                "re-decides its context from scratch",
                last_record.turn,
            )
            st.reset()
            return
        if any(t.get("name") == RECALL_TOOL_NAME for t in last_record.tools):
            st.stubbed = True  # the recall tool stays offered, as in the crashed worker
        st.builds = 1
        st.last_estimate = st.total + st.summary_tokens
        st.overhead = len(last_record.system) // 4
        st.retry = cursor == len(entries)  # the recorded call got no response

    # -------------------------------------------------------------------- limits

    def _limits(self, inp: ViewInput) -> _Limits:
        window = inp.profile.context_window
        max_result = self.max_result_tokens
        if window and max_result is not None:
            max_result = min(max_result, max(1, window // 4))
        clear_after, keep = self.clear_after_turns, self.keep_recent_turns
        threshold = int(window * self.summarize_at) if window and self.summarize_at else None
        force = inp.attempt >= 2
        if force:
            max_result = None if max_result is None else max(1, max_result // 2)
            clear_after = None if clear_after is None else max(1, clear_after // 2)
            keep = max(1, keep // 2)
        target = None if threshold is None else threshold // 2
        return _Limits(max_result, clear_after, keep, threshold, target, force)

    def _estimate(self, inp: ViewInput, st: CompactionState, adopt: bool = False) -> int:
        """Last reported input tokens + the estimated change since (chars/4).

        ``adopt``: take the reported count as already seen (it belongs to the call before
        the restored view, which the crashed worker had calibrated against already).
        """
        reported = inp.last_input_tokens
        if reported is not None and reported != st.seen_input:
            st.seen_input = reported
            if st.builds and not adopt:
                st.overhead = max(0, reported - st.last_estimate)
        if not st.builds and st.overhead == 0:
            st.overhead = len(inp.system) // 4
        return st.total + st.summary_tokens + st.overhead

    # -------------------------------------------------------------------- taking in

    def _take_in(
        self,
        inp: ViewInput,
        st: CompactionState,
        lim: _Limits,
        log: list[tuple[str, tuple[str, ...]]],
    ) -> int:
        """Take the new transcript entries in; the tokens their evictions saved."""
        entries = inp.entries
        n = len(entries)
        if st.cursor > n or (st.cursor and entries[st.cursor - 1] is not st.last):
            st.reset()  # not the transcript this state was built from
        evicted: list[str] = []
        orphans: list[str] = []
        saved = 0

        def evict(entry: ToolResultEntry, tokens: int) -> ToolResultEntry | None:
            nonlocal saved
            if not self._too_big(entry, tokens, lim, inp):
                return None
            stub = self._stub(entry, "evicted")
            saved += tokens - self.estimator(stub)
            return stub

        for i in range(st.cursor, n):
            self._add(entries[i], st, evict, evicted, orphans)
        st.cursor = n
        st.last = entries[n - 1] if n else None
        if evicted:
            log.append(("evict", tuple(evicted)))
        if orphans:
            log.append(("orphan", tuple(orphans)))
        return saved

    def _add(
        self,
        entry: TranscriptEntry,
        st: CompactionState,
        evict: Callable[[ToolResultEntry, int], ToolResultEntry | None],
        evicted: list[str],
        orphans: list[str],
    ) -> None:
        """Take one transcript entry in; ``evict`` gives the stub of a result to evict."""
        if isinstance(entry, SystemEntry):
            st.model_msg = None
            return
        pos = st.base + len(st.items)
        if entry.type in _MODEL_TYPES:
            msg: str = getattr(entry, "message_id", "")
            if st.model_msg is None or msg != st.model_msg:
                st.responses += 1
                st.starts.append(pos)
            st.model_msg = msg
        else:
            st.model_msg = None
        if isinstance(entry, ToolCallEntry):
            older = st.calls_open.get(entry.call_id)
            if older is not None:  # same call_id again: the older call stays unanswered
                orphans.append(older)
            st.calls_open[entry.call_id] = entry.id
            st.hidden[entry.id] = pos
        if isinstance(entry, ToolResultEntry):  # its size is known from the eviction check
            call = st.calls_open.pop(entry.call_id, None)
            if call is None:  # no call in the view to pair with: leave it out
                orphans.append(entry.id)
                st.dropped += 1
                return
            st.pair[entry.id] = st.hidden.pop(call)
            tokens = self.estimator(entry)
            stub = evict(entry, tokens)
            if stub is not None:
                entry = stub
                st.replaced[entry.id] = entry
                st.stubbed = True
                evicted.append(entry.id)
                tokens = self.estimator(stub)
            elif tokens >= self.clear_min_tokens and entry.name != RECALL_TOOL_NAME:
                st.clear_q.append((st.responses, pos))
        else:
            tokens = self.estimator(entry)
        st.items.append(entry)
        st.ids.append(entry.id)
        st.toks.append(tokens)
        st.total += tokens

    def _too_big(self, entry: ToolResultEntry, tokens: int, lim: _Limits, inp: ViewInput) -> bool:
        if entry.name == RECALL_TOOL_NAME:
            return False
        cap = inp.result_caps.get(entry.name)
        if cap is not None and len(entry.content) > cap:
            return True
        return lim.max_result is not None and tokens > lim.max_result

    def _stub(self, entry: ToolResultEntry, verb: str) -> ToolResultEntry:
        preview = json.dumps(entry.content[: self.preview_chars], ensure_ascii=False)
        text = (
            f"[tool result {entry.id} {verb} from view: {len(entry.content)} chars; "
            f'preview: {preview}; call {RECALL_TOOL_NAME}("{entry.id}") to see it]'
        )
        return entry.model_copy(update={"content": text})

    def _replace(self, st: CompactionState, k: int, stub: ToolResultEntry) -> None:
        tokens = self.estimator(stub)
        st.total += tokens - st.toks[k]
        st.toks[k] = tokens
        st.items[k] = stub
        st.replaced[stub.id] = stub
        st.stubbed = True

    # -------------------------------------------------------------------- clearing

    def _clear(
        self, st: CompactionState, lim: _Limits, log: list[tuple[str, tuple[str, ...]]]
    ) -> None:
        if lim.clear_after is None:
            return
        queue, cleared = st.clear_q, list[str]()
        while queue and st.responses - queue[0][0] > lim.clear_after:
            k = queue.popleft()[1] - st.base
            if k < 0:
                continue
            entry = st.items[k]
            if entry.id in st.replaced or not isinstance(entry, ToolResultEntry):
                continue
            self._replace(st, k, self._stub(entry, "cleared"))
            cleared.append(entry.id)
        if cleared:
            log.append(("clear", tuple(cleared)))

    def _evict_all(
        self,
        st: CompactionState,
        lim: _Limits,
        inp: ViewInput,
        log: list[tuple[str, tuple[str, ...]]],
    ) -> None:
        """After an overflow: apply the (halved) size limit to results already in view."""
        evicted: list[str] = []
        for k, entry in enumerate(st.items):
            if (
                isinstance(entry, ToolResultEntry)
                and entry.id not in st.replaced
                and self._too_big(entry, st.toks[k], lim, inp)
            ):
                self._replace(st, k, self._stub(entry, "evicted"))
                evicted.append(entry.id)
        if evicted:
            log.append(("evict", tuple(evicted)))

    # -------------------------------------------------------------------- summary

    async def _summarize(
        self,
        inp: ViewInput,
        st: CompactionState,
        lim: _Limits,
        summarize: Summarize,
        log: list[tuple[str, tuple[str, ...]]],
    ) -> str | None:
        cut = _cut(st, lim)
        if cut is None:
            return None
        k = cut - st.base
        head = st.items[:k]
        messages: list[TranscriptEntry] = [] if st.summary is None else [st.summary]
        messages += [e for e in head if e.id not in st.hidden]
        messages.append(InputEntry(role="user", content=_SUMMARY_REQUEST))
        try:
            if self.summary_model is None:
                text = await summarize(messages, self.summary_prompt)
            else:
                text = await summarize(messages, self.summary_prompt, provider=self.summary_model)
        except RunError:  # the run ends (budget spent, cancelled): not a failed summary
            raise
        except Exception:
            logger.warning(
                "summarizing the early conversation failed; the view stays uncompacted this time",
                exc_info=True,
            )
            return None
        text = (text or "").strip()
        if not text:
            return None
        _drop_prefix(st, k)
        entry = InputEntry(
            id=new_id("sum"),
            role="user",
            origin="summary",
            content=f"<summary>\n{text}\n</summary>",
            turn=inp.turn,
            agent=inp.agent_name,
        )
        if st.summary is not None:
            st.replaced.pop(st.summary.id, None)
        st.summary = entry
        st.summary_tokens = self.estimator(entry)
        st.replaced[entry.id] = entry
        log.append(("summarize", tuple(e.id for e in head)))
        return text


def _cut(st: CompactionState, lim: _Limits) -> int | None:
    """Where the kept part starts (absolute position), or None if nothing to summarize."""
    starts = st.starts
    if not starts:
        return None
    idx = max(0, len(starts) - lim.keep_turns)
    if lim.force and len(starts) > 1:
        idx = max(idx, 1)  # after an overflow, summarize at least the oldest turn
    if lim.target is not None:  # keep fewer turns when they alone are too big (min 1)
        while idx < len(starts) - 1 and sum(st.toks[starts[idx] - st.base :]) > lim.target:
            idx += 1
    k = starts[idx] - st.base
    while k > 0 and isinstance(st.items[k - 1], InputEntry):
        k -= 1  # keep the user message that led to the kept turns
    k = _pair_safe(st, k)
    return st.base + k if k > 0 else None


def _pair_safe(st: CompactionState, k: int) -> int:
    """Move the cut back until no kept result's call is before it."""
    moved = True
    while moved and k > 0:
        moved = False
        for entry in st.items[k:]:
            if isinstance(entry, ToolResultEntry):
                call_pos = st.pair.get(entry.id, st.base) - st.base
                if call_pos < k:
                    i = bisect.bisect_right(st.starts, st.base + call_pos) - 1
                    k = max(0, (st.starts[i] - st.base) if i >= 0 else 0)
                    k = min(k, call_pos)
                    moved = True
                    break
    return k


def _drop_prefix(st: CompactionState, k: int) -> None:
    gone = st.items[:k]
    del st.items[:k], st.ids[:k], st.toks[:k]
    st.base += k
    st.total = sum(st.toks)
    gone_ids = {e.id for e in gone}
    for entry_id in gone_ids:
        st.replaced.pop(entry_id, None)
        st.hidden.pop(entry_id, None)
        st.pair.pop(entry_id, None)
    st.calls_open = {c: e for c, e in st.calls_open.items() if e not in gone_ids}
    st.starts = st.starts[bisect.bisect_left(st.starts, st.base) :]


def _restored_parts(
    record: ViewRecord, pos: dict[str, int]
) -> tuple[InputEntry | None, dict[str, ToolResultEntry]]:
    """The summary and the stubs of a stored view (not rewrites made by a handoff filter)."""
    summary: InputEntry | None = None
    stubs: dict[str, ToolResultEntry] = {}
    for entry_id in record.order:
        data = record.replaced.get(entry_id)
        if data is None:
            continue
        entry = entry_from_dict(data)
        if entry_id not in pos:
            if summary is None and isinstance(entry, InputEntry) and entry.origin == "summary":
                summary = entry
        elif isinstance(entry, ToolResultEntry) and entry.content.startswith(
            f"[tool result {entry_id} "
        ):
            stubs[entry_id] = entry
    return summary, stubs


def _is_subsequence(part: Sequence[str], whole: Sequence[str]) -> bool:
    it = iter(whole)
    return all(any(x == y for y in it) for x in part)


def _output(
    st: CompactionState, log: Sequence[tuple[str, tuple[str, ...]]], summary: str | None
) -> BuiltView:
    if st.hidden:
        keep = [i for i, entry_id in enumerate(st.ids) if entry_id not in st.hidden]
        items = [st.items[i] for i in keep]
        ids = [st.ids[i] for i in keep]
    else:
        items, ids = list(st.items), list(st.ids)
    if st.summary is not None:
        items.insert(0, st.summary)
        ids.insert(0, st.summary.id)
    compacted = bool(st.replaced) or bool(st.hidden) or st.dropped > 0
    return BuiltView(
        messages=items,
        order=ids,
        replaced=dict(st.replaced),
        summary=summary,
        compactions=tuple(log),
        evicted=st.stubbed,
        compacted=compacted,
    )
