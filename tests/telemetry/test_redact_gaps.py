"""Redaction gaps: a key with ``:`` or ``!`` in it is masked whole, secrets in any part
of a URL are masked wherever URLs are shown, and a key in a tool's error text never
reaches the model or the store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lovia import Agent, Runner, tool
from lovia._redact import MASK, redact, redact_error, redact_url, remember
from lovia.errors import LoviaError, UserError
from lovia.stores import store
from lovia.testing import ScriptedModel, call
from lovia.transcript import ToolResultEntry
from lovia.web import redact_url as web_redact_url

SRC = Path(__file__).resolve().parents[2] / "src"
COLON_KEY = "lvk-7c1e0f9a:b2d4e6f8a0c2e4f6"
BANG_KEY = "lvk-5d3b1f9e!c7a5e3d1b9f7d5b3"
TAILS = ("b2d4e6f8a0c2e4f6", "c7a5e3d1b9f7d5b3")


@pytest.fixture(autouse=True)
def known_keys() -> None:
    remember(COLON_KEY)
    remember(BANG_KEY)


@pytest.mark.parametrize(
    "text",
    [
        f"Incorrect API key provided: {COLON_KEY}.",
        f"key={BANG_KEY}&next=1",
        f'{{"error": "bad key {BANG_KEY}"}}',
        f"Authorization: Bearer {COLON_KEY}",
        # the same shapes when lovia never saw the key
        "Bearer abcd1234:efgh5678!ijkl",
        "x-api-key: ab12cd34:ef56!gh78ij90",
        "sk-proj-abcdef12:tail!more",
    ],
)
def test_key_with_colon_or_bang_is_masked_whole(text: str) -> None:
    shown = redact(text)
    assert MASK in shown
    for tail in (*TAILS, "efgh5678", "ijkl", "ef56", "gh78ij90", "tail!more"):
        assert tail not in shown, shown


def test_redact_error_masks_the_tail_in_the_chain() -> None:
    try:
        try:
            raise ValueError(f"upstream echoed {COLON_KEY}")
        except ValueError as inner:
            raise LoviaError(f"call failed: {BANG_KEY}", hint=f"check {COLON_KEY}") from inner
    except LoviaError as exc:
        redact_error(exc)
        text = f"{exc.message} {exc.hint} {exc.__cause__}"
    assert not any(t in text for t in TAILS) and "lvk-" not in text


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:hunter2@db:5432/lovia", "postgresql://u:***@db:5432/lovia"),
        (
            "postgresql://u@db/lovia?password=hunter2&sslmode=require",
            "postgresql://u@db/lovia?password=***&sslmode=require",
        ),
        (
            "postgresql://db/lovia?sslmode=verify-full&sslpassword=k3y!pw&application_name=x",
            "postgresql://db/lovia?sslmode=verify-full&sslpassword=***&application_name=x",
        ),
        (
            "https://api.example/v1?key=AIzaSyA-1:2&alt=sse",
            "https://api.example/v1?key=***&alt=sse",
        ),
        ("https://h/x?Token=t0k&PASS=p&secret=s", "https://h/x?Token=***&PASS=***&secret=***"),
        ("redis://:p%40ss@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("sqlite:///.lovia/lovia.db", "sqlite:///.lovia/lovia.db"),
        ("https://h/search?q=password&page=2", "https://h/search?q=password&page=2"),
    ],
)
def test_url_secrets_are_masked(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert web_redact_url(url) == shown
    assert redact(f"cannot connect to {url} (refused)") == f"cannot connect to {shown} (refused)"


def test_keyword_connection_string_password_is_masked() -> None:
    assert redact("host=db password=hunter2 dbname=x") == "host=db password=*** dbname=x"


def test_cli_error_line_masks_a_store_url_password() -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC), "NO_COLOR": "1"}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "lovia.cli",
            "runs",
            "--store",
            "nosuch://u:hunter2@h/db?password=pw2&token=tk3",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert res.returncode == 2 and "error: " in res.stderr
    for secret in ("hunter2", "pw2", "tk3"):
        assert secret not in res.stderr and secret not in res.stdout


def test_store_error_masks_the_url() -> None:
    with pytest.raises(UserError) as info:
        store("nosuch://u:hunter2@h/db?password=pw2")
    assert "hunter2" not in info.value.message and "pw2" not in info.value.message


@tool
def deploy(target: str) -> str:
    """Deploy somewhere (fails, echoing a key)."""
    raise RuntimeError(f"auth failed for {target} with key {COLON_KEY}")


async def test_key_in_a_tool_error_reaches_neither_the_model_nor_the_store(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    db = store(url)
    model = ScriptedModel([call("deploy", target="prod"), "gave up"])
    result = await Runner.run(
        Agent(name="ops", model=model, tools=[deploy]), "deploy", checkpointer=db
    )
    await db.aclose()
    errors = [e for e in result.entries if isinstance(e, ToolResultEntry)]
    assert len(errors) == 1 and errors[0].is_error
    assert "RuntimeError: auth failed for prod with key ***" in errors[0].content
    sent = str(model.requests[-1])
    assert "lvk-" not in sent and TAILS[0] not in sent
    raw = (tmp_path / "l.db").read_bytes()
    for wal in tmp_path.glob("l.db-wal"):
        raw += wal.read_bytes()
    assert COLON_KEY[:8].encode() not in raw and TAILS[0].encode() not in raw
