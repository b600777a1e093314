"""Eval reports in the browser: each case's recorded (baseline) answer next to the
candidate's, with verdicts and scores; reports read by name from the reports folder
only; hostile report text shown, never obeyed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from lovia import evals
from lovia.evals._report import to_json
from lovia.stores import store
from lovia.testing import FunctionModel
from lovia.web import create_app
from lovia.web._evals import ANSWER_LIMIT

from .conftest import run_async

LOCAL = "http://127.0.0.1:8765"
HOSTILE = "\x1b[31mred\u202e <script>window.__x=1</script>\n" + "y" * (ANSWER_LIMIT + 50)


@pytest.fixture
def report_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from evals.conftest import record_tools  # the eval tests' recorded runs

    url = f"sqlite:///{tmp_path / 'lovia.db'}"
    folder = tmp_path / "evals"
    monkeypatch.setenv("LOVIA_EVAL_DIR", str(folder))

    async def go() -> None:
        db = store(url)
        ids = [await record_tools(db, i) for i in range(2)]
        await db.aclose()
        for i, run_id in enumerate(ids):
            await evals.pin(run_id, url, to=folder / "cases", name=f"c{i}")
        answers = iter(["Both shipped (0).", HOSTILE])
        model = FunctionModel(lambda request, info: next(answers))
        report = await evals.evaluate(folder / "cases", model=model)
        (folder / "reports").mkdir()
        (folder / "reports" / "nightly.json").write_text(to_json(report))

    run_async(go)
    return folder


def test_cases_show_the_recorded_answer_next_to_the_candidates(report_dir: Path) -> None:
    with TestClient(create_app("memory://"), base_url=LOCAL) as client:
        listing = client.get("/evals").text
        page = client.get("/evals/nightly").text
        data = client.get("/api/evals/nightly.json").json()
    assert '<a href="/evals/nightly">nightly</a>' in listing
    assert [(c["name"], c["passed"], c["recorded"]) for c in data["cases"]] == [
        ("c0", True, "Both shipped (0)."),
        ("c1", False, "Both shipped (1)."),
    ]
    assert [s["output"] for c in data["cases"] for s in c["samples"]] == [
        "Both shipped (0).",
        HOSTILE,
    ]
    assert (data["mode"], data["pass_rate"], data["baseline_pass_rate"]) == ("candidate", 0.5, 1.0)
    sections = re.findall(r'<section class="eval-case (\w+)" id="case-(\d)"', page)
    assert sections == [("passed", "1"), ("failed", "2")]
    case2 = page[page.index('id="case-2"') :]
    baseline = re.search(
        r'<div class="side baseline">.*?<pre class="text answer">([^<]*)</pre>', case2, re.S
    )
    assert baseline and baseline.group(1) == "Both shipped (1)."
    candidate = re.search(
        r'<div class="side candidate failed">.*?<pre class="text answer">(.*?)</pre>', case2, re.S
    )
    assert candidate
    shown = candidate.group(1)
    assert shown.startswith("\\x1b[31mred\\u202e &lt;script&gt;window.__x=1&lt;/script&gt;\n")
    assert "\x1b" not in page and "\u202e" not in page and "<script>window" not in page
    assert len(shown) < ANSWER_LIMIT + 200 and f"cut at {ANSWER_LIMIT} of {len(HOSTILE)}" in case2
    assert "recorded answer passes too" in case2 and "(the recorded answers: 100%)" in page


@pytest.mark.parametrize(
    ("name", "content", "error"),
    [
        ("..passwd", None, "no eval report '..passwd'"),
        ("x..y", None, "no eval report 'x..y'"),
        ("nope", None, "no eval report 'nope'"),
        (".hidden", b"{}", "no eval report"),
        ("bytes", b"\xff\xfe{not json", "is not JSON"),
        ("list", b"[1, 2]", "is not a lovia eval report"),
        ("cases", b'{"cases": [1, {"case": "\\u001b[2J", "samples": "x"}]}', None),
    ],
)
def test_a_missing_or_hostile_report_is_a_clear_error_or_shown_safely(
    report_dir: Path, name: str, content: bytes | None, error: str | None
) -> None:
    if content is not None:
        (report_dir / "reports" / f"{name}.json").write_bytes(content)
    with TestClient(create_app("memory://"), base_url=LOCAL) as client:
        page = client.get(f"/evals/{name}")
        api = client.get(f"/api/evals/{name}")
    if error is None:
        assert page.status_code == api.status_code == 200
        assert [c["name"] for c in api.json()["cases"]] == ["?", "\x1b[2J"]
        assert "\x1b" not in page.text and "\\x1b[2J" in page.text
        return
    assert page.status_code == api.status_code == 400
    assert error in api.json()["error"] and error.replace("'", "&#39;") in page.text


def test_a_path_outside_the_reports_folder_is_not_found(report_dir: Path) -> None:
    (report_dir / "secret.json").write_text('{"cases": []}')
    with TestClient(create_app("memory://"), base_url=LOCAL) as client:
        for name in ("..%2Fsecret", "%2E%2E%2Fsecret", "..%5Csecret"):
            assert client.get(f"/api/evals/{name}").status_code in (400, 404), name
        assert client.get("/api/evals/nightly").status_code == 200
