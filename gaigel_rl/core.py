"""The episode every adapter shares: a series of seeded hands, agents mapped to seats, rewards.

An episode is *hands* hands of one match whose deals come from DEALS.md with the episode's
deal seed (:func:`gaigel.match.hand_setup`: the dealer moves one seat per hand). Agent *a*
sits at seat ``(a + seating) % players``: replaying a deal seed with every seating is the
duplicate evaluation the arena uses, the same cards dealt to every agent in turn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from gaigel.match import MatchSpec, hand_setup
from gaigel.observation import Observation
from gaigel.ruleset import Ruleset, preset
from gaigel.state import GaigelState, HandOutcome


@dataclasses.dataclass(frozen=True)
class Rewards:
    """How a finished hand pays each side (every seat of a side gets its side's reward).

    ``win`` to each winning side, ``loss`` to each side that takes a dash (a Gigackel counts
    once here; ``dash`` adds per dash), ``points`` times the side's points minus the mean of
    the other sides' points, over 120. Void hands pay 0 plus the points term.
    """

    win: float = 1.0
    loss: float = -1.0
    dash: float = 0.0
    points: float = 0.0

    def of(self, outcome: HandOutcome, side: int) -> float:
        """The reward of *side* for *outcome*."""
        r = 0.0
        if side in outcome.winners:
            r += self.win
        dashes = outcome.dashes[side]
        if dashes:
            r += self.loss + self.dash * dashes
        if self.points and len(outcome.points) > 1:
            others = [p for x, p in enumerate(outcome.points) if x != side]
            r += self.points * (outcome.points[side] - sum(others) / len(others)) / 120.0
        return r


def make_rules(players: int, rules_preset: str = "default", options: Mapping[str, Any] | None = None) -> Ruleset:
    """The ruleset of *rules_preset* for *players* seats with dotted *options* on top (RULES.md §14)."""
    base = preset(rules_preset, players)
    return Ruleset.from_dict(dict(options), base) if options else base


class Episode:
    """One episode: the hands of a match with seed *deal_seed*, agent ``a`` at seat ``(a + seating) % n``."""

    def __init__(self, rules: Ruleset, hands: int, deal_seed: int, seating: int, rewards: Rewards) -> None:
        n = rules.players
        if not 0 <= seating < n:
            raise ValueError(f"seating must be 0..{n - 1}, got {seating}")
        self.rules = rules
        self.rewards = rewards
        self.spec = MatchSpec(rules, deal_seed, hands, ("agent",) * n)
        self.seating = seating
        self.hand_index = -1
        self.decisions = 0
        self._legal: list[int] = []
        self._legal_key = (-2, -1)
        """Actions applied so far, by every seat (what bench/rl.py counts)."""
        self.carry = [0.0] * n
        """Rewards of hands that ended at the deal (five Sevens, a redeal), paid with the next hand's."""
        self.state: GaigelState = self._deal_next()
        while self.state.is_terminal() and self.hand_index + 1 < hands:
            self._pay(self.carry)
            self.state = self._deal_next()

    def seat_of(self, agent: int) -> int:
        """The seat agent *agent* plays."""
        return (agent + self.seating) % self.rules.players

    def agent_at(self, seat: int) -> int:
        """The agent at *seat*."""
        return (seat - self.seating) % self.rules.players

    @property
    def over(self) -> bool:
        """True once the last hand is over."""
        return self.state.is_terminal() and self.hand_index + 1 >= self.spec.hands

    def to_act(self) -> int:
        """The agent to decide (only while not :attr:`over`)."""
        return self.agent_at(self.state.to_act)

    def legal(self) -> list[int]:
        """The legal actions now, computed once per decision (the adapters ask for them twice)."""
        key = (self.hand_index, self.decisions)
        if self._legal_key != key:
            self._legal = self.state.legal_actions()
            self._legal_key = key
        return self._legal

    def observation(self, agent: int) -> Observation:
        """What *agent* may know now."""
        return self.state.observation(self.seat_of(agent))

    def apply(self, action: int) -> list[float] | None:
        """Applies the current agent's *action*; returns every agent's reward when a hand ended, else None.

        A finished hand that is not the last is followed by the next deal at once (hands that
        end at the deal, such as five Sevens, pay out together with it).

        :raises IllegalActionError: for an action that is not legal now.
        """
        if action in self.legal():
            self.state.apply(action)
        else:
            self.state.apply_checked(action)  # raises, with the engine's reason
        self.decisions += 1
        if not self.state.is_terminal():
            return None
        paid, self.carry = self.carry, [0.0] * self.rules.players
        while True:
            self._pay(paid)
            if self.hand_index + 1 >= self.spec.hands:
                return paid
            self.state = self._deal_next()
            if not self.state.is_terminal():
                return paid

    def _pay(self, paid: list[float]) -> None:
        outcome = self.state.outcome()
        assert outcome is not None
        for seat in range(self.rules.players):
            paid[self.agent_at(seat)] += self.rewards.of(outcome, self.rules.side_of(seat))

    def _deal_next(self) -> GaigelState:
        self.hand_index += 1
        d, _, forehand = hand_setup(self.spec, self.hand_index)
        return GaigelState(self.rules, d, forehand)
