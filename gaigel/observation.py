"""What one seat may know (RULES.md §3.5 and §17 "Observation").

An :class:`Observation` holds the seat's own hand, everything public (the trump card and
who took it, the talon *size*, every card once face up, melds with the cards shown,
robbing, declarations, trick history, public holdings) and, when the ruleset exposes them,
the side totals. It never holds another seat's unknown cards or the talon order: a
face-down trick-1 card is shown only to its owner until the trick is complete.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, NamedTuple

from gaigel._pickling import reduce_through_constructor
from gaigel.cards import CardId, card_code, cards_of
from gaigel.ruleset import Opening

if TYPE_CHECKING:
    from gaigel.state import GaigelState, HandOutcome


class TrickView(NamedTuple):
    """A completed trick: who led, the cards in playing order, who won it. A tuple, so that the
    state keeps its tricks as these and an observation shares them instead of building one
    per trick each time (that was a third of an observation's cost late in a hand)."""

    leader: int
    cards: tuple[CardId, ...]
    winner: int


@dataclasses.dataclass(frozen=True)
class MeldView:
    """A declared marriage: the cards shown (both K and O, or all four) and its points."""

    seat: int
    suit: int
    double: bool
    cards: tuple[CardId, ...]
    points: int

    def __reduce__(self) -> tuple[type[Any], tuple[object, ...]]:
        return reduce_through_constructor(self)  # (compiled frozen dataclasses need it)


@dataclasses.dataclass(frozen=True)
class SideScore:
    """Points of one side (exposed when ``expose_scores`` is on)."""

    card_points: int
    meld_points: int
    total: int

    def __reduce__(self) -> tuple[type[Any], tuple[object, ...]]:
        return reduce_through_constructor(self)  # (compiled frozen dataclasses need it)


@dataclasses.dataclass(frozen=True)
class Observation:
    """Everything *seat* may know at one moment of a hand."""

    seat: int
    players: int
    sides: tuple[tuple[int, ...], ...]
    forehand: int
    phase: str
    to_act: int | None
    trump_suit: int
    trump_card: CardId
    face_up_card: CardId | None
    talon_size: int
    hand: tuple[CardId, ...]
    public_holdings: tuple[tuple[CardId, ...], ...]
    opening: Opening | None
    dissle_declarer: int | None
    trick_leader: int
    current_trick: tuple[tuple[int, CardId | None], ...]
    tricks: tuple[TrickView, ...]
    tricks_won: tuple[int, ...]
    melds: tuple[MeldView, ...]
    robbed_by: int | None
    robbed_cards: tuple[CardId, CardId] | None
    rob_reserved_seat: int | None
    strict: bool
    scores: tuple[SideScore, ...] | None
    outcome: HandOutcome | None

    def __reduce__(self) -> tuple[type[Any], tuple[object, ...]]:
        return reduce_through_constructor(self)  # (compiled frozen dataclasses need it)

    @property
    def side(self) -> int:
        """The observer's side."""
        return next(i for i, seats in enumerate(self.sides) if self.seat in seats)

    def visible_cards(self) -> set[CardId]:
        """Every card id this observation shows (hand, table, history, public holdings)."""
        out = set(self.hand) | {self.trump_card}
        if self.face_up_card is not None:
            out.add(self.face_up_card)
        for held in self.public_holdings:
            out.update(held)
        out.update(c for _, c in self.current_trick if c is not None)
        for t in self.tricks:
            out.update(t.cards)
        for m in self.melds:
            out.update(m.cards)
        if self.robbed_cards is not None:
            out.update(self.robbed_cards)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form with card codes (the shape the stdio bridge sends)."""
        code = card_code
        return {
            "seat": self.seat,
            "players": self.players,
            "sides": [list(s) for s in self.sides],
            "forehand": self.forehand,
            "phase": self.phase,
            "to_act": self.to_act,
            "trump_suit": "EBHS"[self.trump_suit],
            "trump_card": code(self.trump_card),
            "face_up_card": None if self.face_up_card is None else code(self.face_up_card),
            "talon_size": self.talon_size,
            "hand": [code(c) for c in self.hand],
            "public_holdings": [[code(c) for c in h] for h in self.public_holdings],
            "opening": None if self.opening is None else self.opening.name,
            "dissle_declarer": self.dissle_declarer,
            "trick_leader": self.trick_leader,
            "current_trick": [{"seat": s, "card": None if c is None else code(c)} for s, c in self.current_trick],
            "tricks": [
                {"leader": t.leader, "cards": [code(c) for c in t.cards], "winner": t.winner} for t in self.tricks
            ],
            "tricks_won": list(self.tricks_won),
            "melds": [
                {
                    "seat": m.seat,
                    "suit": "EBHS"[m.suit],
                    "double": m.double,
                    "cards": [code(c) for c in m.cards],
                    "points": m.points,
                }
                for m in self.melds
            ],
            "robbed_by": self.robbed_by,
            "robbed_cards": None if self.robbed_cards is None else [code(c) for c in self.robbed_cards],
            "rob_reserved_seat": self.rob_reserved_seat,
            "strict": self.strict,
            "scores": None
            if self.scores is None
            else [{"card_points": s.card_points, "meld_points": s.meld_points, "total": s.total} for s in self.scores],
            "outcome": None if self.outcome is None else self.outcome.to_dict(),
        }


def observe(state: GaigelState, seat: int) -> Observation:
    """Builds the observation of *seat* from the full *state*."""
    if not 0 <= seat < state.n:
        raise ValueError(f"seat must be 0..{state.n - 1}, got {seat}")
    n = state.n
    current = []
    for i, c in enumerate(state.trick_cards):
        s = (state.leader + i) % n
        hidden = state.face_down and s != seat
        current.append((s, None if hidden else c))
    rules = state.rules
    scores = None
    if rules.expose_scores:
        scores = tuple(
            SideScore(state.side_cards[x], state.side_melds[x], state.side_total(x)) for x in range(state.num_sides)
        )
    return Observation(
        seat=seat,
        players=n,
        sides=tuple(rules.seats_of(x) for x in range(state.num_sides)),
        forehand=state.forehand,
        phase=state.phase.name.lower(),
        to_act=state.current_seat(),
        trump_suit=state.trump,
        trump_card=state.trump_card,
        face_up_card=state.face_up if state.face_up >= 0 else None,
        talon_size=state.talon_size,
        hand=tuple(cards_of(state.hands[seat])),
        public_holdings=tuple(tuple(cards_of(state.known[s] & state.hands[s])) for s in range(n)),
        opening=state.opening,
        dissle_declarer=state.declarer if state.declarer >= 0 else None,
        trick_leader=state.leader,
        current_trick=tuple(current),
        tricks=tuple(state.tricks),
        tricks_won=tuple(state.side_tricks),
        melds=tuple(MeldView(*m) for m in state.melds),
        robbed_by=state.robbed_by if state.robbed_by >= 0 else None,
        robbed_cards=state.rob_cards if state.robbed_by >= 0 else None,
        rob_reserved_seat=state.reserved_seat if state.reserved_seat >= 0 else None,
        strict=state.strict,
        scores=scores,
        outcome=state.outcome(),
    )
