"""The reference the server's wire encoder is tested against: the same messages built as
protobuf message objects, field by field, and serialized by protobuf.

This is how ``gaigel_server.codec`` built them until the server wrote the bytes itself
(``gaigel_server.wire``); kept here, unchanged in what it builds, as an independent
second reading of the protocol for ``tests/server/test_wire.py``.
"""

from __future__ import annotations

import dataclasses
from typing import assert_never

from google.protobuf import duration_pb2

from gaigel import actions as A
from gaigel.cards import CODE_OF, POINTS_OF, CardId
from gaigel.events import (
    AusCalled,
    AusPassed,
    CardDrawn,
    CardPlayed,
    Event,
    FiveSevens,
    HandTerminated,
    Melded,
    MeldGiven,
    MeldPassed,
    OpeningDeclared,
    Robbed,
    RobReserved,
    SevenShown,
    TrickTaken,
)
from gaigel.observation import Observation
from gaigel.ruleset import Opening, Ruleset
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import game_pb2 as gm

FACE_DOWN_OPENINGS = (Opening.ANDERE_ALTE, Opening.HOEHER_HAT, Opening.TRUMPF_HOEHER)
_PHASES = {
    "opening": gm.PHASE_OPENING,
    "aus_window": gm.PHASE_AUS_WINDOW,
    "meld_window": gm.PHASE_MELD_WINDOW,
    "terminal": gm.PHASE_HAND_OVER,
}
_LEGAL: dict[int, bs.LegalAction] = {}


def _make_card(c: CardId) -> cm.Card:
    return cm.Card(id=c, code=CODE_OF[c], suit=c // 12 + 1, rank=(c % 12) // 2 + 1, points=POINTS_OF[c])  # type: ignore[arg-type]


_CARDS = tuple(_make_card(c) for c in range(48))


def card(c: CardId) -> cm.Card:
    """The proto Card of card id *c*, every field filled.

    A shared, read-only instance: protobuf copies it wherever it is assigned (constructor
    arguments, ``CopyFrom``, ``add``, ``extend``); never modify it in place.
    """
    return _CARDS[c]


def legal_action(a: int) -> bs.LegalAction:
    """One legal action with its label, kind and structured fields (shared and read-only, as :func:`card`)."""
    out = _LEGAL.get(a)
    if out is None:
        out = _LEGAL[a] = _make_legal_action(a)
    return out


def _make_legal_action(a: int) -> bs.LegalAction:
    out = bs.LegalAction(id=a, label=A.action_label(a))
    if a < 48:
        out.kind = bs.ACTION_KIND_PLAY
        out.card.CopyFrom(card(a))
    elif a < 144:
        c = a % 48
        out.kind = bs.ACTION_KIND_PLAY_WITH_MELD
        out.card.CopyFrom(card(c))
        out.meld = cm.MELD_KIND_DOUBLE_MARRIAGE if a >= A.DOUBLE_PLAY_BASE else cm.MELD_KIND_MARRIAGE
        out.meld_suit = c // 12 + 1  # type: ignore[assignment]
    elif a == A.ROB:
        out.kind = bs.ACTION_KIND_ROB
    elif A.OPENING_BASE <= a < A.OPENING_BASE + 5:
        out.kind = bs.ACTION_KIND_OPENING
        out.opening = a - A.OPENING_BASE + 1  # type: ignore[assignment]
    elif A.MELD_BASE <= a < A.NO_MELD:
        double = a >= A.DOUBLE_MELD_BASE
        out.kind = bs.ACTION_KIND_MELD
        out.meld = cm.MELD_KIND_DOUBLE_MARRIAGE if double else cm.MELD_KIND_MARRIAGE
        out.meld_suit = a - (A.DOUBLE_MELD_BASE if double else A.MELD_BASE) + 1  # type: ignore[assignment]
    else:
        out.kind = {
            A.AUS: bs.ACTION_KIND_AUS,
            A.PASS: bs.ACTION_KIND_PASS,
            A.RESERVE_ROB: bs.ACTION_KIND_RESERVE_ROB,
            A.SHOW_SEVEN: bs.ACTION_KIND_SHOW_SEVEN,
            A.FIVE_SEVENS: bs.ACTION_KIND_FIVE_SEVENS,
            A.NO_MELD: bs.ACTION_KIND_NO_MELD,
            A.GIVE_MELD: bs.ACTION_KIND_GIVE_MELD,
        }[a]
    return out


def _opening(o: Opening | None) -> int:
    return 0 if o is None else int(o) + 1


def observation(
    obs: Observation, hand_index: int, tricks_cache: list[gm.Trick] | None = None, out: gm.Observation | None = None
) -> gm.Observation:
    """The proto Observation of *obs* (which already holds only what its seat may know).

    *tricks_cache*, a list kept by the caller for one hand (empty at its start), saves
    rebuilding the completed tricks, which are public and never change, on every call.
    *out*, an empty Observation inside the message being built, is filled in place and
    returned: handing a finished Observation to a constructor copies all of it.
    """
    scalars = gm.Observation(
        seat=obs.seat,
        hand_index=hand_index,
        talon_size=obs.talon_size,
        trump_suit=obs.trump_suit + 1,  # type: ignore[arg-type]
        opening=_opening(obs.opening),  # type: ignore[arg-type]
        trick_index=len(obs.tricks),
        leader_seat=obs.trick_leader,
        scores_exposed=obs.scores is not None,
        players=obs.players,
        forehand_seat=obs.forehand,
    )
    if out is None:
        out = scalars
    else:
        out.MergeFrom(scalars)  # scalars only: a cheap copy
    if obs.phase == "play":
        if obs.strict:
            out.phase = gm.PHASE_STRICT
        elif obs.opening is not None and not obs.tricks:
            out.phase = gm.PHASE_FIRST_TRICK
        else:
            out.phase = gm.PHASE_TALON
    else:
        out.phase = _PHASES[obs.phase]
    if obs.to_act is not None:
        out.turn_seat = obs.to_act
    out.hand.extend(card(c) for c in obs.hand)
    out.trump_card.CopyFrom(card(obs.trump_card))
    if obs.face_up_card is not None:
        out.face_up_card.CopyFrom(card(obs.face_up_card))
    if obs.dissle_declarer is not None:
        out.dissle_declarer_seat = obs.dissle_declarer
    face_down = not obs.tricks and obs.opening in FACE_DOWN_OPENINGS
    for s, c in obs.current_trick:
        tp = out.current_trick.add(seat=s, face_down=face_down)
        if c is not None:
            tp.card.CopyFrom(card(c))
    cache = tricks_cache if tricks_cache is not None else []
    for i in range(len(cache), len(obs.tricks)):
        t = obs.tricks[i]
        fd = i == 0 and obs.opening in FACE_DOWN_OPENINGS
        cache.append(
            gm.Trick(
                trick_index=i,
                leader_seat=t.leader,
                winner_seat=t.winner,
                card_points=sum(POINTS_OF[c] for c in t.cards),
                plays=[
                    gm.TrickPlay(seat=(t.leader + j) % obs.players, face_down=fd, card=_CARDS[c])
                    for j, c in enumerate(t.cards)
                ],
            )
        )
    out.completed_tricks.extend(cache[: len(obs.tricks)])
    for m in obs.melds:
        out.melds.add(
            seat=m.seat,
            suit=m.suit + 1,
            kind=cm.MELD_KIND_DOUBLE_MARRIAGE if m.double else cm.MELD_KIND_MARRIAGE,
            cards=[card(c) for c in m.cards],
            points=m.points,
        )
    if obs.robbed_by is not None and obs.robbed_cards is not None:
        seven, taken = obs.robbed_cards
        out.robbery.CopyFrom(gm.Robbery(seat=obs.robbed_by, trump_card=card(taken), seven=card(seven)))
    if obs.rob_reserved_seat is not None:
        out.rob_reserved_seat = obs.rob_reserved_seat
    for s, held in enumerate(obs.public_holdings):
        if held:
            out.public_holdings.add(seat=s, cards=[card(c) for c in held])
    if obs.scores is not None:
        for x, sc in enumerate(obs.scores):
            won = obs.tricks_won[x] if x < len(obs.tricks_won) else 0
            out.side_totals.add(
                side=x, card_points=sc.card_points, meld_points=sc.meld_points, total_points=sc.total, tricks_won=won
            )
    return out


@dataclasses.dataclass
class Routed:
    """A full event and the seat that alone may see its hidden card (None: public)."""

    event: gm.Event
    owner: int | None = None

    def for_viewer(self, viewer: int | None) -> gm.Event:
        """The event as *viewer* may see it (spectators: ``None``)."""
        if self.owner is None or viewer == self.owner:
            return self.event
        ev = gm.Event()
        ev.CopyFrom(self.event)
        if ev.HasField("card_played"):
            ev.card_played.ClearField("card")
        elif ev.HasField("card_drawn"):
            ev.card_drawn.ClearField("card")
        return ev


class HandEvents:
    """Turns the engine's typed events (:mod:`gaigel.events`) of one hand into routed proto events."""

    def __init__(self, rules: Ruleset, hand_index: int, talon_size: int) -> None:
        self.rules = rules
        self.hand_index = hand_index
        self.trick_index = 0
        self.talon_size = talon_size
        self.face_down_in_trick = False
        self.deciding_seat: int | None = None

    def feed(self, ev: Event) -> list[Routed]:
        """The routed events for one engine event (none for those that only update this tracker)."""
        k = self.hand_index
        match ev:
            case CardPlayed(seat, c, face_down):
                self.face_down_in_trick |= face_down
                cp = gm.CardPlayed(seat=seat, trick_index=self.trick_index, face_down=face_down, card=card(c))
                return [Routed(gm.Event(hand_index=k, card_played=cp), owner=seat if face_down else None)]
            case TrickTaken():
                return self._trick(ev)
            case CardDrawn(seat, c, face_up):
                self.talon_size -= 1
                cd = gm.CardDrawn(seat=seat, card=card(c), face_up_card=face_up, talon_size=self.talon_size)
                return [Routed(gm.Event(hand_index=k, card_drawn=cd), owner=None if face_up else seat)]
            case OpeningDeclared(seat, opening):
                if opening == Opening.AUF_DISSLE:
                    self.deciding_seat = seat
                od = gm.OpeningDeclared(seat=seat, opening=cm.Opening.ValueType(_opening(opening)))
                return [Routed(gm.Event(hand_index=k, opening_declared=od))]
            case Melded(seat, suit, double, cards, points):
                meld = gm.Meld(
                    seat=seat,
                    suit=cm.Suit.ValueType(suit + 1),
                    kind=cm.MELD_KIND_DOUBLE_MARRIAGE if double else cm.MELD_KIND_MARRIAGE,
                    cards=[card(c) for c in cards],
                    points=points,
                    trick_index=self.trick_index,
                )
                return [Routed(gm.Event(hand_index=k, meld=meld))]
            case Robbed(seat, seven, taken):
                rob = gm.Robbery(seat=seat, trump_card=card(taken), seven=card(seven), trick_index=self.trick_index)
                return [Routed(gm.Event(hand_index=k, robbery=rob))]
            case RobReserved(seat):
                return [Routed(gm.Event(hand_index=k, rob_reserved=gm.RobReserved(seat=seat)))]
            case SevenShown(seat, seven, points):
                shown = gm.SevenShown(seat=seat, card=card(seven), points=points)
                return [Routed(gm.Event(hand_index=k, seven_shown=shown))]
            case AusCalled(seat) | AusPassed(seat):
                called = isinstance(ev, AusCalled)
                if called:
                    self.deciding_seat = seat
                return [Routed(gm.Event(hand_index=k, aus_answered=gm.AusAnswered(seat=seat, aus=called)))]
            case MeldPassed(seat):
                return [Routed(gm.Event(hand_index=k, meld_privilege_passed=gm.MeldPrivilegePassed(seat=seat)))]
            case MeldGiven(seat, to_seat):
                mp = gm.MeldPrivilegePassed(seat=seat, to_seat=to_seat)
                return [Routed(gm.Event(hand_index=k, meld_privilege_passed=mp))]
            case FiveSevens(seat, _):
                self.deciding_seat = seat  # shown as the HandEnd's deciding seat, no event of its own
                return []
            case HandTerminated():
                return []  # becomes a HandEnd message of its own
            case _:
                assert_never(ev)

    def _trick(self, ev: TrickTaken) -> list[Routed]:
        out: list[Routed] = []
        n = self.rules.players
        if self.face_down_in_trick:
            plays = [
                gm.TrickPlay(seat=(ev.leader + j) % n, face_down=True, card=card(c)) for j, c in enumerate(ev.cards)
            ]
            revealed = gm.TrickRevealed(trick_index=self.trick_index, plays=plays)
            out.append(Routed(gm.Event(hand_index=self.hand_index, trick_revealed=revealed)))
        points = ev.points
        if self.trick_index == self.rules.tricks_per_hand - 1:
            points -= self.rules.last_trick_bonus  # the bonus is part of the side total, not of the trick
        tw = gm.TrickWon(
            trick_index=self.trick_index,
            winner_seat=ev.winner,
            winner_side=self.rules.side_of(ev.winner),
            card_points=points,
        )
        out.append(Routed(gm.Event(hand_index=self.hand_index, trick_won=tw)))
        self.trick_index += 1
        self.face_down_in_trick = False
        return out


def duration(seconds: float) -> duration_pb2.Duration:
    """A Duration of *seconds* (negative values clamp to zero)."""
    d = duration_pb2.Duration()
    d.FromNanoseconds(max(0, int(seconds * 1e9)))
    return d
