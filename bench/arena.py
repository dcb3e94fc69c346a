"""Arena overhead: wall time of an arena with instant bots against the engine-only time of its games.

Run from the repository root::

    python bench/arena.py                                   # demo arena: local, grpc at 1 and 2 workers
    python bench/arena.py --sets 20 --executors local,grpc,ray --repeat 3 --json
    python bench/arena.py --executors grpc --grpc-workers 2 --profile prof/   # cProfile of each table worker

The arena is the demo config (``examples/demo.toml``, or ``--config``) with every bot
replaced by an *instant* house bot of the same name (``random`` and ``first`` in turn),
so the time measured is the arena's own: scheduling, the journal (SQLite, WAL), match
records, the executor, and the final ratings (``--bootstrap`` samples). Each executor
plays the whole schedule into a fresh temporary folder, with ``--workers`` (default: one
per core) matches at a time:

* **local**: worker processes with in-process house bots;
* **grpc**: table worker processes (``--grpc-workers``, default 1 and 2, each measured),
  each with its own match server; every bot is its own process (``gaigel bot NAME``) and
  every decision travels over gRPC (start-up of the workers, servers and bot processes
  included). Also printed: the runner's CPU seconds, and per decision the CPU of the
  workers (their servers) and of the bot processes, start-up left out;
* **ray** (when Ray is installed, ``pip install -e '.[ray]'``): Ray tasks on a local
  cluster of ``--workers`` CPUs started before the clock starts, as an existing cluster
  would be.

The engine-only time plays the same schedule's matches (same seeds, seats and bots) with
:func:`gaigel.match.play_match` in this one process, one after the other, with no
journal, no records and no ratings. The ratio compares the arena's wall time on all its
workers with that single-core time, and with the ideal ``engine / workers``. The targets
(issue 13) are checked against figures of the same run: gRPC at 2 workers at least 1.7x
the matches/s of 1 worker, and the gRPC executor's time at most 20x the engine-only time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import platform
import resource
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
from gaigel_arena.executors import Executor
from gaigel_arena.runner import make_executor, run_arena
from gaigel_arena.schedule import build_schedule

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = REPO / "examples" / "demo.toml"
INSTANT = ("random", "first")
EXECUTORS = ("local", "grpc", "ray")
SPEEDUP_TARGET = 1.7
"""gRPC matches/s at 2 workers over 1 worker (issue 13)."""
X_ENGINE_TARGET = 20.0
"""gRPC executor time over the engine-only time of the same matches, at most (issue 13)."""


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


@dataclasses.dataclass
class Run:
    """One arena run: wall seconds, matches, the runner's CPU seconds and what its table workers spent."""

    wall: float
    played: int
    runner_cpu: float
    workers: list[dict[str, Any]]
    startup: float
    """Seconds the executor took to start (workers, servers, bot processes joined), part of *wall*."""

    def per_decision_ms(self, key: str) -> float | None:
        decisions = sum(w["decisions"] for w in self.workers)
        return 1000.0 * sum(w[key] for w in self.workers) / decisions if decisions else None


def arena_wall(config: ArenaConfig, executor: str, bootstrap: int, workers: int | None = None) -> Run:
    """Plays the whole arena into a temporary folder, with *workers* (default: the config's)."""
    pools: list[Executor] = []
    startup: list[float] = []

    def factory(c: ArenaConfig, w: int) -> Executor:
        began = time.perf_counter()
        pools.append(make_executor(c, w, executor))
        startup.append(time.perf_counter() - began)
        return pools[-1]

    with tempfile.TemporaryDirectory(prefix="gaigel-bench-arena-") as tmp:
        cpu = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        summary = run_arena(
            config, Path(tmp) / "out", workers=workers, executor_factory=factory, bootstrap_samples=bootstrap
        )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
    if summary.done != summary.scheduled:
        raise RuntimeError(f"{executor}: only {summary.done} of {summary.scheduled} matches done")
    runner_cpu = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
    return Run(wall, summary.played_now, runner_cpu, list(getattr(pools[0], "worker_stats", [])), startup[0])


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def _cell(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


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
    parts += ["--grpc-workers", ",".join(str(w) for w in args.grpc_workers)]
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
    parser.add_argument(
        "--grpc-workers",
        type=lambda s: [int(x) for x in s.split(",") if x],
        default=[1, 2],
        help="table workers of the grpc executor, each count measured (default: 1,2)",
    )
    parser.add_argument("--profile", metavar="DIR", help="each table worker writes a cProfile of its server here")
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
    if args.profile:
        from gaigel_arena.workers import PROFILE_ENV

        Path(args.profile).mkdir(parents=True, exist_ok=True)
        os.environ[PROFILE_ENV] = str(Path(args.profile).resolve())
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
        for workers in args.grpc_workers if kind == "grpc" else [args.workers]:

            def measure(kind: str = kind, workers: int = workers) -> Run:
                runs = [arena_wall(config, kind, args.bootstrap, workers) for _ in range(args.repeat)]
                return min(runs, key=lambda r: r.wall)

            if kind == "ray":
                try:
                    run = with_ray(args.workers, measure)
                except ImportError:
                    print("# ray skipped: not installed (pip install -e '.[ray]')", file=sys.stderr)
                    continue
            else:
                run = measure()
            assert run.played == matches
            rows.append(
                {
                    "executor": kind,
                    "workers": workers,
                    "wall_s": round(run.wall, 3),
                    "matches_per_s": round(matches / run.wall, 1),
                    "startup_s": round(run.startup, 3),
                    "matches_per_s_after_startup": round(matches / (run.wall - run.startup), 1),
                    "x_engine": round(run.wall / engine_s, 2),
                    "x_engine_per_worker": round(run.wall / (engine_s / workers), 2),
                    "runner_cpu_s": round(run.runner_cpu, 3),
                    "worker_cpu_ms_per_decision": _round(run.per_decision_ms("worker_cpu_s")),
                    "bot_cpu_ms_per_decision": _round(run.per_decision_ms("bots_cpu_s")),
                }
            )
    grpc = {r["workers"]: r for r in rows if r["executor"] == "grpc"}
    targets: dict[str, Any] = {}
    if 1 in grpc and 2 in grpc:
        for key, name in (("matches_per_s", ""), ("matches_per_s_after_startup", "_after_startup")):
            speedup = grpc[2][key] / grpc[1][key]
            targets[f"grpc_2_over_1_workers{name}"] = {
                "value": round(speedup, 2),
                "target": f">= {SPEEDUP_TARGET}",
                "met": speedup >= SPEEDUP_TARGET,
            }
    if grpc:
        best = min(grpc.values(), key=lambda r: r["wall_s"])
        targets["grpc_x_engine"] = {
            "value": best["x_engine"],
            "workers": best["workers"],
            "target": f"<= {X_ENGINE_TARGET:g}",
            "met": best["x_engine"] <= X_ENGINE_TARGET,
        }
        local = [r for r in rows if r["executor"] == "local"]
        if local:
            targets["grpc_x_local_executor"] = round(best["wall_s"] / local[0]["wall_s"], 2)

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
        "targets": targets,
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
    header = (
        f"{'executor':<9} | {'workers':>7} | {'wall s':>8} | {'start s':>7} | {'matches/s':>9} | "
        f"{'m/s w/o start':>13} | {'x engine':>8} | "
        f"{'x eng/w':>7} | {'runner CPU s':>12} | {'worker ms/dec':>13} | {'bots ms/dec':>11}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['executor']:<9} | {r['workers']:>7} | {r['wall_s']:>8.3f} | {r['startup_s']:>7.2f} | "
            f"{r['matches_per_s']:>9.1f} | {r['matches_per_s_after_startup']:>13.1f} | "
            f"{r['x_engine']:>8.2f} | {r['x_engine_per_worker']:>7.2f} | {r['runner_cpu_s']:>12.3f} | "
            f"{_cell(r['worker_cpu_ms_per_decision']):>13} | {_cell(r['bot_cpu_ms_per_decision']):>11}"
        )
    for name, t in targets.items():
        if isinstance(t, dict):
            print(f"# target {name}: {t['value']} (target {t['target']}): {'met' if t['met'] else 'MISSED'}")
        else:
            print(f"# {name}: {t}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
