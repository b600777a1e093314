"""Re-run a case through the real loop from its pinned start, offline.

The start (session history + the run's entries before the start turn, its usage and
active agent) is written as a checkpoint to a ``memory://`` store; the run then resumes
from it under the recorded run id, so turn numbers, stamps and the system entry are the
original ones. Three pieces replace the outside world:

- :class:`PinnedView` — the context strategy. Baseline: every view is rebuilt from its
  recorded record (compaction stubs, summaries, reminders) over the *re-run's*
  transcript. Candidate: the start view as recorded, then every entry the candidate adds.
- pinned tools — each call is answered from the recorded result with the same name and
  arguments; an unmatched call fails the case unless its tool is marked safe to run live.
- :class:`ReplayModel` (baseline) — checks each request against the recorded view (see
  ``_compare``) and answers with the recorded response; it never reaches a network.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import core_schema

from ..agent import Agent, Handoff
from ..context import RunContext
from ..errors import ContextOverflow, LoviaError, ToolError, UserError
from ..model import (
    ModelProfile,
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderBase,
    ResponseEntry,
    StreamItem,
)
from ..stores import store as open_store
from ..stores.base import RunInfo, Store
from ..stores.records import EntriesRecord, StateRecord, to_checkpoint
from ..tools import Tool
from ..transcript import (
    HandoffEntry,
    SystemEntry,
    ToolCallEntry,
    ToolResultEntry,
    TranscriptEntry,
    entry_from_dict,
    entry_to_dict,
)
from ..view.base import BuiltView, ViewInput
from ..view.record import ViewHasher, rebuild_request
from ._case import Case, call_key
from ._compare import Divergence, compare_request, first_difference, identity_aligned

__all__ = [
    "Diverged",
    "Execution",
    "PinnedView",
    "ReplayModel",
    "Watched",
    "start_store",
    "watched",
]

RECALL = "recall_tool_result"


class Diverged(LoviaError):
    """The baseline re-run stopped matching the recording."""


@dataclass(kw_only=True)
class Execution:
    """One re-run of one case: what it was answered from, and what differed."""

    case: Case
    safe_live: frozenset[str] = frozenset()
    pinned_model_calls: int = 0
    pinned_tool_calls: int = 0
    live_tool_calls: int = 0
    views_checked: int = 0
    views_reproduced: int = 0
    live_model_calls: int = 0
    start_matches: bool | None = None
    """Candidate: its first request's messages are the pinned start view's (None: not
    observed, the agent's model is resolved by the loop)."""
    divergence: Divergence | None = None
    unmatched: list[str] = field(default_factory=list[str])
    hashes: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    _results: dict[str, list[Any]] = field(default_factory=dict[str, list[Any]])
    _by_id: dict[str, TranscriptEntry] = field(default_factory=dict[str, TranscriptEntry])
    hasher: ViewHasher = field(default_factory=ViewHasher)
    aligned: dict[tuple[str, str], TranscriptEntry] = field(
        default_factory=dict[tuple[str, str], TranscriptEntry]
    )

    def __post_init__(self) -> None:
        self._results = {k: list(v) for k, v in self.case.results_by_key().items()}
        self._by_id = {e.id: e for e in self.case.transcript}

    @property
    def by_id(self) -> Mapping[str, TranscriptEntry]:
        return self._by_id

    async def answer(
        self, name: str, ctx: RunContext[Any], live: Callable[[], Any] | None = None
    ) -> Any:
        """The pinned result of this call; the live tool when marked safe; else a failure."""
        call = ctx.tool_call
        arguments = call.arguments if call is not None else "{}"
        queue = self._results.get(call_key(name, arguments))
        if queue:
            result = queue.pop(0) if len(queue) > 1 else queue[0]
            self.pinned_tool_calls += 1
            if result.is_error:
                raise ToolError(result.content)
            return result.content
        if live is not None and name in self.safe_live:
            self.live_tool_calls += 1
            return await live()
        self.unmatched.append(f"{name}({arguments})")
        raise ToolError(
            f"no pinned result for {name}({arguments}) and the tool is not marked safe to run live"
        )


class _Arguments(BaseModel):
    """The call's JSON object as is (the pinned answer is found by name + arguments)."""

    model_config = ConfigDict(extra="forbid")
    arguments: dict[str, Any]

    @model_validator(mode="before")
    @classmethod
    def _wrap(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError("the arguments must be a JSON object")
        return {"arguments": cast(dict[str, Any], data)}


_ORDER_WAIT = 2_000
"""Event-loop turns a baseline tool call waits for its recorded predecessor's result."""


def _recorded_order(case: Case) -> dict[str, str]:
    """call_id -> the call_id whose result the recording appended just before it (same
    turn): parallel calls finish in whatever order they did, and that order is in the
    transcript."""
    before: dict[str, str] = {}
    last: tuple[int, str] | None = None
    for e in case.transcript[case.start_entries :]:
        if isinstance(e, ToolResultEntry):
            if last is not None and last[0] == e.turn:
                before[e.call_id] = last[1]
            last = (e.turn, e.call_id)
    return before


async def _in_recorded_order(ctx: RunContext[Any], before: Mapping[str, str]) -> None:
    """Wait until the result recorded before this call's is in the transcript."""
    call = ctx.tool_call
    wanted = before.get(call.call_id) if call is not None else None
    if wanted is None:
        return
    for _ in range(_ORDER_WAIT):
        if any(
            isinstance(e, ToolResultEntry) and e.call_id == wanted for e in reversed(ctx.entries)
        ):
            return
        await asyncio.sleep(0)


def pinned_tool(
    spec: Mapping[str, Any], execution: Execution, order: Mapping[str, str] | None = None
) -> Tool:
    """A tool with a recorded schema, answered only from the pinned results.

    With ``order`` (the baseline) calls of a turn run in parallel and each returns once
    the result recorded before its own is in — the recording's order.
    """
    name = str(spec["name"])

    async def answer(arguments: dict[str, Any], ctx: RunContext[Any]) -> Any:
        if order is not None:
            await _in_recorded_order(ctx, order)
        return await execution.answer(name, ctx)

    return Tool(
        name=name,
        description=str(spec.get("description", "")),
        parameters=dict(spec.get("parameters") or {"type": "object", "properties": {}}),
        fn=answer,
        args_model=_Arguments,
        ctx_param="ctx",
        is_async=True,
        strict=bool(spec.get("strict", False)),
        concurrency_safe=order is not None,
    )


def guarded_tool(original: Tool, execution: Execution) -> Tool:
    """``original`` answered from the pinned results; run for real only when unmatched
    and marked safe to run live."""
    ctx_name = original.ctx_param or "_lovia_eval_ctx"

    async def answer(**kwargs: Any) -> Any:
        ctx = cast(RunContext[Any], kwargs.pop(ctx_name))

        async def live() -> Any:
            return await original.invoke(ctx, kwargs)  # puts ctx back where it wants it

        return await execution.answer(original.name, ctx, live)

    return dataclasses.replace(original, fn=answer, ctx_param=ctx_name, is_async=True)


class PinnedView:
    """The context strategy of a re-run (see the module docstring)."""

    def __init__(self, case: Case, *, baseline: bool) -> None:
        self._case = case
        self._baseline = baseline
        self._views = {(v.turn, v.attempt): v for v in case.views}
        self._ids = [e.id for e in case.transcript]

    def new_state(self) -> None:
        return None

    async def build(self, inp: ViewInput, state: None, summarize: Any) -> BuiltView:
        case, live = self._case, inp.entries
        record = self._views.get((inp.turn, inp.attempt)) if self._baseline else None
        if record is None:
            record = case.views[0]
        span = len(live) if self._baseline else min(len(live), case.start_entries)
        mapped = {rid: live[i] for i, rid in enumerate(self._ids[:span])}
        messages: list[TranscriptEntry] = []
        replaced: dict[str, TranscriptEntry] = {}
        for rid in record.order:
            data = record.replaced.get(rid)
            entry = entry_from_dict(data) if data is not None else mapped.get(rid)
            if entry is None:
                continue
            if data is not None:
                replaced[entry.id] = entry
            messages.append(entry)
        if self._baseline or inp.turn == case.start_turn:
            for data in record.injected:
                entry = entry_from_dict(data)
                replaced[entry.id] = entry
                messages.append(entry)
        if not self._baseline:
            messages.extend(e for e in live[case.start_entries :] if not isinstance(e, SystemEntry))
        return BuiltView(
            messages=messages,
            order=[m.id for m in messages],
            replaced=replaced,
            evicted=any(t.get("name") == RECALL for t in record.tools),
            compacted=bool(replaced),
        )


class ReplayModel(ProviderBase):
    """The recorded model: verifies each request, answers with the recorded response."""

    def __init__(self, execution: Execution) -> None:
        case = execution.case
        super().__init__(
            str(case.agent.get("provider") or "replay"),
            str(case.agent.get("model") or "replay"),
            ModelProfile(native_json_schema=case.agent.get("output_schema") is not None),
        )
        self._execution = execution

    server_address: str | None = None
    server_port: int | None = None

    def render_request(self, request: ModelRequest) -> dict[str, Any]:
        from ..view.record import canonical_request

        return {"model": self._model, **canonical_request(request)}

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        ex = self._execution
        case = ex.case
        index = ex.pinned_model_calls
        if index >= len(case.views):
            last = case.views[-1]
            ex.divergence = Divergence(
                turn=last.turn,
                attempt=last.attempt,
                where="model calls",
                recorded=f"{len(case.views)} model calls",
                rerun=f"a call #{index + 1}",
            )
            raise Diverged("the re-run made more model calls than the recording")
        record = case.views[index]
        ex.pinned_model_calls += 1
        self._verify(record, request)
        answer = case.responses[index] if index < len(case.responses) else None
        if answer is None or answer.error == "context_overflow":
            raise ContextOverflow("recorded: the request was larger than the context window")
        entries = tuple(cast(ResponseEntry, ex.by_id[i]) for i in answer.entry_ids)
        yield ModelResponse(
            entries=entries,
            usage=answer.usage.copy(),
            finish_reason=answer.finish_reason,  # pyright: ignore[reportArgumentType] -- as recorded
            raw_finish_reason=answer.finish_reason,
            response_id=None,
            model=self._model,
        )

    def _verify(self, record: Any, request: ModelRequest) -> None:
        ex = self._execution
        pinned = rebuild_request(record, ex.by_id)
        rerun, aligned = compare_request(request, pinned, ex.hasher, ex.aligned)
        ex.views_checked += 1
        ex.hashes.append(
            {
                "turn": record.turn,
                "attempt": record.attempt,
                "recorded": record.hash,
                "rerun": rerun,
            }
        )
        if rerun == record.hash:
            ex.views_reproduced += 1
            return
        where, recorded, got = first_difference(request, aligned, pinned)
        ex.divergence = Divergence(
            turn=record.turn, attempt=record.attempt, where=where, recorded=recorded, rerun=got
        )
        raise Diverged(f"the view of turn {record.turn} does not reproduce its recorded hash")


def recorded_output_type(schema: Mapping[str, Any] | None) -> Any:
    """A type whose JSON schema is the recorded output schema (native structured output):
    the request carries the same schema; any JSON object the model returns is accepted.

    ``str`` when there was none, or when it has ``$defs`` (pydantic resolves references
    itself): such a case diverges on ``output_schema`` and needs the real agent.
    """
    recorded = dict((schema or {}).get("schema") or {})
    if schema is None or "$defs" in recorded:
        return str

    class PinnedOutput:
        @classmethod
        def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
            return core_schema.dict_schema()

        @classmethod
        def __get_pydantic_json_schema__(cls, core: Any, handler: Any) -> dict[str, Any]:
            return copy.deepcopy(recorded)

    PinnedOutput.__name__ = str(schema.get("name") or "final_output")
    return PinnedOutput


def _handoffs(case: Case) -> dict[str, str]:
    """Handoff tool name -> target agent, from the recorded handoffs."""
    names = {e.call_id: e.name for e in case.transcript if isinstance(e, ToolCallEntry)}
    return {
        names[e.call_id]: e.to_agent
        for e in case.transcript
        if isinstance(e, HandoffEntry) and e.call_id in names
    }


class Watched(ProviderBase):
    """A candidate's provider, passed through: counts its calls and compares its first
    request's messages with the pinned start view."""

    def __init__(self, inner: Provider, execution: Execution) -> None:
        super().__init__(inner.name, inner.model, inner.profile)
        self._inner = inner
        self._execution = execution

    @property
    def server_address(self) -> str | None:
        return getattr(self._inner, "server_address", None)

    @property
    def server_port(self) -> int | None:
        return getattr(self._inner, "server_port", None)

    def render_request(self, request: ModelRequest) -> dict[str, Any]:
        return self._inner.render_request(request)

    async def aclose(self) -> None:
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:
        ex = self._execution
        ex.live_model_calls += 1
        if ex.start_matches is None:
            pinned = rebuild_request(ex.case.views[0], ex.by_id).messages
            aligned = identity_aligned(request.messages, pinned)
            ex.start_matches = [entry_to_dict(e) for e in aligned] == [
                entry_to_dict(e) for e in pinned
            ]
        async for item in self._inner.stream(request):
            yield item


def watched(model: Any, execution: Execution) -> Any:
    """``model`` (a Provider or ``provider:model``) behind :class:`Watched`; None as is."""
    if model is None:
        return None
    if isinstance(model, str):
        from ..providers.registry import resolve_model

        model = resolve_model(model)
    return Watched(cast(Provider, model), execution)


def synthetic_agent(
    case: Case, execution: Execution, *, model: Any, instructions: str | None, baseline: bool
) -> Agent[Any, Any]:
    """The agents of the recording: each one's name, system prompt and tools (pinned), and
    the handoffs the recording made between them (a handoff cycle needs the real agents)."""
    heads: dict[str, tuple[str, list[dict[str, Any]], dict[str, Any] | None]] = {}
    for view in case.views:
        heads.setdefault(view.agent, (view.system, view.tools, view.output_schema))
    handoffs = _handoffs(case)
    strategy = PinnedView(case, baseline=baseline)
    order = _recorded_order(case) if baseline else None
    built: dict[str, Agent[Any, Any]] = {}

    def build(name: str, path: tuple[str, ...]) -> Agent[Any, Any]:
        if name in path:
            raise UserError(
                f"case {case.name} hands off in a cycle ({' -> '.join((*path, name))})",
                hint="Re-run it with the real agents: --agent MODULE:ATTR.",
            )
        if name not in built:
            system, specs, schema = heads.get(name, ("", [], None))
            if name == case.start_agent and instructions is not None:
                system = instructions
            plain = [t for t in specs if t.get("name") != RECALL and t.get("name") not in handoffs]
            targets = [
                Handoff(
                    agent=build(handoffs[str(t["name"])], (*path, name)),
                    tool_name=str(t["name"]),
                    description=str(t.get("description", "")),
                )
                for t in specs
                if t.get("name") in handoffs
            ]
            built[name] = Agent(
                name=name,
                instructions=system,
                model=model,
                tools=[pinned_tool(t, execution, order) for t in plain],
                handoffs=targets,
                context=strategy,
                output_type=recorded_output_type(schema),
            )
        return built[name]

    return build(case.start_agent, ())


def candidate_agent(agent: Agent[Any, Any], case: Case, execution: Execution) -> Agent[Any, Any]:
    """The user's agent, started from the case's pinned view, its tools answered from
    the pinned results (safe-to-run-live tools run when a call has no pinned result)."""
    return agent.clone(
        tools=[guarded_tool(t, execution) for t in agent.tools],
        context=PinnedView(case, baseline=False),
    )


RECORDED_PROMPT = " (recorded prompt)"


def _start_entries(case: Case, fresh_prompts: bool) -> tuple[TranscriptEntry, ...]:
    """The start; ``fresh_prompts``: its system entries re-labelled, so a resumed run
    renders each agent's prompt anew (a resumed run otherwise keeps the recorded one)."""
    if not fresh_prompts:
        return tuple(case.start)
    return tuple(
        e.model_copy(update={"agent": e.agent + RECORDED_PROMPT})
        if isinstance(e, SystemEntry)
        else e
        for e in case.start
    )


async def start_store(
    case: Case, agent_name: str, *, fresh_prompts: bool = False
) -> tuple[Store, RunInfo]:
    """A ``memory://`` store holding the case's start as a run's checkpoint, and that run."""
    db = open_store("memory://")
    run_id = str(case.source.get("run_id") or case.name)
    info = RunInfo(
        run_id=run_id,
        agent=agent_name,
        status="running",
        started_at=time.time(),
        extra={"first_agent": agent_name, "eval_case": case.name},
    )
    await db.begin(info)
    records = [
        to_checkpoint(EntriesRecord(_start_entries(case, fresh_prompts))),
        to_checkpoint(
            StateRecord(turn=case.start_turn - 1, usage=case.start_usage, agent=agent_name)
        ),
    ]
    await db.append(run_id, records)
    return db, info
