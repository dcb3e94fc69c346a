"""Engine speed: decisions per second of random playouts, beside OpenSpiel's C++ skat and hearts.

Run from the repository root::

    python bench/engine.py                      # 3 s per measurement, best of 3
    python bench/engine.py --seconds 1 --repeat 1 --json

Two measurements per engine and player count, one core, each for a fixed wall time:

* **full playout**: from the initial state, dealing included (Gaigel: ``gaigel.deal.deal``
  plus ``GaigelState(...)``; OpenSpiel: ``new_initial_state()`` and applying one sampled
  outcome per chance node);
* **play only**: from an already dealt state (Gaigel: ``GaigelState`` built from a pre-made
  ``Deal``; OpenSpiel: ``clone()`` of a pre-dealt state).

Only player decisions are counted, never chance nodes. Both engines choose with the same
mechanism, ``options[int(rnd() * len(options))]`` with ``rnd = random.Random(seed).random``
(chance outcomes of skat and hearts are uniform, so the same index draw samples them).
Each measurement is repeated ``--repeat`` times and the best rate is reported. The
OpenSpiel rows need ``pyspiel`` (``pip install -e '.[bench]'``); without it Gaigel runs alone.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import platform
import random
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gaigel import engine_build
from gaigel.deal import Deal, deal
from gaigel.ruleset import PRESETS, preset
from gaigel.state import ENGINE_VERSION, GaigelState

REPO = Path(__file__).resolve().parent.parent
POOL = 256
"""Pre-dealt hands/states cycled through by the play-only measurement."""
OPENSPIEL_GAMES = (("skat", 3), ("hearts", 4))
MODES = ("full", "play")
MODE_TITLES = {"full": "full playout", "play": "play only"}

Run = Callable[[float], tuple[int, int, float]]
"""Runs for about the given seconds; returns (decisions, hands, elapsed seconds)."""


# --- Gaigel ---------------------------------------------------------------------------------


def gaigel_runner(preset_name: str, players: int, mode: str, seed: int) -> Run:
    """A timed loop of random Gaigel hands (see the module docstring for the two modes)."""
    rules = preset(preset_name, players)
    pool: list[Deal] = [deal(seed, i, players) for i in range(POOL)] if mode == "play" else []

    def run(seconds: float) -> tuple[int, int, float]:
        rnd = random.Random(seed).random
        perf = time.perf_counter
        decisions = hands = 0
        start = perf()
        deadline = start + seconds
        while True:
            if pool:
                state = GaigelState(rules, pool[hands % POOL], hands % players)
            else:
                state = GaigelState(rules, deal(seed, hands, players), hands % players)
            legal_actions = state.legal_actions
            apply = state.apply
            is_terminal = state.is_terminal
            while not is_terminal():
                acts = legal_actions()
                apply(acts[int(rnd() * len(acts))])
                decisions += 1
            hands += 1
            now = perf()
            if now >= deadline:
                return decisions, hands, now - start

    return run


# --- OpenSpiel ------------------------------------------------------------------------------


def openspiel_runner(pyspiel: Any, game_name: str, mode: str, seed: int) -> Run:
    """A timed loop of random OpenSpiel playouts through pyspiel (C++ game, Python driver)."""
    game = pyspiel.load_game(game_name)
    pool: list[Any] = []
    if mode == "play":
        rnd = random.Random(seed ^ 0x5EED).random
        for _ in range(POOL):
            state = game.new_initial_state()
            while state.is_chance_node():
                outcomes = state.chance_outcomes()
                state.apply_action(outcomes[int(rnd() * len(outcomes))][0])
            pool.append(state)

    def run(seconds: float) -> tuple[int, int, float]:
        rnd = random.Random(seed).random
        perf = time.perf_counter
        new_initial_state = game.new_initial_state
        decisions = hands = 0
        start = perf()
        deadline = start + seconds
        while True:
            state = pool[hands % POOL].clone() if pool else new_initial_state()
            is_terminal = state.is_terminal
            is_chance_node = state.is_chance_node
            legal_actions = state.legal_actions
            apply_action = state.apply_action
            chance_outcomes = state.chance_outcomes
            while not is_terminal():
                if is_chance_node():
                    outcomes = chance_outcomes()
                    apply_action(outcomes[int(rnd() * len(outcomes))][0])
                else:
                    acts = legal_actions()
                    apply_action(acts[int(rnd() * len(acts))])
                    decisions += 1
            hands += 1
            now = perf()
            if now >= deadline:
                return decisions, hands, now - start

    return run


# --- measurement and report -----------------------------------------------------------------


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The best of several timed runs (highest decisions per second), with all runs listed."""
    best = max(runs, key=lambda r: r["decisions"] / r["seconds"])
    return {
        "decisions_per_s": round(best["decisions"] / best["seconds"], 1),
        "hands_per_s": round(best["hands"] / best["seconds"], 1),
        "decisions_per_hand": round(best["decisions"] / best["hands"], 2),
        "runs": [{**r, "decisions_per_s": round(r["decisions"] / r["seconds"], 1)} for r in runs],
    }


def measure_all(runners: list[Run], seconds: float, repeat: int, progress: bool) -> list[dict[str, Any]]:
    """Runs every runner *repeat* times, round-robin (so a burst of load elsewhere hits all
    rows alike rather than one), and summarizes each by its best run."""
    for run in runners:
        run(min(0.2, seconds))  # warm-up: imports, caches, branch predictors
    runs: list[list[dict[str, Any]]] = [[] for _ in runners]
    for rep in range(repeat):
        for i, run in enumerate(runners):
            decisions, hands, elapsed = run(seconds)
            runs[i].append({"decisions": decisions, "hands": hands, "seconds": round(elapsed, 4)})
        if progress:
            print(f"# round {rep + 1}/{repeat} done", file=sys.stderr, flush=True)
    return [summarize(r) for r in runs]


def pin_to_one_core(cpu: int | None) -> int | None:
    """Restricts this process to one CPU (the first allowed one unless *cpu* is given)."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    chosen = cpu if cpu is not None else allowed[0]
    os.sched_setaffinity(0, {chosen})
    return chosen


def environment(pyspiel: Any, pinned: int | None) -> dict[str, Any]:
    """What the numbers depend on."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "pinned_cpu": pinned,
        "gaigel_engine": ENGINE_VERSION,
        "gaigel_build": engine_build(),
        "git": _git_revision(),
        "open_spiel": None,
    }
    if pyspiel is not None:
        try:
            from importlib.metadata import version

            env["open_spiel"] = version("open_spiel")
        except Exception:
            env["open_spiel"] = "unknown"
    return env


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _git_revision() -> str | None:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return rev + ("-dirty" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return None


def rerun_command(args: argparse.Namespace) -> str:
    """The exact command (every option spelled out) that repeats this run."""
    parts = [
        "python", "bench/engine.py",
        "--seconds", f"{args.seconds:g}", "--repeat", str(args.repeat),
        "--players", ",".join(map(str, args.players)), "--preset", args.preset, "--seed", str(args.seed),
    ]  # fmt: skip
    if args.cpu is not None:
        parts += ["--cpu", str(args.cpu)]
    if args.no_openspiel:
        parts.append("--no-openspiel")
    if args.json:
        parts.append("--json")
    return f"cd {shlex.quote(str(REPO))} && " + " ".join(shlex.quote(p) for p in parts)


def format_table(rows: list[dict[str, Any]]) -> list[str]:
    """A fixed-width table: one row per engine and player count, both modes side by side."""
    skat = next((r for r in rows if r["game"] == "skat"), None)
    header = ["engine", "players", "full playout dec/s", "play only dec/s", "dec/hand", "full: x skat", "play: x skat"]
    body = []
    for r in rows:
        ratio = ["-", "-"]
        if skat is not None:
            ratio = [f"{r[m]['decisions_per_s'] / skat[m]['decisions_per_s']:.2f}" for m in MODES]
        body.append(
            [
                r["label"],
                str(r["players"]),
                f"{r['full']['decisions_per_s']:,.0f}",
                f"{r['play']['decisions_per_s']:,.0f}",
                f"{r['play']['decisions_per_hand']:.1f}",
                *ratio,
            ]
        )
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]

    def fmt(row: list[str]) -> str:
        return "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )

    return [fmt(header), "  ".join("-" * w for w in widths), *(fmt(row) for row in body)]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=3.0, help="wall time of one measurement (default 3)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="measurements per row and mode; the best counts (default 3)"
    )
    parser.add_argument(
        "--players",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[2, 3, 4, 6],
        help="Gaigel player counts (default 2,3,4,6)",
    )
    parser.add_argument("--preset", choices=PRESETS, default="default", help="Gaigel ruleset preset (default: default)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the deals and of the random policy (default 1)")
    parser.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: the first allowed one)")
    parser.add_argument(
        "--no-openspiel", action="store_true", help="skip the OpenSpiel rows even if pyspiel is importable"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.repeat < 1:
        parser.error("--seconds must be > 0 and --repeat >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pyspiel: Any = None
    why_alone = ""
    if args.no_openspiel:
        why_alone = "OpenSpiel skipped (--no-openspiel): Gaigel alone."
    else:
        try:
            pyspiel = importlib.import_module("pyspiel")
        except ImportError as e:
            why_alone = (
                f"pyspiel is not importable ({e}); install the bench extra (pip install -e '.[bench]'). Gaigel alone."
            )
    pinned = pin_to_one_core(args.cpu)
    command = rerun_command(args)
    if not args.json:
        print(f"# rerun: {command}")
        if why_alone:
            print(f"# {why_alone}")
        sys.stdout.flush()

    jobs: list[tuple[str, str, int, Callable[[str], Run]]] = []
    for n in args.players:
        jobs.append(
            (
                f"gaigel {args.preset}",
                f"gaigel-{args.preset}",
                n,
                functools.partial(gaigel_runner, args.preset, n, seed=args.seed),
            )
        )
    if pyspiel is not None:
        for name, n in OPENSPIEL_GAMES:
            jobs.append(
                (f"{name} (OpenSpiel C++)", name, n, functools.partial(openspiel_runner, pyspiel, name, seed=args.seed))
            )

    rows: list[dict[str, Any]] = [{"label": label, "game": game, "players": n} for label, game, n, _ in jobs]
    keys = [(i, mode) for i in range(len(jobs)) for mode in MODES]
    results = measure_all([jobs[i][3](mode) for i, mode in keys], args.seconds, args.repeat, progress=not args.json)
    for (i, mode), result in zip(keys, results, strict=True):
        rows[i][mode] = result

    env = environment(pyspiel, pinned)
    if args.json:
        doc = {
            "command": command,
            "environment": env,
            "note": why_alone or None,
            "settings": {"seconds": args.seconds, "repeat": args.repeat, "seed": args.seed, "pool": POOL},
            "modes": MODE_TITLES,
            "results": rows,
        }
        json.dump(doc, sys.stdout, indent=2)
        print()
        return 0
    print(
        f"# Python {env['python']} ({env['implementation']}), {env['cpu']}, pinned to CPU {env['pinned_cpu']}, "
        f"gaigel engine {env['gaigel_engine']} ({env['gaigel_build']}, git {env['git']}), open_spiel {env['open_spiel'] or 'n/a'}"
    )
    print(
        f"# best of {args.repeat} x {args.seconds:g} s; decisions only (no chance nodes); "
        "full playout = dealing included, play only = from a pre-dealt state"
    )
    for line in format_table(rows):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
