"""``gaigel try`` and ``gaigel rematch``: one match of a bot command against house bots, on an
in-process server or a running one, and a recorded match played again."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import secrets
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gaigel.bots import HOUSE_BOTS
from gaigel.botseed import bot_seeds
from gaigel.cli import CliError, add_ruleset_args, players_arg, positive_int, ruleset_from_args, seconds_arg, seed_arg
from gaigel.deal import player_counts_text
from gaigel.match import MatchSpec, MatchTermination
from gaigel_harness.launch import bot_environment
from gaigel_harness.startup import (
    REFUSAL_GRACE,
    STARTUP_TIMEOUT,
    StderrTail,
    never_joined,
    quoted,
    refused,
)
from gaigel_harness.startup import exited as exited_note
from gaigel_server.clock import Clock
from gaigel_server.commands import add_clock_args, clock_from_args, clock_options

if TYPE_CHECKING:
    from gaigel_server.servicer import Refusal
    from gaigel_server.table import Table

EXIT_GRACE_S = 1.0
"""Seconds a match may take to end on its own after the bot process exited (it may exit right after MatchEnd)."""
BOT_EXIT_GRACE_S = 5.0
"""Seconds a bot has to exit on its own once its session ended after a completed match (as in
``gaigel check-bot``), so that it handles its MatchEnd and says what it says then; then it is stopped."""


def register(sub: Any) -> None:
    """Adds ``try`` and ``rematch`` to the ``gaigel`` subparsers."""
    p = sub.add_parser(
        "try",
        help="test a bot command against house bots",
        description="Start a server in-process (or, with --server, use a running one: register a fresh bot name "
        "there with the admin token), launch CMD with GAIGEL_SERVER, GAIGEL_TOKEN and GAIGEL_BOT_NAME set, play one "
        "match against house bots, print the result and every fault of the bot. Exit 0 only when the match "
        "completed without a fault of the bot.",
    )
    p.add_argument(
        "--server",
        metavar="HOST:PORT",
        default=None,
        help="play on this running server instead of an in-process one (needs the admin token)",
    )
    p.add_argument(
        "--admin-token",
        default=None,
        help="MatchService token of --server (default: env GAIGEL_ADMIN_TOKEN)",
    )
    p.add_argument(
        "--tls",
        action="store_true",
        help="connect to --server with TLS (the bot command must then use TLS itself)",
    )
    p.add_argument("--ca-cert", metavar="PEM", help="CA certificate(s) to verify --server with (implies --tls)")
    p.add_argument("--players", type=players_arg, default=2, help=f"{player_counts_text()} (default %(default)s)")
    p.add_argument("--hands", type=positive_int, default=2, help="number of hands (default %(default)s)")
    p.add_argument("--seed", type=seed_arg, default=None, help="match seed (default random)")
    p.add_argument(
        "--house",
        choices=sorted(HOUSE_BOTS),
        default="random",
        help="house bot for the other seats (default %(default)s)",
    )
    p.add_argument(
        "--time-limit", type=seconds_arg, default=120.0, help="seconds for the whole try (default %(default)s)"
    )
    p.add_argument(
        "--startup-timeout",
        type=seconds_arg,
        default=STARTUP_TIMEOUT,
        help="seconds the bot command has to join, a build it runs first included (default %(default)s)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--record", metavar="FILE", default=None, help="save the match record (JSON) to FILE")
    p.add_argument("--view", metavar="FILE.html", help="write the match's viewer page (as gaigel view) to FILE.html")
    add_ruleset_args(p)
    add_clock_args(p, server_defaults=True)
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
    p.add_argument(
        "--time-limit", type=seconds_arg, default=300.0, help="seconds for the rematch (default %(default)s)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_rematch)


# --- try --------------------------------------------------------------------------------


@dataclasses.dataclass
class _Launched:
    """A bot process of ``try``/``rematch`` and the tail of its stderr (which still reaches ours)."""

    proc: asyncio.subprocess.Process
    stderr: StderrTail


async def _start_bot(cmd: list[str], address: str, name: str, token: str) -> _Launched:
    env = bot_environment(GAIGEL_SERVER=address, GAIGEL_TOKEN=token, GAIGEL_BOT_NAME=name)
    try:
        proc = await asyncio.create_subprocess_exec(
            *cmd, env=env, stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
        )
    except OSError as e:
        raise CliError(f"cannot start bot command {' '.join(cmd)!r}: {e.strerror}") from None
    return _Launched(proc, StderrTail(proc.stderr))


async def _stop_bot(bot: _Launched, grace: float = 0.0) -> None:
    """Stops *bot*: after up to *grace* seconds for it to exit on its own, SIGTERM, then SIGKILL."""
    proc = bot.proc
    if grace and proc.returncode is None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), grace)
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 2.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    await bot.stderr.lines()  # the rest of its stderr is copied before we report


class _Watch:
    """Decides when ``try``/``rematch`` stop waiting for a match, and says why: a bot that did not
    start (exited, refused by the server, not joined within the start-up allowance), the time limit,
    or soon after a bot exited during the match."""

    def __init__(
        self,
        time_limit: float,
        bots: dict[str, _Launched],
        address: str,
        startup_timeout: float = STARTUP_TIMEOUT,
        refusals: Sequence[Refusal] | None = None,
    ) -> None:
        now = time.monotonic()
        self.time_limit = time_limit
        self.deadline = now + time_limit
        self.startup_timeout = startup_timeout
        self.join_by = now + startup_timeout
        self.bots = bots
        self.address = address
        self.refusals = refusals  # None: the server is elsewhere and its refusals are not seen
        self.exited_at: float | None = None

    def _who(self) -> str:
        names = list(self.bots)
        return names[0] if len(names) == 1 else "one of " + ", ".join(names)

    async def why_stop(self, waiting: bool) -> str | None:
        """A note saying why the match is cancelled now, or None to keep waiting."""
        now = time.monotonic()
        exited = [(name, b) for name, b in self.bots.items() if b.proc.returncode is not None]
        refusal = self.refusals[-1] if waiting and self.refusals else None
        if waiting and exited:
            name, bot = exited[0]
            code = bot.proc.returncode
            assert code is not None
            if refusal is not None:
                return refused(self._who(), self.address, refusal.code.name, refusal.message) + (
                    f" (then it exited with code {code})"
                )
            return exited_note(name, code, self.address, await bot.stderr.lines())
        if refusal is not None and now - refusal.at >= REFUSAL_GRACE:
            return refused(self._who(), self.address, refusal.code.name, refusal.message)
        if waiting and now > self.join_by:
            return never_joined(
                self._who(), self.address, self.startup_timeout, None if self.refusals is None else False
            )
        if now > self.deadline:
            return f"time limit of {self.time_limit:g} s reached: match cancelled"
        if not exited:
            return None
        if self.exited_at is None:
            self.exited_at = now
        if now - self.exited_at >= EXIT_GRACE_S:  # else it may be ending after MatchEnd: let the match end
            name, bot = exited[0]
            lines = await bot.stderr.lines()
            last = f"; its last stderr lines:{quoted(lines)}" if lines else ""
            return f"bot {name} exited with code {bot.proc.returncode} during the match: match cancelled{last}"
        return None


def try_match_key(seed: int) -> str:
    """The bot seeds' match key of a ``gaigel try`` match: from its seed alone, so trying the same
    seed again, locally or on a server, gives the bots the same seeds and the same match."""
    return f"try-{seed}"


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
    match_key: str = "",
    startup_timeout: float = STARTUP_TIMEOUT,
) -> tuple[dict[str, Any], list[str]]:
    """Runs one match on an in-process server; non-house bots are launched from *commands* (one process per seat)."""
    from gaigel_api.v1 import match_service_pb2 as ms
    from gaigel_server import matches
    from gaigel_server.logging import configure_logging
    from gaigel_server.server import ServerConfig, create_server
    from gaigel_server.states import TableState

    configure_logging("warning")
    config = ServerConfig(clock=clock)
    server, port = create_server("127.0.0.1:0", config)
    await server.start()
    procs: dict[str, _Launched] = {}
    notes: list[str] = []
    grace = 0.0
    try:
        tokens = {name: server.bots.register(name) for name in commands}
        for seat, name in enumerate(seat_bots):
            if name in commands:
                proc = await _start_bot(commands[name], f"127.0.0.1:{port}", name, tokens[name])
                procs[name if seat_bots.count(name) == 1 else f"{name} (seat {seat})"] = proc
        request = ms.CreateMatchRequest(
            players=len(seat_bots),
            seat_bots=seat_bots,
            hands=hands,
            seed=seed,
            ruleset_preset=preset_name,
            ruleset_overrides_json=rules_json,
            first_dealer_seat=first_dealer,
            match_key=match_key,
        )
        assert server.play is not None
        watch = _Watch(time_limit, procs, f"127.0.0.1:{port}", startup_timeout, server.play.refusals)

        async def stop(table: Table) -> str:
            note = await watch.why_stop(table.state is TableState.WAITING) or ""
            if note:
                notes.append(note)
            return note

        table = server.lobby.open(matches.validate(request, server.bots, server.config.clock))
        await server.lobby.play(table, stop)
        assert table.record is not None
        if not notes:  # it ended by itself: the sessions end with OK (as after Leave) behind MatchEnd
            for name in commands:
                server.lobby.retire(name)
            grace = BOT_EXIT_GRACE_S
        return table.record, notes
    finally:
        for proc in procs.values():
            await _stop_bot(proc, grace)
        await server.stop(1.0)


RPC_TIMEOUT = 10.0
"""Seconds for one MatchService call of ``gaigel try --server``."""


def _rpc_error(address: str, what: str, e: Any) -> CliError:
    """A one-line CliError for a failed MatchService call."""
    import grpc

    code = e.code()
    details = " ".join((e.details() or "").split())
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return CliError(f"cannot reach the server at {address} ({code.name}): {details}")
    if code is grpc.StatusCode.UNAUTHENTICATED:
        return CliError(f"the server at {address} refused the admin token: {details}")
    return CliError(f"{what} failed on {address} ({code.name}): {details}")


def _admin_channel(args: argparse.Namespace) -> Any:
    import grpc

    if not (args.tls or args.ca_cert):
        return grpc.aio.insecure_channel(args.server)
    roots = None
    if args.ca_cert:
        try:
            with open(args.ca_cert, "rb") as f:
                roots = f.read()
        except OSError as e:
            raise CliError(f"cannot read --ca-cert {args.ca_cert}: {e.strerror}") from None
    return grpc.aio.secure_channel(args.server, grpc.ssl_channel_credentials(root_certificates=roots))


async def _try_on_remote_server(
    args: argparse.Namespace, cmd: list[str], rules: Any, seed: int
) -> tuple[dict[str, Any], list[str]]:
    """``gaigel try --server``: registers a fresh bot name, launches *cmd* as that bot, creates the match
    against house bots, waits for its end (cancelling it at the time limit) and fetches its record."""
    import grpc

    from gaigel_api.v1 import match_service_pb2 as ms
    from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc

    address = args.server
    token = args.admin_token or os.environ.get("GAIGEL_ADMIN_TOKEN", "")
    if not token:
        raise CliError("--server needs the server's admin token: give --admin-token or set GAIGEL_ADMIN_TOKEN")
    metadata = (("authorization", f"Bearer {token}"),)
    notes: list[str] = []
    async with _admin_channel(args) as channel:
        stub = ms_grpc.MatchServiceStub(channel)

        async def call(what: str, request: Any) -> Any:
            try:
                return await getattr(stub, what)(request, metadata=metadata, timeout=RPC_TIMEOUT)
            except grpc.aio.AioRpcError as e:
                raise _rpc_error(address, what, e) from None

        name = f"try-{secrets.token_hex(4)}"
        bot_token = (await call("RegisterBot", ms.RegisterBotRequest(bot_name=name))).bot_token
        request = ms.CreateMatchRequest(
            players=rules.players,
            seat_bots=[name] + [f"house:{args.house}"] * (rules.players - 1),
            hands=args.hands,
            seed=seed,
            ruleset_preset=args.rules,
            ruleset_overrides_json=json.dumps(rules.to_dict()),
            first_dealer_seat=0,
            match_key=try_match_key(seed),
        )
        for field, value in clock_options(args).items():  # the others are left to the server
            if field == "strikes_limit":
                request.clock.strikes_limit = value
            else:
                getattr(request.clock, field).FromNanoseconds(int(value * 1e9))
        proc = await _start_bot(cmd, address, name, bot_token)
        ended = False
        try:
            match = (await call("CreateMatch", request)).match
            watch = _Watch(args.time_limit, {name: proc}, address, args.startup_timeout)
            while match.state != ms.MATCH_STATE_ENDED:
                reason = await watch.why_stop(match.state == ms.MATCH_STATE_WAITING)
                if reason:
                    notes.append(reason)
                    try:
                        cancel = ms.CancelMatchRequest(match_id=match.match_id, reason=reason.split("\n")[0])
                        match = (await stub.CancelMatch(cancel, metadata=metadata, timeout=RPC_TIMEOUT)).match
                    except grpc.aio.AioRpcError as e:
                        if e.code() is not grpc.StatusCode.FAILED_PRECONDITION:  # else it ended meanwhile
                            raise _rpc_error(address, "CancelMatch", e) from None
                    ended_by = time.monotonic() + RPC_TIMEOUT
                    while match.state != ms.MATCH_STATE_ENDED and time.monotonic() < ended_by:
                        await asyncio.sleep(0.1)
                        match = (await call("GetMatch", ms.GetMatchRequest(match_id=match.match_id))).match
                    break
                await asyncio.sleep(0.1)
                match = (await call("GetMatch", ms.GetMatchRequest(match_id=match.match_id))).match
            record_json = (await call("GetMatchRecord", ms.GetMatchRecordRequest(match_id=match.match_id))).record_json
            ended = not notes
        finally:
            if ended:  # unregistering ends its session with OK behind MatchEnd: it may exit by itself
                await _unregister(stub, metadata, name)
                await _stop_bot(proc, BOT_EXIT_GRACE_S)
            else:
                await _stop_bot(proc)
                await _unregister(stub, metadata, name)
    return json.loads(record_json), notes


async def _unregister(stub: Any, metadata: Any, name: str) -> None:
    """Removes the try's bot name (its token, sessions and metric series) from the server; warns if it cannot."""
    import grpc

    from gaigel_api.v1 import match_service_pb2 as ms

    try:
        await stub.UnregisterBot(ms.UnregisterBotRequest(bot_name=name), metadata=metadata, timeout=RPC_TIMEOUT)
    except grpc.aio.AioRpcError as e:
        details = " ".join((e.details() or "").split())
        print(
            f"gaigel try: warning: bot {name} stays registered on the server ({e.code().name}: {details})",
            file=sys.stderr,
        )


def _report_try(args: argparse.Namespace, seed: int, record: dict[str, Any], notes: list[str]) -> int:
    """Prints the outcome of ``gaigel try`` for the candidate in seat 0; the exit code."""
    result = record.get("result") or {}
    termination = result.get("termination", "?")
    faults = [f for f in record.get("faults", []) if f["seat"] == 0]
    ok = termination == MatchTermination.COMPLETED.value and not faults and not notes
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
        print(_verdict(ok, termination, bool(faults), bool(notes)))
    return 0 if ok else 1


def _verdict(ok: bool, termination: str, faults: bool, notes: bool) -> str:
    """The last line of ``gaigel try``: it points only at what was printed above it."""
    if ok:
        return "ok: the bot completed the match without a fault"
    if faults or notes:
        above = " and ".join(w for w, shown in (("faults", faults), ("notes", notes)) if shown)
        return f"FAILED: see the {above} above"
    return f"FAILED: the match ended as {termination}"


def cmd_try(args: argparse.Namespace) -> int:
    """gaigel try."""
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise CliError("give the bot command after --, e.g. gaigel try --players 2 -- python my_bot.py")
    rules = ruleset_from_args(args)
    seed = args.seed if args.seed is not None else secrets.randbits(64)
    if args.view and not os.path.isdir(os.path.dirname(os.path.abspath(args.view))):
        raise CliError(f"--view {args.view}: no such folder")  # found out before the match, not after
    if args.server:
        record, notes = asyncio.run(_try_on_remote_server(args, cmd, rules, seed))
    else:
        if args.tls or args.ca_cert or args.admin_token:
            raise CliError("--admin-token, --tls and --ca-cert go with --server")
        seats = ["candidate"] + [f"house:{args.house}"] * (rules.players - 1)
        record, notes = asyncio.run(
            _play_on_server(
                seats,
                {"candidate": cmd},
                seed,
                args.hands,
                json.dumps(rules.to_dict()),
                0,
                clock_from_args(args),
                args.time_limit,
                args.rules,
                try_match_key(seed),
                args.startup_timeout,
            )
        )
    if args.record:
        _save_record(record, args.record)
    if args.view:
        _write_view(record, args.view)
    return _report_try(args, seed, record, notes)


def _save_record(record: dict[str, Any], path: str) -> None:
    from gaigel.record import dump_record

    try:
        dump_record(record, path)
    except OSError as e:
        raise CliError(f"cannot write --record {path}: {e.strerror}") from None


def _write_view(record: dict[str, Any], path: str) -> None:
    from gaigel_harness.viewer import ViewerError, write_viewer_for

    try:
        write_viewer_for(record, path)
    except ViewerError as e:
        raise CliError(f"--view: {e}") from None


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
    kind = name.removeprefix("house:")
    return kind if kind in HOUSE_BOTS else None


def recorded_bot_seeds(record: dict[str, Any], spec: MatchSpec) -> list[int] | None:
    """The bot seed of each seat of *record*, from its seed and match key; None for a record
    without a match key (``gaigel play``, the local arena: there bots saw the match seed).

    :raises CliError: when the recorded ``seats[].bot_seed`` disagree with the derivation.
    """
    key = record.get("match_key")
    if not isinstance(key, str):
        return None
    seeds = bot_seeds(spec.seed, spec.players, key)
    recorded = [s.get("bot_seed") for s in record["seats"] if isinstance(s, dict)]
    if any(r is not None for r in recorded) and recorded != seeds:
        raise CliError(f"the record's seats[].bot_seed do not follow from its seed and match_key {key!r}")
    return seeds


def cmd_rematch(args: argparse.Namespace) -> int:
    """gaigel rematch."""
    import shlex

    from gaigel.bots import make_bot
    from gaigel.match import play_match, spec_from_record
    from gaigel.record import load_record

    record = load_record(args.record)
    # Replay what the record holds, not what it planned: a hostile record planning 10^9 hands
    # (or an aborted match that planned many) must not keep the rematch busy past what it can compare.
    spec = dataclasses.replace(spec_from_record(record), hands=max(1, len(record["hands"])))
    commands: dict[str, list[str]] = {}
    for item in args.bots:
        name, sep, cmd = item.partition("=")
        if not sep or not cmd.strip():
            raise CliError(f"--bots needs NAME=CMD, got {item!r}")
        commands[name.strip()] = shlex.split(cmd)
    missing = sorted({b for b in spec.bots if _house_kind(b) is None and b not in commands})
    if missing:
        raise CliError(
            f"no command for bot(s) {', '.join(missing)}: give --bots NAME=CMD (house bots: {', '.join(sorted(HOUSE_BOTS))})"
        )
    recorded_bot_seeds(record, spec)  # a record whose bot seeds do not follow from its key is refused
    key = record.get("match_key") or ""
    if not commands or not any(b in commands for b in spec.bots):
        bots = [make_bot(_house_kind(b) or b) for b in spec.bots]
        deadline = time.monotonic() + args.time_limit

        def in_time(hand: int, _outcome: object) -> None:  # the limit holds in-process too
            if time.monotonic() > deadline and hand + 1 < spec.hands:
                raise CliError(
                    f"time limit of {args.time_limit:g} s reached after {hand + 1} of {spec.hands} hands: rematch cancelled"
                )

        _, new = play_match(spec, bots, on_hand=in_time, match_key=key)
        assert new is not None
    else:
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
                match_key=key,
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


__all__ = ["cmd_rematch", "cmd_try", "first_difference", "register"]
