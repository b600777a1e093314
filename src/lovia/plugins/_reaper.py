"""Private: the supervisor of one Workspace shell command (Linux).

Run as ``python -I -S _reaper.py PARENT_PID /bin/sh -c COMMAND`` by ``_shell.py``. A
process-group kill misses anything that calls ``setsid`` or double-forks; this
supervisor does not: it makes itself a *child subreaper* (``PR_SET_CHILD_SUBREAPER``),
so every process the command starts — in any session, orphaned or not — stays its
descendant instead of moving to init. When the command exits, on ``SIGTERM`` from the
parent (timeout, cancellation), and when the parent dies (``PR_SET_PDEATHSIG``), it
kills and reaps every descendant, then exits the way the command did.

This file is executed by path and imports only the standard library.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _children() -> list[int]:
    """Pids whose parent is this process (scanned in /proc: reliable while they fork)."""
    me, out = os.getpid(), list[int]()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) > 1 and int(fields[1]) == me:
            out.append(int(name))
    return out


def kill_all() -> None:
    """SIGKILL every descendant and reap it; orphans re-parent here, so loop until none."""
    while True:
        for pid in _children():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return  # no child left, alive or zombie
        time.sleep(0.005)


def _on_term(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kill_all()
    os._exit(128 + signal.SIGTERM)


def _exit_like(status: int) -> None:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig != signal.SIGKILL:
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    sys.exit(os.WEXITSTATUS(status))


def main() -> None:
    parent, argv = int(sys.argv[1]), sys.argv[2:]
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the parent's process-group kill remains
        pass
    signal.signal(signal.SIGTERM, _on_term)
    if os.getppid() != parent:  # the parent died before PDEATHSIG was armed
        _on_term(signal.SIGTERM, None)
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as subprocess does for a command
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # cleaning up now anyway
    kill_all()
    _exit_like(status)


if __name__ == "__main__":
    main()
