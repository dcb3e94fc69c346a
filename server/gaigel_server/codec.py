"""Translation between engine values and gaigel.v1 messages, and nothing else.

Every per-seat message is built from an :class:`~gaigel.observation.Observation` or from
engine events filtered for the receiver: a seat never gets another seat's cards, a
face-down card before its trick is complete, another seat's drawn card or the talon
order. ``viewer=None`` means a spectator (public information only).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, assert_never

from google.protobuf import duration_pb2

from gaigel.cards import CardId
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
from gaigel.match import FaultReason, MatchTermination
from gaigel.observation import Observation
from gaigel.ruleset import Opening, Ruleset
from gaigel.state import GaigelState, HandOutcome, Termination
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import game_pb2 as gm
from gaigel_server import wire
from gaigel_server.clock import Clock

HAND_TERMINATION = {
    Termination.TARGET_REACHED: cm.HAND_TERMINATION_TARGET_REACHED,
    Termination.AUS_CALLED: cm.HAND_TERMINATION_TARGET_REACHED,
    Termination.UEBERGAIGELT: cm.HAND_TERMINATION_UEBERGAIGELT,
    Termination.UNTERGAIGELT: cm.HAND_TERMINATION_UNTERGAIGELT,
    Termination.CARDS_EXHAUSTED: cm.HAND_TERMINATION_CARDS_EXHAUSTED,
    Termination.FIVE_SEVENS: cm.HAND_TERMINATION_FIVE_SEVENS,
    Termination.DISSLE_WON: cm.HAND_TERMINATION_DISSLE_WON,
    Termination.DISSLE_FAILED: cm.HAND_TERMINATION_DISSLE_FAILED,
    Termination.REDEAL: cm.HAND_TERMINATION_REDEAL,
}


def _by_name(values: Any, prefix: str, names: list[str]) -> dict[str, int]:
    """Each of *names* -> its proto value ``prefix + name``, checked both ways when this module is
    imported: an engine name without a proto value, or a proto value the engine lacks, fails here
    rather than when that fault or termination first happens."""
    proto = {n.removeprefix(prefix): v for n, v in values.items() if v}
    if set(proto) != set(names):
        raise ImportError(f"{prefix}*: the proto has {sorted(proto)}, the engine {sorted(names)}")
    return proto


_TERMINATIONS = _by_name(cm.MatchTermination, "MATCH_TERMINATION_", [t.name for t in MatchTermination])
MATCH_TERMINATION: dict[MatchTermination, cm.MatchTermination.ValueType] = {
    t: cm.MatchTermination.ValueType(_TERMINATIONS[t.name]) for t in MatchTermination
}
_FAULTS = _by_name(cm.FaultReason, "FAULT_REASON_", [r.value for r in FaultReason])
FAULT_REASON: dict[FaultReason, cm.FaultReason.ValueType] = {
    r: cm.FaultReason.ValueType(_FAULTS[r.value]) for r in FaultReason
}


def card(c: CardId) -> cm.Card:
    """The proto Card of card id *c*, every field filled.

    A shared, read-only instance: protobuf copies it wherever it is assigned (constructor
    arguments, ``CopyFrom``, ``add``, ``extend``); never modify it in place.
    """
    return wire.CARDS[c]


legal_action = wire.legal_action


def rejection(
    decision_id: str,
    action_id: int,
    reason: bs.RejectReason.ValueType,
    message: str,
    decision_open: bool = False,
    strikes: int = 0,
    strikes_limit: int = 0,
) -> bs.ActionRejected:
    """The ActionRejected of an answer (the verdict comes from the seat's ledger, or from the
    servicer when the session plays no match)."""
    return bs.ActionRejected(
        decision_id=decision_id,
        action_id=action_id,
        reason=reason,
        message=message,
        decision_open=decision_open,
        strikes=strikes,
        strikes_limit=strikes_limit,
    )


def observation(obs: Observation, hand_index: int) -> gm.Observation:
    """The proto Observation of *obs* (which already holds only what its seat may know): the
    bytes the server sends (:func:`gaigel_server.wire.observation`), parsed."""
    return gm.Observation.FromString(wire.observation(obs, hand_index))


def hand_start(state: GaigelState, hand_index: int, dealer: int, viewer: int | None) -> gm.HandStart:
    """HandStart for *viewer* (own cards only; none for spectators)."""
    out = gm.HandStart(
        hand_index=hand_index,
        dealer_seat=dealer,
        forehand_seat=state.forehand,
        trump_card=card(state.trump_card),
        trump_suit=state.trump + 1,  # type: ignore[arg-type]
        talon_size=state.talon_size,
    )
    if viewer is not None:
        out.hand.extend(card(c) for c in state.hand(viewer))
    return out


@dataclasses.dataclass(slots=True)
class Routed:
    """A serialized Event; for one with a hidden card, the seat that alone may see it (*owner*)
    and the event as every other viewer gets it (*hidden*, the card left out)."""

    event: bytes
    owner: int | None = None
    hidden: bytes = b""

    def for_viewer(self, viewer: int | None) -> bytes:
        """The event as *viewer* may see it (spectators: ``None``)."""
        if self.owner is None or viewer == self.owner:
            return self.event
        return self.hidden


def _event(**kind: Any) -> Routed:
    """A public event, serialized once (the rare kinds: built as a message)."""
    return Routed(gm.Event(**kind).SerializeToString())


class HandEvents:
    """Turns the engine's typed events (:mod:`gaigel.events`) of one hand into routed, serialized events."""

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
                played = wire.card_played(k, seat, self.trick_index, face_down, c)
                if not face_down:
                    return [Routed(played)]
                return [Routed(played, seat, wire.card_played(k, seat, self.trick_index, face_down, None))]
            case TrickTaken():
                return self._trick(ev)
            case CardDrawn(seat, c, face_up):
                self.talon_size -= 1
                drawn = wire.card_drawn(k, seat, c, face_up, self.talon_size)
                if face_up:
                    return [Routed(drawn)]
                return [Routed(drawn, seat, wire.card_drawn(k, seat, None, face_up, self.talon_size))]
            case OpeningDeclared(seat, opening):
                if opening == Opening.AUF_DISSLE:
                    self.deciding_seat = seat
                od = gm.OpeningDeclared(seat=seat, opening=cm.Opening.ValueType(wire.opening(opening)))
                return [_event(hand_index=k, opening_declared=od)]
            case Melded(seat, suit, double, cards, points):
                meld = gm.Meld(
                    seat=seat,
                    suit=cm.Suit.ValueType(suit + 1),
                    kind=cm.MELD_KIND_DOUBLE_MARRIAGE if double else cm.MELD_KIND_MARRIAGE,
                    cards=[card(c) for c in cards],
                    points=points,
                    trick_index=self.trick_index,
                )
                return [_event(hand_index=k, meld=meld)]
            case Robbed(seat, seven, taken):
                rob = gm.Robbery(seat=seat, trump_card=card(taken), seven=card(seven), trick_index=self.trick_index)
                return [_event(hand_index=k, robbery=rob)]
            case RobReserved(seat):
                return [_event(hand_index=k, rob_reserved=gm.RobReserved(seat=seat))]
            case SevenShown(seat, seven, points):
                shown = gm.SevenShown(seat=seat, card=card(seven), points=points)
                return [_event(hand_index=k, seven_shown=shown)]
            case AusCalled(seat) | AusPassed(seat):
                called = isinstance(ev, AusCalled)
                if called:
                    self.deciding_seat = seat
                return [_event(hand_index=k, aus_answered=gm.AusAnswered(seat=seat, aus=called))]
            case MeldPassed(seat):
                return [_event(hand_index=k, meld_privilege_passed=gm.MeldPrivilegePassed(seat=seat))]
            case MeldGiven(seat, to_seat):
                mp = gm.MeldPrivilegePassed(seat=seat, to_seat=to_seat)
                return [_event(hand_index=k, meld_privilege_passed=mp)]
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
            out.append(_event(hand_index=self.hand_index, trick_revealed=revealed))
        points = ev.points
        if self.trick_index == self.rules.tricks_per_hand - 1:
            points -= self.rules.last_trick_bonus  # the bonus is part of the side total, not of the trick
        won = wire.trick_won(self.hand_index, self.trick_index, ev.winner, self.rules.side_of(ev.winner), points)
        out.append(Routed(won))
        self.trick_index += 1
        self.face_down_in_trick = False
        return out


def hand_end(state: GaigelState | None, hand_index: int, deciding_seat: int | None, rules: Ruleset) -> gm.HandEnd:
    """HandEnd of a finished hand, or an ABORTED one when *state* is not terminal (or None)."""
    outcome: HandOutcome | None = state.outcome() if state is not None else None
    out = gm.HandEnd(hand_index=hand_index)
    if outcome is None or state is None:
        out.termination = cm.HAND_TERMINATION_ABORTED
        return out
    out.termination = HAND_TERMINATION[outcome.termination]
    if deciding_seat is not None and outcome.termination in (
        Termination.AUS_CALLED,
        Termination.UNTERGAIGELT,
        Termination.FIVE_SEVENS,
        Termination.DISSLE_WON,
        Termination.DISSLE_FAILED,
    ):
        out.deciding_seat = deciding_seat
    out.winner_sides.extend(outcome.winners)
    bonus_side = (
        rules.side_of(state.tricks[-1][2]) if state.tricks and len(state.tricks) == rules.tricks_per_hand else -1
    )
    for x in range(rules.num_sides):
        out.sides.add(
            side=x,
            won=x in outcome.winners,
            dashes=outcome.dashes[x],
            card_points=state.side_cards[x] - (rules.last_trick_bonus if x == bonus_side else 0),
            meld_points=state.side_melds[x],
            total_points=outcome.points[x],
            tricks_won=outcome.tricks[x],
        )
    return out


def fault(
    seat: int, reason: FaultReason, message: str, hand: int | None, decision_id: str, strike: bool, strikes: int
) -> cm.Fault:
    """A Fault message."""
    out = cm.Fault(
        seat=seat,
        reason=FAULT_REASON[reason],
        decision_id=decision_id,
        strike=strike,
        strikes=strikes,
        message=message,
    )
    if hand is not None:
        out.hand_index = hand
    return out


def side_results(hands_won: Sequence[int], dashes: Sequence[int]) -> list[gm.SideMatchResult]:
    """One SideMatchResult per side."""
    return [gm.SideMatchResult(side=x, hands_won=hands_won[x], dashes=dashes[x]) for x in range(len(dashes))]


__all__ = [
    "FAULT_REASON",
    "HAND_TERMINATION",
    "MATCH_TERMINATION",
    "HandEvents",
    "Routed",
    "card",
    "fault",
    "hand_end",
    "hand_start",
    "legal_action",
    "observation",
    "rejection",
    "side_results",
]


def duration(seconds: float) -> duration_pb2.Duration:
    """A Duration of *seconds* (negative values clamp to zero)."""
    d = duration_pb2.Duration()
    d.FromNanoseconds(max(0, int(seconds * 1e9)))
    return d


def clock(c: Clock) -> cm.ClockSettings:
    """The ClockSettings message of *c*."""
    return cm.ClockSettings(
        decision_time=duration(c.decision_time),
        bank=duration(c.bank),
        strikes_limit=c.strikes_limit,
        resume_grace=duration(c.resume_grace),
    )


def merge_clock(base: Clock, msg: cm.ClockSettings | None) -> Clock:
    """*base* with the fields set in *msg* replaced.

    :raises ValueError: a value out of range, naming the field.
    """
    if msg is None:
        return base
    changes: dict[str, float | int] = {}
    for name in ("decision_time", "bank", "resume_grace"):
        if msg.HasField(name):
            d = getattr(msg, name)
            changes[name] = d.seconds + d.nanos / 1e9
    if msg.HasField("strikes_limit"):
        changes["strikes_limit"] = msg.strikes_limit
    return base.replaced(**changes)
