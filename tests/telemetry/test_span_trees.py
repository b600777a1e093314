"""Normalized span trees of representative runs (deterministic ids, in-memory exporter)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from inline_snapshot import snapshot
from telemetry_helpers import Otel

from lovia import Agent, Runner, tool
from lovia.context import CancelToken
from lovia.errors import GuardrailTripped, RateLimited, RunCancelled
from lovia.providers.base import ModelRequest, RetryNotice, StreamItem
from lovia.stores import MemoryStore
from lovia.testing import ScriptedModel, call
from lovia.view import BuiltView, FullView, ViewInput


@tool(concurrency_safe=True)
async def weather(city: str) -> str:
    """Weather for a city."""
    await asyncio.sleep(0)
    return f"{city}: sunny"


async def test_parallel_tools_are_siblings_under_the_turn(otel: Otel) -> None:
    model = ScriptedModel([[call("weather", city="Paris"), call("weather", city="Oslo")], "ok"])
    agent = Agent(name="forecaster", model=model, tools=[weather])
    await Runner.run(agent, "weather?", tracer_provider=otel.tp)
    assert otel.tree() == snapshot(
        [
            {
                "name": "invoke_agent forecaster",
                "attrs": {
                    "lovia.run.outcome": "completed",
                    "lovia.run.turns": 2,
                    "lovia.run.finish_reason": "stop",
                },
                "children": [
                    {
                        "name": "lovia.turn",
                        "children": [
                            {"name": "lovia.view"},
                            {
                                "name": "chat scripted",
                                "kind": "CLIENT",
                                "attrs": {"gen_ai.response.finish_reasons": ["tool_calls"]},
                            },
                            {
                                "name": "execute_tool weather",
                                "attrs": {"gen_ai.tool.name": "weather"},
                            },
                            {
                                "name": "execute_tool weather",
                                "attrs": {"gen_ai.tool.name": "weather"},
                            },
                        ],
                    },
                    {
                        "name": "lovia.turn",
                        "children": [
                            {"name": "lovia.view"},
                            {
                                "name": "chat scripted",
                                "kind": "CLIENT",
                                "attrs": {"gen_ai.response.finish_reasons": ["stop"]},
                            },
                        ],
                    },
                ],
            }
        ]
    )


async def test_handoff(otel: Otel) -> None:
    billing = Agent(name="billing", model=ScriptedModel(["refund issued"]))
    triage = Agent(
        name="triage", model=ScriptedModel([call("transfer_to_billing")]), handoffs=[billing]
    )
    result = await Runner.run(triage, "refund please", tracer_provider=otel.tp)
    assert result.output == "refund issued"
    assert otel.tree() == snapshot(
        [
            {
                "name": "invoke_agent triage",
                "attrs": {
                    "lovia.run.outcome": "completed",
                    "lovia.run.turns": 2,
                    "lovia.run.finish_reason": "stop",
                },
                "children": [
                    {
                        "name": "lovia.turn",
                        "children": [
                            {"name": "lovia.view"},
                            {
                                "name": "chat scripted",
                                "kind": "CLIENT",
                                "attrs": {"gen_ai.response.finish_reasons": ["tool_calls"]},
                            },
                            {
                                "name": "execute_tool transfer_to_billing",
                                "attrs": {
                                    "gen_ai.tool.name": "transfer_to_billing",
                                    "lovia.tool.started": False,
                                },
                            },
                        ],
                    },
                    {"name": "lovia.handoff", "attrs": {"lovia.handoff.to_agent": "billing"}},
                    {
                        "name": "lovia.turn",
                        "children": [
                            {"name": "lovia.view"},
                            {
                                "name": "chat scripted",
                                "kind": "CLIENT",
                                "attrs": {"gen_ai.response.finish_reasons": ["stop"]},
                            },
                        ],
                    },
                ],
            }
        ]
    )


async def test_guardrail_trip(otel: Otel) -> None:
    def no_secrets(ctx: Any, value: Any) -> str | None:
        return "mentions a secret" if "secret" in str(value) else None

    agent = Agent(name="guarded", model=ScriptedModel([]), input_guardrails=[no_secrets])
    with pytest.raises(GuardrailTripped):
        await Runner.run(agent, "tell me the secret", tracer_provider=otel.tp)
    assert otel.tree(events=True) == snapshot(
        [
            {
                "name": "invoke_agent guarded",
                "status": "ERROR",
                "attrs": {
                    "error.type": "GuardrailTripped",
                    "lovia.run.outcome": "failed",
                    "lovia.run.turns": 0,
                    "lovia.run.finish_reason": "guardrail",
                },
                "events": ["lovia.guardrail.tripped"],
                "children": [
                    {
                        "name": "lovia.guardrail no_secrets",
                        "status": "ERROR",
                        "attrs": {
                            "error.type": "GuardrailTripped",
                            "lovia.guardrail.tripped": True,
                        },
                    }
                ],
            }
        ]
    )


class RetryingModel(ScriptedModel):
    """Announces one retry (rate limited) before its scripted answer."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamItem]:  # type: ignore[override]
        yield RetryNotice(attempt=1, error=RateLimited("slow down", retry_after=0.0), delay=0.0)
        async for item in super().stream(request):
            yield item


async def test_provider_retry_is_an_event_on_one_chat_span(otel: Otel) -> None:
    agent = Agent(name="patient", model=RetryingModel(["fine"]))
    await Runner.run(agent, "hi", tracer_provider=otel.tp)
    assert otel.tree(events=True) == snapshot(
        [
            {
                "name": "invoke_agent patient",
                "attrs": {
                    "lovia.run.outcome": "completed",
                    "lovia.run.turns": 1,
                    "lovia.run.finish_reason": "stop",
                },
                "children": [
                    {
                        "name": "lovia.turn",
                        "children": [
                            {"name": "lovia.view"},
                            {
                                "name": "chat scripted",
                                "kind": "CLIENT",
                                "attrs": {"gen_ai.response.finish_reasons": ["stop"]},
                                "events": ["lovia.provider.retry"],
                            },
                        ],
                    }
                ],
            }
        ]
    )
    (chat,) = [s for s in otel.spans() if s.name.startswith("chat ")]
    (retry,) = chat.events
    assert retry.attributes == {
        "error.type": "RateLimited",
        "lovia.retry.message": "RateLimited",  # the error's text is content: capture is off
        "lovia.retry.attempt": 1,
        "lovia.retry.delay_s": 0.0,
    }


async def test_retry_message_carries_the_error_text_when_capture_is_on(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    await Runner.run(Agent(name="p", model=RetryingModel(["fine"])), "hi", tracer_provider=otel.tp)
    (chat,) = [s for s in otel.spans() if s.name.startswith("chat ")]
    assert chat.events[0].attributes["lovia.retry.message"] == "slow down"


async def test_cancellation_closes_open_spans_with_the_error(otel: Otel) -> None:
    token = CancelToken()

    @tool
    async def slow() -> str:
        """Slow."""
        token.cancel("user pressed stop")
        await asyncio.sleep(10)
        return "never"

    agent = Agent(name="slowpoke", model=ScriptedModel([call("slow")]), tools=[slow])
    with pytest.raises(RunCancelled):
        await Runner.run(agent, "go", cancel_token=token, tracer_provider=otel.tp)
    assert otel.tree() == snapshot(
        [
            {
                "name": "invoke_agent slowpoke",
                "status": "ERROR",
                "attrs": {
                    "error.type": "RunCancelled",
                    "lovia.run.outcome": "cancelled",
                    "lovia.run.turns": 1,
                    "lovia.run.finish_reason": "cancelled",
                },
                "children": [
                    {
                        "name": "lovia.turn",
                        "status": "ERROR",
                        "attrs": {"error.type": "RunCancelled"},
                        "children": [
                            {"name": "lovia.view"},
                            {
                                "name": "chat scripted",
                                "kind": "CLIENT",
                                "attrs": {"gen_ai.response.finish_reasons": ["tool_calls"]},
                            },
                            {
                                "name": "execute_tool slow",
                                "status": "ERROR",
                                "attrs": {"error.type": "RunCancelled", "gen_ai.tool.name": "slow"},
                            },
                        ],
                    }
                ],
            }
        ]
    )


class EvictOldest(FullView):
    """A tiny strategy that reports one eviction on every build after the first."""

    def new_state(self) -> dict[str, int]:  # type: ignore[override]
        return {"builds": 0}

    async def build(self, inp: ViewInput, state: Any, summarize: Any) -> BuiltView:
        built = await super().build(inp, state, summarize)
        state["builds"] += 1
        if state["builds"] == 1:
            return built
        first = built.messages[0].id
        return BuiltView(
            messages=built.messages,
            order=built.order,
            compactions=[("evict", (first,))],
            summary="(summary)",
        )


async def test_compaction_is_a_leaf_under_the_view(otel: Otel) -> None:
    agent = Agent(
        name="compact",
        model=ScriptedModel([call("weather", city="Rome"), "done"]),
        tools=[weather],
        context=EvictOldest(),
    )
    await Runner.run(agent, "go", tracer_provider=otel.tp)
    assert otel.tree() == snapshot(
        [
            {
                "name": "invoke_agent compact",
                "attrs": {
                    "lovia.run.outcome": "completed",
                    "lovia.run.turns": 2,
                    "lovia.run.finish_reason": "stop",
                },
                "children": [
                    {
                        "name": "lovia.turn",
                        "children": [
                            {"name": "lovia.view"},
                            {
                                "name": "chat scripted",
                                "kind": "CLIENT",
                                "attrs": {"gen_ai.response.finish_reasons": ["tool_calls"]},
                            },
                            {
                                "name": "execute_tool weather",
                                "attrs": {"gen_ai.tool.name": "weather"},
                            },
                        ],
                    },
                    {
                        "name": "lovia.turn",
                        "children": [
                            {
                                "name": "lovia.view",
                                "attrs": {"gen_ai.conversation.compacted": True},
                                "children": [
                                    {
                                        "name": "lovia.compaction",
                                        "attrs": {"lovia.compaction.kind": "evict"},
                                    }
                                ],
                            },
                            {
                                "name": "chat scripted",
                                "kind": "CLIENT",
                                "attrs": {
                                    "gen_ai.response.finish_reasons": ["stop"],
                                    "gen_ai.conversation.compacted": True,
                                },
                            },
                        ],
                    },
                ],
            }
        ]
    )


async def test_resumed_run_links_to_the_crashed_attempt(otel: Otel) -> None:
    store = MemoryStore()
    model = ScriptedModel([call("weather", city="Lima"), RateLimited("try later"), "sunny"])
    agent = Agent(name="resumable", model=model, tools=[weather])
    with pytest.raises(RateLimited):
        await Runner.run(agent, "go", run_id="run-1", checkpointer=store, tracer_provider=otel.tp)
    first = next(s for s in otel.spans() if s.name == "invoke_agent resumable")
    otel.exporter.clear()
    result = await Runner.run(
        agent, None, run_id="run-1", checkpointer=store, tracer_provider=otel.tp
    )
    assert result.output == "sunny"
    assert otel.tree(
        ("lovia.run.resumed", "lovia.run.outcome", "lovia.checkpoint.kind", "error.type"),
        events=True,
    ) == snapshot(
        [
            {
                "name": "invoke_agent resumable",
                "attrs": {"lovia.run.resumed": True, "lovia.run.outcome": "completed"},
                "events": ["lovia.checkpoint.write", "lovia.checkpoint.write"],
                "children": [
                    {
                        "name": "lovia.turn",
                        "children": [
                            {"name": "lovia.view"},
                            {"name": "chat scripted", "kind": "CLIENT"},
                        ],
                    }
                ],
            }
        ]
    )
    # fast checkpoint writes are span events on the turn / run span, not spans
    kinds = {
        s.name: [e.attributes["lovia.checkpoint.kind"] for e in s.events if e.attributes]
        for s in otel.spans()
        if s.events
    }
    # the resume first records its attempt (who took the run over, how the last one
    # ended); the final answer is written with the run's end, in one transaction
    assert kinds == {"invoke_agent resumable": ["attempt", "complete"]}
    second = next(s for s in otel.spans() if s.name == "invoke_agent resumable")
    assert second.context.trace_id != first.context.trace_id


async def test_resumed_run_span_links_to_the_first_attempt(otel: Otel) -> None:
    store = MemoryStore()
    model = ScriptedModel([RateLimited("try later"), "sunny"])
    agent = Agent(name="resumable", model=model)
    with pytest.raises(RateLimited):
        await Runner.run(agent, "go", run_id="run-2", checkpointer=store, tracer_provider=otel.tp)
    first = next(s for s in otel.spans() if s.name == "invoke_agent resumable")
    otel.exporter.clear()
    await Runner.run(agent, None, run_id="run-2", checkpointer=store, tracer_provider=otel.tp)
    second = next(s for s in otel.spans() if s.name == "invoke_agent resumable")
    assert [(lk.context.trace_id, lk.context.span_id) for lk in second.links] == [
        (first.context.trace_id, first.context.span_id)
    ]
    assert second.context.trace_id != first.context.trace_id
