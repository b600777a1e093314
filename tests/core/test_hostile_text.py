"""Text that is not valid Unicode never kills a run.

Lone surrogates arrive at every entry point (user input, mailbox, plugin instructions,
model text, reasoning, tool-call arguments, tool results, tool errors) and a stream
splits a surrogate pair across two SSE chunks. The run must complete, the SQLite
checkpoint must hold every entry (the tool result that already ran is not lost), and
everything a user can print or export must encode as UTF-8.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

import lovia
from lovia import Agent, RunContext, Runner, events, tool
from lovia.errors import ToolError
from lovia.plugins.base import PluginInstance
from lovia.providers.openai_chat import OpenAIChat
from lovia.stores import store
from lovia.testing import ScriptedModel, call, reply
from lovia.testing._models import ToolCallSpec
from lovia.transcript import (
    DeltaCleaner,
    InputEntry,
    ReasoningEntry,
    TextEntry,
    ToolResultEntry,
    clean_text,
    dump_entries,
    load_entries,
)

LONE = "\ud800"
SPLIT = "\ud83d\ude00"  # the two halves of U+1F600 as separate code points
BAD = f"a{LONE}b{SPLIT}c\udce9"
CLEAN = "a\ufffdb\U0001f600c\ufffd"


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in (*_texts(k), *_texts(v))]  # type: ignore[union-attr]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _texts(v)]  # type: ignore[union-attr]
    return []


def _encodable(entries: Any) -> None:
    for entry in entries:
        for text in _texts(entry.model_dump()):
            text.encode("utf-8")  # raises on a surrogate


def test_clean_text_joins_split_pairs_and_replaces_lone_surrogates() -> None:
    assert clean_text(BAD) == CLEAN
    valid = "plain ✓ text"
    assert clean_text(valid) is valid
    assert clean_text("\udc00\ud800") == "\ufffd\ufffd"  # wrong order is no pair


def test_every_entry_is_cleaned_on_creation_and_round_trips() -> None:
    entries = [
        InputEntry(content=BAD),
        TextEntry(text=BAD),
        ReasoningEntry(text=BAD, details={BAD: [BAD, {"k": BAD}]}),
        ToolResultEntry(call_id="c", name="t", content=BAD),
    ]
    assert entries[0].content == entries[1].text == entries[3].content == CLEAN
    assert entries[2].details == {CLEAN: [CLEAN, {"k": CLEAN}]}
    assert load_entries(dump_entries(entries)) == entries


def test_delta_cleaner_holds_a_high_half_until_its_partner() -> None:
    clean = DeltaCleaner()
    assert clean.feed("text", "hi \ud83d") == "hi "
    assert clean.feed(0, "{\ud83d") == "{"  # another stream keeps its own half
    assert clean.feed("text", "\ude00!") == "\U0001f600!"
    assert clean.feed("text", "\udc00") == "\ufffd"
    assert clean.flush() == {0: "\ufffd"}


@tool
def echo(text: str) -> str:
    """Echo the text back, with a lone surrogate added."""
    return f"{text}{LONE}"


@tool
def broken() -> str:
    """Fail with a message that is not valid Unicode."""
    raise ToolError(f"bad {LONE} news")


class _Plugin:
    name = "hostile"

    async def setup(self, ctx: RunContext[Any]) -> PluginInstance:
        return PluginInstance(instructions=f"plugin says {BAD}")


@tool
def steer(ctx: RunContext[Any]) -> str:
    """Send a mailbox message that is not valid Unicode."""
    ctx.mailbox.put(f"mail {BAD}")
    return "sent"


async def test_hostile_text_at_every_entry_point_completes_and_is_stored(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    raw_args = ToolCallSpec("echo", '{"text": "' + BAD + '"}')  # raw code points, no escapes
    model = ScriptedModel(
        [
            reply(f"looking {BAD}", tool_calls=[raw_args, call("broken")], reasoning=BAD),
            call("steer"),
            f"final {BAD}",
        ]
    )
    agent = Agent(name="a", model=model, tools=[echo, broken, steer], plugins=[_Plugin()])
    result = await Runner.run(agent, f"input {BAD}", run_id="hostile", checkpointer=url)

    assert result.output == f"final {CLEAN}"
    assert f"plugin says {CLEAN}" in model.requests[0].system
    kinds = {(e.type, getattr(e, "origin", "")) for e in result.entries}
    assert ("input", "mailbox") in kinds
    echoed = next(e for e in result.entries if isinstance(e, ToolResultEntry) and e.name == "echo")
    assert echoed.content == f"{CLEAN}\ufffd" and not echoed.is_error
    failed = next(e for e in result.entries if isinstance(e, ToolResultEntry) and e.is_error)
    assert failed.content == "bad \ufffd news"
    _encodable(result.entries)

    snapshot = await store(url).load("hostile")
    assert snapshot is not None and snapshot.info.status == "completed"
    assert snapshot.entries() == list(result.entries)

    for args in (["show", "hostile"], ["show", "hostile", "--json"], ["replay", "hostile"]):
        out = _cli(*args, "--store", url)
        assert out.returncode == 0, out.stderr
        assert f"input {CLEAN}" in out.stdout.decode("utf-8")


def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    """``lovia ARGS`` with a strict UTF-8 stdout (a surrogate would fail to print)."""
    src = str(Path(lovia.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": src, "PYTHONIOENCODING": "utf-8:strict", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "lovia.cli", *args], capture_output=True, env=env, timeout=60
    )


def _sse(*deltas: dict[str, Any], finish: str = "stop") -> bytes:
    """A recorded-style Chat Completions stream, one SSE event per delta."""
    chunks = [{"id": "c1", "model": "m", "choices": [{"index": 0, "delta": d}]} for d in deltas]
    chunks.append(
        {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    )
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    assert "\\ud83d" in body and "\\ude00" in body  # escapes on the wire, as servers send
    return body.encode()


def _args(piece: str, **first: str) -> dict[str, Any]:
    call: dict[str, Any] = {"index": 0, "function": {"arguments": piece}}
    if first:
        call |= {"id": first["id"], "type": "function"}
        call["function"]["name"] = first["name"]
    return {"tool_calls": [call]}


STREAMS = [
    # a tool call whose arguments split an emoji between two chunks
    _sse(
        _args('{"text": "tool ', id="call_1", name="echo"),
        _args("\ud83d"),
        _args('\ude00"}'),
        finish="tool_calls",
    ),
    _sse(*({"content": d} for d in ("smile ", "\ud83d", "\ude00", " and a lone ", "\ud83d"))),
]


async def test_a_surrogate_pair_split_across_sse_chunks_is_joined(tmp_path: Path) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = STREAMS[len(seen) - 1]
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    model = OpenAIChat("gpt-4o", api_key="sk-test", http_client=client)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    handle = Runner.stream(Agent(name="a", model=model, tools=[echo]), "hi", checkpointer=url)
    texts: list[str] = []
    args: list[str] = []
    async for event in handle:
        if isinstance(event, events.TextDelta):
            texts.append(event.text)
        elif isinstance(event, events.ToolCallDelta):
            args.append(event.arguments)
    result = await handle.result()

    assert result.output == "smile \U0001f600 and a lone \ufffd"
    assert "".join(texts) == result.output  # the live stream shows what is stored
    assert "".join(args) == '{"text": "tool \U0001f600"}'
    (echoed,) = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert echoed.content == "tool \U0001f600\ufffd"  # the tool got the joined emoji
    for text in (*texts, *args):
        text.encode("utf-8")
    snapshot = await store(url).load(result.run_id)
    assert snapshot is not None and snapshot.entries() == list(result.entries)
