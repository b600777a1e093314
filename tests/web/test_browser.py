"""The pages in real headless Chromium: list → run → view → diff, the waterfall, the
tamper banner, hostile strings, chat streaming, approvals, a paged 500-turn run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lovia import Agent
from lovia.replay._policy import WhatIfPolicy
from lovia.testing import ScriptedModel, call, reply
from lovia.web import create_app

from .conftest import LONG_TURNS, Recorded, run_async, serve
from .scenarios import XSS, lookup, refund, support_agent

Shot = Callable[[Any, str], Path]


@pytest.fixture(scope="module")
def site(recorded: Recorded) -> Iterator[str]:
    with serve(create_app(recorded.url)) as base:
        yield base


def test_runs_run_view_diff(page: Any, site: str, recorded: Recorded, shot: Shot) -> None:
    from playwright.sync_api import expect

    page.goto(site + "/")
    rows = page.locator("tr.run")
    assert rows.count() >= 5
    failed = page.locator('tr.run[data-run-id="run-failed-1"]')
    assert "failed" in failed.locator(".badge").inner_text()
    assert "ProviderServerError" in failed.inner_text()
    shot(page, "01-runs")

    page.locator(f'tr.run[data-run-id="{recorded.run_id}"] a.run-link').click()
    page.wait_for_url(f"**/runs/{recorded.run_id}")
    assert page.locator("#run-status").inner_text() == "completed"
    transcript = page.locator("#transcript")
    # the tool call and its result sit together; the handoff is marked
    call_a1 = transcript.locator(".item.kind-tool_call", has_text="A1")
    assert "A1: shipped" in call_a1.locator(".result").inner_text()
    assert transcript.locator(".item.mark-handoff").count() == 1
    assert "tokens" in transcript.locator('section.turn[data-turn="1"] .usage').inner_text()
    shot(page, "02-run")

    page.locator('section.turn[data-turn="2"] a.view-link').click()
    page.wait_for_url("**/turns/2")
    assert page.locator("#verified").is_visible()
    assert page.locator("#mismatch").count() == 0
    assert "<reminder>be brief</reminder>" in page.locator("#compaction").inner_text()
    page.click("#load-body")
    expect(page.locator("#body-json")).to_contain_text('"messages"')
    shot(page, "03-view")

    # the diff defaults to the previous turn; another turn is one field away
    assert "turn 1 → turn 2" in page.locator("#diff").inner_text()
    page.fill("#diff-select", "1")
    page.locator("#diff-form button").click()
    page.wait_for_url("**diff=1")
    diff = page.locator("#diff")
    assert "turn 1 → turn 2" in diff.inner_text()
    added = diff.locator("li.diff-added")
    assert added.count() >= 1
    assert "A1: shipped" in diff.inner_text() or "lookup_order" in diff.inner_text()
    shot(page, "04-diff")
    assert page.js_errors == []


def test_waterfall_has_one_bar_per_span_nested(page: Any, site: str, recorded: Recorded) -> None:
    page.goto(f"{site}/runs/{recorded.run_id}")
    rows = page.locator("#waterfall tr.span")
    spans = rows.evaluate_all(
        "rs => rs.map(r => ({id: r.dataset.spanId, parent: r.dataset.parentId,"
        " depth: Number(r.dataset.depth), bars: r.querySelectorAll('rect').length,"
        " name: r.querySelector('.span-open').textContent}))"
    )
    assert all(s["bars"] == 1 for s in spans)
    depth = {s["id"]: s["depth"] for s in spans}
    for s in spans:
        if s["parent"]:
            assert depth[s["parent"]] == s["depth"] - 1, s
        else:
            assert s["depth"] == 0
    names = [s["name"] for s in spans]
    assert names[0].startswith("invoke_agent")
    turns = [s for s in spans if s["name"].startswith("turn ")]
    tools = [s for s in spans if s["name"].startswith("execute_tool")]
    assert {s["depth"] for s in turns} == {1} and {s["depth"] for s in tools} == {2}
    assert len(tools) == 3  # lookup A1, lookup B2, transfer_to_billing


def test_tampered_run_shows_red_banner(page: Any, recorded: Recorded, shot: Shot) -> None:
    with serve(create_app(recorded.tampered_url)) as base:
        page.goto(f"{base}/runs/{recorded.run_id}/turns/3")
        banner = page.locator("#mismatch")
        assert banner.is_visible()
        assert "does not match its recorded hash" in banner.inner_text()
        assert recorded.tampered_entry in banner.inner_text()  # names the entry
        color = banner.evaluate("b => getComputedStyle(b).color")
        assert color == "rgb(180, 35, 24)"
        shot(page, "05-tampered")
        page.goto(f"{base}/runs/{recorded.run_id}/turns/1")  # before the change: fine
        assert page.locator("#verified").is_visible()


def test_hostile_strings_render_inert(page: Any, site: str, shot: Shot) -> None:
    from urllib.parse import quote

    paths = (
        "/",
        "/?q=" + quote(XSS[1]),
        "/runs/run-xss",
        "/runs/run-xss/turns/1",
        "/runs/run-xss/turns/2?diff=1",
        "/sessions/" + quote(XSS[3], safe=""),
        "/compare?a=run-xss&ta=1&b=run-xss&tb=2",
    )
    for path in paths:
        page.goto(site + path)
        page.locator("a").first.wait_for()
        for opener in page.locator("#waterfall .span-open").all()[:6]:
            opener.click()  # the span panel is built from stored attributes
        for more in page.locator("button.more, #earlier").all():
            more.click()
        assert page.evaluate("window.__xss") is None, path
        assert page.locator("img[onerror], svg[onload], a[href^='javascript:' i]").count() == 0
        assert page.locator("script:not([src])").count() == 0
    body = page.locator("main").inner_text()
    assert XSS[0] in body or "window.__xss = 1" in body  # shown as text
    page.goto(site + "/runs/run-xss")
    text = page.locator("#transcript").inner_text()
    for payload in XSS[:3]:
        assert payload in text  # every payload is displayed literally
    shot(page, "06-xss")
    assert page.js_errors == []


def test_long_run_is_paged(page: Any, site: str, shot: Shot) -> None:
    response = page.goto(site + "/runs/run-long")
    assert response.ok
    turns = page.locator("#transcript section.turn")
    assert 0 < turns.count() < LONG_TURNS / 5
    assert page.locator("#transcript section.turn").first.get_attribute("data-turn") == "0"
    bars = page.locator("#waterfall tr.span").count()
    assert bars < LONG_TURNS  # the waterfall follows the page, not the whole run
    shot(page, "07-long")
    page.locator("#transcript nav.pager a[rel=next]").first.click()
    page.wait_for_url("**page=1")
    first = int(page.locator("#transcript section.turn").first.get_attribute("data-turn"))
    assert first > 0


def _chat_agent() -> Agent[Any, str]:
    model = ScriptedModel(
        [
            reply(
                "Let me check. ",
                tool_calls=[call("lookup", order="A7", id="c_a7")],
                chunk_delay=0.01,
            ),
            reply("A7 has shipped.", chunk_delay=0.01),
        ]
    )
    return Agent(name="support", instructions="Help.", tools=[lookup], model=model)


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
def test_chat_streams_text_and_tool_calls(page: Any, recorded: Recorded, shot: Shot) -> None:
    with serve(create_app(recorded.url, agent=_chat_agent)) as base:
        page.goto(base + "/chat")
        page.fill("#chat-form textarea", "where is A7?")
        page.click("#chat-form button")
        log = page.locator("#chat-log")
        log.locator("a.run-link").wait_for(timeout=20_000)
        assert "lookup" in log.locator(".tool-call").inner_text()
        assert "A7: shipped" in log.locator(".tool-result").inner_text()
        assert "A7 has shipped." in log.inner_text()
        shot(page, "08-chat")
        log.locator("a.run-link").click()
        page.wait_for_url("**/runs/**")
        assert page.locator("#run-status").inner_text() == "completed"
        assert "where is A7?" in page.locator("#transcript").inner_text()
        assert page.js_errors == []


@pytest.mark.lovia_unconsumed  # the run ends before the script does, on purpose
def test_approve_pending_call_and_run_finishes(page: Any, recorded: Recorded, shot: Shot) -> None:
    from playwright.sync_api import expect

    def agent() -> Agent[Any, str]:
        return support_agent(ScriptedModel(["Refunded 80."]))

    with serve(create_app(recorded.url, agent=agent)) as base:
        page.goto(base + "/runs/run-paused")
        assert page.locator("#run-status").inner_text() == "paused"
        pending = page.locator('#approvals .pending[data-call-id="c_refund"]')
        assert "refund" in pending.inner_text()
        assert page.locator("#approvals .pending").count() == 1  # lookup needs no human
        assert page.locator("#transcript .item.mark-approval").count() == 2  # both wait
        shot(page, "09-approval")
        pending.locator("button.approve").click()
        expect(page.locator("#run-status")).to_have_text("completed", timeout=20_000)
        assert "refunded 80" in page.locator("#transcript").inner_text()
        assert "Refunded 80." in page.locator("#transcript").inner_text()
        assert page.locator("#approvals").count() == 0
        # no red ApprovalPending bar once approved; the decision says who and when
        assert page.locator("#run-error").count() == 0
        decision = page.locator(".approval-decision.decision-approved")
        assert "approved by web:local" in decision.inner_text()
        shot(page, "10-approved")


def test_interrupted_run_stops_reloading_and_resumes_from_its_button(
    page: Any, tmp_path: Path, shot: Shot
) -> None:
    from playwright.sync_api import expect

    from lifecycle.test_resume_traced import _torn_down, torn_agent

    url = f"sqlite:///{tmp_path / 'torn.db'}"
    run_async(lambda: _torn_down(url))  # Playwright owns this thread's event loop
    with serve(create_app(url, agent=torn_agent)) as base:
        page.goto(base + "/")
        row = page.locator('tr.run[data-run-id="r-torn"]')
        assert row.get_attribute("data-state") == "interrupted"
        assert page.locator("body").get_attribute("data-refresh") is None  # no endless reload
        page.goto(base + "/runs/r-torn")
        assert page.locator("#run-status").inner_text() == "interrupted"
        shot(page, "11-interrupted")
        page.locator("#run-interrupted button.resume").click()
        expect(page.locator("#run-status")).to_have_text("completed", timeout=20_000)
        assert "finished: step done" in page.locator("#transcript").inner_text()
        assert page.locator("#attempts tr.attempt").count() == 2
        assert page.js_errors == []


__all__ = ["lookup", "refund"]


def test_whatif_from_the_view_page(page: Any, site: str, recorded: Recorded, shot: Shot) -> None:
    from lovia.providers.registry import register_provider

    register_provider(
        "webwhatif", lambda model: ScriptedModel(["<b>B2</b> is on its way."]), replace=True
    )
    assert page.goto(f"{site}/runs/{recorded.run_id}/turns/2") is not None
    assert page.locator("#whatif-off").count() == 1  # off unless the server enables it
    app = create_app(recorded.url, token="browser-token-1234", whatif=WhatIfPolicy())
    with serve(app) as base:
        page.goto(f"{base}/?token=browser-token-1234")  # traded for a cookie
        page.goto(f"{base}/runs/{recorded.run_id}/turns/2")
        _send_whatif(page, shot)


def _send_whatif(page: Any, shot: Shot) -> None:
    from playwright.sync_api import expect

    page.fill("#whatif-form input[name=model]", "webwhatif:m")
    page.click("#whatif-form button")
    result = page.locator("#whatif-result")
    expect(result).to_contain_text("<b>B2</b> is on its way.")  # shown as text, not markup
    assert result.locator("b").count() == 0
    assert "lookup_order" in page.locator(".side-by-side").inner_text()  # the recorded answer
    shot(page, "11-whatif")
