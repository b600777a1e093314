"""The Workspace shell kills everything a command starts.

A process-group kill misses a child that calls ``setsid`` or double-forks; the shell's
supervisor (a child subreaper) does not: on timeout, when the command returns, and when
the process hosting the run is SIGKILLed.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from lovia import Agent, Runner
from lovia.plugins.workspace import Workspace
from lovia.testing import ScriptedModel, call

from .conftest import results


def _sleepers(token: str) -> list[int]:
    """Live ``sleep <token>`` processes (zombies count as gone)."""
    wanted = b"sleep\x00" + token.encode() + b"\x00"
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if cmdline == wanted and state != "Z":
            found.append(int(name))
    return found


async def _until(check: object, *args: object) -> bool:
    for _ in range(200):
        if check(*args):  # type: ignore[operator]
            return True
        await asyncio.sleep(0.05)
    return False


def _token() -> str:
    return f"1000.{int.from_bytes(os.urandom(3), 'big'):08d}"  # a unique `sleep` argument


linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


@linux_only
async def test_setsid_child_is_killed_on_timeout(tmp_path: Path) -> None:
    token = _token()
    workspace = Workspace(tmp_path, shell_timeout=1)
    model = ScriptedModel([call("shell", command=f"setsid sleep {token} & sleep 100"), "ok"])
    result = await Runner.run(Agent(name="a", model=model), "go", workspace=workspace)
    (out,) = results(result.entries)
    assert out.is_error and "timed out after 1 s" in out.content
    assert await _until(lambda: not _sleepers(token)), "the setsid child escaped the kill"


@linux_only
async def test_double_forked_setsid_child_is_killed_when_the_command_returns(
    tmp_path: Path,
) -> None:
    token = _token()
    command = f"(setsid sh -c 'sleep {token} & sleep {token}' &); echo started"
    text = await Workspace(tmp_path).shell_run(command)
    assert text.startswith("exit code: 0\n<stdout>\nstarted\n")
    assert await _until(lambda: not _sleepers(token)), "the double-forked child escaped"


HOST = """
import asyncio, sys
from lovia.plugins.workspace import Workspace
asyncio.run(Workspace(sys.argv[1], shell_timeout=600).shell_run(sys.argv[2]))
"""


@linux_only
async def test_setsid_child_dies_with_a_sigkilled_host(tmp_path: Path) -> None:
    import signal
    import sys

    import lovia

    token = _token()
    env = {**os.environ, "PYTHONPATH": str(Path(lovia.__file__).parents[1])}
    host = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HOST, str(tmp_path), f"setsid sleep {token} & sleep 600", env=env
    )
    try:
        assert await _until(lambda: bool(_sleepers(token))), "the command did not start"
    finally:
        host.send_signal(signal.SIGKILL)
        await host.wait()
    assert await _until(lambda: not _sleepers(token)), "the command outlived its host"
