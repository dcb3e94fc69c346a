"""Prometheus metrics of an arena run (``gaigel_arena_*``).

Labels are bounded: ``outcome`` has a fixed set of values and ``bot`` is limited to the
bots of the configuration. Match ids, seeds and tokens are never labels.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gaigel.match import MATCH_TERMINATIONS

__all__ = ["OUTCOMES", "VOID", "ArenaMetrics"]

VOID = "void"
"""The ``outcome`` of a match the arena could not count (it is replayed, not rated)."""
OUTCOMES = (*MATCH_TERMINATIONS, VOID)
"""``outcome`` label values: the match terminations plus :data:`VOID`."""


class ArenaMetrics:
    """The arena's metrics in their own registry (pass one in tests)."""

    def __init__(self, bots: Iterable[str], registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.matches_scheduled = Gauge("gaigel_arena_matches_scheduled", "Matches in the schedule.", registry=r)
        self.matches_done = Gauge("gaigel_arena_matches_done", "Matches with a stored result.", registry=r)
        self.progress_ratio = Gauge("gaigel_arena_progress_ratio", "Done matches over scheduled matches.", registry=r)
        self.matches_total = Counter(
            "gaigel_arena_matches_total", "Matches finished in this run, by outcome.", ["outcome"], registry=r
        )
        self.match_duration_seconds = Histogram(
            "gaigel_arena_match_duration_seconds",
            "Wall time of one match in a worker.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
            registry=r,
        )
        self.rating_elo = Gauge("gaigel_arena_rating_elo", "Sequential Elo rating by bot.", ["bot"], registry=r)
        self.rating_bt = Gauge(
            "gaigel_arena_rating_bt", "Bradley-Terry rating (Elo scale, mean 0) by bot.", ["bot"], registry=r
        )
        for outcome in OUTCOMES:
            self.matches_total.labels(outcome=outcome)
        for bot in bots:
            self.rating_elo.labels(bot=bot).set(1500.0)
            self.rating_bt.labels(bot=bot).set(0.0)

    def set_progress(self, done: int, total: int) -> None:
        """Updates the progress gauges."""
        self.matches_scheduled.set(total)
        self.matches_done.set(done)
        self.progress_ratio.set(done / total if total else 1.0)
