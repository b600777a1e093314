"""The control examples run offline (scripted models) and print what they promise."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXPECT = {
    "10_structured_output.py": ["ACME: 100.00 EUR (turns: 2)", "repair message:"],
    "11_handoffs.py": ["handoff: triage -> billing", "final agent: billing"],
    "12_guardrails.py": [
        "tripped: input guardrail 'no_card_numbers'",
        "tripped: output guardrail 'no_internal_urls'",
        "session c2 entries: 0",
    ],
    "13_approvals.py": ["waiting for approval: refund", "after approval: Refunded 80.00"],
    "29_hostile_output.py": [
        "model saw: Tool 'deploy' failed: RuntimeError: auth failed for prod with ***",
        "500 calls asked for, 0 ran",
        "modes: .lovia 700, db 600",
        "-> page of https://evil.example: \\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2Jgotcha",
        "echo\\u202egnp.exe({})",
        "resumed: A1 charged. (charge ran 1 time)",
    ],
    "42_run_outcomes.py": [
        "report: 'report written', cost $0.005980, unpriced calls: 1",
        "span invoke_agent manager: outcome=completed own=$0.005600 total=$0.005980 unpriced=1",
        "span invoke_agent manager: outcome=cancelled",
        "metric lovia.runs agent=manager cancelled nested=False: 1",
        "metric lovia.runs agent=helper completed nested=True: 1",
        "metric lovia.cost agent=manager  nested=True: 0.00038",
        "metric lovia.cost.unpriced agent=manager  nested=True: 1",
    ],
    "43_prices.py": [
        "ollama:llama3.3:70b: cost $0.000000, unpriced calls: 0",
        "openai:ft:gpt-4o-mini:acme:support:abc123: cost $0.006000, unpriced calls: 0",
        "vllm:in-house-7b: cost ?, unpriced calls: 1",
        "span chat llama3.3:70b: source=overrides",
        "span chat in-house-7b: source=unknown",
        "bad file: the price file 'bad.yaml', entry 1: openai:tuned: input_per_mtok is -1",
    ],
    "45_spend_limits.py": [
        "run 3 for globex: ok",
        "run 4 for acme: ok",
        "run 5 for acme: stopped: spend limit $0.5 per day for tenant=acme reached ($0.6000",
        "acme completed runs: 3, cost $0.60",
        "total for tenant=acme: 4 runs, 600 tokens, $0.6000",
        "changed 4 of 5 runs; total change -$0.4000",
    ],
    "44_content_by_reference.py": [
        "EVENT_ONLY: content keys on spans: []",
        "log event gen_ai.client.inference.operation.details",
        "log event lovia.tool.call.result",
        "resolved: turn 2, 3 messages, verified=True",
        "last message the model saw: 'A1: shipped on Monday'",
    ],
    "64_fleet_store.py": [
        "worker: pool 1..4, statement cache 0, listen off, application_name 'lovia': at most 4",
        "api: pool 1..2, statement cache 100, listen on, application_name 'api': at most 3",
        "fleet: 20 machines x 2 workers: 160 connections to PgBouncer",
        "fleet: 4 API processes: 12 connections straight to PostgreSQL",
        "typo: unknown option 'statment_cache_size' in the PostgreSQL store URL",
        "hint: lovia's options: application_name, command_timeout",
    ],
    "14_budget_cancel.py": [
        "budget: max_tool_calls hit at turn 2",
        "cancelled after 0.",
        "resumed:",
        "mailbox: ['note:",
    ],
}


@pytest.mark.parametrize("name", sorted(EXPECT))
def test_example_runs_offline(name: str, tmp_path: Path) -> None:
    script = EXAMPLES / name
    doc = script.read_text()
    assert f"Run: python examples/{name}" in doc.split('"""')[1]
    env = {k: v for k, v in os.environ.items() if k != "LOVIA_MODEL"}
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for needle in EXPECT[name]:
        assert needle in proc.stdout, proc.stdout
