"""``gaigel serve``, ``gaigel try`` and ``gaigel rematch`` (registered by :mod:`gaigel.cli`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import sys
import time
from typing import Any

from gaigel.cli import CliError, add_ruleset_args, players_arg, positive_int, ruleset_from_args, seed_arg

HOUSE_CHOICES = ("random", "first")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative number of seconds, got {text}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0..65535, got {value}")
    return value


def _add_clock_args(p: argparse.ArgumentParser, decision: float, bank: float) -> None:
    p.add_argument(
        "--decision-time",
        type=_seconds,
        default=decision,
        help="seconds per decision before the bank is drawn on (default %(default)s)",
    )
    p.add_argument(
        "--bank", type=_seconds, default=bank, help="reserve seconds per seat for the whole match (default %(default)s)"
    )
    p.add_argument(
        "--strikes-limit",
        type=int,
        default=3,
        help="strikes a seat may collect; one more forfeits (default %(default)s)",
    )
    p.add_argument(
        "--resume-grace",
        type=_seconds,
        default=20.0,
        help="seconds a disconnected seat may take to resume (default %(default)s)",
    )


def _clock(args: argparse.Namespace) -> Any:
    from gaigel_server.table import Clock

    return Clock(
        decision_time=args.decision_time,
        bank=args.bank,
        strikes_limit=args.strikes_limit,
        resume_grace=args.resume_grace,
    )


def register(sub: Any) -> None:
    """Adds serve, try and rematch to the ``gaigel`` subparsers."""
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
        "--metrics-port", type=_port, default=9464, help="Prometheus metrics port, 0 = off (default %(default)s)"
    )
    p.add_argument(
        "--metrics-address", default="127.0.0.1", help="address of the metrics endpoint (default %(default)s)"
    )
    p.add_argument("--records", metavar="DIR", help="write each match record as DIR/<match id>.json")
    p.add_argument(
        "--grace", type=_seconds, default=10.0, help="seconds to shut down in on SIGTERM (default %(default)s)"
    )
    p.add_argument(
        "--join-timeout",
        type=_seconds,
        default=10.0,
        help="seconds a new stream has to send Join (default %(default)s)",
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
    _add_clock_args(p, 2.0, 30.0)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser(
        "try",
        help="test a bot command against house bots",
        description="Start a server in-process, launch CMD with GAIGEL_SERVER and GAIGEL_TOKEN set, play one match "
        "against house bots, print the result and every fault of the bot. Exit 0 only when the match completed "
        "without a fault of the bot.",
    )
    p.add_argument("--players", type=players_arg, default=2, help="2, 3, 4 or 6 (default %(default)s)")
    p.add_argument("--hands", type=positive_int, default=2, help="number of hands (default %(default)s)")
    p.add_argument("--seed", type=seed_arg, default=None, help="match seed (default random)")
    p.add_argument(
        "--house", choices=HOUSE_CHOICES, default="random", help="house bot for the other seats (default %(default)s)"
    )
    p.add_argument("--time-limit", type=_seconds, default=120.0, help="seconds for the whole try (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_ruleset_args(p)
    _add_clock_args(p, 2.0, 30.0)
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the bot command")
    p.set_defaults(func=cmd_try)

    p = sub.add_parser(
        "rematch",
        help="play a recorded match again and report the first different decision",
        description="Play the bots of RECORD again on the same seed (house bots in-process, others by --bots NAME=CMD) "
        "and report the first decision where a bot now differs. Exit 0 when nothing differs, 1 otherwise.",
    )
    p.add_argument("record", help="a JSON match record")
    p.add_argument(
        "--bots", action="append", default=[], metavar="NAME=CMD", help="command of a non-house bot (repeatable)"
    )
    p.add_argument("--time-limit", type=_seconds, default=300.0, help="seconds for the rematch (default %(default)s)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_rematch)


# --- serve ------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    """gaigel serve."""
    from gaigel_server.auth import load_bots_file
    from gaigel_server.logging import configure_logging
    from gaigel_server.server import ServerConfig, serve

    configure_logging(args.log_level)
    bots = load_bots_file(args.bots) if args.bots else {}
    config = ServerConfig(
        admin_token=args.admin_token or os.environ.get("GAIGEL_ADMIN_TOKEN", ""),
        bots=bots,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        metrics_port=args.metrics_port or None,
        metrics_address=args.metrics_address,
        records_dir=args.records,
        max_message_bytes=args.max_message_bytes,
        join_timeout=args.join_timeout,
        max_sessions_per_bot=args.max_sessions,
        clock=_clock(args),
        watch_without_token=args.watch_without_token,
    )
    try:
        return asyncio.run(serve(args.address, config, grace=args.grace))
    except RuntimeError as e:  # grpc cannot bind
        raise CliError(str(e)) from None


# --- try --------------------------------------------------------------------------------


async def _start_bot(cmd: list[str], port: int, name: str, token: str) -> asyncio.subprocess.Process:
    env = dict(os.environ, GAIGEL_SERVER=f"127.0.0.1:{port}", GAIGEL_TOKEN=token, GAIGEL_BOT_NAME=name)
    try:
        return await asyncio.create_subprocess_exec(*cmd, env=env, stdin=asyncio.subprocess.DEVNULL)
    except OSError as e:
        raise CliError(f"cannot start bot command {' '.join(cmd)!r}: {e.strerror}") from None


async def _stop_bot(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), 2.0)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


async def _play_on_server(
    seat_bots: list[str],
    commands: dict[str, list[str]],
    seed: int,
    hands: int,
    rules_json: str,
    first_dealer: int,
    clock: Any,
    time_limit: float,
    preset_name: str = "default",
) -> tuple[dict[str, Any], list[str]]:
    """Runs one match on an in-process server; non-house bots are launched from *commands* (one process per seat)."""
    from gaigel_api.v1 import match_service_pb2 as ms
    from gaigel_server.logging import configure_logging
    from gaigel_server.server import ServerConfig, create_server

    configure_logging("warning")
    config = ServerConfig(clock=clock)
    server, port = create_server("127.0.0.1:0", config)
    await server.start()
    procs: list[asyncio.subprocess.Process] = []
    notes: list[str] = []
    try:
        tokens = {name: server.bots.register(name) for name in commands}
        for name in seat_bots:
            if name in commands:
                procs.append(await _start_bot(commands[name], port, name, tokens[name]))
        servicer = _match_servicer(server)
        request = ms.CreateMatchRequest(
            players=len(seat_bots),
            seat_bots=seat_bots,
            hands=hands,
            seed=seed,
            ruleset_preset=preset_name,
            ruleset_overrides_json=rules_json,
            first_dealer_seat=first_dealer,
        )
        table = servicer.build_table(request)
        server.lobby.add_table(table)
        deadline = time.monotonic() + time_limit
        while table.state != "ended":
            if time.monotonic() > deadline:
                notes.append(f"time limit of {time_limit:g} s reached: match cancelled")
                server.lobby.cancel(table, "cancelled", "time limit")
                if table.task is not None:
                    with contextlib.suppress(asyncio.CancelledError):
                        await table.task
                break
            if table.state == "waiting" and procs and all(p.returncode is not None for p in procs):
                notes.append(f"the bot exited with code {procs[0].returncode} before the match started")
                server.lobby.cancel(table, "cancelled", "bot exited")
                break
            await asyncio.sleep(0.05)
        assert table.record is not None
        return table.record, notes
    finally:
        for proc in procs:
            await _stop_bot(proc)
        await server.stop(1.0)


def _match_servicer(server: Any) -> Any:
    from gaigel_server.servicer import MatchServicer

    return MatchServicer(server.lobby, server.bots, server.metrics, server.admin_token, server.config.clock)


def cmd_try(args: argparse.Namespace) -> int:
    """gaigel try."""
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise CliError("give the bot command after --, e.g. gaigel try --players 2 -- python my_bot.py")
    rules = ruleset_from_args(args)
    seed = args.seed if args.seed is not None else secrets.randbits(64)
    seats = ["candidate"] + [f"house:{args.house}"] * (rules.players - 1)
    record, notes = asyncio.run(
        _play_on_server(
            seats,
            {"candidate": cmd},
            seed,
            args.hands,
            json.dumps(rules.to_dict()),
            0,
            _clock(args),
            args.time_limit,
            args.rules,
        )
    )
    result = record.get("result") or {}
    termination = result.get("termination", "?")
    faults = [f for f in record.get("faults", []) if f["seat"] == 0]
    ok = termination == "completed" and not faults and not notes
    if args.json:
        print(
            json.dumps(
                {"ok": ok, "seed": seed, "termination": termination, "result": result, "faults": faults, "notes": notes}
            )
        )
    else:
        print(f"match {record.get('match_id')} seed {seed}: {termination}, {result.get('hands_played', 0)} hands")
        for side in result.get("sides", []):
            print(
                f"side {side['side']} seats {side['seats']} ({', '.join(side['bots'])}): hands won {side['hands_won']}, dashes {side['dashes']}"
            )
        for f in faults:
            where = f"hand {f['hand']} step {f['step']}" if f.get("hand") is not None else "between hands"
            print(f"fault {f['reason']} ({where}): {f['message']}")
        for note in notes:
            print(f"note: {note}")
        print("ok: the bot completed the match without a fault" if ok else "FAILED: see the faults above")
    return 0 if ok else 1


# --- rematch ----------------------------------------------------------------------------


def first_difference(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any] | None:
    """The first decision where *new* differs from *old* (hand, step, seat, recorded and new action), or None."""
    from gaigel.actions import action_label

    for h_old, h_new in zip(old["hands"], new["hands"], strict=False):
        for step, (a, b) in enumerate(zip(h_old["actions"], h_new["actions"], strict=False)):
            if a["action"] != b["action"]:
                return {
                    "hand": h_old["index"],
                    "step": step,
                    "seat": a["seat"],
                    "recorded": action_label(a["action"]),
                    "new": action_label(b["action"]),
                }
        if len(h_old["actions"]) != len(h_new["actions"]):
            step = min(len(h_old["actions"]), len(h_new["actions"]))
            return {
                "hand": h_old["index"],
                "step": step,
                "seat": None,
                "recorded": f"{len(h_old['actions'])} actions",
                "new": f"{len(h_new['actions'])} actions",
            }
    if len(old["hands"]) != len(new["hands"]):
        return {
            "hand": min(len(old["hands"]), len(new["hands"])),
            "step": 0,
            "seat": None,
            "recorded": f"{len(old['hands'])} hands",
            "new": f"{len(new['hands'])} hands",
        }
    return None


def _house_kind(name: str) -> str | None:
    from gaigel.bots import HOUSE_BOTS

    kind = name.removeprefix("house:")
    return kind if kind in HOUSE_BOTS else None


def cmd_rematch(args: argparse.Namespace) -> int:
    """gaigel rematch."""
    import shlex

    from gaigel.bots import make_bot
    from gaigel.match import play_match
    from gaigel.record import load_record, spec_from_record

    record = load_record(args.record)
    spec = spec_from_record(record)
    commands: dict[str, list[str]] = {}
    for item in args.bots:
        name, sep, cmd = item.partition("=")
        if not sep or not cmd.strip():
            raise CliError(f"--bots needs NAME=CMD, got {item!r}")
        commands[name.strip()] = shlex.split(cmd)
    missing = sorted({b for b in spec.bots if _house_kind(b) is None and b not in commands})
    if missing:
        raise CliError(f"no command for bot(s) {', '.join(missing)}: give --bots NAME=CMD (house bots: random, first)")
    if not commands or not any(b in commands for b in spec.bots):
        bots = [make_bot(_house_kind(b) or b) for b in spec.bots]
        _, new = play_match(spec, bots)
        assert new is not None
    else:
        from gaigel_server.table import Clock

        seat_bots = [b if b in commands else f"house:{_house_kind(b)}" for b in spec.bots]
        clock = Clock(**record["clock"]) if isinstance(record.get("clock"), dict) else Clock()
        new, notes = asyncio.run(
            _play_on_server(
                seat_bots,
                commands,
                spec.seed,
                spec.hands,
                json.dumps(spec.ruleset.to_dict()),
                spec.first_dealer % spec.players,
                clock,
                args.time_limit,
            )
        )
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    diff = first_difference(record, new)
    actions = sum(len(h["actions"]) for h in record["hands"])
    if args.json:
        print(json.dumps({"same": diff is None, "difference": diff, "hands": len(record["hands"]), "actions": actions}))
    elif diff is None:
        print(f"same: {len(record['hands'])} hands, {actions} decisions chosen as recorded")
    else:
        who = f" (seat {diff['seat']}, bot {spec.bots[diff['seat']]})" if diff["seat"] is not None else ""
        print(
            f"first difference at hand {diff['hand']} step {diff['step']}{who}: recorded {diff['recorded']}, now {diff['new']}"
        )
    return 0 if diff is None else 1


__all__ = ["cmd_rematch", "cmd_serve", "cmd_try", "first_difference", "register"]
