"""Private: run a shell command in its own session, with a timeout and output cap.

Nothing the command starts outlives the call: on timeout, on cancellation and when the
command returns, everything it started is killed (SIGKILL). On Linux the command runs
under a supervisor (``_reaper.py``, a child subreaper) that finds and kills every
descendant, even one that called ``setsid`` or double-forked to leave the process
group; elsewhere the process group is killed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ShellResult", "run_shell"]


@dataclass(frozen=True, slots=True)
class ShellResult:
    exit_code: int | None
    """``None`` when the command was killed on timeout."""
    stdout: str
    stderr: str
    truncated: bool
    timed_out: bool

    def render(self) -> str:
        code = "killed (timeout)" if self.timed_out else str(self.exit_code)
        parts = [f"exit code: {code}"]
        parts.append(f"<stdout>\n{self.stdout}</stdout>" if self.stdout else "<stdout></stdout>")
        parts.append(f"<stderr>\n{self.stderr}</stderr>" if self.stderr else "<stderr></stderr>")
        if self.truncated:
            parts.append("(output truncated)")
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
STOP_GRACE_S = 5.0
"""How long the supervisor may take to kill and reap the command's processes."""


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Ask the supervisor to kill every descendant, and wait (bounded) until it has."""
    try:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(STOP_GRACE_S):
            await proc.wait()
    except (ProcessLookupError, TimeoutError):
        pass


async def run_shell(
    command: str, cwd: str, limit_s: float, cap: int, env: dict[str, str] | None = None
) -> ShellResult:
    """Run ``command`` with ``/bin/sh -c`` in ``cwd``; see the module docs."""
    supervised = sys.platform == "linux" and bool(sys.executable)
    argv = ["/bin/sh", "-c", command]
    if supervised:
        argv = [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), *argv]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    out, err = _Capped(cap), _Capped(cap)
    assert proc.stdout is not None and proc.stderr is not None
    timed_out = False
    try:
        async with asyncio.timeout(limit_s):
            await asyncio.gather(out.drain(proc.stdout), err.drain(proc.stderr), proc.wait())
    except TimeoutError:
        timed_out = True
    finally:  # also on cancellation: nothing outlives the call
        if supervised and proc.returncode is None:
            await asyncio.shield(_stop(proc))
        _kill_group(proc.pid)
        if proc.returncode is None:
            await asyncio.shield(proc.wait())
    return ShellResult(
        exit_code=None if timed_out else proc.returncode,
        stdout=out.text(),
        stderr=err.text(),
        truncated=bool(out.dropped or err.dropped),
        timed_out=timed_out,
    )
