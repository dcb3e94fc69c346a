"""Games needed for one interval: per game, per duplicate set, per set with a control variate.

Run from the repository root::

    python bench/variance.py                                  # 2 and 4 players, the default pairs
    python bench/variance.py --sets 2000 --pairs search:heuristic --players 2 --hands 4 --json

For each player count and pair ``A:B`` (house bots; A is the candidate) this plays ``--sets``
duplicate sets of an A/B test (the schedule of ``gaigel arena test``: every deal under every
seating) on the local executor, then computes from the same games, with
:func:`gaigel_arena.sprt.standard_errors`:

* **per game**: the games treated as independent (what a plain win/loss count assumes);
* **per set**: the variance of the set means (duplicate: the unit of independence);
* **per set + control variate**, for each control in ``--controls``: ``Y = X - (B - mean B)``
  with ``B`` the set mean of ``b`` values from house-bot games on the same deals computed
  beforehand (``heuristic`` = heuristic self-play; ``heuristic/random`` = heuristic in the
  candidate's seats against random in the others; ``--playouts`` games each, with other bot seeds).

Each is given as the games it needs for a 95 % interval of the same half-width, and as a ratio
to per game (the target of issue 24: set + control variate at most 0.5x). Also printed: the
sets the sequential test (``--elo0``/``--elo1``) took on these same games with X alone and
with the best control variate (``-`` when no bound was reached within ``--sets``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import sys
import time
from typing import Any


def _play(arena: Any, plan: Any, workers: int) -> list[list[float]]:
    """Every match of *plan* on the local executor; the pairwise game scores per set."""
    from gaigel_arena.abtest import pair_score
    from gaigel_arena.executors import LocalExecutor, MatchJob

    pool = LocalExecutor(workers)
    try:
        futures = {
            pool.submit(
                MatchJob(m.match_id, arena.ruleset, m.seed, arena.hands, m.seats, {b.name: b for b in arena.bots}, None)
            ): m
            for m in plan.schedule
        }
        per_match = {}
        for future in concurrent.futures.as_completed(futures):
            per_match[futures[future].match_id] = future.result().result
    finally:
        pool.shutdown()
    sets: list[list[float]] = [[] for _ in range(plan.test.max_sets)]
    for m in plan.schedule:
        for me, other in plan.pairs[m.match_id]:
            sets[m.set_index].append(pair_score(per_match[m.match_id], me, other, plan.test.score))
    return sets


def measure(players: int, pair: str, args: argparse.Namespace) -> dict[str, Any]:
    """One row: the three standard errors (a control variate per --controls) and the sequential lengths."""
    from gaigel_arena.abtest import ABConfig, ABKind, ScoreKind, control_values, plan_ab
    from gaigel_arena.config import parse_config
    from gaigel_arena.sprt import Sprt, controlled_scores, first_crossing, llr_path, standard_errors

    a, b = pair.split(":")
    names = (a, b if b != a else f"{b}-copy")
    arena = parse_config(
        {
            "arena": {"name": "variance", "seed": args.seed},
            "game": {"players": players, "hands": args.hands},
            "bots": [{"name": names[0], "house": a}, {"name": names[1], "house": b}],
        }
    )
    test = ABConfig(ABKind.AB, names[0], names[1], (), max_sets=args.sets, score=ScoreKind(args.score), control="none")
    plan = plan_ab(arena, test)
    started = time.perf_counter()
    games = _play(arena, plan, args.workers)
    play_s = time.perf_counter() - started
    x = [sum(g) / len(g) for g in games]
    base = standard_errors(games)
    row: dict[str, Any] = {
        "players": players,
        "pair": pair,
        "sets": args.sets,
        "games_per_set": plan.games_per_set,
        "score": 100 * sum(x) / len(x),
        "play_s": round(play_s, 1),
        "per_game_se": base.per_game,
        "per_set_se": base.per_set,
        "per_set_ratio": base.ratio("per_set"),
        "controls": {},
    }
    sprt = Sprt(args.elo0, args.elo1, games_per_set=plan.games_per_set)
    best: tuple[float, list[float]] | None = None
    for control in args.controls.split(","):
        ref, _, against = control.partition("/")
        cplan = plan_ab(
            arena, dataclasses.replace(test, control=ref, control_against=against, control_playouts=args.playouts)
        )
        started = time.perf_counter()
        values = control_values(cplan)
        control_s = time.perf_counter() - started
        bs = [sum(v) / len(v) for v in values]
        y = [float(v) for v in controlled_scores(x, bs, sum(bs) / len(bs))]
        se = standard_errors(games, y)
        ratio = se.ratio("per_set_cv")
        row["controls"][control] = {"se": se.per_set_cv, "ratio": ratio, "seconds": round(control_s, 1)}
        if best is None or ratio < best[0]:
            best = (ratio, y)

    def sets_to_verdict(scores: list[float]) -> str:
        verdict, used = first_crossing(llr_path(scores, sprt), sprt)
        return f"{verdict.value} {used}" if verdict.value in ("H0", "H1") else "-"

    row["sequential"] = {"x": sets_to_verdict(x), "best_cv": sets_to_verdict(best[1]) if best else "-"}
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--players", default="2,4", help="player counts (default %(default)s)")
    p.add_argument("--pairs", default="random:first,heuristic:random,heuristic:heuristic", help="A:B house-bot pairs")
    p.add_argument("--controls", default="heuristic,heuristic/random,heuristic/first", help="control variates")
    p.add_argument("--sets", type=int, default=600, help="duplicate sets per row (default %(default)s)")
    p.add_argument("--hands", type=int, default=4, help="hands per match (default %(default)s)")
    p.add_argument("--playouts", type=int, default=1, help="control games per deal and seating (default 1)")
    p.add_argument("--score", default="match", choices=("match", "hands", "points"))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--elo0", type=float, default=0.0)
    p.add_argument("--elo1", type=float, default=20.0)
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = p.parse_args()
    rows = [measure(int(n), pair, args) for n in args.players.split(",") for pair in args.pairs.split(",")]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    controls = args.controls.split(",")
    print(
        f"games needed for the same 95 % interval, relative to per game ({args.sets} sets, {args.hands} hands, "
        f"score = {args.score}); sets to a verdict at nElo [{args.elo0:g}, {args.elo1:g}]"
    )
    head = f"{'players':>7} {'pair':<22} {'score':>6} {'per set':>8} " + " ".join(f"{'+cv ' + c:>20}" for c in controls)
    print(head + f" {'seq X':>9} {'seq best':>9}")
    for r in rows:
        cv = " ".join(f"{r['controls'][c]['ratio']:>19.2f}x" for c in controls)
        print(
            f"{r['players']:>7} {r['pair']:<22} {r['score']:>5.1f}% {r['per_set_ratio']:>7.2f}x {cv}"
            f" {r['sequential']['x']:>9} {r['sequential']['best_cv']:>9}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
