"""Learning-agent adapters: environment steps per second beside the raw engine's decisions per second.

Run from the repository root (needs the rl extra, ``pip install -e '.[rl]'``)::

    python bench/rl.py                       # 2 s per measurement, best of 3
    python bench/rl.py --players 4 --seconds 1 --repeat 1 --json

Every row plays random legal actions for a fixed wall time on one core, episodes of one
hand of the default preset, and counts decisions (one step = one decision):

* **engine**: ``GaigelState.legal_actions`` and ``apply`` only, the reference;
* **engine + tensor**: the same plus the acting seat's observation tensor at every decision;
* **pettingzoo AEC**: ``last()`` (observation dict with tensor and action mask) and ``step()``;
* **gymnasium**: ``step()`` of the single-agent environment, the other seats ``random`` house
  bots (their decisions count too: they are steps of the table);
* **openspiel**: ``python_gaigel``'s ``legal_actions``, ``observation_tensor`` and
  ``apply_action`` (the deal's chance nodes are not counted).

Rows run round-robin ``--repeat`` times and the best rate counts; each ratio is the row's
rate over the engine's rate in the same run (the issue's target for the AEC step: 0.3x).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from gaigel import engine_build
from gaigel.deal import deal
from gaigel.ruleset import preset
from gaigel.state import GaigelState
from gaigel_rl.tensor import encode_state

Run = Callable[[float], int]
"""Runs for about the given seconds; returns the decisions made."""


def engine(players: int, tensor: bool) -> Run:
    rules = preset("default", players)

    def run(seconds: float) -> int:
        rnd = random.Random(1).random
        decisions = hands = 0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            state = GaigelState(rules, deal(1, hands, players), hands % players)
            hands += 1
            while not state.is_terminal():
                if tensor:
                    encode_state(state, state.to_act)
                acts = state.legal_actions()
                state.apply(acts[int(rnd() * len(acts))])
                decisions += 1
        return decisions

    return run


def pettingzoo(players: int) -> Run:
    from gaigel_rl.pettingzoo_env import env

    e = env(players=players)

    def run(seconds: float) -> int:
        rnd = random.Random(1).random
        decisions = 0
        e.reset(seed=1)
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            obs, _, term, trunc, _ = e.last()
            if term or trunc:
                e.reset()
                continue
            legal = np.flatnonzero(obs["action_mask"])
            e.step(int(legal[int(rnd() * len(legal))]))
            decisions += 1
        return decisions

    return run


def gymnasium(players: int) -> Run:
    from gaigel_rl.gymnasium_env import GaigelSingleEnv

    e = GaigelSingleEnv(players=players, opponents="random")

    def run(seconds: float) -> int:
        rnd = random.Random(1).random
        decisions = 0
        obs, _ = e.reset(seed=1)
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            legal = np.flatnonzero(obs["action_mask"])
            obs, _, done, _, _ = e.step(int(legal[int(rnd() * len(legal))]))
            if done:
                assert e.episode is not None
                decisions += e.episode.decisions
                obs, _ = e.reset()
        return decisions

    return run


def openspiel(players: int) -> Run:
    import pyspiel

    import gaigel_rl.openspiel_game  # noqa: F401  (registers the game)

    game = pyspiel.load_game(f"python_gaigel(players={players})")

    def run(seconds: float) -> int:
        rnd = random.Random(1).random
        decisions = 0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            state = game.new_initial_state()
            while state.is_chance_node():
                outcomes = state.chance_outcomes()
                state.apply_action(outcomes[int(rnd() * len(outcomes))][0])
            while not state.is_terminal():
                state.observation_tensor(state.current_player())
                acts = state.legal_actions()
                state.apply_action(acts[int(rnd() * len(acts))])
                decisions += 1
        return decisions

    return run


ROWS: dict[str, Callable[[int], Run]] = {
    "engine": lambda n: engine(n, tensor=False),
    "engine + tensor": lambda n: engine(n, tensor=True),
    "pettingzoo AEC": pettingzoo,
    "gymnasium": gymnasium,
    "openspiel": openspiel,
}


def measure(players: int, seconds: float, repeat: int) -> list[dict[str, Any]]:
    """Best rate of *repeat* rounds of every row (round-robin, so outside load hits every row alike)."""
    runs = {name: make(players) for name, make in ROWS.items()}
    best = dict.fromkeys(runs, 0.0)
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            decisions = run(seconds)
            best[name] = max(best[name], decisions / (time.perf_counter() - start))
    reference = best["engine"]
    return [
        {"row": name, "decisions_per_s": round(rate), "ratio": round(rate / reference, 3)}
        for name, rate in best.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--players", type=int, choices=(2, 3, 4, 6), default=2)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = measure(args.players, args.seconds, args.repeat)
    if args.json:
        print(json.dumps({"players": args.players, "engine_build": engine_build(), "rows": rows}))
        return
    print(f"{args.players} players, engine {engine_build()}")
    print(f"{'row':<18}{'decisions/s':>12}{'ratio':>8}")
    for row in rows:
        print(f"{row['row']:<18}{row['decisions_per_s']:>12}{row['ratio']:>8.2f}")


if __name__ == "__main__":
    main()
