"""The floor: a hand-written minimal agent loop doing the same HTTP as a framework.

Posts the conversation, parses the tool calls (JSON or SSE), runs ``add``, appends the
tool results and repeats until the model answers with text. ``--client httpx2`` runs the
same loop on httpx2 to measure the HTTP client itself. ``--otel`` installs the OTel SDK
as ``lovia_driver.py --otel`` does and emits lovia's spans and metrics by hand
(``_floor_otel``): the least any agent loop pays for that telemetry.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import time
from typing import Any
from urllib.parse import urlsplit

from _common import (
    ADD_TOOL_SCHEMA,
    INSTRUCTIONS,
    MAX_TURNS,
    PROMPT,
    add,
    cpu_request_hook,
    import_timer,
    measure,
    model_name,
    parse_args,
)
from _floor_otel import RunTrace, Telemetry


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--client", choices=["httpx", "httpx2"], default="httpx")
    parser.add_argument("--otel", action="store_true", help="emit lovia's telemetry by hand")


async def json_turn(
    client: Any, url: str, body: dict[str, Any], meta: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One non-streamed request; returns (assistant message, usage). ``meta``, when
    given, gets the answer's id, model and finish reason."""
    response = await client.post(url, json=body)
    response.raise_for_status()
    data = response.json()
    choice = data["choices"][0]
    if meta is not None:
        meta.update(id=data.get("id"), model=data.get("model"))
        meta.update(finish_reason=choice.get("finish_reason"), first_chunk=time.perf_counter())
    return choice["message"], data.get("usage") or {}


def _merge_delta(
    message: dict[str, Any], calls: dict[int, dict[str, Any]], delta: dict[str, Any]
) -> None:
    """Fold one streamed ``delta`` into the message being assembled."""
    if delta.get("content"):
        message["content"] = (message.get("content") or "") + delta["content"]
    for part in delta.get("tool_calls") or ():
        call = calls.setdefault(
            part["index"], {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if part.get("id"):
            call["id"] = part["id"]
        function = part.get("function") or {}
        if function.get("name"):
            call["function"]["name"] = function["name"]
        call["function"]["arguments"] += function.get("arguments") or ""


async def sse_turn(
    client: Any, url: str, body: dict[str, Any], meta: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One streamed request; returns (assistant message, usage). ``meta``, when given,
    gets the answer's id, model, finish reason and the time of its first chunk."""
    message: dict[str, Any] = {"role": "assistant", "content": None}
    calls: dict[int, dict[str, Any]] = {}
    usage: dict[str, Any] = {}
    async with client.stream("POST", url, json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                continue  # read on to the end of the body so the connection is reused
            chunk = json.loads(data)
            if chunk.get("usage"):
                usage = chunk["usage"]
            for choice in chunk.get("choices") or ():
                _merge_delta(message, calls, choice.get("delta") or {})
                if meta is not None and choice.get("finish_reason"):
                    meta["finish_reason"] = choice["finish_reason"]
            if meta is not None and "id" not in meta:
                meta.update(id=chunk.get("id"), model=chunk.get("model"))
                meta["first_chunk"] = time.perf_counter()
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message, usage


async def run_once(client: Any, url: str, model: str, stream: bool) -> str:
    """One agent run: loop until the model answers with text; return that text."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": PROMPT},
    ]
    body: dict[str, Any] = {"model": model, "messages": messages, "tools": [ADD_TOOL_SCHEMA]}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    turn = sse_turn if stream else json_turn
    total_tokens = 0
    for _ in range(MAX_TURNS):
        message, usage = await turn(client, url, body)
        total_tokens += usage.get("total_tokens", 0)
        messages.append(message)
        calls = message.get("tool_calls")
        if not calls:
            return message.get("content") or ""
        for call in calls:
            arguments = json.loads(call["function"]["arguments"])
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": str(add(**arguments))}
            )
    raise RuntimeError("max turns exceeded")


async def run_traced(client: Any, url: str, tel: Telemetry) -> str:
    """``run_once`` emitting lovia's spans and metrics for the run."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": PROMPT},
    ]
    body: dict[str, Any] = {"model": tel.model, "messages": messages, "tools": [ADD_TOOL_SCHEMA]}
    if tel.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    turn = sse_turn if tel.stream else json_turn
    run = RunTrace(tel)
    for _ in range(MAX_TURNS):
        run.start_turn(len(messages) - 1)  # the view: the conversation without instructions
        meta: dict[str, Any] = {}
        message, usage = await turn(client, url, body, meta)
        run.end_chat(meta, usage)
        messages.append(message)
        calls = message.get("tool_calls") or ()
        for call in calls:
            span, started = run.start_tool(call["id"]), time.perf_counter()
            arguments = json.loads(call["function"]["arguments"])
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": str(add(**arguments))}
            )
            run.end_tool(span, started)
        run.end_turn(len(calls))
        if not calls:
            run.end()
            return message.get("content") or ""
    raise RuntimeError("max turns exceeded")


async def main() -> None:
    """Parse options, build the client, measure."""
    args = parse_args(__doc__.splitlines()[0], _options)
    sdk = None
    if args.otel:
        from _otel import install_sdk

        sdk = install_sdk()
    elapsed = import_timer()
    http = importlib.import_module(args.client)
    import_s = elapsed()
    marks: list[float] = []
    hooks = {"request": [cpu_request_hook(marks)]} if args.per_turn else {}
    conns = args.max_connections  # default: the client's default pool (100 / 20)
    limits = http.Limits(max_connections=conns or 100, max_keepalive_connections=conns or 20)
    async with http.AsyncClient(timeout=600.0, event_hooks=hooks, limits=limits) as client:
        url = args.base_url.rstrip("/") + "/chat/completions"
        model = model_name(args.turns, args.calls)

        extra: dict[str, Any] = {"client": args.client, "otel": sdk is not None}
        if sdk is None:

            async def one() -> str:
                return await run_once(client, url, model, args.mode == "sse")
        else:
            where = urlsplit(url)
            tel = Telemetry(model, where.hostname or "", where.port or 80, args.mode == "sse")

            async def one() -> str:
                return await run_traced(client, url, tel)

        def flush() -> None:
            if sdk is not None:
                sdk.flush()
                extra.update(sdk.summary())

        contender = "floor" if args.client == "httpx" else f"floor-{args.client}"
        if sdk is not None:
            contender += "+otel"
        await measure(contender, args, one, import_s, flush=flush, cpu_marks=marks, extra=extra)


if __name__ == "__main__":
    asyncio.run(main())
