"""Deterministic fake OpenAI-compatible Chat Completions server for the benchmarks.

Stdlib only: an asyncio ``Protocol`` speaking just enough HTTP/1.1 (keep-alive,
``Content-Length`` request bodies, ``Content-Length`` JSON replies and chunked SSE
replies) to be far cheaper than any client it serves.

Workload: for a model named ``bench-t<T>-c<C>`` (or the ``--turns``/``--calls``
defaults) the server answers with ``C`` parallel calls to an ``add`` tool for ``T``
turns (the turn is the number of assistant messages with ``tool_calls`` already in
``messages``), then with the final text ``sum=<sum of every role:"tool" result>``.
A client that loses or garbles a tool result therefore gets a wrong final answer.

Endpoints: ``POST /v1/chat/completions``; ``GET /stats`` (requests served and this
process's CPU seconds, for CPU-per-request figures); ``POST /stats/reset``.

Run: ``python bench/fake_server.py --port 0`` prints the bound port on its first line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "drivers"))

from _common import tool_args

MODEL_RE = re.compile(r"-t(\d+)-c(\d+)")
CREATED = 1_766_000_000
FINGERPRINT = "fp_bench0001"


@dataclass
class Stats:
    """Counters reported by ``GET /stats``."""

    requests: int = 0
    errors: int = 0
    connections: int = 0
    started: float = field(default_factory=time.perf_counter)

    def as_json(self) -> bytes:
        """Serialise the counters plus this process's CPU time so far."""
        return json.dumps(
            {
                "requests": self.requests,
                "errors": self.errors,
                "connections": self.connections,
                "cpu_s": time.process_time(),
                "uptime_s": time.perf_counter() - self.started,
            }
        ).encode()


@dataclass(frozen=True)
class Workload:
    """Turns and parallel calls per turn, the server-wide defaults."""

    turns: int
    calls: int
    latency_s: float = 0.0
    """Delay before each reply (``--latency-ms``): a model that takes its time."""

    def for_model(self, model: str) -> tuple[int, int]:
        """Turns and calls for ``model``: ``bench-t5-c2`` means T=5, C=2."""
        match = MODEL_RE.search(model)
        if match:
            return int(match.group(1)), int(match.group(2))
        return self.turns, self.calls


# --------------------------------------------------------------------------- workload


def _text_of(content: object) -> str:
    """Text of a message ``content`` that may be a string or a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _as_int(text: str) -> int | None:
    """Parse a tool result as an integer (plain, JSON number or JSON string)."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, str):
        return _as_int(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    return None


def inspect_conversation(messages: list[dict]) -> tuple[int, int, int]:
    """Return (completed turns, sum of tool results, number of unparseable results)."""
    turn = 0
    total = 0
    bad = 0
    for message in messages:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            turn += 1
        elif role == "tool":
            value = _as_int(_text_of(message.get("content")))
            if value is None:
                bad += 1
            else:
                total += value
    return turn, total, bad


def plan_reply(
    messages: list[dict], turns: int, calls: int
) -> tuple[list[tuple[str, str]], str | None]:
    """Decide the reply: a list of (call id, arguments JSON) or a final text."""
    turn, total, bad = inspect_conversation(messages)
    if turn < turns:
        tool_calls = []
        for index in range(calls):
            a, b = tool_args(turn, index)
            tool_calls.append((f"call_t{turn}_{index}", f'{{"a": {a}, "b": {b}}}'))
        return tool_calls, None
    text = f"sum={total}" if not bad else f"sum=invalid({bad} unparseable tool results)"
    return [], text


def usage(prompt_bytes: int, completion_chars: int) -> dict:
    """Plausible usage: about four bytes per token, growing with the conversation."""
    prompt = max(1, prompt_bytes // 4)
    completion = max(1, completion_chars // 4)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 0,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


# --------------------------------------------------------------------------- bodies


def json_body(
    rid: str, model: str, calls: list[tuple[str, str]], text: str | None, use: dict
) -> bytes:
    """A complete ``chat.completion`` object."""
    message: dict = {"role": "assistant", "content": text, "refusal": None, "annotations": []}
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": "add", "arguments": args}}
            for cid, args in calls
        ]
    body = {
        "id": rid,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": use,
        "service_tier": "default",
        "system_fingerprint": FINGERPRINT,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def _split(text: str, parts: int) -> list[str]:
    """Split ``text`` into ``parts`` non-empty pieces (fewer if it is short)."""
    step = max(1, -(-len(text) // parts))
    return [text[i : i + step] for i in range(0, len(text), step)]


def sse_events(
    rid: str, model: str, calls: list[tuple[str, str]], text: str | None, use: dict | None
) -> list[bytes]:
    """The SSE events of a streamed reply, each a complete ``data: ...\\n\\n`` block."""
    head = (
        f'{{"id":"{rid}","object":"chat.completion.chunk","created":{CREATED},'
        f'"model":"{model}","service_tier":"default","system_fingerprint":"{FINGERPRINT}",'
    )
    null_usage = '"usage":null,' if use is not None else ""

    def chunk(delta: dict, finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        payload = (
            head + null_usage + '"choices":[' + json.dumps(choice, separators=(",", ":")) + "]}"
        )
        return b"data: " + payload.encode() + b"\n\n"

    events = [chunk({"role": "assistant", "content": None, "refusal": None})]
    for index, (cid, args) in enumerate(calls):
        start = {
            "index": index,
            "id": cid,
            "type": "function",
            "function": {"name": "add", "arguments": ""},
        }
        events.append(chunk({"tool_calls": [start]}))
        for piece in _split(args, 4):
            events.append(
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            )
    if text is not None:
        for piece in _split(text, 3):
            events.append(chunk({"content": piece}))
    events.append(chunk({}, "tool_calls" if calls else "stop"))
    if use is not None:
        tail = head + '"choices":[],"usage":' + json.dumps(use, separators=(",", ":")) + "}"
        events.append(b"data: " + tail.encode() + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


# --------------------------------------------------------------------------- HTTP


class ChatProtocol(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; requests are answered in order."""

    def __init__(self, workload: Workload, stats: Stats) -> None:
        self.workload = workload
        self.stats = stats
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport for writing replies."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.stats.connections += 1

    def data_received(self, data: bytes) -> None:
        """Buffer bytes and answer every complete request in the buffer."""
        self.buffer += data
        while self._handle_one():
            pass

    def _handle_one(self) -> bool:
        """Answer one buffered request if it is complete; return whether one was."""
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return False
        head = bytes(self.buffer[:end]).decode("latin-1")
        lines = head.split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        if len(self.buffer) < end + 4 + length:
            return False
        body = bytes(self.buffer[end + 4 : end + 4 + length])
        del self.buffer[: end + 4 + length]
        self._route(method, path, body)
        return True

    def _route(self, method: str, path: str, body: bytes) -> None:
        """Dispatch a complete request."""
        if method == "POST" and path.endswith("/chat/completions"):
            try:
                self._chat(body)
            except Exception as exc:  # a bad request must not kill the server
                self.stats.errors += 1
                self._send(
                    400, "application/json", json.dumps({"error": {"message": repr(exc)}}).encode()
                )
        elif path == "/stats":
            if method == "POST":
                self.stats.requests = 0
                self.stats.errors = 0
                self.stats.connections = 0
            self._send(200, "application/json", self.stats.as_json())
        else:
            self._send(404, "application/json", b'{"error":{"message":"not found"}}')

    def _chat(self, body: bytes) -> None:
        """Answer one chat completion request as JSON or SSE."""
        request = json.loads(body)
        model = request.get("model", "bench")
        turns, calls = self.workload.for_model(model)
        tool_calls, text = plan_reply(request["messages"], turns, calls)
        self.stats.requests += 1
        rid = f"chatcmpl-bench{self.stats.requests:08d}"
        completion_chars = sum(len(a) for _, a in tool_calls) + len(text or "")
        use = usage(len(body), completion_chars)
        if not request.get("stream"):
            reply = json_body(rid, model, tool_calls, text, use)
            self._later(self._send, 200, "application/json", reply)
            return
        include = bool((request.get("stream_options") or {}).get("include_usage"))
        self._later(
            self._stream, sse_events(rid, model, tool_calls, text, use if include else None)
        )

    def _later(self, send: Any, *args: Any) -> None:
        """Reply now, or after the workload's latency."""
        if self.workload.latency_s > 0:
            asyncio.get_running_loop().call_later(self.workload.latency_s, send, *args)
        else:
            send(*args)

    def _send(self, status: int, ctype: str, payload: bytes) -> None:
        """Write a complete response with ``Content-Length``."""
        assert self.transport is not None
        reason = "OK" if status == 200 else "Error"
        head = (
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: {ctype}\r\n"
            f"content-length: {len(payload)}\r\nconnection: keep-alive\r\n\r\n"
        )
        self.transport.write(head.encode() + payload)

    def _stream(self, events: list[bytes]) -> None:
        """Write an SSE response, one HTTP chunk (and one socket write) per event."""
        assert self.transport is not None
        write = self.transport.write
        write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
            b"transfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n"
        )
        for event in events:
            write(b"%x\r\n%s\r\n" % (len(event), event))
        write(b"0\r\n\r\n")


async def serve(host: str, port: int, workload: Workload) -> None:
    """Serve until cancelled, printing the bound port first."""
    stats = Stats()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: ChatProtocol(workload, stats), host, port, backlog=2048
    )
    bound = server.sockets[0].getsockname()[1]
    print(bound, flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--turns", type=int, default=5, help="T when the model name has none")
    parser.add_argument("--calls", type=int, default=2, help="C when the model name has none")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay of each reply")
    args = parser.parse_args(argv)
    workload = Workload(args.turns, args.calls, args.latency_ms / 1000)
    try:
        asyncio.run(serve(args.host, args.port, workload))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
