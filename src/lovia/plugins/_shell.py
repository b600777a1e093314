"""Private: run a shell command in its own session, with a timeout and output cap.

Nothing the command starts outlives the call: on timeout, on cancellation and when the
command returns, everything it started is killed (SIGKILL). On Linux the command runs
under a supervisor (``_reaper.py``) that puts it in its own PID namespace when the
kernel allows (the command can then neither pause nor kill it, and the kernel ends the
whole namespace), else acts as a child subreaper; either way it finds and kills every
descendant, even one that called ``setsid`` or double-forked. On timeout and
cancellation this process does not rely on the supervisor (which the command may have
paused with ``kill -STOP $PPID``): it kills the supervisor's descendants itself, until
none is left, and only then the supervisor. A result says processes were killed only
when that is known (``contained``); elsewhere the process group is killed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ShellResult", "run_shell"]


@dataclass(frozen=True, slots=True)
class ShellResult:
    exit_code: int | None
    """``None`` when the command was killed on timeout."""
    stdout: str
    stderr: str
    truncated: bool
    timed_out: bool
    contained: bool = True
    """Every process the command started is known to be gone (False: the command killed
    its supervisor, so one may have escaped)."""

    def render(self) -> str:
        code = "killed (timeout)" if self.timed_out else str(self.exit_code)
        parts = [f"exit code: {code}"]
        parts.append(f"<stdout>\n{self.stdout}</stdout>" if self.stdout else "<stdout></stdout>")
        parts.append(f"<stderr>\n{self.stderr}</stderr>" if self.stderr else "<stderr></stderr>")
        if self.truncated:
            parts.append("(output truncated)")
        if not self.contained:
            parts.append(ESCAPED)
        return "\n".join(parts)


class _Capped:
    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()
        self.dropped = 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            room = self.cap - len(self.data)
            if room > 0:
                self.data += chunk[:room]
            self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self) -> str:
        out = self.data.decode("utf-8", errors="replace")
        if self.dropped:
            out += f"\n[… {self.dropped} more bytes not shown]\n"
        return out


REAPER = Path(__file__).with_name("_reaper.py")
PID_NAMESPACE_ENV = "LOVIA_SHELL_PIDNS"
"""Set to ``0`` to run commands without a PID namespace (the subreaper alone)."""
ESCAPED = (
    "warning: the command killed the supervisor that tracks its processes: a process it "
    "started in another session may still be running"
)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _live_descendants(root: int) -> list[int]:
    """The live (not zombie) processes below ``root``, from one scan of /proc."""
    parents: dict[int, list[int]] = {}
    zombies: set[int] = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[-1].split()
        except OSError:
            continue
        if len(fields) > 1:
            parents.setdefault(int(fields[1]), []).append(int(name))
            if fields[0] == b"Z":
                zombies.add(int(name))
    found, todo = list[int](), list(parents.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, []))
    return [pid for pid in found if pid not in zombies]


def kill_tree(root: int) -> None:
    """SIGKILL every live descendant of ``root`` (not ``root``), until none is left.

    ``root`` is the supervisor, alive, maybe paused: as a subreaper it keeps every
    orphan of the command, so a process that forks meanwhile is found by the next scan
    (a killed process forks no more)."""
    while victims := _live_descendants(root):
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.002)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Kill the command's processes from here, then the supervisor, and reap it."""
    if proc.returncode is None:
        kill_tree(proc.pid)
        try:
            proc.kill()
        except ProcessLookupError:
            pass
    await proc.wait()


async def run_shell(
    command: str, cwd: str, limit_s: float, cap: int, env: dict[str, str] | None = None
) -> ShellResult:
    """Run ``command`` with ``/bin/sh -c`` in ``cwd``; see the module docs."""
    supervised = sys.platform == "linux" and bool(sys.executable)
    argv = ["/bin/sh", "-c", command]
    status_r, status_w = os.pipe() if supervised else (-1, -1)
    if supervised:
        pidns = "0" if os.environ.get(PID_NAMESPACE_ENV) == "0" else "1"
        reaper = [str(REAPER), str(os.getpid()), str(status_w), pidns]
        argv = [sys.executable, "-I", "-S", *reaper, *argv]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            pass_fds=(status_w,) if supervised else (),
        )
    finally:
        if supervised:
            os.close(status_w)
    out, err = _Capped(cap), _Capped(cap)
    assert proc.stdout is not None and proc.stderr is not None
    timed_out, killed_here = False, False
    try:
        async with asyncio.timeout(limit_s):
            await asyncio.gather(out.drain(proc.stdout), err.drain(proc.stderr), proc.wait())
    except TimeoutError:
        timed_out = True
    finally:  # also on cancellation: nothing outlives the call
        if supervised and proc.returncode is None:
            killed_here = True  # everything below the supervisor, from here, verified
            await asyncio.shield(_stop(proc))
        _kill_group(proc.pid)
        if proc.returncode is None:
            await asyncio.shield(proc.wait())
        # everything holding the pipes is gone: read them to their end, so their
        # transports close now (not when collected, perhaps after the loop closed)
        await asyncio.shield(_read_rest(proc, out, err))
        said = _said_contained(status_r) if supervised else False
        contained = not supervised or killed_here or said
    return ShellResult(
        exit_code=None if timed_out else proc.returncode,
        stdout=out.text(),
        stderr=err.text(),
        truncated=bool(out.dropped or err.dropped),
        timed_out=timed_out,
        contained=contained,
    )


async def _read_rest(proc: asyncio.subprocess.Process, out: _Capped, err: _Capped) -> None:
    assert proc.stdout is not None and proc.stderr is not None
    if proc.stdout.at_eof() and proc.stderr.at_eof():
        return
    try:
        async with asyncio.timeout(1.0):  # a process that escaped may hold them: bounded
            await asyncio.gather(out.drain(proc.stdout), err.drain(proc.stderr))
    except TimeoutError:  # stop reading: close our ends of the pipes
        transport: Any = getattr(proc, "_transport", None)  # asyncio keeps no public handle
        if transport is not None:
            transport.close()


def _said_contained(status_r: int) -> bool:
    """Whether the supervisor wrote ``C`` (every descendant gone) before it exited."""
    try:
        os.set_blocking(status_r, False)
        return b"C" in os.read(status_r, 16)
    except BlockingIOError:
        return False
    finally:
        os.close(status_r)
