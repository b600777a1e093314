"""lovia web: the postmortem in a browser, over a store every run is recorded in (offline).

Records every run of this process with ``lovia.configure(store=...)`` (no
``checkpointer=`` at the call site), then starts ``lovia web`` on 127.0.0.1 on a free
port, fetches the runs list, the run's page and its turn-1 view as a browser would,
searches the list and exports the run as JSON Lines, and stops. To look at them yourself:

    lovia web --store URL          # the URL this script prints; opens on 127.0.0.1:8765

Needs the ``web`` extra: pip install 'lovia[web]'.

Run: python examples/70_web.py
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import tempfile
from pathlib import Path

import httpx
import uvicorn

import lovia
from lovia import Agent, Runner, tool
from lovia.testing import ScriptedModel, call
from lovia.web import create_app


@tool
async def lookup_order(order_id: str) -> str:
    """Look up an order by id."""
    return f"{order_id}: shipped yesterday"


async def main() -> None:
    url = f"sqlite:///{Path(tempfile.mkdtemp()) / 'lovia.db'}"
    lovia.configure(store=url)  # every run of this process is recorded there
    agent = Agent(
        name="support",
        instructions="You help with orders.",
        tools=[lookup_order],
        model=ScriptedModel([call("lookup_order", order_id="A1"), "A1 shipped yesterday."]),
    )
    result = await Runner.run(agent, "Where is order A1?")
    print(f"recorded run {result.run_id} in {url}")

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # an ephemeral port
    sock.listen(16)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(url), log_level="warning"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:  # noqa: ASYNC110 (uvicorn exposes a flag, not an event)
        await asyncio.sleep(0.01)
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base) as client:
        runs = (await client.get("/api/runs")).json()["runs"]
        print(f"lovia web on {base}: {len(runs)} run(s), newest {runs[0]['status']}")
        page = (await client.get(f"/runs/{result.run_id}")).text
        bars = len(re.findall(r'<tr class="span', page))
        print(f"run page: {len(page)} bytes, {bars} spans in the waterfall")
        view = (await client.get(f"/api/runs/{result.run_id}/turns/1")).json()["view"]
        print(f"turn 1 view verified: {view['ok']} (hash {view['rebuilt_hash'][:16]}…)")
        # triage: search, facets and totals are query parameters (the page's links too)
        found = (await client.get("/api/runs", params={"q": "support", "sort": "cost"})).json()
        print(f"search 'support': {found['totals']['count']} run(s), facets {found['facets']}")
        export = await client.get(f"/api/runs/{result.run_id}/export.jsonl")
        kinds = [json.loads(line)["kind"] for line in export.text.splitlines()]
        print(f"export: {len(kinds)} JSON lines ({', '.join(sorted(set(kinds)))})")
    server.should_exit = True
    await serving
    print(f"look yourself: lovia web --store {url}")


if __name__ == "__main__":
    asyncio.run(main())
