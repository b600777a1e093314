"""lovia's spans in a real GenAI-aware receiver: Arize Phoenix, over OTLP/HTTP.

Phoenix reads the OpenTelemetry GenAI conventions itself (``gen_ai.operation.name`` gives
the span kind, ``gen_ai.usage.*`` the token counts, ``gen_ai.input.messages`` /
``gen_ai.output.messages`` the conversation), so what it shows is what a user of such a
backend sees. ``scripts/ci-install-phoenix.sh`` (run by ``.ci/run``) installs it into
``$LOVIA_PHOENIX_HOME`` (default ``~/.cache/lovia-phoenix``). Phoenix's OTLP gRPC server
listens on every interface whatever its host setting, so the whole exchange runs in one
subprocess inside a private network namespace (``unshare -n``, loopback only):
``phoenix_driver.py`` starts Phoenix once, runs a two-turn agent twice per content-capture
mode (its tool works, then raises) and prints what Phoenix stored. Without the install (or without
``unshare``) these tests skip, unless ``CI=true``: then they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import phoenix_driver as D
import pytest

import lovia

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

HOME = Path(os.environ.get("LOVIA_PHOENIX_HOME", Path.home() / ".cache" / "lovia-phoenix"))
PHOENIX = HOME / "venv" / "bin" / "phoenix"
DRIVER = Path(__file__).with_name("phoenix_driver.py")
RUN_TIMEOUT_S = 480
KINDS = {
    "invoke_agent courier": "AGENT",
    "lovia.turn": "UNKNOWN",
    "lovia.view": "UNKNOWN",
    "chat scripted": "LLM",
    "execute_tool track": "TOOL",
}
NO_SPAN_CONTENT = ("EVENT_ONLY", "REFERENCE", "NO_CONTENT")
CONTENT_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "tool.parameters", "input.")
CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _missing() -> str | None:
    """Why the exchange cannot run here, or None."""
    if not os.access(PHOENIX, os.X_OK):
        return f"no Phoenix in {HOME}: run scripts/ci-install-phoenix.sh"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "unshare or ip (util-linux, iproute2) not found"
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot make a private network namespace: {probe.stderr.strip()}"
    return None


@pytest.fixture(scope="module")
def stored() -> dict[str, Any]:
    """The driver's JSON: per mode, lovia's spans and usage and what Phoenix stored."""
    missing = _missing()
    if missing is not None:
        if _in_ci():
            pytest.fail(missing)
        pytest.skip(missing)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    src = str(Path(lovia.__file__).resolve().parents[1])  # the lovia under test, not another
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    script = 'ip link set lo up && exec "$0" "$1" "$2"'
    proc = subprocess.run(
        ["unshare", "-n", "sh", "-c", script, sys.executable, str(DRIVER), str(PHOENIX)],
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
    assert proc.returncode == 0, f"driver failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout)


def _run(stored: dict[str, Any], mode: str, run: str = "found") -> dict[str, Any]:
    return stored["modes"][mode][run]


def _by_kind(spans: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return sorted((s for s in spans if s["span_kind"] == kind), key=lambda s: s["start_time"])


EVERY_RUN = pytest.mark.parametrize(("mode", "run"), [(m, r) for m in D.MODES for r in D.RUNS])


@EVERY_RUN
def test_every_span_is_stored_with_its_parent(stored: dict[str, Any], mode: str, run: str) -> None:
    lovia, phoenix = _run(stored, mode, run)["lovia"], _run(stored, mode, run)["phoenix"]
    assert lovia["flushed"] is True
    assert lovia["output"] == (D.ANSWER if run == "found" else D.APOLOGY)
    ours = {s["span_id"]: (s["name"], s["parent_id"], s["trace_id"]) for s in lovia["spans"]}
    theirs = {
        s["context"]["span_id"]: (s["name"], s["parent_id"], s["context"]["trace_id"])
        for s in phoenix
    }
    assert len(phoenix) == len(ours) == 8  # run, 2 turns, 2 views, 2 chats, 1 tool
    assert theirs == ours


@EVERY_RUN
def test_kinds_and_tree(stored: dict[str, Any], mode: str, run: str) -> None:
    spans = _run(stored, mode, run)["phoenix"]
    assert {s["name"]: s["span_kind"] for s in spans} == KINDS
    by_id = {s["context"]["span_id"]: s for s in spans}
    (agent,) = _by_kind(spans, "AGENT")
    assert agent["parent_id"] is None
    llm, tools = _by_kind(spans, "LLM"), _by_kind(spans, "TOOL")
    assert len(llm) == 2 and len(tools) == 1
    for span in (*llm, *tools):
        turn = by_id[span["parent_id"]]
        assert turn["name"] == "lovia.turn" and turn["parent_id"] == agent["context"]["span_id"]
    # the tool ran in the first turn, under the same turn span as the call asking for it
    assert tools[0]["parent_id"] == llm[0]["parent_id"] != llm[1]["parent_id"]
    assert tools[0]["attributes"]["tool.name"] == "track"
    failed = [(s["name"], s["status_message"]) for s in spans if s["status_code"] == "ERROR"]
    # a tool's error is the tool span's alone (the model got it and answered), and its
    # status says the error type only, in every mode: the error text is content
    assert failed == ([] if run == "found" else [("execute_tool track", "LookupError")])
    assert tools[0]["attributes"].get("error.type") == (None if run == "found" else "LookupError")


@EVERY_RUN
def test_token_counts_equal_lovias_usage(stored: dict[str, Any], mode: str, run: str) -> None:
    usage, spans = _run(stored, mode, run)["lovia"]["usage"], _run(stored, mode, run)["phoenix"]
    llm = [s["attributes"] for s in _by_kind(spans, "LLM")]
    prompt = [a["llm.token_count.prompt"] for a in llm]
    completion = [a["llm.token_count.completion"] for a in llm]
    assert [a["llm.token_count.total"] for a in llm] == [
        p + c for p, c in zip(prompt, completion, strict=True)
    ]
    assert (sum(prompt), sum(completion)) == (usage["input"], usage["output"])
    if run == "found":  # scripted usage; the other run's is the fake model's estimate
        assert prompt == [u.input_tokens for u in D.USAGES]
        assert completion == [u.output_tokens for u in D.USAGES]
        assert [a["llm.token_count.prompt_details.cache_read"] for a in llm] == [0, 64]
        assert usage == {"input": 330, "output": 44, "cache_read": 64}
    # The run's totals are not under gen_ai.usage.*: Phoenix must not count them again.
    (agent,) = _by_kind(spans, "AGENT")
    assert not [k for k in agent["attributes"] if k.startswith(("llm.token_count", "gen_ai.usage"))]
    assert agent["attributes"]["lovia.run.usage.input_tokens"] == usage["input"]
    assert agent["attributes"]["lovia.run.usage.output_tokens"] == usage["output"]


@pytest.mark.parametrize("mode", NO_SPAN_CONTENT)
@pytest.mark.parametrize("run", D.RUNS)
def test_no_content_reaches_phoenix(stored: dict[str, Any], mode: str, run: str) -> None:
    spans = _run(stored, mode, run)["phoenix"]
    wire = json.dumps(spans, ensure_ascii=False)
    assert [c for c in D.CONTENT if c in wire] == []
    assert [k for s in spans for k in s["attributes"] if k.startswith(CONTENT_PREFIXES)] == []
    assert [k for s in spans for k in s["attributes"] if k in CONTENT_KEYS] == []


def test_event_only_sends_the_content_as_log_events(stored: dict[str, Any]) -> None:
    keys = _run(stored, "EVENT_ONLY")["lovia"]["event_keys"]
    assert len(keys) == 4  # one per model call, one per tool call's arguments and result
    assert set().union(*map(set, keys)) & CONTENT_KEYS == CONTENT_KEYS
    for other in ("SPAN_ONLY", "REFERENCE", "NO_CONTENT"):
        assert _run(stored, other)["lovia"]["event_keys"] == []


def test_reference_mode_shows_where_the_content_is(stored: dict[str, Any]) -> None:
    for span in _by_kind(_run(stored, "REFERENCE")["phoenix"], "LLM"):
        attrs = span["attributes"]
        run, view = attrs["lovia.run.id"], attrs["lovia.view.hash"]
        assert attrs["lovia.content.ref"] == f"lovia:run/{run}/view/{view}"
        first, last = attrs["lovia.content.entries"].split("..")
        assert first.startswith("e_") and last.startswith("e_")


SYSTEM_AND_USER = {
    "llm.input_messages.0.message.role": "system",
    "llm.input_messages.0.message.content": D.INSTRUCTIONS,
    "llm.input_messages.1.message.role": "user",
    "llm.input_messages.1.message.content": D.PROMPT,
}
ASKED = "llm.output_messages.0.message.tool_calls.0.tool_call.function"


def test_span_only_shows_the_conversation(stored: dict[str, Any]) -> None:
    spans = _run(stored, "SPAN_ONLY")["phoenix"]
    first, second = (s["attributes"] for s in _by_kind(spans, "LLM"))
    assert {k: first.get(k) for k in SYSTEM_AND_USER} == SYSTEM_AND_USER
    assert first[f"{ASKED}.name"] == "track"
    assert json.loads(first[f"{ASKED}.arguments"]) == {"order_id": D.ARGUMENT}
    assert first["llm.output_messages.0.message.finish_reason"] == "tool_calls"
    assert {k: second.get(k) for k in SYSTEM_AND_USER} == SYSTEM_AND_USER
    assert second["llm.input_messages.3.message.role"] == "tool"
    assert second["llm.input_messages.3.message.content"] == D.TOOL_RESULT
    assert second["llm.output_messages.0.message.content"] == D.ANSWER
    assert second["llm.output_messages.0.message.role"] == "assistant"
    (tool_span,) = _by_kind(spans, "TOOL")
    assert tool_span["attributes"]["output.value"] == D.TOOL_RESULT
    assert tool_span["attributes"]["tool.parameters.order_id"] == D.ARGUMENT


def test_span_only_shows_the_tool_error_the_model_saw(stored: dict[str, Any]) -> None:
    spans = _run(stored, "SPAN_ONLY", "failed")["phoenix"]
    _, second = (s["attributes"] for s in _by_kind(spans, "LLM"))
    assert second["llm.input_messages.3.message.role"] == "tool"
    assert D.FAILURE in second["llm.input_messages.3.message.content"]
    assert second["llm.output_messages.0.message.content"] == D.APOLOGY
    (tool_span,) = _by_kind(spans, "TOOL")
    assert tool_span["attributes"]["tool.parameters.order_id"] == D.LOST
    assert "output.value" not in tool_span["attributes"]  # an error is no result
