"""``lovia web`` against hostile ids and tokens: a non-ASCII token or CSRF value is a
plain 401/403 (never a 500), and runs whose id holds ``/`` or is ``.``/``..`` have
working pages (listed links lead to them, and the JSON twins answer)."""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from lovia import Agent, Runner
from lovia.stores import store
from lovia.testing import ScriptedModel
from lovia.web import create_app
from lovia.web._format import path, run_id_param

LOCAL = "http://127.0.0.1:8765"
ODD_IDS = ["tenant/a/run-1", ".", "..", "~tilde", "a%2Fb", "q?x#y"]


async def _record(url: str) -> None:
    db = store(url)
    for run_id in ODD_IDS:
        agent = Agent(name="a", model=ScriptedModel([f"answer for {run_id}"]))
        await Runner.run(agent, "hi", run_id=run_id, checkpointer=db)
    await db.aclose()


@pytest.fixture(scope="module")
def odd_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('odd') / 'lovia.db'}"
    asyncio.run(_record(url))
    return url


@pytest.fixture
def client(odd_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(odd_url), base_url=LOCAL) as opened:
        yield opened


def test_every_listed_run_link_opens_its_page(client: TestClient) -> None:
    listing = client.get("/").text
    links = re.findall(r'class="run-link" href="([^"]+)"', listing)
    assert len(links) == len(ODD_IDS)
    for link in links:
        page = client.get(link)
        assert page.status_code == 200, link
    for run_id in ODD_IDS:
        data = client.get(f"/api/runs/{path(run_id)}")
        assert data.status_code == 200, run_id
        assert data.json()["run"]["run_id"] == run_id
        page = client.get(f"/runs/{path(run_id)}").text
        assert f"answer for {run_id}" in html.unescape(page)


@pytest.mark.parametrize("run_id", [*ODD_IDS, "plain-id", "日本\u202e"])
def test_path_segment_round_trips(run_id: str) -> None:
    segment = path(run_id)
    assert "/" not in segment and segment not in (".", "..")
    from urllib.parse import unquote

    assert run_id_param(unquote(segment, errors="surrogatepass")) == run_id


def test_plain_ids_keep_their_readable_urls() -> None:
    assert path("run-42") == "run-42" and run_id_param("run-42") == "run-42"
    assert run_id_param("~not base64!") == "~not base64!"  # a bad segment is itself: 404


@pytest.mark.parametrize("value", ["tök€n", "\u202e", "é" * 40])
def test_non_ascii_token_is_401_not_500(odd_url: str, value: str) -> None:
    app = create_app(odd_url, token="s3cret-token", allowed_hosts=("*",))
    with TestClient(app, base_url="http://10.0.0.5:8765", raise_server_exceptions=False) as c:
        assert c.get("/api/runs", params={"token": value}).status_code == 401
        bearer = c.get("/api/runs", headers={"authorization": f"Bearer {value}".encode()})
        assert bearer.status_code == 401
        cookie = c.get("/api/runs", headers={"cookie": f"lovia_token={value}".encode()})
        assert cookie.status_code == 401


@pytest.mark.parametrize("value", ["çsrf", "\u202e", "x" * 5 + "€"])
def test_non_ascii_csrf_is_403_not_500(odd_url: str, value: str) -> None:
    app = create_app(odd_url)
    with TestClient(app, base_url=LOCAL, raise_server_exceptions=False) as c:
        res = c.post(
            f"/api/runs/{path('.')}/approvals",
            json={"decisions": {}},
            headers={"x-lovia-csrf": value.encode()},
        )
        assert res.status_code == 403


async def _record_bidi(url: str) -> None:
    db = store(url)
    agent = Agent(name="a", model=ScriptedModel(["ok"]))
    await Runner.run(
        agent, "hi", run_id="inv\u202egnp.exe", checkpointer=db, session=db, session_id="s\u200d1"
    )
    await db.aclose()


def test_bidi_and_invisible_characters_in_names_are_shown_visibly(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    url = f"sqlite:///{tmp_path_factory.mktemp('bidi') / 'lovia.db'}"
    asyncio.run(_record_bidi(url))
    with TestClient(create_app(url), base_url=LOCAL) as c:
        listing = c.get("/").text
        page = c.get("/runs/" + path("inv\u202egnp.exe")).text
    for html_text in (listing, page):
        assert "inv\\u202egnp.exe" in html_text
    assert "s\\u200d1" in listing
    visible = re.sub(r'"[^"]*"', "", listing + page)  # attributes keep the exact id
    assert "\u202e" not in visible and "\u200d" not in visible
