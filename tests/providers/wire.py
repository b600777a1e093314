"""Replay recorded wire exchanges (``tests/fixtures/wire``) through ``httpx.MockTransport``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from lovia.providers._http import RetryPolicy
from lovia.providers.anthropic import Anthropic
from lovia.providers.base import ModelRequest, ModelResponse, StreamItem
from lovia.providers.openai_chat import OpenAIChat
from lovia.providers.openai_responses import OpenAIResponses

REPO = Path(__file__).resolve().parents[2]
WIRE = REPO / "tests" / "fixtures" / "wire"
FOLDERS = ("openai_chat", "openai_compat", "openai_responses", "anthropic")
FAKE_KEY = "sk-test-FAKE-KEY-0123456789abcdef"


async def no_sleep(delay: float) -> None:
    del delay


NO_RETRY = RetryPolicy(max_retries=0, sleep=no_sleep)


@dataclass(frozen=True)
class Case:
    folder: str
    name: str
    request: Any
    body: bytes
    meta: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.folder}/{self.name}"

    @property
    def stream(self) -> bool:
        return bool(self.meta.get("stream"))

    @property
    def headers(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for key, value in (self.meta.get("headers") or {}).items():
            for v in value if isinstance(value, list) else [value]:
                out.append((key, str(v)))
        return out


def all_cases() -> list[Case]:
    out: list[Case] = []
    for folder in FOLDERS:
        base = WIRE / folder
        if not base.is_dir():
            continue
        for path in sorted(p for p in base.iterdir() if p.is_dir()):
            out.append(
                Case(
                    folder,
                    path.name,
                    json.loads((path / "request.json").read_text()),
                    (path / "response.body").read_bytes(),
                    json.loads((path / "response.meta.json").read_text()),
                )
            )
    return out


def case(case_id: str) -> Case:
    for c in all_cases():
        if c.id == case_id:
            return c
    raise KeyError(case_id)


def replay_client(c: Case, seen: list[Any] | None = None, http: Any = httpx) -> Any:
    """A client of the ``http`` module (httpx, or httpx2: same API) replaying case ``c``."""

    def handler(request: Any) -> Any:
        if seen is not None:
            seen.append(request)
        headers = c.headers
        if (
            c.stream
            and c.meta.get("status") == 200
            and not any(k == "content-type" for k, _ in headers)
        ):
            headers.append(("content-type", "text/event-stream"))
        return http.Response(int(c.meta["status"]), headers=headers, content=c.body)

    return http.AsyncClient(transport=http.MockTransport(handler))


def provider_for(c: Case, client: Any, **kwargs: Any) -> OpenAIChat | OpenAIResponses | Anthropic:
    model = (c.request or {}).get("model", "model-x") if isinstance(c.request, dict) else "model-x"
    kwargs.setdefault("retry", NO_RETRY)
    if c.folder in ("openai_chat", "openai_compat"):
        return OpenAIChat(model, api_key=FAKE_KEY, http_client=client, stream=c.stream, **kwargs)
    if c.folder == "openai_responses":
        return OpenAIResponses(
            model, api_key=FAKE_KEY, http_client=client, stream=c.stream, **kwargs
        )
    return Anthropic(model, api_key=FAKE_KEY, http_client=client, stream=c.stream, **kwargs)


async def collect(stream: Any) -> tuple[list[StreamItem], ModelResponse]:
    items: list[StreamItem] = [item async for item in stream]
    final = items[-1]
    assert isinstance(final, ModelResponse)
    assert not any(isinstance(i, ModelResponse) for i in items[:-1])
    return items, final


SIMPLE = ModelRequest(system="", messages=())
