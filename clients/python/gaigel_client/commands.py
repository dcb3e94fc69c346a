"""The ``gaigel bot NAME`` command: runs a house bot over gRPC against a server.

Registered by ``gaigel.cli`` as an extension module; grpc is imported only when the
command runs.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any


def register(subparsers: Any) -> None:
    """Adds ``bot`` to the ``gaigel`` command line."""
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
    p.add_argument(
        "--matches",
        type=int,
        default=None,
        metavar="N",
        help="leave after N matches (default: until the server ends the session)",
    )
    p.add_argument("--secure", action="store_true", help="connect with TLS")
    p.add_argument("-v", "--verbose", action="store_true", help="log every reconnect and rejection")
    p.set_defaults(func=cmd_bot)


def cmd_bot(args: argparse.Namespace) -> int:
    """Runs the house bot; exit 0 when done, 1 when the server refused or stayed unreachable."""
    from gaigel_client.client import run
    from gaigel_client.errors import GaigelClientError
    from gaigel_client.house import HouseBotAdapter

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
