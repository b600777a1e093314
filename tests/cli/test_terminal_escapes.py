"""Stored text is hostile: nothing the model, a tool or a name put in the store can send
a control sequence to the terminal of whoever runs ``lovia show/replay/runs/trace``.

The attacks are the ones a recorded run really carried: an OSC 52 clipboard write, a
screen clear, an OSC 8 hidden hyperlink, a window retitle, BEL, a lone CR that
overwrites the line, 8-bit C1 CSI, and a tool named ``echo<U+202E>gnp.exe`` (reads
"echoexe.png" when printed raw). The output shows each as a visible escape; ``--json``
keeps the exact values.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from lovia import Agent, Runner, tool
from lovia._display import safe_json, safe_name, safe_text
from lovia.cli._out import Out
from lovia.cli._trace import tree_lines
from lovia.replay._spans import SpanRow
from lovia.stores import store
from lovia.telemetry import configure
from lovia.testing import ScriptedModel, call

from .conftest import lovia

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"
CLEAR = "\x1b[2J\x1b[H"
LINK = "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"
TITLE = "\x1b]0;owned\x07"
OVERWRITE = "rm -rf ~\rls -l   "
C1_CSI = "\x9b31m"
BIDI_TOOL = "echo\u202egnp.exe"
EMOJI = "\U0001f468\u200d\U0001f469"  # a joiner inside text is kept
ANSWER = f"done {CLIPBOARD}{CLEAR}{LINK}{TITLE}{OVERWRITE}{C1_CSI}\u2067x\u2069 {EMOJI}"
RUN_ID = "run-\u202eevil\u200b-\x9b"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\u2067", "\u200b")


@tool
def fetch_page() -> str:
    """Fetch a page (returns hostile text)."""
    return f"page {CLIPBOARD}{TITLE}\r\nnext line"


async def _record(url: str) -> None:
    telemetry = configure(
        service_name="esc", exporter="local", local_path=url, metrics=False, set_global=False
    )
    db = store(url)
    model = ScriptedModel(
        [
            [call("fetch_page", id="c1"), call(BIDI_TOOL, id="c2")],
            ANSWER,
        ]
    )
    agent = Agent(name="support", model=model, tools=[fetch_page])
    await Runner.run(
        agent,
        f"hi {CLEAR}",
        run_id=RUN_ID,
        checkpointer=db,
        session=db,
        session_id="s\u202e1",
        tracer_provider=telemetry.tracer_provider,
    )
    telemetry.shutdown()
    await db.aclose()


@pytest.fixture(scope="module")
def hostile_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('esc') / 'lovia.db'}"
    asyncio.run(_record(url))
    return url


@pytest.mark.parametrize(
    "args",
    [
        ["show", RUN_ID],
        ["show", RUN_ID, "--full"],
        ["replay", RUN_ID],
        ["replay", RUN_ID, "--full"],
        ["runs"],
        ["trace", RUN_ID],
        ["show", "no-such-\x1b]52;c;eA==\x07-run"],  # an error message quoting input
    ],
    ids=["show", "show-full", "replay", "replay-full", "runs", "trace", "error"],
)
def test_no_raw_control_character_reaches_the_terminal(hostile_url: str, args: list[str]) -> None:
    res = lovia(*args, "--store", hostile_url)
    for raw in RAW:
        assert raw not in res.out and raw not in res.err, (raw, args)
    assert "\r" not in res.out.replace("\r\n", "\n")
    shown = res.out + res.err
    assert any(e in shown for e in ("\\x9b", "\\x07", "\\u202e"))  # shown, not dropped
    if args[0] not in ("runs", "trace"):
        assert "\\x1b]52;c;" in shown


def test_bidi_name_is_shown_visibly(hostile_url: str) -> None:
    res = lovia("show", RUN_ID, "--store", hostile_url)
    assert res.code == 0, res.err
    assert "echo\\u202egnp.exe" in res.out
    assert "run-\\u202eevil\\u200b-\\x9b" in res.out  # the run id in the header
    assert "\U0001f468\u200d\U0001f469" in res.out  # an emoji's joiner in text is kept
    runs = lovia("runs", "--store", hostile_url)
    assert "run-\\u202eevil\\u200b-\\x9b" in runs.out and "s\\u202e1" in runs.out
    header, row = runs.out.splitlines()[:2]
    assert header.index("AGENT") == row.index("support")  # the escaped id is padded as shown


def test_json_output_keeps_the_exact_values(hostile_url: str) -> None:
    res = lovia("show", RUN_ID, "--json", "--store", hostile_url)
    assert res.code == 0, res.err
    for raw in RAW:
        assert raw not in res.out
    data = json.loads(res.out)
    assert data["run"]["run_id"] == RUN_ID
    texts = [e.get("text") for e in data["entries"] if e["type"] == "text"]
    assert texts == [ANSWER]
    names = [e["name"] for e in data["entries"] if e["type"] == "tool_call"]
    assert names == ["fetch_page", BIDI_TOOL]


def test_pretty_output_keeps_its_own_styles_only() -> None:
    buf = io.StringIO()
    out = Out(buf, pretty=True)
    out.line(out.style("ok", "green") + " " + out.style(f"x{CLEAR}\x1b[8mhidden", "bold", "red"))
    text = buf.getvalue()
    assert text.count("\x1b") == 4  # green+reset, bold;red+reset: nothing from the content
    assert "\\x1b[2J" in text and "\\x1b[8m" in text


def test_trace_span_names_and_errors_are_escaped() -> None:
    span = SpanRow(
        span_id="1",
        parent_id=None,
        trace_id="t",
        name=f"execute_tool {BIDI_TOOL}\n",
        start=0.0,
        end=1.0,
        attributes={},
        error=f"boom {TITLE}",
    )
    buf = io.StringIO()
    out = Out(buf, pretty=False)
    for line in tree_lines([span], out):
        out.line(line)
    text = buf.getvalue()
    assert "execute_tool echo\\u202egnp.exe\\x0a" in text and "boom \\x1b]0;owned\\x07" in text
    assert not any(raw in text for raw in RAW)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\x1bb", "a\\x1bb"),
        ("bel\x07", "bel\\x07"),
        ("c1\x9b", "c1\\x9b"),
        ("cr\roverwrite", "cr\\x0doverwrite"),
        ("crlf\r\nok", "crlf\r\nok"),
        ("tab\tok\n", "tab\tok\n"),
        ("del\x7f", "del\\x7f"),
        ("rlo\u202e", "rlo\\u202e"),
        ("iso\u2066x\u2069", "iso\\u2066x\\u2069"),
        ("zw\u200b\ufeff", "zw\\u200b\\ufeff"),
        ("lone\udce9", "lone\\udce9"),
        ("ok é 日本 \U0001f600", "ok é 日本 \U0001f600"),
    ],
)
def test_safe_text(raw: str, shown: str) -> None:
    assert safe_text(raw) == shown
    assert safe_text(shown) == shown  # idempotent: an escape is plain text


def test_safe_name_escapes_every_invisible_character() -> None:
    assert safe_name("ad\u200dmin\u200c\n\t\r") == "ad\\u200dmin\\u200c\\x0a\\x09\\x0d"
    assert safe_name("tag\U000e0041") == "tag\\U000e0041"
    assert safe_name("plain_name-1.2") == "plain_name-1.2"


def test_safe_json_stays_the_same_json() -> None:
    value = {"k": f"{C1_CSI}\u202e\u2028\ufeff{CLEAR}"}
    text = safe_json(json.dumps(value, ensure_ascii=False))
    assert json.loads(text) == value
    assert not any(c in text for c in "\x9b\u202e\u2028\ufeff\x1b")


def test_piped_output_has_no_style_and_no_escape(tmp_path: Path) -> None:
    buf = io.StringIO()
    out = Out(buf, pretty=False)
    out.table(["A", "B"], [[f"x{CLEAR}", "y"]])
    assert "\x1b" not in buf.getvalue() and "x\\x1b[2J\\x1b[H  y" in buf.getvalue()
