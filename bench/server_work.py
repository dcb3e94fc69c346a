"""The server's own work per decision, piece by piece, without gRPC or the event loop.

Run from the repository root::

    python bench/server_work.py            # 2 players, 200 hands; about 10 seconds
    python bench/server_work.py --players 4 --hands 100

Plays seeded matches in process the way ``Table`` does (the engine's ``MatchDriver``, the
codec, a ``BotSession`` per seat with a stream attached) and times each piece the server
does for a decision of a remote seat, in microseconds per decision: building the
observation and the DecisionRequest, the session's send path (plain and compact), the
driver's step (apply, state hash, record), the events (routing and broadcast), and the
metrics. It is what ``bench/server.py --profile`` shows spread over grpc and asyncio,
here without them, so that a change to one piece shows in its own line.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from typing import cast

from prometheus_client import CollectorRegistry

from gaigel.match import DecisionRequest, HandEnded, HandStarted, MatchDriver, MatchSpec
from gaigel.ruleset import preset
from gaigel_server import codec, wire
from gaigel_server.broadcast import Broadcast
from gaigel_server.clock import Clock
from gaigel_server.ledger import decision_id
from gaigel_server.metrics import ServerMetrics
from gaigel_server.seat import Seat, SeatHost
from gaigel_server.session import BotSession, Stream


class Timer:
    """Accumulates seconds per named piece."""

    def __init__(self) -> None:
        self.total: dict[str, float] = defaultdict(float)
        self.start = 0.0

    def __call__(self, name: str) -> Timer:
        self.name = name
        return self

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.total[self.name] += time.perf_counter() - self.start


def play(players: int, hands: int, seed: int, compact: bool, t: Timer) -> int:
    """One match with every seat remote; returns the decisions played."""
    rules = preset("default", players=players)
    spec = MatchSpec(ruleset=rules, seed=seed, hands=hands, bots=tuple(f"b{s}" for s in range(players)))
    metrics = ServerMetrics(CollectorRegistry())
    seats = [Seat(cast(SeatHost, None), s, Clock()) for s in range(players)]  # no table: nothing comes in
    broadcast = Broadcast(seats)
    for s in range(players):
        joined = BotSession(f"b{s}", "1", compact=compact, fold_hand_end=compact)
        joined.attach(Stream(max_queued_bytes=1 << 40))
        seats[s].bind(joined)
    driver = MatchDriver(spec, events=True)
    hev: codec.HandEvents | None = None
    tricks = wire.TrickCache()
    decisions = 0
    answered = metrics.decided["answered"]
    latency = [metrics.decision_seconds.labels(f"b{s}") for s in range(players)]
    while True:
        step = driver.next()
        if isinstance(step, DecisionRequest):
            decisions += 1
            sess = seats[step.seat].session
            assert sess is not None
            with t("observation (engine)"):
                obs = step.observation
            with t("observation (wire)"):
                observation = wire.observation(obs, step.hand_index, tricks)
            with t("DecisionRequest (wire)"):
                legal = wire.legal_actions(step.legal_actions)
                request = wire.decision_request(decision_id(), legal, observation, 1.0, 5.0)
            with t("session send (request)"):
                sess.post_request(request)
            with t("driver step (apply, hash, record)"):
                driver.decide(step.legal_actions[0], 0.001, ())
            with t("metrics"):
                metrics.server_lag.observe(0.0001)  # one per remote decision, as the table does
                answered.inc()
                latency[step.seat].observe(0.001)
            with t("events (route, send, publish)"):
                assert hev is not None
                for ev in driver.take_events():
                    for routed in hev.feed(ev):
                        broadcast.event(routed)
        elif isinstance(step, HandStarted):
            hev = codec.HandEvents(rules, step.hand_index, step.state.talon_size)
            tricks = wire.TrickCache()
            with t("hand start"):
                for s in range(players):
                    broadcast.send(s, hand_start=codec.hand_start(step.state, step.hand_index, step.dealer, s))
                for ev in driver.take_events():
                    for routed in hev.feed(ev):
                        broadcast.event(routed)
        elif isinstance(step, HandEnded):
            assert hev is not None
            with t("hand end"):
                broadcast.announce("hand_end", codec.hand_end(step.state, step.hand_index, hev.deciding_seat, rules))
        else:
            return decisions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--players", type=int, default=2)
    parser.add_argument("--hands", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3, help="runs per mode; the fastest counts (default 3)")
    args = parser.parse_args(argv)
    print("python bench/server_work.py " + " ".join(sys.argv[1:] if argv is None else argv))
    for compact in (False, True):
        best: dict[str, float] | None = None
        n = 0
        for _ in range(args.repeat):
            t = Timer()
            n = play(args.players, args.hands, 1, compact, t)
            if best is None or sum(t.total.values()) < sum(best.values()):
                best = dict(t.total)
        assert best is not None
        print(f"\n{'compact' if compact else 'plain'} ({n} decisions, {args.players} players): us per decision")
        for name, seconds in best.items():
            print(f"  {name:<36} {seconds / n * 1e6:8.2f}")
        print(f"  {'total':<36} {sum(best.values()) / n * 1e6:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
