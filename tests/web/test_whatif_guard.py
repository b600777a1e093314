"""What-if on ``lovia web`` spends the server's money and opens connections from it.

Attacks kept as tests: the server's provider key sent to a listener the request named;
a what-if to any host:port (the PostgreSQL port); a what-if by anyone who can load a
page on loopback (the CSRF token is in every page). Now: what-if is off unless the
server was started with it, then every request needs the access token; a base URL may
name only the configured providers' own origins and the hosts the operator allowed; a
configured key goes only to its own host; a key sent with a request serves that
request only.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from starlette.testclient import TestClient

from lovia.errors import UserError
from lovia.replay._policy import WhatIfPolicy
from lovia.web import create_app

from .conftest import Recorded
from .test_app import _get, _start  # pyright: ignore[reportPrivateUsage]

LOCAL = "http://127.0.0.1:8765"
SERVER_KEY = "sk-server-own-key-0123456789abcdef"
TOKEN = "web-token-for-tests-0123456789"

_CHUNKS = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "from the listener"}}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}},
]


class Listener:
    """An OpenAI-compatible server on 127.0.0.1 that records every request's headers."""

    def __init__(self) -> None:
        seen: list[dict[str, str]] = []
        self.seen = seen

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                seen.append({k.lower(): v for k, v in self.headers.items()})
                self.rfile.read(int(self.headers.get("content-length") or 0))
                body = "".join(
                    f"data: {json.dumps({'id': 'x', 'model': 'm', **c})}\n\n" for c in _CHUNKS
                )
                data = (body + "data: [DONE]\n\n").encode()
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def keys(self) -> list[str | None]:
        return [h.get("authorization") for h in self.seen]


@pytest.fixture
def configured(monkeypatch: pytest.MonkeyPatch) -> Iterator[Listener]:
    """The server's configured OpenAI endpoint (a local listener) and its key."""
    listener = Listener()
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", listener.url)
    monkeypatch.delenv("LOVIA_WHATIF_ALLOW_HOSTS", raising=False)
    yield listener
    listener.server.shutdown()
    from lovia.providers import registry

    registry._cache.pop(("openai", "m"), None)  # pyright: ignore[reportPrivateUsage] -- built from this test's environment


@pytest.fixture
def other() -> Iterator[Listener]:
    listener = Listener()
    yield listener
    listener.server.shutdown()


def _client(recorded: Recorded, policy: WhatIfPolicy | None) -> TestClient:
    app = create_app(recorded.url, token=TOKEN if policy else None, whatif=policy)
    client = TestClient(app, base_url=LOCAL)
    if policy is not None:
        client.headers["authorization"] = f"Bearer {TOKEN}"
    return client


def _whatif(client: TestClient, recorded: Recorded, **body: Any) -> Any:
    page = client.get(f"/runs/{recorded.run_id}/turns/2").text
    match = re.search(r'name="lovia-csrf" content="([^"]+)"', page)
    assert match
    url = f"/api/runs/{recorded.run_id}/turns/2/whatif"
    return client.post(url, json=body, headers={"x-lovia-csrf": match.group(1)})


def test_the_server_key_never_reaches_a_listener_the_request_names(
    recorded: Recorded, configured: Listener, other: Listener
) -> None:
    allowed = WhatIfPolicy((f"127.0.0.1:{other.port}",))
    with _client(recorded, allowed) as client:
        plain = _whatif(client, recorded, model="openai:m", base_url=other.url)
        assert plain.status_code == 200, plain.text
        assert plain.json()["rerun"]["entries"] == [
            {"type": "assistant", "text": "from the listener"}
        ]
        mine = _whatif(client, recorded, model="openai:m", base_url=other.url, api_key="sk-user-1")
        assert mine.status_code == 200, mine.text
        again = _whatif(client, recorded, model="openai:m", base_url=other.url)
        assert again.status_code == 200
        home = _whatif(client, recorded, model="openai:m")  # the configured provider
        assert home.status_code == 200
    # the named listener got no key, then the user's key for that one request only
    assert other.keys() == [None, "Bearer sk-user-1", None]
    assert configured.keys() == [f"Bearer {SERVER_KEY}"], "the configured host gets its key"
    assert SERVER_KEY not in json.dumps(other.seen)


def test_a_host_the_operator_did_not_allow_is_refused_before_connecting(
    recorded: Recorded, configured: Listener, other: Listener
) -> None:
    with _client(recorded, WhatIfPolicy()) as client:
        refused = _whatif(client, recorded, model="openai:m", base_url=other.url)
        postgres = _whatif(client, recorded, model="openai:m", base_url="http://127.0.0.1:5432")
        ftp = _whatif(client, recorded, model="openai:m", base_url="file:///etc/passwd")
        custom = _whatif(client, recorded, model="webtest:m", base_url=configured.url)
    assert refused.status_code == 400
    assert refused.json()["error"] == f"a what-if may not connect to 127.0.0.1:{other.port}"
    assert "--whatif-allow-host" in refused.json()["hint"]
    assert postgres.json()["error"] == "a what-if may not connect to 127.0.0.1:5432"
    assert ftp.status_code == 400 and "not an http(s) URL" in ftp.json()["error"]
    assert custom.status_code == 400 and "built-in provider" in custom.json()["error"]
    assert other.seen == [] and configured.seen == [], "nothing was sent anywhere"


def test_an_allowed_remote_host_needs_the_users_own_key() -> None:
    policy = WhatIfPolicy(("models.example.test",))
    with pytest.raises(UserError, match="needs an API key for that host") as info:
        policy.provider("openai:m", base_url="https://models.example.test/v1")
    assert "server's own keys go only to the hosts" in (info.value.hint or "")
    provider, owned = policy.provider(
        "anthropic:m", base_url="https://models.example.test:8443", api_key="sk-ant-user-key-1"
    )
    assert owned and provider.name == "anthropic"  # a host without a port: any port
    one_port = WhatIfPolicy(("models.example.test:443",))
    with pytest.raises(UserError) as refused:
        one_port.provider("openai:m", base_url="http://models.example.test:9/", api_key="k")
    assert refused.value.message == "a what-if may not connect to models.example.test:9"
    assert WhatIfPolicy(("models.example.test:443",)).allows(("https", "models.example.test", 443))
    assert not WhatIfPolicy(("models.example.test:443",)).allows(("http", "evil.test", 443))


def test_allow_hosts_come_from_the_flag_and_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOVIA_WHATIF_ALLOW_HOSTS", "vllm.internal:8000, [::1]:9000")
    policy = WhatIfPolicy.from_env(["ollama.internal"])
    assert policy.allow_hosts == ("ollama.internal", "vllm.internal:8000", "[::1]:9000")
    assert policy.allows(("http", "::1", 9000)) and policy.allows(("http", "ollama.internal", 1))
    assert not policy.allows(("http", "vllm.internal", 8001))
    with pytest.raises(UserError, match="names no host"):
        WhatIfPolicy((":8000",))


def test_whatif_is_off_unless_enabled_and_then_needs_the_token(recorded: Recorded) -> None:
    with _client(recorded, None) as client:  # loopback, no token: pages open to anyone local
        off = _whatif(client, recorded, model="openai:m")
        page = client.get(f"/runs/{recorded.run_id}/turns/2").text
    assert off.status_code == 403 and "--whatif" in off.json()["hint"]
    assert 'id="whatif-off"' in page and 'id="whatif-form"' not in page
    with pytest.raises(UserError, match="what-if needs an access token"):
        create_app(recorded.url, whatif=WhatIfPolicy())
    app = create_app(recorded.url, token=TOKEN, whatif=WhatIfPolicy())
    with TestClient(app, base_url=LOCAL) as client:  # a local user without the token
        assert client.get("/").status_code == 401
        url = f"/api/runs/{recorded.run_id}/turns/2/whatif"
        assert client.post(url, json={"model": "openai:m"}).status_code == 401


def test_lovia_web_whatif_on_loopback_asks_for_the_token(recorded: Recorded) -> None:
    proc, banner = _start("--store", recorded.url, "--whatif", "--whatif-allow-host", "h:1")
    try:
        assert proc.stdout is not None
        banner += "".join(proc.stdout.readline() for _ in range(3))
        assert "every request needs this access token" in banner
        assert "what-if on: extra hosts it may reach: h:1" in banner
        token, port = re.search(r"\?token=(\S+)", banner), re.search(r":(\d+)/", banner)
        assert token and port
        url = f"http://127.0.0.1:{port.group(1)}/api/runs"
        assert _get(url)[0] == 401, "loopback alone no longer opens the pages"
        assert _get(url, {"authorization": f"Bearer {token.group(1)}"})[0] == 200
    finally:
        proc.terminate()
        proc.wait(10)
