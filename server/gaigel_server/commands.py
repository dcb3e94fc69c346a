"""``gaigel serve`` and the clock options it shares with ``gaigel try`` (registered through the
``gaigel.commands`` entry point, so the engine's CLI never names this package)."""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from gaigel.cli import CliError, number_arg, port_arg, positive_int, seconds_arg
from gaigel_server.clock import CLOCK_DEFAULTS, Clock
from gaigel_server.loops import EventLoop

_CLOCK_HELP = {
    "decision_time": "seconds per decision before the bank is drawn on",
    "bank": "reserve seconds per seat for the whole match",
    "strikes_limit": "strikes a seat may collect; one more forfeits",
    "resume_grace": "seconds a disconnected seat may take to resume",
}


def add_clock_args(p: argparse.ArgumentParser, *, server_defaults: bool = False) -> None:
    """The clock options; with *server_defaults* they default to None (``gaigel try --server``
    then leaves them to the server, and an in-process server uses :data:`CLOCK_DEFAULTS`)."""
    for name, what in _CLOCK_HELP.items():
        value = f"{CLOCK_DEFAULTS[name]:g}"
        default = f"default {value}; with --server the server's default" if server_defaults else f"default {value}"
        p.add_argument(
            "--" + name.replace("_", "-"),
            type=int if name == "strikes_limit" else seconds_arg,
            default=None if server_defaults else CLOCK_DEFAULTS[name],
            help=f"{what} ({default})",
        )


def clock_options(args: argparse.Namespace) -> dict[str, Any]:
    """The clock options given on the command line (those left at None omitted)."""
    return {name: getattr(args, name) for name in CLOCK_DEFAULTS if getattr(args, name) is not None}


def clock_from_args(args: argparse.Namespace) -> Clock:
    """The clock of the command line, defaults filled in.

    :raises CliError: a value out of range.
    """
    try:
        return Clock().replaced(**clock_options(args))
    except ValueError as e:
        raise CliError(str(e)) from None


def register(sub: Any) -> None:
    """Adds ``serve`` to the ``gaigel`` subparsers."""
    p = sub.add_parser(
        "serve",
        help="run the gRPC game server",
        description="Run the gaigel.v1 game server (BotService, MatchService, health, reflection) until SIGTERM.",
    )
    p.add_argument("--address", default="127.0.0.1:50051", help="host:port to listen on (default %(default)s)")
    p.add_argument("--bots", metavar="FILE", help="TOML or JSON file mapping bot names to tokens")
    p.add_argument(
        "--admin-token",
        default=None,
        help="MatchService token (default: env GAIGEL_ADMIN_TOKEN, else generated and printed once)",
    )
    p.add_argument("--tls-cert", metavar="PEM", help="TLS certificate chain (with --tls-key)")
    p.add_argument("--tls-key", metavar="PEM", help="TLS private key (with --tls-cert)")
    p.add_argument(
        "--metrics-port", type=port_arg, default=9464, help="Prometheus metrics port, 0 = off (default %(default)s)"
    )
    p.add_argument(
        "--metrics-address", default="127.0.0.1", help="address of the metrics endpoint (default %(default)s)"
    )
    p.add_argument("--records", metavar="DIR", help="write each match record as DIR/<match id>.json")
    p.add_argument(
        "--grace", type=seconds_arg, default=10.0, help="seconds to shut down in on SIGTERM (default %(default)s)"
    )
    p.add_argument(
        "--loop",
        default=EventLoop.ASYNCIO.value,
        choices=[kind.value for kind in EventLoop],
        help="the event loop: asyncio's own, or uvloop (pip install uvloop) (default %(default)s)",
    )
    p.add_argument(
        "--processes",
        type=positive_int,
        default=1,
        metavar="N",
        help="play tables in N processes behind one front process that routes each connection "
        "(a table's seats all reach its process; --metrics-port serves every process's metrics, "
        "labelled process; a process that dies or hangs for 30 s is replaced and its matches are lost, a fourth death "
        "within a minute stops the server) "
        "(default %(default)s: one process does everything)",
    )
    p.add_argument(
        "--join-timeout",
        type=seconds_arg,
        default=1.0,
        help="seconds a new stream has to send Join or Resume; bots send it at once (default %(default)s)",
    )
    p.add_argument(
        "--max-message-bytes",
        type=positive_int,
        default=64 * 1024,
        help="largest message accepted from a bot (default %(default)s)",
    )
    p.add_argument(
        "--max-sessions", type=positive_int, default=64, help="sessions per bot token at once (default %(default)s)"
    )
    p.add_argument(
        "--keep-ended",
        type=positive_int,
        default=5000,
        help="ended matches kept in memory for GetMatch, GetMatchRecord and WatchMatch; older ones are "
        "forgotten (their records stay in --records) (default %(default)s)",
    )
    p.add_argument(
        "--max-streams",
        type=positive_int,
        default=1024,
        help="bot streams past Join open at once, all bots together; more Joins are refused with "
        "RESOURCE_EXHAUSTED (default %(default)s)",
    )
    p.add_argument(
        "--max-pending-streams",
        type=positive_int,
        default=256,
        help="streams still waiting to send Join or Resume; beyond it the one waiting longest is ended "
        "with SERVER_BUSY, so a Join or Resume always finds room (default %(default)s)",
    )
    p.add_argument(
        "--max-pending-per-peer",
        type=positive_int,
        default=32,
        help="streams of one address still waiting to send Join or Resume; beyond it that address's "
        "oldest is ended with SERVER_BUSY (default %(default)s)",
    )
    p.add_argument(
        "--slow-reader-timeout",
        type=seconds_arg,
        default=20.0,
        help="seconds the server waits for a bot to read what it sent before ending the stream with "
        "SLOW_READER (default %(default)s)",
    )
    p.add_argument(
        "--idle-timeout",
        type=seconds_arg,
        default=5.0,
        help="seconds a connection without any call stays open, then GOAWAY; clients reconnect when they "
        "call again (default %(default)s)",
    )
    p.add_argument(
        "--max-connection-age",
        type=seconds_arg,
        default=3600.0,
        help="seconds after which a connection takes no new calls; its open streams go on (default %(default)s)",
    )
    p.add_argument(
        "--max-connections",
        type=positive_int,
        default=2048,
        help="connections open at once; more are closed when accepted, and health says NOT_SERVING "
        "meanwhile (default %(default)s)",
    )
    p.add_argument(
        "--max-connections-per-peer",
        type=positive_int,
        default=64,
        help="connections open at once from one address (IPv6: one /64); more are closed when accepted "
        "(default %(default)s)",
    )
    p.add_argument(
        "--no-front-door",
        dest="front_door",
        action="store_false",
        help="let grpc listen on --address itself: no per-address limits and no rapid-reset GOAWAY "
        "(see docs/reliability.md)",
    )
    p.add_argument(
        "--max-streams-per-connection",
        type=positive_int,
        default=256,
        help="streams open at once on one connection; clients queue the rest (default %(default)s)",
    )
    p.add_argument(
        "--max-bot-series",
        type=number_arg(int, 0, None, "a count"),
        default=200,  # ServerConfig.max_bot_series (not imported here: it pulls in prometheus_client)
        help='bots with their own metric series (decision latency); the others share bot="_other", '
        "so thousands of bots keep /metrics small; 0: all share it (default %(default)s)",
    )
    p.add_argument(
        "--watch-without-token",
        action="store_true",
        help="serve WatchMatch without the admin token (public information only)",
    )
    p.add_argument(
        "--log-level",
        default="info",
        choices=("debug", "info", "warning", "error"),
        help="log level (default %(default)s)",
    )
    add_clock_args(p)
    p.set_defaults(func=cmd_serve)


# --- serve ------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    """gaigel serve."""
    from gaigel_server import loops
    from gaigel_server.auth import load_bots_file
    from gaigel_server.logging import configure_logging
    from gaigel_server.server import ServerConfig, check_bindable, serve

    configure_logging(args.log_level)
    # Start-up checks: each mistake is one line naming the flag, before anything is served.
    try:
        new_loop = loops.factory(EventLoop(args.loop))
    except loops.LoopUnavailable as e:
        raise CliError(str(e)) from None
    if not args.address.startswith("unix"):  # grpc binds unix: paths itself (no front door there)
        check_bindable(args.address, "--address")
    if args.metrics_port:
        check_bindable(f"{args.metrics_address}:{args.metrics_port}", "--metrics-port")
    bots = load_bots_file(args.bots) if args.bots else {}
    config = ServerConfig(
        admin_token=args.admin_token or os.environ.get("GAIGEL_ADMIN_TOKEN", ""),
        bots=bots,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        metrics_port=args.metrics_port or None,
        metrics_address=args.metrics_address,
        max_bot_series=args.max_bot_series,
        records_dir=args.records,
        max_message_bytes=args.max_message_bytes,
        join_timeout=args.join_timeout,
        max_sessions_per_bot=args.max_sessions,
        max_streams=args.max_streams,
        max_pending_streams=args.max_pending_streams,
        max_pending_per_peer=args.max_pending_per_peer,
        slow_reader_timeout=args.slow_reader_timeout,
        idle_timeout=args.idle_timeout,
        max_connection_age=args.max_connection_age,
        max_connections=args.max_connections,
        max_connections_per_peer=args.max_connections_per_peer,
        front_door=args.front_door,
        max_streams_per_connection=args.max_streams_per_connection,
        keep_ended=args.keep_ended,
        clock=clock_from_args(args),
        watch_without_token=args.watch_without_token,
    )
    if args.processes > 1:
        if not args.front_door:
            raise CliError("--processes needs the front door (it routes each connection): drop --no-front-door")
        if args.address.startswith("unix"):
            raise CliError("--processes needs a TCP --address (the front door routes TCP connections)")
        from gaigel_server.cluster import serve_processes

        try:
            with asyncio.Runner(loop_factory=new_loop) as runner:
                return runner.run(
                    serve_processes(
                        args.address, config, args.processes, grace=args.grace, log_level=args.log_level, loop=args.loop
                    )
                )
        except ValueError as e:
            raise CliError(str(e)) from None
    try:
        with asyncio.Runner(loop_factory=new_loop) as runner:
            return runner.run(serve(args.address, config, grace=args.grace))
    except RuntimeError as e:  # grpc cannot bind
        raise CliError(str(e)) from None


__all__ = ["add_clock_args", "clock_from_args", "cmd_serve", "register"]
