"""The harness's commands: ``bot``, ``chaos-bot``, ``stdio-bot``, ``check-bot``, ``try``, ``rematch`` and ``view``.

Registered through the ``gaigel.commands`` entry point; grpc is imported only when a
command runs.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from gaigel.cli import CliError, seconds_arg
from gaigel_harness import trial
from gaigel_harness.startup import STARTUP_TIMEOUT


def register(subparsers: Any) -> None:
    """Adds the harness's commands to the ``gaigel`` subparsers."""
    p = subparsers.add_parser(
        "bot",
        help="connect a house bot to a server over gRPC",
        description=(
            "Run a house bot (random, first, ...) as a gRPC client of a Gaigel server. "
            "The server address and bot token default to $GAIGEL_SERVER and $GAIGEL_TOKEN."
        ),
    )
    p.add_argument("name", help="house bot to run, e.g. random or first")
    p.add_argument(
        "--server", default=None, metavar="HOST:PORT", help="server address (default $GAIGEL_SERVER or 127.0.0.1:50051)"
    )
    p.add_argument("--token", default=None, help="bot token (default $GAIGEL_TOKEN)")
    p.add_argument(
        "--bot-name", default=None, help="registered bot name for Join (default $GAIGEL_BOT_NAME, else NAME)"
    )
    _add_matches(p)
    p.add_argument("--secure", action="store_true", help="connect with TLS")
    p.add_argument("-v", "--verbose", action="store_true", help="log every reconnect and rejection")
    p.set_defaults(func=cmd_bot)
    _register_chaos(subparsers)
    _register_bridge(subparsers)
    trial.register(subparsers)
    _register_view(subparsers)


def _register_view(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "view",
        help="write an HTML page that replays a match record step by step",
        description=(
            "Replay RECORD with the engine and write one self-contained HTML page (no network) to step through "
            "it hand by hand and trick by trick: hands, talon, trump, tricks, melds, points, dashes, every "
            "decision's legal actions and time, and every fault. With --seat the page holds only what that seat "
            "knew. Open a step directly with #step=N&seat=S in the URL."
        ),
    )
    p.add_argument("record", metavar="RECORD", help="a JSON match record")
    p.add_argument("--out", metavar="FILE.html", help="the page to write (default: RECORD with .html)")
    p.add_argument("--seat", type=int, metavar="S", help="show only what seat S knew (the other hands stay hidden)")
    p.set_defaults(func=cmd_view)


def cmd_view(args: argparse.Namespace) -> int:
    """Writes the viewer page of a record; exit 2 with one line for bad input."""
    from pathlib import Path

    from gaigel_harness.viewer import ViewerError, write_viewer

    out = Path(args.out) if args.out else Path(args.record).with_suffix(".html")
    if out.resolve() == Path(args.record).resolve():
        raise CliError(f"--out {out} would overwrite the record")
    try:
        write_viewer(args.record, out, args.seat)
    except ViewerError as e:
        raise CliError(str(e)) from None
    print(f"wrote {out}")
    return 0


def _register_chaos(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "chaos-bot",
        help="a bot that injects faults on purpose (for soak tests)",
        description=(
            "Play legal moves over gRPC, and at seeded random decisions misbehave on purpose: time out, "
            "answer illegally, quote a stale decision id, send bytes that are not a PlayRequest, drop the "
            "stream and resume, or crash (exit code 86; the arena restarts it and the new process resumes). "
            "Each injected fault is one JSON line in the fault log. Server, token and bot name default to "
            "$GAIGEL_SERVER, $GAIGEL_TOKEN and $GAIGEL_BOT_NAME."
        ),
    )
    p.add_argument(
        "--chaos",
        default=None,
        metavar="SPEC",
        help=(
            "per-decision probabilities, e.g. timeout=0.01,garbage=0.005,illegal=0.01,stale=0.005,"
            "disconnect=0.005,crash=0.002 (default $GAIGEL_CHAOS, else none: a well-behaved bot)"
        ),
    )
    p.add_argument(
        "--seed", type=int, default=None, help="seed of the faults and moves (default $GAIGEL_CHAOS_SEED, else 0)"
    )
    p.add_argument(
        "--fault-log",
        default=None,
        metavar="FILE",
        help="append one JSON line per injected fault here (default $GAIGEL_CHAOS_LOG, else stderr)",
    )
    p.add_argument(
        "--state-dir",
        default=None,
        metavar="DIR",
        help=(
            "resume files shared by the processes of this bot, so a restarted process resumes its match "
            "(default $GAIGEL_CHAOS_STATE_DIR, else a folder in the temporary directory named after bot and server)"
        ),
    )
    p.add_argument(
        "--crash-interval",
        type=float,
        default=10.0,
        metavar="S",
        help=(
            "at most one crash per S seconds among this bot's processes, drawn crashes within it are played "
            "normally (default 10: the arena stops a bot that exits 10 times within a minute)"
        ),
    )
    p.add_argument("--server", default=None, metavar="HOST:PORT", help="server address (default $GAIGEL_SERVER)")
    p.add_argument("--token", default=None, help="bot token (default $GAIGEL_TOKEN)")
    p.add_argument("--bot-name", default=None, help="registered bot name (default $GAIGEL_BOT_NAME, else chaos)")
    _add_matches(p)
    p.add_argument("-v", "--verbose", action="store_true", help="log the SDK's reconnects and rejections")
    p.set_defaults(func=cmd_chaos_bot)


def _add_matches(p: argparse.ArgumentParser) -> None:
    """--matches, as every SDK-driven bot command takes it (None: run() reads $GAIGEL_MATCHES)."""
    p.add_argument(
        "--matches",
        type=int,
        default=None,
        metavar="N",
        help="leave after N matches (default $GAIGEL_MATCHES, else until the server ends the session)",
    )


def cmd_bot(args: argparse.Namespace) -> int:
    """Runs the house bot; exit 0 when done, 1 when the server refused or stayed unreachable."""
    from gaigel_client.client import run
    from gaigel_client.errors import GaigelClientError
    from gaigel_harness.house import HouseBotAdapter

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    bot = HouseBotAdapter(args.name)  # ValueError for an unknown name: the CLI prints it
    try:
        played = run(bot, args.server, args.token, matches=args.matches, secure=args.secure, name=args.bot_name)
    except GaigelClientError as e:
        print(f"gaigel bot: error: {e}", file=sys.stderr)
        return 1
    print(f"gaigel bot: {args.name} played {played} match{'es' if played != 1 else ''}", file=sys.stderr)
    return 0


def cmd_chaos_bot(args: argparse.Namespace) -> int:
    """Runs the chaos bot; exit 0 when done, 1 when the server refused or stayed unreachable."""
    import os

    from gaigel_client.errors import GaigelClientError
    from gaigel_harness.chaos import ChaosSpec, run_chaos

    # The SDK warns about every rejection and reconnect; here they are on purpose (and in the fault log).
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.ERROR, format="%(levelname)s %(name)s: %(message)s"
    )
    spec_text = args.chaos if args.chaos is not None else os.environ.get("GAIGEL_CHAOS", "")
    seed = args.seed if args.seed is not None else int(os.environ.get("GAIGEL_CHAOS_SEED", "0") or 0)
    try:
        played = run_chaos(
            ChaosSpec.parse(spec_text),
            seed=seed,
            fault_log=args.fault_log or os.environ.get("GAIGEL_CHAOS_LOG") or None,
            state_dir=args.state_dir or os.environ.get("GAIGEL_CHAOS_STATE_DIR") or None,
            server=args.server,
            token=args.token,
            name=args.bot_name,
            matches=args.matches,
            crash_interval=args.crash_interval,
        )
    except GaigelClientError as e:
        print(f"gaigel chaos-bot: error: {e}", file=sys.stderr)
        return 1
    print(f"gaigel chaos-bot: played {played} match{'es' if played != 1 else ''}", file=sys.stderr)
    return 0


def _command(args: argparse.Namespace, what: str) -> list[str]:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise CliError(f"give the bot command after --, e.g. gaigel {what} -- bash clients/stdio/random_bot.sh")
    return cmd


def _register_bridge(sub: Any) -> None:
    """stdio-bot and check-bot."""
    p = sub.add_parser(
        "stdio-bot",
        help="connect a bot that speaks JSON lines on stdin/stdout",
        description="Join a server as a bot (like `gaigel bot`), launch CMD and relay the session to it as JSON "
        "lines: one line per server message on CMD's stdin, one answer line per decision on its stdout "
        "(docs/stdio-protocol.md). The server, token and bot name default to $GAIGEL_SERVER, $GAIGEL_TOKEN and "
        "$GAIGEL_BOT_NAME.",
    )
    p.add_argument("--server", default=None, metavar="HOST:PORT", help="server address (default $GAIGEL_SERVER)")
    p.add_argument("--token", default=None, help="bot token (default $GAIGEL_TOKEN)")
    p.add_argument("--bot-name", default=None, help="registered bot name (default $GAIGEL_BOT_NAME)")
    _add_matches(p)
    p.add_argument("--secure", action="store_true", help="connect with TLS")
    p.add_argument("-v", "--verbose", action="store_true", help="log reconnects and rejections")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the bot command")
    p.set_defaults(func=cmd_stdio_bot)

    p = sub.add_parser(
        "check-bot",
        help="run a bot command through the conformance checks",
        description="Start a scripted server and a real server with short clocks, launch CMD (with GAIGEL_SERVER, "
        "GAIGEL_TOKEN and GAIGEL_BOT_NAME set) several times and check the protocol: Join, every decision kind, "
        "recovery after ActionRejected, answer time, Resume after a dropped stream, exit after MatchEnd. Prints "
        "PASS/FAIL per check; exit 0 only when all pass.",
    )
    p.add_argument(
        "--deadline",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="time per decision the bot must answer within (default %(default)s)",
    )
    p.add_argument(
        "--max-matches", type=int, default=8, help="real matches to try for decision coverage (default %(default)s)"
    )
    p.add_argument(
        "--startup-timeout",
        type=seconds_arg,
        default=STARTUP_TIMEOUT,
        help="seconds the bot command has to join each time it is started, a build it runs first included "
        "(default %(default)s)",
    )
    p.add_argument("--json", action="store_true", help="print the results as one JSON object")
    p.add_argument("-v", "--verbose", action="store_true", help="show the bot's stderr and the server's log")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the bot command")
    p.set_defaults(func=cmd_check_bot)


def cmd_stdio_bot(args: argparse.Namespace) -> int:
    """gaigel stdio-bot."""
    from gaigel_harness.stdio import run_stdio_bot

    cmd = _command(args, "stdio-bot")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    return run_stdio_bot(
        cmd, server=args.server, token=args.token, name=args.bot_name, matches=args.matches, secure=args.secure
    )


def cmd_check_bot(args: argparse.Namespace) -> int:
    """gaigel check-bot."""
    from gaigel_harness.checkbot import run_checks

    cmd = _command(args, "check-bot")
    return run_checks(
        cmd,
        deadline=args.deadline,
        max_matches=args.max_matches,
        as_json=args.json,
        verbose=args.verbose,
        startup_timeout=args.startup_timeout,
    )
