"""Context management: a long tool-heavy run in a small context window (offline).

A crawler agent fetches 60 pages through a 12k-token model. Every tenth page is huge.
``Compaction`` (the default strategy) evicts huge results into stubs, clears old ones
and summarizes early turns — in the view only; the transcript keeps everything. The
fake model recalls one evicted page with ``recall_tool_result``. At the end every
model call is rebuilt from the stored records and verified against its hash.

Run: python examples/15_compaction.py
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from lovia import Agent, Runner, events, tool
from lovia.providers.base import ModelProfile, ModelRequest
from lovia.stores import MemoryStore
from lovia.testing import FunctionModel, call
from lovia.transcript import ToolResultEntry, entry_from_dict
from lovia.view import DEFAULT_SUMMARY_PROMPT, Compaction, ViewHasher, rebuild_view, view_records

PAGES = 60


@tool
def fetch(n: int) -> str:
    """Fetch page n of the archive."""
    size = 200_000 if n % 10 == 0 else 2_000
    return f"page {n} " + "".join(f"[{n}:{i}]" for i in range(size // 8))[:size]


def fake_model(request: ModelRequest, info: Any) -> Any:
    """Fetch pages in order; recall the first evicted one; answer at the end."""
    if request.system == DEFAULT_SUMMARY_PROMPT:  # a summary call from Compaction
        return f"Fetched pages so far; the last message had {len(request.messages)} parts."
    done = sum(r.system != DEFAULT_SUMMARY_PROMPT for r in info.requests) - 1
    last = request.messages[-1]
    if isinstance(last, ToolResultEntry) and last.name == "fetch" and done == 10:
        stub_id = last.content.split()[2]  # "[tool result <id> evicted from view: …"
        return call("recall_tool_result", {"id": stub_id, "limit": 60})
    if done < PAGES:
        return call("fetch", n=done + 1)
    return f"Read {PAGES} pages."


async def main() -> None:
    model = FunctionModel(fake_model, profile=ModelProfile(context_window=12_000))
    agent = Agent(
        name="crawler",
        model=model,
        tools=[fetch],
        context=Compaction(clear_after_turns=15, keep_recent_turns=4),
    )
    store = MemoryStore()
    kinds: Counter[str] = Counter()
    handle = Runner.stream(
        agent, "Read the archive.", run_id="crawl-1", checkpointer=store, max_turns=PAGES + 10
    )
    async for event in handle:
        if isinstance(event, events.CompactionApplied):
            kinds[event.kind] += 1
            if event.kind != "clear":  # clearing happens most turns: counted below
                print(f"turn {event.turn:>2}: {event.kind:<9} {len(event.entry_ids)} entries")
        elif (
            isinstance(event, events.ToolCallCompleted) and event.call.name == "recall_tool_result"
        ):
            print(f"turn {event.turn:>2}: recalled -> {event.result.content[:90]!r}…")
    result = await handle.result()
    print(f"\n{result.output} {result.turns} turns, compactions: {dict(kinds)}")

    views = [r for r in model.requests if r.system != DEFAULT_SUMMARY_PROMPT]
    biggest = max(len(ViewHasher().entry_bytes(m)) for r in views for m in r.messages)
    total = sum(len(getattr(e, "content", "")) for e in result.entries)
    print(
        f"transcript: {total:,} chars of tool results kept; largest message sent: {biggest:,} bytes"
    )

    snapshot = await store.load("crawl-1")
    assert snapshot is not None
    records = view_records(snapshot.records)
    entries = [
        entry_from_dict(e)
        for r in snapshot.records
        if r.kind == "entries"
        for e in r.data["entries"]
    ]
    rebuilt = rebuild_view(records, entries)
    ok = all(ViewHasher().hash(q) == r.hash for q, r in zip(rebuilt, records, strict=True))
    size = sum(len(str(r.to_data())) for r in records)
    print(
        f"replay: {len(records)} views rebuilt, all hashes match: {ok}; records take {size:,} bytes"
    )


if __name__ == "__main__":
    asyncio.run(main())
