"""An answer's entries carry the run, turn and agent they were recorded in, whether the
provider built them with its request's stamp (recorded as built, no copy) or not (the
loop copies them with it)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

from lovia import Agent, Runner, tool
from lovia.model import ModelRequest, ModelResponse, StreamItem
from lovia.testing import ScriptedModel, call
from lovia.transcript import EntryStamp, SystemEntry, ToolResultEntry

_KEEP = EntryStamp()


class Recording(ScriptedModel):
    """A scripted model that keeps each response's entries as it built them; ``stamp``
    (when given) replaces the request's: ``_KEEP`` keeps it, ``{}`` drops it, another
    value is a wrong one."""

    def __init__(self, steps: list[Any], stamp: EntryStamp | None = None) -> None:
        super().__init__(steps)
        self.built: list[Any] = []
        self.stamps: list[EntryStamp] = []
        self._override = stamp

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:  # type: ignore[override]
        self.stamps.append(dict(request.stamp))  # type: ignore[arg-type]
        if self._override is not _KEEP:
            request = dataclasses.replace(request, stamp=self._override or EntryStamp())
        async for item in super().stream(request):
            if isinstance(item, ModelResponse):
                self.built.extend(item.entries)
            yield item


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _agent(model: Recording) -> Agent[Any, str]:
    return Agent(name="triage", model=model, tools=[lookup])


def _answers(result: Any) -> list[Any]:
    skip = (SystemEntry, ToolResultEntry)
    return [e for e in result.entries if not isinstance(e, skip) and e.type != "input"]


async def test_each_call_is_asked_for_its_run_turn_and_agent() -> None:
    model = Recording([call("lookup", key="a"), call("lookup", key="b"), "done"], _KEEP)
    result = await Runner.run(_agent(model), "go", run_id="run-s1")
    assert model.stamps == [
        {"run_id": "run-s1", "turn": turn, "agent": "triage"} for turn in (1, 2, 3)
    ]
    assert [(e.run_id, e.turn, e.agent) for e in _answers(result)] == [
        ("run-s1", 1, "triage"),
        ("run-s1", 2, "triage"),
        ("run-s1", 3, "triage"),
    ]


async def test_entries_built_with_the_stamp_are_recorded_as_built() -> None:
    model = Recording([call("lookup", key="a"), "done"], _KEEP)
    result = await Runner.run(_agent(model), "go", run_id="run-s2")
    answers = _answers(result)
    assert len(answers) == 2 and all(a is b for a, b in zip(answers, model.built, strict=True))


async def test_entries_without_or_with_a_wrong_stamp_are_copied_with_the_right_one() -> None:
    wrong = EntryStamp(run_id="other-run", turn=99, agent="someone")
    for stamp in (EntryStamp(), wrong):
        model = Recording([call("lookup", key="a"), "done"], stamp)
        result = await Runner.run(_agent(model), "go", run_id="run-s3")
        answers = _answers(result)
        assert [(e.run_id, e.turn, e.agent) for e in answers] == [
            ("run-s3", 1, "triage"),
            ("run-s3", 2, "triage"),
        ]
        assert not any(a is b for a, b in zip(answers, model.built, strict=True))
        # the copies are the provider's entries otherwise (same id, content and time)
        assert [(a.id, a.ts, a.type) for a in answers] == [
            (b.id, b.ts, b.type) for b in model.built
        ]
