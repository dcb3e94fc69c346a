"""The protobuf bytes of the messages the server sends on every decision, written directly.

A DecisionRequest built as protobuf message objects cost more than all the rest of the
server's own work per decision: every Card is a message, copied wherever it is assigned.
Here the same bytes are written from the engine's values: the constant messages (the 48
Cards, each LegalAction) are serialized once by protobuf itself, the rest is tags and
varints. Field numbers and wire types come from the generated descriptors when this module is
imported (a renumbered field follows; a changed type fails the import), and the bytes are
protobuf's own (fields in number order, proto3 defaults left out), which
``tests/server/test_wire.py`` checks against the message objects for every message and
seat of whole seeded matches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf.descriptor import FieldDescriptor

from gaigel import actions as A
from gaigel.cards import CODE_OF, POINTS_OF, CardId
from gaigel.observation import MeldView, Observation, SideScore
from gaigel.ruleset import Opening
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import game_pb2 as gm

_SMALL = tuple(bytes((i,)) for i in range(128))


def varint(n: int) -> bytes:
    """*n* as a protobuf varint (a negative int32 or int64 as its 64-bit two's complement, as protobuf writes it)."""
    if 0 <= n < 128:
        return _SMALL[n]
    if n < 0:
        n &= (1 << 64) - 1
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: *tag*, the length of *payload*, *payload*."""
    n = len(payload)
    return tag + (_SMALL[n] if n < 128 else varint(n)) + payload


_SCALAR_TYPES = {
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_ENUM,
    FieldDescriptor.TYPE_BOOL,
}


def tag(message: Any, name: str) -> bytes:
    """The tag of field *name* of *message* (a generated class): its number and wire type, as bytes."""
    f = message.DESCRIPTOR.fields_by_name[name]
    if f.type in _SCALAR_TYPES:
        wire_type = 0
    elif f.type in (FieldDescriptor.TYPE_MESSAGE, FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES):
        wire_type = 2
    else:  # (no fixed-width or packed field is written here)
        raise ImportError(f"{message.DESCRIPTOR.full_name}.{name}: type {f.type} is not written by gaigel_server.wire")
    if f.is_repeated and wire_type == 0:
        raise ImportError(
            f"{message.DESCRIPTOR.full_name}.{name}: packed scalars are not written by gaigel_server.wire"
        )
    return varint(f.number << 3 | wire_type)


def _int(t: bytes, n: int) -> bytes:
    """A varint field of a proto3 scalar: nothing when *n* is 0 (or False)."""
    if not n:
        return b""
    return t + (_SMALL[n] if 0 < n < 128 else varint(n))


def _opt(t: bytes, n: int | None) -> bytes:
    """A varint field with presence (``optional``): written when not None, zero included."""
    if n is None:
        return b""
    return t + (_SMALL[n] if 0 <= n < 128 else varint(n))


# --- constant messages: serialized once by protobuf ------------------------------------------


def _card(c: CardId) -> cm.Card:
    return cm.Card(id=c, code=CODE_OF[c], suit=c // 12 + 1, rank=(c % 12) // 2 + 1, points=POINTS_OF[c])  # type: ignore[arg-type]


CARDS = tuple(_card(c) for c in range(48))
"""The Card message of each card id, every field filled (shared and read-only: protobuf copies it wherever it is assigned)."""
CARD = tuple(c.SerializeToString() for c in CARDS)
"""The serialized Card of each card id."""


def card_fields(t: bytes) -> tuple[bytes, ...]:
    """Each card as a whole field with tag *t* (a Card field of some message)."""
    return tuple(field(t, c) for c in CARD)


# --- Observation ---------------------------------------------------------------------------

_O = gm.Observation
_O_SEAT, _O_HAND_INDEX, _O_PHASE, _O_TURN = (
    tag(_O, "seat"),
    tag(_O, "hand_index"),
    tag(_O, "phase"),
    tag(_O, "turn_seat"),
)
_O_HAND = card_fields(tag(_O, "hand"))
_O_TRUMP_CARD = card_fields(tag(_O, "trump_card"))
_O_TRUMP_SUIT, _O_FACE_UP = tag(_O, "trump_suit"), card_fields(tag(_O, "face_up_card"))
_O_TALON, _O_OPENING, _O_DISSLE = tag(_O, "talon_size"), tag(_O, "opening"), tag(_O, "dissle_declarer_seat")
_O_TRICK_INDEX, _O_LEADER, _O_CURRENT = tag(_O, "trick_index"), tag(_O, "leader_seat"), tag(_O, "current_trick")
_O_COMPLETED, _O_MELDS, _O_ROBBERY = tag(_O, "completed_tricks"), tag(_O, "melds"), tag(_O, "robbery")
_O_RESERVED, _O_HOLDINGS, _O_EXPOSED = (
    tag(_O, "rob_reserved_seat"),
    tag(_O, "public_holdings"),
    tag(_O, "scores_exposed"),
)
_O_TOTALS, _O_PLAYERS, _O_FOREHAND = tag(_O, "side_totals"), tag(_O, "players"), tag(_O, "forehand_seat")
_TP = gm.TrickPlay
_TP_SEAT, _TP_FACE_DOWN, _TP_CARD = tag(_TP, "seat"), tag(_TP, "face_down"), card_fields(tag(_TP, "card"))
_T = gm.Trick
_T_INDEX, _T_LEADER, _T_PLAYS, _T_WINNER = (
    tag(_T, "trick_index"),
    tag(_T, "leader_seat"),
    tag(_T, "plays"),
    tag(_T, "winner_seat"),
)
_T_POINTS = tag(_T, "card_points")
_ST = gm.SideTotals
_ST_SIDE, _ST_CARDS, _ST_MELDS = tag(_ST, "side"), tag(_ST, "card_points"), tag(_ST, "meld_points")
_ST_TOTAL, _ST_TRICKS = tag(_ST, "total_points"), tag(_ST, "tricks_won")

FACE_DOWN_OPENINGS = (Opening.ANDERE_ALTE, Opening.HOEHER_HAT, Opening.TRUMPF_HOEHER)
"""The openings whose first trick is played face down."""

PHASES = {
    "opening": gm.PHASE_OPENING,
    "aus_window": gm.PHASE_AUS_WINDOW,
    "meld_window": gm.PHASE_MELD_WINDOW,
    "terminal": gm.PHASE_HAND_OVER,
}
"""The proto Phase of each engine phase but "play" (which is STRICT, FIRST_TRICK or TALON)."""


def opening(o: Opening | None) -> int:
    """The proto Opening of an engine opening (0: none declared)."""
    return 0 if o is None else int(o) + 1


def trick_play(seat: int, face_down: bool, c: CardId | None) -> bytes:
    """A serialized TrickPlay (no card: a face-down card its viewer may not see yet)."""
    return _int(_TP_SEAT, seat) + _int(_TP_FACE_DOWN, face_down) + (b"" if c is None else _TP_CARD[c])


def _phase(obs: Observation) -> int:
    if obs.phase != "play":
        return PHASES[obs.phase]
    if obs.strict:
        return gm.PHASE_STRICT
    if obs.opening is not None and not obs.tricks:
        return gm.PHASE_FIRST_TRICK
    return gm.PHASE_TALON


class TrickCache:
    """The completed tricks of one hand as Observation fields, each serialized once: they are
    public and never change, and every later observation of the hand carries all of them."""

    __slots__ = ("fields", "joined")

    def __init__(self) -> None:
        self.fields: list[bytes] = []
        self.joined = b""

    def upto(self, obs: Observation) -> bytes:
        """The completed_tricks fields of *obs* (whose tricks extend those seen so far in this hand)."""
        tricks = obs.tricks
        if len(tricks) != len(self.fields):
            n = obs.players
            for i in range(len(self.fields), len(tricks)):
                t = tricks[i]
                fd = i == 0 and obs.opening in FACE_DOWN_OPENINGS
                plays = b"".join(
                    [field(_T_PLAYS, trick_play((t.leader + j) % n, fd, c)) for j, c in enumerate(t.cards)]
                )
                trick = b"".join(
                    (
                        _int(_T_INDEX, i),
                        _int(_T_LEADER, t.leader),
                        plays,
                        _int(_T_WINNER, t.winner),
                        _int(_T_POINTS, sum([POINTS_OF[c] for c in t.cards])),
                    )
                )
                self.fields.append(field(_O_COMPLETED, trick))
            self.joined = b"".join(self.fields[: len(tricks)])
        return self.joined


_MELDS: dict[MeldView, bytes] = {}


def _meld(m: MeldView) -> bytes:
    """An Observation.melds field (a declared meld never changes: kept by its value)."""
    out = _MELDS.get(m)
    if out is None:
        msg = gm.Meld(
            seat=m.seat,
            suit=m.suit + 1,  # type: ignore[arg-type]
            kind=cm.MELD_KIND_DOUBLE_MARRIAGE if m.double else cm.MELD_KIND_MARRIAGE,
            cards=[CARDS[c] for c in m.cards],
            points=m.points,
        )
        out = field(_O_MELDS, msg.SerializeToString())
        if len(_MELDS) < 4096:
            _MELDS[m] = out
    return out


def _side_totals(scores: Sequence[SideScore], tricks_won: Sequence[int]) -> bytes:
    out = []
    for x, sc in enumerate(scores):
        won = tricks_won[x] if x < len(tricks_won) else 0
        totals = _int(_ST_SIDE, x) + _int(_ST_CARDS, sc.card_points) + _int(_ST_MELDS, sc.meld_points)
        out.append(field(_O_TOTALS, totals + _int(_ST_TOTAL, sc.total) + _int(_ST_TRICKS, won)))
    return b"".join(out)


def observation(obs: Observation, hand_index: int, tricks: TrickCache | None = None) -> bytes:
    """The serialized Observation of *obs* (which holds only what its seat may know already).

    *tricks* (one per hand, kept by the caller) saves serializing the completed tricks again
    on every call."""
    opened = obs.opening
    parts = [
        _int(_O_SEAT, obs.seat),
        _int(_O_HAND_INDEX, hand_index),
        _int(_O_PHASE, _phase(obs)),
        _opt(_O_TURN, obs.to_act),
        b"".join([_O_HAND[c] for c in obs.hand]),
        _O_TRUMP_CARD[obs.trump_card],
        _int(_O_TRUMP_SUIT, obs.trump_suit + 1),
        b"" if obs.face_up_card is None else _O_FACE_UP[obs.face_up_card],
        _int(_O_TALON, obs.talon_size),
        _int(_O_OPENING, opening(opened)),
        _opt(_O_DISSLE, obs.dissle_declarer),
        _int(_O_TRICK_INDEX, len(obs.tricks)),
        _int(_O_LEADER, obs.trick_leader),
    ]
    if obs.current_trick:
        face_down = not obs.tricks and opened in FACE_DOWN_OPENINGS
        parts.extend(field(_O_CURRENT, trick_play(s, face_down, c)) for s, c in obs.current_trick)
    if obs.tricks:
        parts.append((tricks or TrickCache()).upto(obs))
    if obs.melds:
        parts.extend(_meld(m) for m in obs.melds)
    if obs.robbed_by is not None and obs.robbed_cards is not None:
        seven, taken = obs.robbed_cards
        robbery = gm.Robbery(seat=obs.robbed_by, trump_card=CARDS[taken], seven=CARDS[seven])
        parts.append(field(_O_ROBBERY, robbery.SerializeToString()))
    parts.append(_opt(_O_RESERVED, obs.rob_reserved_seat))
    for s, held in enumerate(obs.public_holdings):
        if held:
            holding = gm.PublicHolding(seat=s, cards=[CARDS[c] for c in held])
            parts.append(field(_O_HOLDINGS, holding.SerializeToString()))
    if obs.scores is not None:
        parts.append(_O_EXPOSED + b"\x01")
        parts.append(_side_totals(obs.scores, obs.tricks_won))
    parts.append(_int(_O_PLAYERS, obs.players))
    parts.append(_int(_O_FOREHAND, obs.forehand))
    return b"".join(parts)


# --- DecisionRequest -----------------------------------------------------------------------

_D = bs.DecisionRequest
_D_ID, _D_LEGAL, _D_OBSERVATION = tag(_D, "decision_id"), tag(_D, "legal_actions"), tag(_D, "observation")
_D_TIME_LEFT, _D_BANK_LEFT = tag(_D, "time_left"), tag(_D, "bank_left")
D_HAND_START, D_EVENT = tag(_D, "hand_start"), tag(_D, "events")
D_HAND_END, D_ENDED_EVENT = tag(_D, "hand_end"), tag(_D, "ended_hand_events")
"""The compact fields of a DecisionRequest (its held HandStart and Events, with Join.compact_hand_end
also the held HandEnd and its hand's last Events), written after the others."""
_LEGAL: dict[int, bs.LegalAction] = {}
_LEGAL_FIELDS: dict[int, bytes] = {}
_DURATION_SECONDS, _DURATION_NANOS = b"\x08", b"\x10"  # google.protobuf.Duration: seconds = 1, nanos = 2


def legal_action(a: int) -> bs.LegalAction:
    """One legal action with its label, kind and structured fields (shared and read-only, as :data:`CARDS`)."""
    out = _LEGAL.get(a)
    if out is None:
        out = _LEGAL[a] = _make_legal_action(a)
    return out


def _make_legal_action(a: int) -> bs.LegalAction:
    out = bs.LegalAction(id=a, label=A.action_label(a))
    if a < 48:
        out.kind = bs.ACTION_KIND_PLAY
        out.card.CopyFrom(CARDS[a])
    elif a < 144:
        c = a % 48
        out.kind = bs.ACTION_KIND_PLAY_WITH_MELD
        out.card.CopyFrom(CARDS[c])
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


def legal_actions(legal: Sequence[int]) -> bytes:
    """The legal_actions fields of a DecisionRequest (each action's serialized once and kept)."""
    out = []
    for a in legal:
        f = _LEGAL_FIELDS.get(a)
        if f is None:
            f = _LEGAL_FIELDS[a] = field(_D_LEGAL, legal_action(a).SerializeToString())
        out.append(f)
    return b"".join(out)


def duration(seconds: float) -> bytes:
    """A serialized google.protobuf.Duration of *seconds* (negative values clamp to zero)."""
    ns = max(0, int(seconds * 1e9))
    s, n = divmod(ns, 1_000_000_000)
    return _int(_DURATION_SECONDS, s) + _int(_DURATION_NANOS, n)


def decision_request(decision_id: str, legal: bytes, observation: bytes, time_left: float, bank_left: float) -> bytes:
    """A serialized DecisionRequest without its compact fields (*legal* from :func:`legal_actions`,
    *observation* from :func:`observation`)."""
    return b"".join(
        (
            field(_D_ID, decision_id.encode()) if decision_id else b"",
            legal,
            field(_D_OBSERVATION, observation),
            field(_D_TIME_LEFT, duration(time_left)),
            field(_D_BANK_LEFT, duration(bank_left)),
        )
    )


# --- the frequent events: a card played, a card drawn, a trick won --------------------------

_E = gm.Event
_E_HAND = tag(_E, "hand_index")
_E_PLAYED, _E_DRAWN, _E_WON = tag(_E, "card_played"), tag(_E, "card_drawn"), tag(_E, "trick_won")
_CP = gm.CardPlayed
_CP_SEAT, _CP_TRICK, _CP_FACE_DOWN = tag(_CP, "seat"), tag(_CP, "trick_index"), tag(_CP, "face_down")
_CP_CARD = card_fields(tag(_CP, "card"))
_CD = gm.CardDrawn
_CD_SEAT, _CD_CARD, _CD_FACE_UP = tag(_CD, "seat"), card_fields(tag(_CD, "card")), tag(_CD, "face_up_card")
_CD_TALON = tag(_CD, "talon_size")
_TW = gm.TrickWon
_TW_TRICK, _TW_SEAT, _TW_SIDE = tag(_TW, "trick_index"), tag(_TW, "winner_seat"), tag(_TW, "winner_side")
_TW_POINTS = tag(_TW, "card_points")


def card_played(hand_index: int, seat: int, trick_index: int, face_down: bool, c: CardId | None) -> bytes:
    """A serialized Event with a CardPlayed (*c* None: the face-down card as others see it)."""
    body = _int(_CP_SEAT, seat) + _int(_CP_TRICK, trick_index) + _int(_CP_FACE_DOWN, face_down)
    if c is not None:
        body += _CP_CARD[c]
    return _int(_E_HAND, hand_index) + field(_E_PLAYED, body)


def card_drawn(hand_index: int, seat: int, c: CardId | None, face_up: bool, talon_size: int) -> bytes:
    """A serialized Event with a CardDrawn (*c* None: the card as the other seats see it)."""
    body = _int(_CD_SEAT, seat) + (b"" if c is None else _CD_CARD[c])
    body += _int(_CD_FACE_UP, face_up) + _int(_CD_TALON, talon_size)
    return _int(_E_HAND, hand_index) + field(_E_DRAWN, body)


def trick_won(hand_index: int, trick_index: int, seat: int, side: int, points: int) -> bytes:
    """A serialized Event with a TrickWon."""
    body = _int(_TW_TRICK, trick_index) + _int(_TW_SEAT, seat) + _int(_TW_SIDE, side) + _int(_TW_POINTS, points)
    return _int(_E_HAND, hand_index) + field(_E_WON, body)


__all__ = [
    "CARD",
    "CARDS",
    "D_ENDED_EVENT",
    "D_EVENT",
    "D_HAND_END",
    "D_HAND_START",
    "FACE_DOWN_OPENINGS",
    "PHASES",
    "TrickCache",
    "card_drawn",
    "card_fields",
    "card_played",
    "decision_request",
    "duration",
    "field",
    "legal_action",
    "legal_actions",
    "observation",
    "opening",
    "tag",
    "trick_play",
    "trick_won",
    "varint",
]
