"""Arena overhead: wall time of an arena with instant bots against the engine-only time of its games.

Run from the repository root::

    python bench/arena.py                                   # demo arena, local and grpc executors
    python bench/arena.py --sets 20 --executors local,grpc,ray --repeat 3 --json

The arena is the demo config (``examples/demo.toml``, or ``--config``) with every bot
replaced by an *instant* house bot of the same name (``random`` and ``first`` in turn),
so the time measured is the arena's own: scheduling, the journal (SQLite, WAL), match
records, the executor, and the final ratings (``--bootstrap`` samples). Each executor
plays the whole schedule into a fresh temporary folder, with ``--workers`` (default: one
per core) matches at a time:

* **local**: worker processes with in-process house bots;
* **grpc**: a local match server; every bot is its own process (``gaigel bot NAME``) and
  every decision travels over gRPC (start-up of the server and the bot processes included);
* **ray** (when Ray is installed, ``pip install -e '.[ray]'``): Ray tasks on a local
  cluster of ``--workers`` CPUs started before the clock starts, as an existing cluster
  would be.

The engine-only time plays the same schedule's matches (same seeds, seats and bots) with
:func:`gaigel.match.play_match` in this one process, one after the other, with no
journal, no records and no ratings. The ratio compares the arena's wall time on all its
workers with that single-core time, and with the ideal ``engine / workers``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from gaigel import engine_build
from gaigel.bots import make_bot
from gaigel.match import MatchSpec, play_match
from gaigel.state import ENGINE_VERSION
from gaigel_arena.config import ArenaConfig, BotConfig, load_config
from gaigel_arena.runner import run_arena
from gaigel_arena.schedule import build_schedule

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = REPO / "examples" / "demo.toml"
INSTANT = ("random", "first")
EXECUTORS = ("local", "grpc", "ray")


def instant_config(config: ArenaConfig, sets: int | None, workers: int) -> ArenaConfig:
    """*config* with instant house bots (same names) and the given sets and workers."""
    bots = tuple(
        BotConfig(name=b.name, kind="house", house=INSTANT[i % len(INSTANT)]) for i, b in enumerate(config.bots)
    )
    return dataclasses.replace(
        config, bots=bots, sets_per_pairing=sets or config.sets_per_pairing, workers=workers, executor="auto"
    )


def engine_only(config: ArenaConfig, record: bool = False) -> tuple[float, int, int]:
    """Plays every scheduled match in this process; (seconds, matches, decisions)."""
    schedule = build_schedule(config.bot_names, config.ruleset, config.sets_per_pairing, config.seed)
    jobs = [
        (MatchSpec(ruleset=config.ruleset, seed=m.seed, hands=config.hands, bots=m.seats), m.seats) for m in schedule
    ]
    decisions = 0
    started = time.perf_counter()
    for spec, seats in jobs:
        bots = [make_bot(config.bot(name).house) for name in seats]
        _, rec = play_match(spec, bots, record=record)
        if rec is not None:
            decisions += sum(len(h["actions"]) for h in rec["hands"])
    return time.perf_counter() - started, len(jobs), decisions


def arena_wall(config: ArenaConfig, executor: str, bootstrap: int) -> tuple[float, int]:
    """Plays the whole arena into a temporary folder; (wall seconds, matches played)."""
    with tempfile.TemporaryDirectory(prefix="gaigel-bench-arena-") as tmp:
        started = time.perf_counter()
        summary = run_arena(config, Path(tmp) / "out", executor=executor, bootstrap_samples=bootstrap)
        wall = time.perf_counter() - started
    if summary.done != summary.scheduled:
        raise RuntimeError(f"{executor}: only {summary.done} of {summary.scheduled} matches done")
    return wall, summary.played_now


def with_ray(workers: int, run: Callable[[], Any]) -> Any:
    """Runs *run* with a local Ray cluster of *workers* CPUs already up."""
    import ray

    ray.init(address="local", num_cpus=workers, include_dashboard=False, logging_level="warning")
    try:
        return run()
    finally:
        ray.shutdown()


def rerun_command(args: argparse.Namespace) -> str:
    parts = ["python", "bench/arena.py"]
    if Path(args.config).resolve() != DEFAULT_CONFIG:
        parts += ["--config", str(args.config)]
    if args.sets:
        parts += ["--sets", str(args.sets)]
    parts += ["--workers", str(args.workers), "--executors", ",".join(args.executors)]
    parts += ["--repeat", str(args.repeat), "--bootstrap", str(args.bootstrap)]
    if args.json:
        parts.append("--json")
    return f"cd {shlex.quote(str(REPO))} && " + " ".join(shlex.quote(p) for p in parts)


def environment() -> dict[str, Any]:
    try:
        git = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        git = None
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "gaigel_engine": ENGINE_VERSION,
        "gaigel_build": engine_build(),
        "git": git,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(DEFAULT_CONFIG), help="arena config (default: examples/demo.toml)")
    parser.add_argument("--sets", type=int, default=0, help="duplicate sets per pairing (default: the config's)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="matches at a time (default: cores)")
    parser.add_argument(
        "--executors",
        type=lambda s: [x for x in s.split(",") if x],
        default=["local", "grpc"],
        help="comma-separated, of local, grpc, ray (default: local,grpc)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each measurement; the best counts (default 1)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap samples of the final ratings")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    args = parser.parse_args(argv)
    unknown = [e for e in args.executors if e not in EXECUTORS]
    if unknown:
        parser.error(f"unknown executor(s) {', '.join(unknown)} (known: {', '.join(EXECUTORS)})")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # no fork notices from gRPC (the gRPC executor, Ray)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    config = instant_config(load_config(args.config), args.sets, args.workers)
    command = rerun_command(args)
    if not args.json:
        print(f"# rerun: {command}", flush=True)

    engine = min(engine_only(config) for _ in range(args.repeat))
    engine_rec = min(engine_only(config, record=True) for _ in range(args.repeat))
    engine_s, matches, _ = engine
    decisions = engine_rec[2]
    rows: list[dict[str, Any]] = []
    for kind in args.executors:

        def measure(kind: str = kind) -> tuple[float, int]:
            return min(arena_wall(config, kind, args.bootstrap) for _ in range(args.repeat))

        if kind == "ray":
            try:
                wall, played = with_ray(args.workers, measure)
            except ImportError:
                print("# ray skipped: not installed (pip install -e '.[ray]')", file=sys.stderr)
                continue
        else:
            wall, played = measure()
        assert played == matches
        rows.append(
            {
                "executor": kind,
                "wall_s": round(wall, 3),
                "matches_per_s": round(matches / wall, 1),
                "x_engine": round(wall / engine_s, 2),
                "x_engine_per_worker": round(wall / (engine_s / args.workers), 2),
            }
        )

    doc = {
        "command": command,
        "environment": environment(),
        "arena": {
            "config": str(args.config),
            "bots": {b.name: b.house for b in config.bots},
            "players": config.players,
            "hands": config.hands,
            "sets_per_pairing": config.sets_per_pairing,
            "matches": matches,
            "decisions": decisions,
            "workers": args.workers,
            "keep_records": config.keep_records,
            "bootstrap": args.bootstrap,
            "repeat": args.repeat,
        },
        "engine_only_s": round(engine_s, 3),
        "engine_with_records_s": round(engine_rec[0], 3),
        "results": rows,
    }
    if args.json:
        json.dump(doc, sys.stdout, indent=2)
        print()
        return 0
    env = doc["environment"]
    print(
        f"# Python {env['python']}, {env['cpus']} CPUs, engine {env['gaigel_engine']} ({env['gaigel_build']}), "
        f"git {env['git']}, load average {env['load_average'][0]} at the end"
    )
    print(
        f"# {matches} matches ({config.sets_per_pairing} sets, {config.players} players, {config.hands} hands, "
        f"{decisions} decisions), bots {', '.join(f'{b.name}={b.house}' for b in config.bots)}; "
        f"{args.workers} workers; best of {args.repeat}"
    )
    print(
        f"# engine only, 1 process: {engine_s:.3f} s ({matches / engine_s:.0f} matches/s); "
        f"with match records: {engine_rec[0]:.3f} s; ideal on {args.workers} workers: {engine_s / args.workers:.3f} s"
    )
    header = f"{'executor':<9} | {'wall s':>8} | {'matches/s':>9} | {'x engine':>8} | {f'x engine/{args.workers}':>10}"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['executor']:<9} | {r['wall_s']:>8.3f} | {r['matches_per_s']:>9.1f} | "
            f"{r['x_engine']:>8.2f} | {r['x_engine_per_worker']:>10.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
