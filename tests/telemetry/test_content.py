"""Content capture: off by default, each env value, scrubbing, keys never exported."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from telemetry_helpers import Otel

from lovia import Agent, Runner, tool
from lovia.providers.base import ModelSettings
from lovia.telemetry import attributes as A
from lovia.telemetry import content
from lovia.testing import ScriptedModel, call

CONTENT_KEYS = {
    A.INPUT_MESSAGES,
    A.OUTPUT_MESSAGES,
    A.SYSTEM_INSTRUCTIONS,
    A.TOOL_DEFINITIONS,
    A.TOOL_ARGUMENTS,
    A.TOOL_RESULT,
}
FAKE_KEY = "sk-test-FAKEKEY0123456789abcdef"


@pytest.fixture(autouse=True)
def _reset_policy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(content.ENV_VAR, raising=False)
    content.set_policy(None, None)
    yield
    content.set_policy(None, None)


@tool
async def lookup(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}: shipped"


async def _run(otel: Otel, **options: Any) -> None:
    model = ScriptedModel([call("lookup", order_id="A1"), "it shipped"])
    agent = Agent(name="support", model=model, tools=[lookup], instructions="Be kind.")
    await Runner.run(agent, "where is A1?", tracer_provider=otel.tp, **options)


def _content(otel: Otel) -> tuple[set[str], set[str]]:
    """(content keys on span attributes or span events, content keys in log events)."""
    on_spans = {k for s in otel.spans() for k in (s.attributes or {}) if k in CONTENT_KEYS}
    on_spans |= {
        k for s in otel.spans() for e in s.events for k in (e.attributes or {}) if k in CONTENT_KEYS
    }
    in_events = {
        k for r in otel.logs() for k in (r.log_record.attributes or {}) if k in CONTENT_KEYS
    }
    return on_spans, in_events


async def test_no_content_by_default(otel: Otel) -> None:
    await _run(otel)
    assert _content(otel) == (set(), set())
    assert not any(e.name == A.EVENT_DETAILS for s in otel.spans() for e in s.events)
    assert otel.logs() == ()


@pytest.mark.parametrize(
    ("value", "spans", "events"),
    [
        ("NO_CONTENT", False, False),
        ("span_only", True, False),
        ("EVENT_ONLY", False, True),
        ("Span_And_Event", True, True),
        ("true", True, False),
        ("false", False, False),
    ],
)
async def test_env_values(
    otel: Otel, monkeypatch: pytest.MonkeyPatch, value: str, spans: bool, events: bool
) -> None:
    monkeypatch.setenv(content.ENV_VAR, value)
    await _run(otel)
    on_spans, in_events = _content(otel)
    assert on_spans == (CONTENT_KEYS if spans else set())
    assert in_events == (CONTENT_KEYS if events else set())


async def test_unknown_value_warns_and_captures_nothing(
    otel: Otel, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(content.ENV_VAR, "everything")
    with caplog.at_level(logging.WARNING, logger="lovia.telemetry"):
        await _run(otel)
    assert _content(otel) == (set(), set())
    assert "everything" in caplog.text


async def test_messages_follow_the_genai_schema(otel: Otel) -> None:
    content.set_policy("SPAN_ONLY", None)
    await _run(otel)
    chats = [s for s in otel.spans() if s.name.startswith("chat ")]
    attrs = chats[1].attributes or {}
    inputs = json.loads(str(attrs[A.INPUT_MESSAGES]))
    assert inputs == [
        {"role": "user", "parts": [{"type": "text", "content": "where is A1?"}]},
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "tool_call",
                    "id": "call_1",
                    "name": "lookup",
                    "arguments": {"order_id": "A1"},
                }
            ],
        },
        {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": "call_1", "response": "order A1: shipped"}
            ],
        },
    ]
    assert json.loads(str(attrs[A.OUTPUT_MESSAGES])) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "it shipped"}],
            "finish_reason": "stop",
        }
    ]
    system = json.loads(str(attrs[A.SYSTEM_INSTRUCTIONS]))
    assert "Be kind." in system[0]["content"]
    (tool_span,) = [s for s in otel.spans() if s.name.startswith("execute_tool")]
    assert json.loads(str((tool_span.attributes or {})[A.TOOL_ARGUMENTS])) == {"order_id": "A1"}


async def test_scrubber_runs_before_anything_is_recorded(otel: Otel) -> None:
    seen: list[str] = []

    def scrub(key: str, value: Any) -> Any:
        seen.append(key)
        if key == A.SYSTEM_INSTRUCTIONS:
            return None
        return json.loads(json.dumps(value).replace("A1", "[order]"))

    content.set_policy("SPAN_AND_EVENT", scrub)
    await _run(otel)
    dump = _everything(otel)
    assert "A1" not in dump
    assert "[order]" in dump
    assert A.SYSTEM_INSTRUCTIONS not in dump
    assert set(seen) == CONTENT_KEYS


def _everything(otel: Otel) -> str:
    parts: list[str] = []
    for s in otel.spans():
        parts.append(s.name)
        parts.extend(f"{k}={v}" for k, v in (s.attributes or {}).items())
        for e in s.events:
            parts.append(e.name)
            parts.extend(f"{k}={v}" for k, v in (e.attributes or {}).items())
        for lk in s.links:
            parts.extend(f"{k}={v}" for k, v in (lk.attributes or {}).items())
        parts.extend(f"{k}={v}" for k, v in s.resource.attributes.items())
    for r in otel.logs():
        parts.append(str(r.log_record.event_name))
        parts.extend(f"{k}={v}" for k, v in (r.log_record.attributes or {}).items())
    return "\n".join(parts)


class KeyedModel(ScriptedModel):
    """A provider that holds an API key and auth headers, like the real adapters."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.api_key = FAKE_KEY
        self.headers = {"Authorization": f"Bearer {FAKE_KEY}", "x-api-key": FAKE_KEY}


async def test_api_key_never_exported(otel: Otel) -> None:
    content.set_policy("SPAN_AND_EVENT", None)
    model = KeyedModel([call("lookup", order_id="A1"), "done"])
    agent = Agent(name="keyed", model=model, tools=[lookup])
    settings = ModelSettings(
        temperature=0.2, extra={"api_key": FAKE_KEY, "headers": {"authorization": FAKE_KEY}}
    )
    await Runner.run(agent, "hi", settings=settings, tracer_provider=otel.tp)
    dump = _everything(otel)
    assert "gen_ai.request.temperature=0.2" in dump
    assert FAKE_KEY not in dump
    assert "FAKEKEY" not in dump


def test_reference_mode_sends_no_content_and_a_bad_link_template_is_skipped(
    otel: Otel, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(content.URL_ENV, "https://lovia.example/{run_id}/{nope}")
    with caplog.at_level(logging.WARNING, logger="lovia.telemetry"):
        assert content.content_url("r1", "h" * 64, 3) is None
    assert content.URL_ENV in caplog.text
    monkeypatch.setenv(content.URL_ENV, "https://lovia.example/{run_id}/{view_hash}?t={turn}")
    assert content.content_url("r1", "ab", 3) == "https://lovia.example/r1/ab?t=3"
    policy = content.ContentPolicy("REFERENCE")
    assert policy.by_reference and not policy.enabled and not policy.on_span
    assert content.parse_mode("reference") == "REFERENCE"
    # an error text is content too: by reference, status messages carry only its type
    assert content.status_text(policy, "ValueError", "secret prompt") == "ValueError"


async def test_reference_mode_run_has_refs_and_nothing_else(otel: Otel) -> None:
    content.set_policy("REFERENCE", None)
    await _run(otel)
    assert _content(otel) == (set(), set())
    chats = [s for s in otel.spans() if s.name.startswith("chat ")]
    for chat in chats:
        attrs = chat.attributes or {}
        assert attrs[A.CONTENT_REF] == f"lovia:run/{attrs[A.RUN_ID]}/view/{attrs[A.VIEW_HASH]}"
    assert "where is A1" not in _everything(otel)


async def test_event_only_keeps_error_texts_off_the_spans(otel: Otel) -> None:
    @tool
    async def leaky(order_id: str) -> str:
        """Fails, echoing its input."""
        raise RuntimeError(f"cannot find {order_id} for the customer's secret question")

    content.set_policy("EVENT_ONLY", None)
    model = ScriptedModel([call("leaky", order_id="A1"), "sorry"])
    await Runner.run(Agent(name="s", model=model, tools=[leaky]), "hi", tracer_provider=otel.tp)
    (span,) = [s for s in otel.spans() if s.name == "execute_tool leaky"]
    assert span.status.description == "RuntimeError"
    on_spans = [
        f"{s.status.description} {dict(s.attributes or {})} {[e.attributes for e in s.events]}"
        for s in otel.spans()
    ]
    assert not [t for t in on_spans if "secret question" in t]
    assert any("secret question" in str(r.log_record.attributes) for r in otel.logs())
