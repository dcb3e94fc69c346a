"""The ``gaigel`` command line: deal, play, selfplay, replay, and the commands other packages register.

Every command has ``--help``; bad input gets a one-line error and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gaigel.deal import MAX_SEED, PLAYER_COUNTS, deal, player_counts_text
from gaigel.ruleset import PRESETS, Ruleset, RulesetError, preset


class CliError(Exception):
    """A user error: printed as one line, exit code 2."""


def writable_dir(path: Path, flag: str) -> None:
    """Creates *path* if needed and writes a probe file in it, so an output folder that cannot
    be written fails before any work is done.

    :raises CliError: one line naming *flag* and the path.
    """
    if path.exists() and not path.is_dir():
        raise CliError(f"{flag} {path}: exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as e:
        raise CliError(f"{flag} {path}: cannot write there: {e.strerror or e}") from None


def writable_file(path: Path, flag: str) -> None:
    """Checks that *path* can be written (its folder exists and takes files; it is not a folder).

    :raises CliError: one line naming *flag* and the path.
    """
    if path.is_dir():
        raise CliError(f"{flag} {path}: is a directory")
    folder = path.parent
    if not folder.is_dir():
        raise CliError(f"{flag} {path}: the folder {folder} does not exist")
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
            pass
    except OSError as e:
        raise CliError(f"{flag} {path}: cannot write in {folder}: {e.strerror or e}") from None
    if path.exists() and not os.access(path, os.W_OK):
        raise CliError(f"{flag} {path}: the file is not writable")


def write_error(flag: str, path: str | Path, e: OSError) -> CliError:
    """The one-line error for a write that failed half way (a full disk, say)."""
    return CliError(f"{flag} {path}: cannot write: {e.strerror or e}")


def number_arg(kind: type[int] | type[float], low: float, high: float | None, what: str) -> Callable[[str], Any]:
    """An argparse type for a number in [low, high] whose error names *what* and the range."""

    def show(v: float) -> str:
        return str(int(v)) if kind is int else f"{v:g}"

    span = f"{what} in {show(low)}..{show(high)}" if high is not None else f"{what} >= {show(low)}"

    def parse(text: str) -> int | float:
        try:
            value = int(text, 0) if kind is int else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {span}, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"expected {span}, got {text}")
        return value

    parse.__name__ = what.replace(" ", "_")
    return parse


seed_arg = number_arg(int, 0, MAX_SEED, "a seed")
positive_int = number_arg(int, 1, None, "a positive integer")
seconds_arg = number_arg(float, 0, None, "a number of seconds")
port_arg = number_arg(int, 0, 65535, "a port")


def players_arg(text: str) -> int:
    """A player count the rules allow."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"players must be {player_counts_text()}, got {text!r}") from None
    if value not in PLAYER_COUNTS:
        raise argparse.ArgumentTypeError(f"players must be {player_counts_text()}, got {value}")
    return value


def add_ruleset_args(p: argparse.ArgumentParser) -> None:
    """--rules PRESET and --option NAME=VALUE."""
    p.add_argument("--rules", default="default", choices=PRESETS, help="ruleset preset (default: %(default)s)")
    p.add_argument(
        "--option",
        "-o",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override one ruleset option of RULES.md §14, e.g. -o meld.timing=lead_only (JSON values)",
    )


def ruleset_from_args(args: argparse.Namespace) -> Ruleset:
    """Builds the ruleset of --players, --rules and --option."""
    options: dict[str, Any] = {}
    for item in args.option:
        name, sep, raw = item.partition("=")
        if not sep:
            raise CliError(f"--option needs NAME=VALUE, got {item!r}")
        try:
            options[name.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            options[name.strip()] = raw
    return Ruleset.from_dict(options, base=preset(args.rules, args.players))


# --- commands ---------------------------------------------------------------------------


def cmd_deal(args: argparse.Namespace) -> int:
    """gaigel deal."""
    from gaigel.cards import card_code
    from gaigel.deal import shuffled_deck

    d = deal(args.seed, args.hand, args.players)
    out = {
        "seed": args.seed,
        "hand": args.hand,
        "players": args.players,
        "deck": [card_code(c) for c in shuffled_deck(args.seed, args.hand)],
    }
    out.update(d.to_json())
    if args.json:
        print(json.dumps(out))
    else:
        for i, h in enumerate(out["hands_from_forehand"]):
            print(f"player {i} from forehand: {' '.join(h)}")
        print(f"trump card: {out['trump_card']}")
        print(f"talon (top first): {' '.join(out['talon_top_first'])}")
    return 0


def _seat_bots(names: Sequence[str], rules: Ruleset) -> list[str]:
    n, sides = rules.players, rules.num_sides
    if len(names) == 1:
        return [names[0]] * n
    if len(names) == n:
        return list(names)
    if len(names) == sides:
        return [names[rules.side_of(s)] for s in range(n)]
    raise CliError(f"give one --bot for all seats, one per side ({sides}) or one per seat ({n}); got {len(names)}")


def cmd_play(args: argparse.Namespace) -> int:
    """gaigel play."""
    from gaigel.bots import make_bot
    from gaigel.match import MatchSpec, play_match
    from gaigel.record import dump_record

    rules = ruleset_from_args(args)
    if args.record:
        writable_file(Path(args.record), "--record")
    names = _seat_bots(args.bot or ["random"], rules)
    bots = [make_bot(name) for name in names]
    spec = MatchSpec(ruleset=rules, seed=args.seed, hands=args.hands, bots=tuple(names))
    hand_results: list[dict[str, Any]] = []

    def on_hand(k: int, outcome: Any) -> None:
        hand_results.append({"hand": k, **outcome.to_dict()})
        if not args.json:
            winners = ", ".join(f"side {w}" for w in outcome.winners) or "nobody (void)"
            print(
                f"hand {k:3d}: {winners} won by {outcome.termination.value}; points {list(outcome.points)}, dashes {list(outcome.dashes)}"
            )

    score, record = play_match(spec, bots, on_hand=on_hand, record=args.record is not None)
    if args.record and record:
        try:
            dump_record(record, args.record)
        except OSError as e:
            raise write_error("--record", args.record, e) from None
    result = score.to_dict()
    if args.json:
        print(
            json.dumps(
                {
                    "seed": args.seed,
                    "players": args.players,
                    "hands": score.hands_played,
                    **result,
                    "hand_results": hand_results,
                }
            )
        )
    else:
        for side in result["sides"]:
            print(
                f"side {side['side']} seats {side['seats']} ({', '.join(side['bots'])}): hands won {side['hands_won']}, dashes {side['dashes']}"
            )
        print(f"winner: {', '.join(f'side {w}' for w in result['winners'])} (fewest dashes)")
    return 0


def cmd_selfplay(args: argparse.Namespace) -> int:
    """gaigel selfplay."""
    import dataclasses

    from gaigel.bots import make_bot
    from gaigel.match import DecisionRequest, HandEnded, MatchDriver, MatchSpec

    # Independent hands: the match format's extra hands (putzen) and deal rotation (duplicate) do not apply.
    rules = dataclasses.replace(ruleset_from_args(args), match_format="fixed_hands")
    n = rules.players
    spec = MatchSpec(ruleset=rules, seed=args.seed, hands=args.games, bots=tuple([args.bot] * n))
    bots = [make_bot(args.bot) for _ in range(n)]
    driver = MatchDriver(spec, record=False)
    for seat, bot in enumerate(bots):
        bot.start_match(driver.bot_spec(seat), seat)
    decisions = 0
    terminations: dict[str, int] = {}
    started = time.perf_counter()
    while True:
        step = driver.next()
        if type(step) is DecisionRequest:
            driver.decide(bots[step.seat].decide(step))
            decisions += 1
        elif type(step) is HandEnded:
            term = step.outcome.termination.value
            terminations[term] = terminations.get(term, 0) + 1
        elif driver.over is not None:
            break
    seconds = time.perf_counter() - started
    out = {
        "players": n,
        "bot": args.bot,
        "seed": args.seed,
        "hands": args.games,
        "decisions": decisions,
        "seconds": round(seconds, 4),
        "decisions_per_second": round(decisions / seconds, 1) if seconds else None,
        "terminations": terminations,
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{args.games} hands, {decisions} decisions in {seconds:.2f} s: {decisions / seconds:,.0f} decisions/s")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """gaigel replay."""
    from gaigel.record import load_record
    from gaigel.replay import replay

    record = load_record(args.file)
    report = replay(record)
    if report.mismatch is not None:
        print(f"mismatch at {report.mismatch}", file=sys.stderr)
        return 1
    result = report.result or {}
    summary = {"ok": True, "hands": report.hands, "actions": report.actions, "result": result}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"ok: {report.hands} hands, {report.actions} actions re-derived hash for hash")
        for side in result.get("sides", []):
            print(
                f"side {side['side']} ({', '.join(side['bots'])}): hands won {side['hands_won']}, dashes {side['dashes']}"
            )
    return 0


# --- parser -----------------------------------------------------------------------------

Command = Callable[[argparse.Namespace], int]


def version_text() -> str:
    """``gaigel-arena 0.1.0 (engine: compiled, mypyc)``, or ``engine: pure Python`` (and why)."""
    from gaigel import __version__, engine_build

    return f"gaigel-arena {__version__} (engine: {engine_build()})"


def build_parser() -> argparse.ArgumentParser:
    """The full ``gaigel`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="gaigel", description="Gaigel bot arena: rules engine, match server and arena for bot competitions."
    )
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "deal",
        help="print the seeded deal of one hand (DEALS.md)",
        description="Print the seeded deal of one hand (DEALS.md).",
    )
    p.add_argument("--seed", type=seed_arg, required=True, help="match seed, 0..2^64-1")
    p.add_argument("--hand", type=int, default=0, help="hand index, 0-based (default 0)")
    p.add_argument("--players", type=players_arg, required=True, help=player_counts_text())
    p.add_argument("--json", action="store_true", help="one JSON object with the keys of vectors/deals.json")
    p.set_defaults(func=cmd_deal)

    p = sub.add_parser(
        "play",
        help="play a local match between in-process bots",
        description="Play a local match between in-process house bots.",
    )
    p.add_argument("--players", type=players_arg, default=4, help=f"{player_counts_text()} (default 4)")
    p.add_argument("--hands", type=positive_int, default=8, help="number of hands (default 8)")
    p.add_argument("--seed", type=seed_arg, default=0, help="match seed, 0..2^64-1 (default 0)")
    p.add_argument("--bot", action="append", help="house bot: once for all seats, once per side or once per seat")
    p.add_argument("--record", metavar="FILE", help="write the JSON match record to FILE")
    p.add_argument("--json", action="store_true", help="print one JSON object with the result")
    add_ruleset_args(p)
    p.set_defaults(func=cmd_play)

    p = sub.add_parser(
        "selfplay",
        help="measure engine speed with independent hands",
        description="Play independent hands between in-process bots and report decisions per second.",
    )
    p.add_argument("--players", type=players_arg, default=4, help=f"{player_counts_text()} (default 4)")
    p.add_argument("--games", type=positive_int, default=1000, help="number of hands (default 1000)")
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of the deals (default 0)")
    p.add_argument("--bot", default="random", help="house bot for every seat (default random)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_ruleset_args(p)
    p.set_defaults(func=cmd_selfplay)

    p = sub.add_parser(
        "replay",
        help="re-derive a match record hash for hash",
        description="Re-derive every state of a match record. Exit 0 when every hash matches, 1 at the first mismatch, 2 for a file that is not a valid record.",
    )
    p.add_argument("file", help="a JSON match record")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_replay)

    for register in _extension_commands():
        register(sub)
    return parser


COMMANDS_GROUP = "gaigel.commands"
"""Entry-point group of the packages that add subcommands: each names a ``register(subparsers)``."""


def _extension_commands() -> list[Callable[[Any], None]]:
    """The ``register`` functions of installed packages (the server, harness and arena), in name order.

    Found through entry points, so this engine module never names the packages above it; loading
    one imports only its commands module (no grpc until a command runs).
    """
    from importlib.metadata import entry_points

    found = sorted(entry_points(group=COMMANDS_GROUP), key=lambda ep: ep.name)
    return [ep.load() for ep in found]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gaigel`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (CliError, RulesetError, ValueError) as e:
        print(f"gaigel {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. piped into head: not an error of ours
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    # Run the canonical module, not __main__: registered commands raise gaigel.cli.CliError.
    from gaigel.cli import main as canonical_main

    sys.exit(canonical_main())
