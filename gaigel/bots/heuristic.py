"""The ``heuristic`` house bot: rules of thumb a club player would recognise.

Save trumps for the strict phase, meld and rob whenever possible, take valuable tricks
cheaply, smear points onto a partner's winning trick, and count towards 101: a trick
that brings the side to the target is taken at any price. It reads only its observation.
"""

from __future__ import annotations

from gaigel import actions as A
from gaigel.cards import POINTS_OF, RANK_OF, SUIT_OF, CardId, Rank
from gaigel.match import Bot, DecisionRequest
from gaigel.observation import Observation
from gaigel.ruleset import Opening
from gaigel.state import beats, trick_winner


def side_points(obs: Observation, side: int) -> int:
    """The side's total: exposed scores, or counted from the public tricks and melds."""
    if obs.scores is not None:
        return obs.scores[side].total
    seats = obs.sides[side]
    cards = sum(POINTS_OF[c] for t in obs.tricks if t.winner in seats for c in t.cards)
    melds = sum(m.points for m in obs.melds if m.seat in seats)
    return cards + melds


def partner_of(obs: Observation, seat: int, other: int) -> bool:
    """True when *other* sits on *seat*'s side (and is not *seat*)."""
    return other != seat and any(seat in s and other in s for s in obs.sides)


class HeuristicBot(Bot):
    """Rules of thumb; deterministic (no randomness)."""

    name = "heuristic"

    def decide(self, request: DecisionRequest) -> int:
        legal = request.legal_actions
        if len(legal) == 1:
            return legal[0]
        obs = request.observation
        target = request.ruleset.target
        if A.FIVE_SEVENS in legal:
            return A.FIVE_SEVENS
        if A.AUS in legal:
            return A.AUS if side_points(obs, obs.side) >= target else A.PASS
        openings = [a for a in legal if A.OPENING_BASE <= a < A.OPENING_BASE + 5]
        if openings:
            return self._opening(obs, openings)
        if A.ROB in legal:
            return A.ROB
        melds = [a for a in legal if A.MELD_BASE <= a < A.NO_MELD]
        if melds:
            return max(melds, key=lambda a: (a >= A.DOUBLE_MELD_BASE, (a - A.MELD_BASE) % 4 == obs.trump_suit))
        if A.NO_MELD in legal:
            return A.NO_MELD
        meld_plays = [a for a in legal if 48 <= a < 144]
        if meld_plays:
            # Double before single, trump before plain; give away the Ober (3) rather than the King (4).
            return max(meld_plays, key=lambda a: (a >= 96, SUIT_OF[a % 48] == obs.trump_suit, RANK_OF[a % 48]))
        cards = [a for a in legal if a < 48]
        if not cards:
            return legal[0]
        if not obs.current_trick:
            return self._lead(obs, cards)
        return self._follow(obs, cards, target)

    def _opening(self, obs: Observation, openings: list[int]) -> int:
        kinds = {Opening(a - A.OPENING_BASE): a for a in openings}
        for kind in (Opening.GE_ELFEN, Opening.HOEHER_HAT, Opening.ANDERE_ALTE):
            if kind in kinds:
                return kinds[kind]
        return openings[0]

    def _lead(self, obs: Observation, cards: list[CardId]) -> CardId:
        trump = obs.trump_suit
        if obs.opening is not None and not obs.tricks:
            if obs.opening == Opening.GE_ELFEN:
                return min(cards, key=lambda c: RANK_OF[c])  # any ace wins: lead one
            return min(cards, key=lambda c: POINTS_OF[c])
        plain = [c for c in cards if SUIT_OF[c] != trump]
        if obs.strict:
            # Cash a sure winner: an ace, or a ten whose aces are gone.
            seen = {c for t in obs.tricks for c in t.cards}
            for c in sorted(cards, key=lambda c: -POINTS_OF[c]):
                higher_left = [
                    h
                    for h in range(SUIT_OF[c] * 12, SUIT_OF[c] * 12 + 12)
                    if RANK_OF[h] < RANK_OF[c] and h not in seen and h not in obs.hand
                ]
                if not higher_left and (SUIT_OF[c] == trump or not self._trumps_out(obs)):
                    return c
        pool = plain or cards
        return min(pool, key=lambda c: (POINTS_OF[c], RANK_OF[c] == Rank.SEVEN))

    def _trumps_out(self, obs: Observation) -> bool:
        seen = {c for t in obs.tricks for c in t.cards} | set(obs.hand)
        return any(SUIT_OF[c] == obs.trump_suit and c not in seen for c in range(48))

    def _follow(self, obs: Observation, cards: list[CardId], target: int) -> CardId:
        trump = obs.trump_suit
        if obs.opening is not None and not obs.tricks:
            return self._follow_first_trick(obs, cards)
        plays = [c for _, c in obs.current_trick if c is not None]
        seats = [s for s, _ in obs.current_trick]
        win_i = trick_winner(plays, trump)
        win_card, win_seat = plays[win_i], seats[win_i]
        on_table = sum(POINTS_OF[c] for c in plays)
        last_to_play = len(plays) == obs.players - 1
        winners = [c for c in cards if beats(c, win_card, trump)]
        if partner_of(obs, obs.seat, win_seat) and (
            last_to_play or SUIT_OF[win_card] == trump or RANK_OF[win_card] == 0
        ):
            # Smear: the partner holds the trick, give him points (but not trumps).
            smear = [c for c in cards if SUIT_OF[c] != trump and not beats(c, win_card, trump)]
            return max(smear or cards, key=lambda c: (POINTS_OF[c], -RANK_OF[c]))
        if winners:
            cheapest = min(winners, key=lambda c: (SUIT_OF[c] == trump, POINTS_OF[c], -RANK_OF[c]))
            gain = on_table + POINTS_OF[cheapest]
            reaches_target = side_points(obs, obs.side) + gain >= target
            if reaches_target or gain >= 10 or obs.strict or SUIT_OF[cheapest] != trump:
                return cheapest
        return min(cards, key=lambda c: (SUIT_OF[c] == trump, POINTS_OF[c], -RANK_OF[c]))

    def _follow_first_trick(self, obs: Observation, cards: list[CardId]) -> CardId:
        leader = obs.current_trick[0][0]
        if obs.opening == Opening.GE_ELFEN and partner_of(obs, obs.seat, leader):
            return max(cards, key=lambda c: (SUIT_OF[c] != obs.trump_suit, POINTS_OF[c]))
        if obs.opening == Opening.ANDERE_ALTE:
            aces = [c for c in cards if RANK_OF[c] == Rank.ACE and SUIT_OF[c] != obs.trump_suit]
            if aces and not partner_of(obs, obs.seat, leader):
                return aces[0]  # may be the other ace: then this seat takes the trick
        return min(cards, key=lambda c: (SUIT_OF[c] == obs.trump_suit, POINTS_OF[c]))
