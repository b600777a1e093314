"""The ``lovia`` command: inspect runs, transcripts, traces, and replay model views.

```
lovia runs   [--session S] [--agent A] [--status interrupted] [--limit N]
lovia show   RUN | REF                                   # REF: a chat span's lovia.content.ref
lovia trace  RUN
lovia replay RUN | REF [--turn N] [--format text|json|request] [--diff A B]
lovia replay RUN --turn N --model M [--base-url U]     # what-if, writes nothing
lovia replay --trace-id T
lovia prune  --older-than 30d [--status completed|failed|cancelled] [--records-only] [--force]
lovia reprice RUN | --since 7d [--until DATE] | --all [--dry-run]   # cost with today's prices
lovia resume RUN --agent pkg.mod:agent [--approve CALL] [--deny CALL [--reason R]]
lovia cancel RUN [--reason R]                        # a queued run never starts
lovia web    [--host 127.0.0.1] [--port 8765] [--agent pkg.mod:agent]   # extra `web`
lovia pin    RUN[:TURN] [--to DIR]                  # a recorded run as an eval case
lovia eval   DIR (--baseline | --agent M:A | --model M) [--format table|json|junit]
```

Every command takes ``--store URL`` (default ``$LOVIA_STORE`` or
``sqlite:///.lovia/lovia.db``) and ``--json``. Output is pretty on a terminal and plain
when piped. Errors print ``error: ...`` and ``hint: ...`` and exit 2; a view that fails
to verify exits 1. Imports are lazy so ``lovia --help`` starts fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _common_options(*, top: bool) -> argparse.ArgumentParser:
    """``--store`` and ``--json``, accepted before the command and after it.

    The command's copies default to SUPPRESS: a subparser's own default would otherwise
    overwrite what was given before the command (``lovia --store URL runs``).
    """
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store",
        metavar="URL",
        default=None if top else argparse.SUPPRESS,
        help="store URL (default: $LOVIA_STORE or sqlite:///.lovia/lovia.db)",
    )
    common.add_argument(
        "--json",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="print JSON",
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (``runs``, ``show``, ``trace``, ``replay``, ``prune``, ``web``)."""
    common = _common_options(top=False)
    parser = argparse.ArgumentParser(
        prog="lovia",
        description="Inspect and replay lovia runs stored in a session/checkpoint store.",
        parents=[_common_options(top=True)],
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _runs_parser(sub.add_parser("runs", parents=[common], help="list recent runs"))
    show = sub.add_parser("show", parents=[common], help="print a run's transcript")
    show.add_argument(
        "run",
        metavar="RUN",
        help="run id, a unique prefix, `last`, or a content reference (lovia:run/…/view/…)",
    )
    show.add_argument("--full", action="store_true", help="do not shorten long entries")
    trace = sub.add_parser("trace", parents=[common], help="print a run's span tree")
    trace.add_argument("run", metavar="RUN", help="run id, a unique prefix, or `last`")
    _replay_parser(
        sub.add_parser(
            "replay", parents=[common], help="rebuild and verify each model view of a run"
        )
    )
    _prune_parser(
        sub.add_parser("prune", parents=[common], help="delete finished runs older than an age")
    )
    _reprice_parser(
        sub.add_parser(
            "reprice", parents=[common], help="recompute stored runs' cost with the current prices"
        )
    )
    _web_parser(sub.add_parser("web", parents=[common], help="the postmortem in a browser"))
    cancel = sub.add_parser(
        "cancel", parents=[common], help="cancel a run by id (stored: a queued run never starts)"
    )
    cancel.add_argument("run", help="the run id")
    cancel.add_argument("--reason", default="cancelled from the CLI", help="why (stored)")
    _resume_parser(
        sub.add_parser(
            "resume", parents=[common], help="continue an interrupted, paused or failed run"
        )
    )

    from ._eval_args import add_eval_parsers

    add_eval_parsers(sub, common)
    return parser


def _runs_parser(runs: argparse.ArgumentParser) -> None:
    """``lovia runs``: its filters."""
    runs.add_argument("--session", help="only runs of this session id")
    runs.add_argument("--agent", help="only runs that ended in this agent")
    runs.add_argument(
        "--status",
        choices=[
            "running",
            "interrupted",
            "paused",
            "completed",
            "failed",
            "cancelled",
            "dead_lettered",
        ],
        help="only runs in this state (interrupted: their worker is gone; resume them)",
    )
    runs.add_argument("--limit", type=int, default=20, help="at most N runs (default 20)")
    runs.add_argument("--all", action="store_true", help="include child runs (agents run as tools)")
    runs.add_argument(
        "--label",
        action="append",
        metavar="KEY=VALUE",
        help="only runs with this attribution label (repeat: all of them); prints totals",
    )


def _prune_parser(prune: argparse.ArgumentParser) -> None:
    """``lovia prune``: age, status and what to keep."""
    prune.add_argument("--older-than", required=True, metavar="AGE", help="30d, 12h, 90m, 45s")
    prune.add_argument(
        "--status", choices=["completed", "failed", "cancelled"], help="only these runs"
    )
    prune.add_argument(
        "--records-only",
        action="store_true",
        help="keep each run's summary row; drop its checkpoint records (no replay after)",
    )
    prune.add_argument(
        "--force",
        action="store_true",
        help="also prune failed runs that ran tools (by default they are kept: they can "
        "resume, and their tool ledger stops a resume from running a tool again)",
    )


def _reprice_parser(reprice: argparse.ArgumentParser) -> None:
    """``lovia reprice``: which runs, dry run, the correction metric."""
    reprice.add_argument("run", nargs="?", metavar="RUN", help="one run (id, prefix or `last`)")
    reprice.add_argument("--since", metavar="WHEN", help="runs started since (date or age: 7d)")
    reprice.add_argument("--until", metavar="WHEN", help="runs started before (date or age)")
    reprice.add_argument("--all", action="store_true", help="every run in the store")
    reprice.add_argument(
        "--dry-run", action="store_true", help="show each run's change and the total; write nothing"
    )
    _telemetry_option(
        reprice,
        "export the lovia.cost.correction metric (default: $LOVIA_TELEMETRY, "
        "OTEL_EXPORTER_OTLP_* variables)",
    )


def _resume_parser(resume: argparse.ArgumentParser) -> None:
    resume.add_argument("run", metavar="RUN", help="run id, a unique prefix, or `last`")
    resume.add_argument(
        "--agent", required=True, metavar="MOD:ATTR", help="the run's agent (pkg.mod:agent)"
    )
    resume.add_argument("--approve", action="append", metavar="CALL_ID", help="approve a call")
    resume.add_argument("--deny", action="append", metavar="CALL_ID", help="deny a call")
    resume.add_argument("--reason", metavar="TEXT", help="why the calls are denied")
    _telemetry_option(resume)


def _telemetry_option(parser: argparse.ArgumentParser, what: str = "") -> None:
    parser.add_argument(
        "--telemetry",
        choices=["otlp", "local", "console", "none"],
        help=what
        or "trace the run (default: $LOVIA_TELEMETRY, OTEL_EXPORTER_OTLP_* variables, "
        "or `local` when the store holds local spans)",
    )


def _web_parser(web: argparse.ArgumentParser) -> None:
    web.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    web.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free)")
    web.add_argument("--agent", metavar="MOD:ATTR", help="agent to chat with (pkg.mod:agent)")
    web.add_argument(
        "--whatif",
        action="store_true",
        help="allow what-if (re-sending a view to a model: it spends money); "
        "every request then needs the access token, on loopback too",
    )
    web.add_argument(
        "--whatif-allow-host",
        metavar="HOST[:PORT]",
        action="append",
        default=[],
        help="a host a what-if base URL may name besides the configured providers' "
        "(repeatable; also $LOVIA_WHATIF_ALLOW_HOSTS); configured keys never go there",
    )
    _telemetry_option(web)


def _replay_parser(replay: argparse.ArgumentParser) -> None:
    """The options of `lovia replay`. Reason for length: a flat list, one call per option."""
    replay.add_argument(
        "run",
        metavar="RUN",
        nargs="?",
        help="run id, a unique prefix, `last`, or a content reference (lovia:run/…/view/…)",
    )
    replay.add_argument("--trace-id", metavar="T", help="find the run by its trace id")
    replay.add_argument(
        "--child",
        metavar="CALL_ID",
        help="replay the child run (agent run as a tool) that this tool call started",
    )
    replay.add_argument("--turn", type=int, metavar="N", help="only this turn")
    replay.add_argument("--attempt", type=int, metavar="K", help="only this attempt of the turn")
    replay.add_argument(
        "--format",
        choices=["text", "json", "request"],
        default=None,
        help="text (default), json, or the exact provider request body",
    )
    replay.add_argument(
        "--diff",
        nargs=2,
        type=int,
        metavar=("A", "B"),
        help="what changed between the views of turns A and B",
    )
    replay.add_argument(
        "--model", metavar="M", help="what-if: send the view of --turn to model M (provider:model)"
    )
    replay.add_argument(
        "--base-url",
        metavar="U",
        help="API base URL for --model (another host than the configured one gets "
        "no configured key: see --api-key-env)",
    )
    replay.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="the environment variable holding the key to send to --base-url",
    )
    replay.add_argument(
        "--provider",
        metavar="P",
        help="adapter for --format request (default: the recorded provider; "
        "openai, openai-responses, anthropic)",
    )
    stream = replay.add_mutually_exclusive_group()
    stream.add_argument(
        "--stream",
        dest="stream",
        action="store_const",
        const=True,
        default=None,
        help="render/send a streaming request (default)",
    )
    stream.add_argument(
        "--no-stream",
        dest="stream",
        action="store_const",
        const=False,
        help="render/send a non-streaming request",
    )
    replay.add_argument("--full", action="store_true", help="do not shorten long entries")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lovia`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    from ._main import dispatch

    code = dispatch(args)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    return code
