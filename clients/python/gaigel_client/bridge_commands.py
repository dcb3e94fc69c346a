"""``gaigel stdio-bot`` and ``gaigel check-bot`` (an extension module of ``gaigel.cli``).

grpc and the server are imported only when a command runs.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any


def _command(args: argparse.Namespace, what: str) -> list[str]:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        from gaigel.cli import CliError

        raise CliError(f"give the bot command after --, e.g. gaigel {what} -- bash clients/stdio/random_bot.sh")
    return cmd


def register(sub: Any) -> None:
    """Adds stdio-bot and check-bot to the ``gaigel`` subparsers."""
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
    p.add_argument("--matches", type=int, default=None, metavar="N", help="leave after N matches")
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
    p.add_argument("--json", action="store_true", help="print the results as one JSON object")
    p.add_argument("-v", "--verbose", action="store_true", help="show the bot's stderr and the server's log")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the bot command")
    p.set_defaults(func=cmd_check_bot)


def cmd_stdio_bot(args: argparse.Namespace) -> int:
    """gaigel stdio-bot."""
    from gaigel_client.stdio import run_stdio_bot

    cmd = _command(args, "stdio-bot")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    return run_stdio_bot(
        cmd, server=args.server, token=args.token, name=args.bot_name, matches=args.matches, secure=args.secure
    )


def cmd_check_bot(args: argparse.Namespace) -> int:
    """gaigel check-bot."""
    from gaigel_client.checkbot import run_checks

    cmd = _command(args, "check-bot")
    return run_checks(
        cmd, deadline=args.deadline, max_matches=args.max_matches, as_json=args.json, verbose=args.verbose
    )


__all__ = ["cmd_check_bot", "cmd_stdio_bot", "main", "register"]


def main(argv: list[str] | None = None) -> int:
    """``python -m gaigel_client.bridge_commands stdio-bot|check-bot ...`` (works before the CLI lists this module)."""
    import sys

    from gaigel.cli import CliError

    parser = argparse.ArgumentParser(prog="gaigel")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except CliError as e:
        print(f"gaigel {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
