"""``lovia web`` test fixtures: recorded stores, a live server, headless Chromium.

The server is the real app under uvicorn on 127.0.0.1 (an ephemeral port, a thread of
this process). The browser is Debian's ``chromium`` driven by Playwright
(``executable_path``; ``playwright install`` is never run). Without chromium the
browser tests skip locally and fail under ``CI=true``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

if os.environ.get("CI", "").lower() not in ("1", "true", "yes"):
    pytest.importorskip("starlette", reason="lovia[web] is not installed")  # in CI: fail

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts" / "web"
CHROMIUM = os.environ.get("LOVIA_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def run_async(fn: Callable[[], Any]) -> Any:
    """``asyncio.run(fn())`` on a worker thread (Playwright's sync API owns this thread's
    event loop)."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(fn())).result()


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn on 127.0.0.1:<free port>; yield its base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    )
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if server.started:
                break
            threading.Event().wait(0.02)
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture(scope="session")
def chromium_path() -> str:
    if shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists():
        message = f"chromium not found at {CHROMIUM} (apt-get install chromium)"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    try:
        import playwright  # noqa: F401
    except ImportError:
        if in_ci():
            pytest.fail("playwright is not installed (pip install playwright)")
        pytest.skip("playwright is not installed")
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium_path: str) -> Iterator[Any]:
    # module scope: Playwright's sync API runs an event loop on this thread until it
    # stops, and the async tests of later modules need the thread free
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        launched = pw.chromium.launch(
            executable_path=chromium_path, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    opened.js_errors = errors
    try:
        yield opened
    finally:
        context.close()


@pytest.fixture
def shot() -> Callable[[Any, str], Path]:
    """``shot(page, name)``: a full-page screenshot into tests/artifacts/web/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def take(page: Any, name: str) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


class Recorded:
    """The stores the web tests read (built once per session)."""

    def __init__(self, root: Path) -> None:
        self.path = root / "lovia.db"
        self.url = f"sqlite:///{self.path}"
        self.tampered_path = root / "tampered.db"
        self.tampered_url = f"sqlite:///{self.tampered_path}"
        self.run_id = ""
        self.first_run_id = ""
        self.tampered_entry = ""


LONG_TURNS = 500


@pytest.fixture(scope="session")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    from .scenarios import record_long, record_paused, record_scenario, record_xss, tamper

    rec = Recorded(tmp_path_factory.mktemp("web"))

    async def build() -> None:
        rec.first_run_id, rec.run_id, _ = await record_scenario(rec.url)
        await record_xss(rec.url)
        await record_paused(rec.url)
        await record_long(rec.url, LONG_TURNS)

    run_async(build)
    rec.tampered_entry = tamper(rec.path, rec.tampered_path, rec.run_id)
    return rec
