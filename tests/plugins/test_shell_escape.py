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

from .conftest import results, sleepers, unique_token


async def _until(check: object, *args: object) -> bool:
    for _ in range(200):
        if check(*args):  # type: ignore[operator]
            return True
        await asyncio.sleep(0.05)
    return False


linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


@linux_only
async def test_setsid_child_is_killed_on_timeout(tmp_path: Path) -> None:
    token = unique_token()
    workspace = Workspace(tmp_path, shell_timeout=1)
    model = ScriptedModel([call("shell", command=f"setsid sleep {token} & sleep 100"), "ok"])
    result = await Runner.run(Agent(name="a", model=model), "go", workspace=workspace)
    (out,) = results(result.entries)
    assert out.is_error and "timed out after 1 s" in out.content
    assert await _until(lambda: not sleepers(token)), "the setsid child escaped the kill"


@linux_only
async def test_double_forked_setsid_child_is_killed_when_the_command_returns(
    tmp_path: Path,
) -> None:
    token = unique_token()
    command = f"(setsid sh -c 'sleep {token} & sleep {token}' &); echo started"
    text = await Workspace(tmp_path).shell_run(command)
    assert text.startswith("exit code: 0\n<stdout>\nstarted\n")
    assert await _until(lambda: not sleepers(token)), "the double-forked child escaped"


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

    token = unique_token()
    env = {**os.environ, "PYTHONPATH": str(Path(lovia.__file__).parents[1])}
    host = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HOST, str(tmp_path), f"setsid sleep {token} & sleep 600", env=env
    )
    try:
        assert await _until(lambda: bool(sleepers(token))), "the command did not start"
    finally:
        host.send_signal(signal.SIGKILL)
        await host.wait()
    assert await _until(lambda: not sleepers(token)), "the command outlived its host"


def _pid_namespaces() -> bool:
    """Whether commands here run in their own PID namespace (the command's pid is 2)."""
    import subprocess
    import sys

    from lovia.plugins._shell import REAPER

    status_r, status_w = os.pipe()
    probe = [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), str(status_w), "1"]
    try:
        done = subprocess.run(
            [*probe, "/bin/sh", "-c", "echo $$"],
            capture_output=True,
            text=True,
            pass_fds=(status_w,),
            timeout=30,
            check=False,
        )
    finally:
        os.close(status_w)
        os.close(status_r)
    return done.stdout.strip() == "2"


NAMESPACES = Path("/proc/self/stat").exists() and _pid_namespaces()
needs_namespaces = pytest.mark.skipif(
    not NAMESPACES, reason="this kernel allows no PID namespace (no CAP_SYS_ADMIN, no userns)"
)
MODES = [
    pytest.param("1", marks=needs_namespaces, id="pid-namespace"),
    pytest.param("0", id="subreaper"),
]
PAUSE = "setsid sleep {token} & kill -STOP $PPID; echo paused; sleep {wait}"


@linux_only
@pytest.mark.parametrize("pidns", MODES)
async def test_pausing_the_supervisor_does_not_let_a_child_outlive_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pidns: str
) -> None:
    monkeypatch.setenv("LOVIA_SHELL_PIDNS", pidns)
    token = unique_token()
    workspace = Workspace(tmp_path, shell_timeout=1)
    with pytest.raises(Exception) as caught:
        await workspace.shell_run(PAUSE.format(token=token, wait=100))
    assert "killed with everything it started" in str(caught.value)
    assert "paused" in str(caught.value) and "warning" not in str(caught.value)
    assert not sleepers(token), "gone when the call returns, not later"


@linux_only
@needs_namespaces
async def test_pausing_the_supervisor_does_not_let_a_child_outlive_a_sigkilled_host(
    tmp_path: Path,
) -> None:
    import signal
    import sys

    import lovia

    token = unique_token()
    env = {**os.environ, "PYTHONPATH": str(Path(lovia.__file__).parents[1])}
    command = PAUSE.format(token=token, wait=600)
    host = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HOST, str(tmp_path), command, env=env
    )
    try:
        assert await _until(lambda: bool(sleepers(token))), "the command did not start"
        await asyncio.sleep(0.2)  # the pause was sent
    finally:
        host.send_signal(signal.SIGKILL)
        await host.wait()
    assert await _until(lambda: not sleepers(token)), "the command outlived its host"


@linux_only
@needs_namespaces
async def test_in_a_pid_namespace_the_command_cannot_kill_its_supervisor(tmp_path: Path) -> None:
    token = unique_token()
    text = await Workspace(tmp_path).shell_run(
        f"setsid sleep {token} & kill -9 $PPID; kill -9 1; echo still here; kill -9 $$"
    )
    assert text.startswith("exit code: -9\n<stdout>\nstill here\n"), text
    assert "warning" not in text
    assert not sleepers(token)


@linux_only
async def test_a_killed_supervisor_is_reported_not_called_contained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a PID namespace the command can SIGKILL its supervisor: then lovia cannot
    know that everything is gone, and the result says so instead of claiming it."""
    monkeypatch.setenv("LOVIA_SHELL_PIDNS", "0")
    token = unique_token()
    try:
        with pytest.raises(Exception) as caught:
            await Workspace(tmp_path, shell_timeout=1).shell_run(
                f"setsid sleep {token} & kill -9 $PPID; echo gone"
            )
        message = str(caught.value)
        assert "killed with what could be found" in message
        assert "a process it started in another session may still be running" in message
    finally:
        for pid in sleepers(token):  # the escape this test provokes: clean it up
            os.kill(pid, 9)
