"""Run one parsed command: open the store, call the command, map errors to exit codes."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import traceback
from collections.abc import Callable, Coroutine
from typing import Any

from .._display import safe_text
from .._redact import redact
from ..errors import LoviaError
from ._common import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK
from ._out import Out

__all__ = ["dispatch"]

Command = Callable[[argparse.Namespace, Out], Coroutine[Any, Any, int]]


def _command(name: str) -> Command:
    if name == "runs":
        from ._runs import runs

        return runs
    if name == "show":
        from ._show import show

        return show
    if name == "trace":
        from ._trace import trace

        return trace
    if name == "prune":
        from ._prune import prune

        return prune
    if name == "reprice":
        from ._reprice import reprice

        return reprice
    if name == "web":
        from ._web import web

        return web
    if name == "cancel":
        from ._cancel import cancel

        return cancel
    if name == "resume":
        from ._resume import resume

        return resume

    if name in ("pin", "eval"):
        from ._eval import eval_command, pin_command

        return pin_command if name == "pin" else eval_command
    from ._replay import replay

    return replay


def dispatch(args: argparse.Namespace) -> int:
    """Run ``args.command`` and map how it ended to the exit code (the one place that does).

    A LoviaError is one ``error: …`` line and its ``hint: …``; anything unexpected also
    exits with EXIT_ERROR (after its traceback), never with EXIT_MISMATCH.
    """
    out = Out(json_mode=bool(args.json))
    try:
        return asyncio.run(_command(str(args.command))(args, out))
    except LoviaError as exc:
        print_error(exc.message, exc.hint)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (`lovia show … | head`): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:
        sys.stderr.write(safe_text(redact(traceback.format_exc())))
        print_error(
            f"unexpected {type(exc).__name__}: {exc}",
            "This is a bug in lovia: please report it with the traceback above.",
        )
        return EXIT_ERROR


def print_error(message: str, hint: str | None = None) -> None:
    """``error: message`` and ``hint: hint`` on stderr: keys and URL secrets masked, and
    control characters escaped (a message may quote a stored name or a server's answer)."""
    sys.stderr.write(f"error: {safe_text(redact(message))}\n")
    if hint:
        sys.stderr.write(f"hint: {safe_text(redact(hint))}\n")
