"""The two simplest house bots: ``first`` and a seeded ``random``."""

from __future__ import annotations

import hashlib

from gaigel.deal import SplitMix64
from gaigel.match import Bot, DecisionRequest, MatchSpec


class FirstBot(Bot):
    """Always takes the first legal action (the lowest id)."""

    name = "first"

    def decide(self, request: DecisionRequest) -> int:
        return request.legal_actions[0]


class RandomBot(Bot):
    """A uniformly random legal action, seeded from the match seed and the seat.

    The stream is SplitMix64 (DEALS.md) started from ``sha256("gaigel-random-bot:<seed>:<seat>")``,
    so the same match plays the same way in every process.
    """

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.rng = SplitMix64(seed)

    def start_match(self, spec: MatchSpec, seat: int) -> None:
        digest = hashlib.sha256(f"gaigel-random-bot:{spec.seed}:{seat}".encode("ascii")).digest()
        self.rng = SplitMix64(int.from_bytes(digest[:8], "big"))

    def decide(self, request: DecisionRequest) -> int:
        legal = request.legal_actions
        return legal[self.rng.below(len(legal))]
