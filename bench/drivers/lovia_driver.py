"""lovia on the benchmark workload (OpenAIChat provider, telemetry off unless --otel).

``--otel`` installs the OTel SDK tracer and meter providers globally (see ``_otel``)
before the run; lovia's telemetry picks up the global providers. ``--store sqlite`` or
``--store postgres`` records every run as deployed: the store is the checkpointer and
the session (a fresh SQLite file in a temporary directory, or a fresh schema on the
PostgreSQL at ``$LOVIA_BENCH_PG``, dropped at the end). ``--client httpx|httpx2`` hands
lovia that client explicitly (default: lovia's own choice). ``--per-turn`` hands lovia
an ``httpx.AsyncClient`` whose request hook records process CPU per model call.
``--tune-gc`` calls ``lovia.tune_gc()`` first, as a process carrying thousands of runs does.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import secrets
import tempfile
from typing import Any

from _common import (
    INSTRUCTIONS,
    MAX_TURNS,
    PROMPT,
    cpu_request_hook,
    import_timer,
    measure,
    model_name,
    parse_args,
)

elapsed = import_timer()
from lovia import Agent, Runner, tool, tune_gc  # noqa: E402
from lovia.providers.openai_chat import OpenAIChat  # noqa: E402

IMPORT_S = elapsed()


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(name="add")
def add_sync(a: int, b: int) -> int:
    """Add two integers (a sync tool: lovia runs it in a worker thread)."""
    return a + b


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--otel", action="store_true", help="OTel SDK tracing + metrics on")
    parser.add_argument(
        "--sync-tool", action="store_true", help="declare `add` as a sync tool (thread hop)"
    )
    parser.add_argument("--store", choices=["none", "sqlite", "postgres"], default="none")
    parser.add_argument("--client", choices=["default", "httpx", "httpx2"], default="default")
    parser.add_argument("--contender", default=None, help="name in the result line")
    parser.add_argument(
        "--tune-gc", action="store_true", help="call lovia.tune_gc() first (thousands of runs)"
    )


PG_URL = os.environ.get("LOVIA_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")


def build_agent(args: argparse.Namespace, marks: list[float]) -> Agent:
    """The benchmark agent; with ``--per-turn`` its HTTP client records CPU per request."""
    options: dict[str, Any] = {}
    if args.per_turn or args.client != "default" or args.max_connections:
        import importlib
        import importlib.util

        name = "httpx" if args.client == "default" and args.per_turn else args.client
        if name == "default":  # lovia's choice (httpx2 when installed), with raised limits
            name = "httpx2" if importlib.util.find_spec("httpx2") else "httpx"
        module = importlib.import_module(name)
        hooks = {"request": [cpu_request_hook(marks)]} if args.per_turn else {}
        conns = args.max_connections
        limits = module.Limits(  # lovia's own defaults unless --max-connections
            max_connections=conns or 100, max_keepalive_connections=conns or 20
        )
        options["http_client"] = module.AsyncClient(event_hooks=hooks, timeout=600.0, limits=limits)
    model = OpenAIChat(
        model_name(args.turns, args.calls),
        base_url=args.base_url,
        api_key="x",
        stream=args.mode == "sse",
        **options,
    )
    tool_fn = add_sync if args.sync_tool else add
    return Agent(name="bench", instructions=INSTRUCTIONS, model=model, tools=[tool_fn])


_sessions = itertools.count()


async def run_once(agent: Agent, db: Any) -> str:
    """One run; returns the final text. With a store: checkpointed, in its own session."""
    if db is None:
        result = await Runner.run(agent, PROMPT, max_turns=MAX_TURNS)
    else:
        result = await Runner.run(
            agent,
            PROMPT,
            max_turns=MAX_TURNS,
            checkpointer=db,
            session=db,
            session_id=f"s{next(_sessions)}",
        )
    return str(result.output)


def open_store(kind: str, tmp: str) -> tuple[Any, str | None]:
    """The store for ``--store`` and, for PostgreSQL, the schema to drop afterwards."""
    if kind == "none":
        return None, None
    from lovia.stores import store

    if kind == "sqlite":
        return store(f"sqlite:///{tmp}/bench.db"), None
    schema = f"lovia_bench_{secrets.token_hex(4)}"
    return store(f"{PG_URL}?schema={schema}"), schema


async def drop_schema(schema: str) -> None:
    """Drop the benchmark's PostgreSQL schema (outside the timed window)."""
    import asyncpg  # pyright: ignore[reportMissingTypeStubs]

    conn = await asyncpg.connect(PG_URL)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def main() -> None:
    """Parse options, set up telemetry if asked, build the agent, measure."""
    args = parse_args(__doc__.splitlines()[0], _options)
    extra: dict[str, Any] = {"otel": False}
    sdk = None
    if args.otel:
        from _otel import install_sdk

        sdk = install_sdk()

    def flush() -> None:
        if sdk is not None:
            sdk.flush()
            extra.update(sdk.summary())

    if args.tune_gc:
        tune_gc()
    marks: list[float] = []
    agent = build_agent(args, marks)
    contender = args.contender or ("lovia+otel" if sdk else "lovia")
    extra.update(
        store=args.store, sync_tool=args.sync_tool, client=args.client, tune_gc=args.tune_gc
    )
    with tempfile.TemporaryDirectory() as tmp:
        db, schema = open_store(args.store, tmp)
        try:
            await measure(
                contender,
                args,
                lambda: run_once(agent, db),
                IMPORT_S,
                flush=flush,
                cpu_marks=marks,
                extra=extra,
            )
        finally:
            if db is not None and hasattr(db, "aclose"):
                await db.aclose()
            if schema is not None:
                await drop_schema(schema)


if __name__ == "__main__":
    asyncio.run(main())
