"""Private: the supervisor of one Workspace shell command (Linux).

Run as ``python -I -S _reaper.py PARENT_PID STATUS_FD PIDNS /bin/sh -c COMMAND`` by
``_shell.py``. A process-group kill misses anything that calls ``setsid`` or
double-forks, and a supervisor the command can signal can be paused
(``kill -STOP $PPID``) or killed. So, when the kernel allows it (``PIDNS`` is ``1``):

- a helper child of the supervisor makes a new **PID namespace** and mount namespace
  (``unshare``; inside a new user namespace mapping only its own uid and gid when it
  lacks ``CAP_SYS_ADMIN``). Its child is that namespace's init, which mounts a ``/proc``
  of the namespace (so ``$!``, ``ps`` and ``pkill`` inside agree) and runs the command:
  the command cannot signal the init (the kernel drops SIGSTOP/SIGKILL sent to an init
  from inside), cannot see the supervisor or the host process at all, and when the init
  ends the kernel kills every process of the namespace — ``setsid``, double fork or not;
- the supervisor ends the helper (and so the init: their death signal is SIGKILL) when
  the command returns, on ``SIGTERM`` (timeout, cancellation) and when the host process
  dies (``PR_SET_PDEATHSIG``). Where the namespaces cannot be made, the helper says so
  before the command starts and the supervisor runs it itself.

Otherwise the supervisor is a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): every
process the command starts stays its descendant, and it kills and reaps them all at
the same moments. The host process then also kills the supervisor's descendants from
outside before ending the supervisor (a paused supervisor still holds them).

Once every descendant is gone it writes ``C`` to ``STATUS_FD`` ("contained"): the host
reports the command's processes as killed only when it read that, or killed them
itself. This file is executed by path and imports only the standard library.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 0x40000
UNAVAILABLE = b"U"
"""What the helper writes to the relay when it could not make the namespaces."""
_libc = ctypes.CDLL(None, use_errno=True)
_status_fd = -1


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
    """SIGKILL every descendant and reap it; orphans re-parent here, so loop until none.

    With a PID namespace the only child is its init: once it is reaped, the kernel has
    killed and reaped everything else in the namespace."""
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
            break  # no child left, alive or zombie
        time.sleep(0.005)
    if _status_fd >= 0:
        os.write(_status_fd, b"C")


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


def _write(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _new_pid_namespace() -> bool:
    """Make our next child the init of a new PID (and mount) namespace; False when not
    allowed."""
    if _libc.unshare(CLONE_NEWPID | CLONE_NEWNS) == 0:  # CAP_SYS_ADMIN (root, in a container)
        return True
    uid, gid = os.getuid(), os.getgid()
    if _libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS) != 0:  # no user namespaces
        return False
    try:  # the same uid and gid inside: files keep their owner, nothing is gained
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as exc:
        sys.stderr.write(f"lovia shell: cannot map the user namespace: {exc}\n")
        os._exit(126)  # nothing was started; running as an unmapped user would be wrong
    return True


def _helper(argv: list[str], relay: int) -> None:
    """The namespaces' parent: make them and start their init, or say they are
    unavailable (``U`` on ``relay``) before anything runs."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the supervisor gone: all go
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if not _new_pid_namespace():
        os.write(relay, UNAVAILABLE)
        os._exit(0)
    init = os.fork()
    if init == 0:
        _run_init(argv, relay)
    os.waitpid(init, 0)
    os._exit(0)


def _run_init(argv: list[str], relay: int) -> None:
    """As the namespace's init: mount its /proc, run the command, reap every orphan,
    and hand the command's wait status to the supervisor (``relay``) as it ends."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # an init ignores what the command sends
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the helper gone: all go
    private = _libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0
    flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
    if not (private and _libc.mount(b"proc", b"/proc", b"proc", flags, None) == 0):
        os.write(relay, UNAVAILABLE)  # pids inside would not match /proc: not this way
        os._exit(0)
    pid = _spawn(argv)
    while True:
        try:
            done, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        if done == pid:
            os.write(relay, b"S%d" % status)
            os._exit(0)  # the kernel now kills the rest of the namespace


def _spawn(argv: list[str]) -> int:
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as subprocess does for a command
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    return pid


def _in_namespace(argv: list[str]) -> int | None:
    """Run the command in its own namespaces; its wait status, or None when they cannot
    be made (nothing ran)."""
    relay, relay_w = os.pipe()  # close-on-exec: the command never holds it
    helper = os.fork()
    if helper == 0:
        os.close(_status_fd)  # only the supervisor says "contained"
        os.close(relay)
        _helper(argv, relay_w)
    os.close(relay_w)
    _, status = os.waitpid(helper, 0)
    told = os.read(relay, 32)
    os.close(relay)
    if told == UNAVAILABLE:
        return None
    return int(told[1:]) if told.startswith(b"S") else status


def main() -> None:
    global _status_fd
    parent, _status_fd, pidns, argv = (
        int(sys.argv[1]),
        int(sys.argv[2]),
        sys.argv[3] == "1",
        sys.argv[4:],
    )
    os.set_inheritable(_status_fd, False)  # the command's processes never hold it
    try:
        _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except AttributeError:  # no prctl: the parent's process-group kill remains
        pass
    signal.signal(signal.SIGTERM, _on_term)
    if os.getppid() != parent:  # the parent died before PDEATHSIG was armed
        _on_term(signal.SIGTERM, None)
    status = _in_namespace(argv) if pidns else None
    if status is None:
        _, status = os.waitpid(_spawn(argv), 0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # cleaning up now anyway
    kill_all()
    _exit_like(status)


if __name__ == "__main__":
    main()
