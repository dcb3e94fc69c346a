"""The ``search`` house bot: determinized Monte Carlo search (perfect-information sampling).

For each decision it samples full states consistent with its observation
(:func:`gaigel.determinize.determinize`: unseen cards dealt uniformly, subject to what the
strict phase revealed), plays every legal action in each sample, finishes the hand with a
fast greedy rollout policy, and picks the action with the best mean result for its side.
It never sees the real state: only ``request.observation``. Its budget is a number of
samples, not a time: with the same seed (its seat's bot seed over gRPC) its choice is a
function of the observation alone, on any machine at any load. A wall-clock safety cap
(``max_seconds``, far above a normal decision) only guards against a stuck machine; when
it fires, ``time_capped`` is set for that decision and the record flags it TIME_CAPPED.
"""

from __future__ import annotations

import hashlib
import random
import time

from gaigel import actions as A
from gaigel.cards import POINTS_OF, SUIT_OF
from gaigel.determinize import determinize
from gaigel.match import Bot, DecisionRequest, MatchSpec
from gaigel.state import BEATS, GaigelState, HandOutcome


def hand_value(outcome: HandOutcome, side: int) -> float:
    """Result of a hand for *side*: +1 for a win, minus its dashes, plus half the others' dashes."""
    others = [d for x, d in enumerate(outcome.dashes) if x != side]
    return (1.0 if side in outcome.winners else 0.0) - outcome.dashes[side] + 0.5 * sum(others) / max(1, len(others))


def rollout_action(state: GaigelState, rng: random.Random) -> int:
    """A cheap greedy policy on the full state: rob and meld, win a trick cheaply when it is
    worth points, otherwise throw the cheapest card. One in ten moves is random."""
    legal = state.legal_actions()
    if len(legal) == 1:
        return legal[0]
    if rng.random() < 0.1:
        return legal[rng.randrange(len(legal))]
    last = legal[-1]
    if last >= 144:
        if A.AUS in legal:
            side = state.side_of[state.to_act]
            return A.AUS if state.side_total(side) >= state.rules.target else A.PASS
        if A.ROB in legal or A.FIVE_SEVENS in legal:
            return A.FIVE_SEVENS if A.FIVE_SEVENS in legal else A.ROB
        if last >= A.OPENING_BASE and last < A.AUS:
            return legal[0]
        melds = [a for a in legal if A.MELD_BASE <= a < A.NO_MELD]
        if melds:
            return melds[-1]
        if A.NO_MELD in legal:
            return A.NO_MELD
    if last >= 48:
        return last  # a play with a meld (the double or trump one sorts last)
    trump = state.trump
    tc = state.trick_cards
    if not tc or state.trick1_special:
        return min(legal, key=lambda c: (SUIT_OF[c] == trump, POINTS_OF[c]))
    table = BEATS[trump]
    win = state.win_card
    partner_wins = state.side_of[(state.leader + state.win_idx) % state.n] == state.side_of[state.to_act]
    if partner_wins:
        return max(legal, key=lambda c: (not table[win * 48 + c] and SUIT_OF[c] != trump, POINTS_OF[c]))
    winners = [c for c in legal if table[win * 48 + c]]
    on_table = sum(POINTS_OF[c] for c in tc)
    if winners and (on_table >= 10 or state.strict):
        return min(winners, key=lambda c: (SUIT_OF[c] == trump, POINTS_OF[c]))
    return min(legal, key=lambda c: (SUIT_OF[c] == trump, POINTS_OF[c]))


class SearchBot(Bot):
    """Determinized Monte Carlo search with a playout budget per decision.

    ``time_capped`` tells whether the last decision was cut short by the safety cap (then
    its choice depends on the machine's speed); match runners record it.
    """

    name = "search"

    def __init__(self, samples: int = 48, max_seconds: float = 10.0, seed: int = 0) -> None:
        self.samples = samples
        self.max_seconds = max_seconds
        self.seed = seed
        self.seat = 0
        self.playouts = 0
        self.time_capped = False

    def start_match(self, spec: MatchSpec, seat: int) -> None:
        self.seed = spec.seed
        self.seat = seat

    def _rng(self, request: DecisionRequest) -> random.Random:
        obs = request.observation
        key = f"{self.seed}:{request.seat}:{request.hand_index}:{len(obs.tricks)}:{len(obs.current_trick)}:{obs.phase}:{len(obs.melds)}"
        return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))

    def decide(self, request: DecisionRequest) -> int:
        legal = request.legal_actions
        self.time_capped = False
        if len(legal) == 1:
            return legal[0]
        obs = request.observation
        rules = request.ruleset
        side = obs.side
        rng = self._rng(request)
        totals = dict.fromkeys(legal, 0.0)
        deadline = time.perf_counter() + self.max_seconds
        for sample in range(self.samples):
            world = determinize(obs, rules, rng)
            for a in legal:
                sim = world.clone()
                sim.apply(a)
                while not sim.is_terminal():
                    sim.apply(rollout_action(sim, rng))
                outcome = sim.outcome()
                assert outcome is not None
                totals[a] += hand_value(outcome, side)
                self.playouts += 1
            if sample + 1 < self.samples and time.perf_counter() > deadline:
                self.time_capped = True  # a safety net only: the choice now depends on the machine
                break
        return max(legal, key=lambda a: (totals[a], -a))
