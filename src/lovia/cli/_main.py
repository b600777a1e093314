"""Run one parsed command: open the store, call the command, map errors to exit codes."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from ..errors import LoviaError
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
    if name == "web":
        from ._web import web

        return web
    from ._replay import replay

    return replay


def dispatch(args: argparse.Namespace) -> int:
    """Run ``args.command``; ``error: …`` / ``hint: …`` and exit 2 on a LoviaError."""
    out = Out(json_mode=bool(args.json))
    try:
        return asyncio.run(_command(str(args.command))(args, out))
    except LoviaError as exc:
        print_error(exc.message, exc.hint)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`lovia show … | head`): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def print_error(message: str, hint: str | None = None) -> None:
    """``error: message`` and ``hint: hint`` on stderr."""
    sys.stderr.write(f"error: {message}\n")
    if hint:
        sys.stderr.write(f"hint: {hint}\n")
