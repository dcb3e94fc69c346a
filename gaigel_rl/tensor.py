"""The observation tensor: one flat float32 vector per seat, the same in-process and over gRPC.

Built from the seat's :class:`~gaigel.observation.Observation` and nothing else (never the
state), so it can hold no hidden card; :func:`observation_from_proto` turns the protocol's
``Observation`` message into the same engine value, so a policy trained in-process gets the
identical vector from a ``DecisionRequest``.

Seats are *relative*: block entry ``r`` is the seat ``(seat + r) % players``, so entry 0 is
always the observer and a policy plays every seat alike. Sides are relative the same way:
entry 0 is the observer's side, then ``(side + k) % sides``. :data:`FEATURES` lists the
blocks in order with their sizes for *n* seats and *k* sides; ``docs/rl.md`` documents each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from gaigel.actions import NUM_ACTIONS
from gaigel.cards import POINTS_OF
from gaigel.observation import MeldView, Observation, SideScore, TrickView
from gaigel.phase import Phase
from gaigel.ruleset import Opening
from gaigel.state import GaigelState
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import game_pb2 as gm

Vector = npt.NDArray[np.float32]

FEATURES: Final[tuple[tuple[str, Callable[[int, int], int], str], ...]] = (
    ("hand", lambda n, k: 48, "own cards, one bit per card id"),
    ("trick_cards", lambda n, k: 48 * n, "per relative seat, the card it played to the current trick (if visible)"),
    ("trump_card", lambda n, k: 48, "the trump card turned up at the deal"),
    ("face_up_card", lambda n, k: 48, "the card face up under the talon now (trump card or robbing Seven), if any"),
    ("played", lambda n, k: 48 * n, "per relative seat, the cards it played in completed tricks"),
    ("holdings", lambda n, k: 48 * n, "per relative seat, the cards publicly known to be in its hand (own seat too)"),
    ("trick_hidden", lambda n, k: n, "per relative seat, 1 if it played a face-down card this seat cannot see"),
    ("trick_leader", lambda n, k: n, "the relative seat leading the current trick"),
    ("trump_suit", lambda n, k: 4, "the trump suit (E, B, H, S)"),
    ("melds", lambda n, k: 8 * n, "per relative seat, suit x (marriage, double marriage) it declared"),
    ("robbed_by", lambda n, k: n, "the relative seat that robbed the trump card, if any"),
    ("rob_reserved", lambda n, k: n, "the relative seat that reserved the robbery (rob.reservation), if any"),
    ("scores_exposed", lambda n, k: 1, "1 when the ruleset exposes side totals (expose_scores)"),
    ("opening", lambda n, k: 5, "the declared trick-1 opening (Andere Alte ... Trumpf hoeher), if any"),
    ("dissle_declarer", lambda n, k: n, "the relative seat playing an Auf Dissle, if any"),
    ("phase", lambda n, k: 4, "opening, play, Aus window, meld window"),
    ("first_trick", lambda n, k: 1, "1 while trick 1 is played under a declared opening"),
    ("to_act", lambda n, k: n, "the relative seat to act"),
    ("forehand", lambda n, k: n, "the relative seat that is forehand of this hand"),
    ("partners", lambda n, k: n, "1 for the relative seats on the observer's side (itself included)"),
    ("talon_size", lambda n, k: 1, "cards left in the talon (face-up card included) / 48"),
    ("tricks_won", lambda n, k: k, "per relative side, completed tricks it won / tricks per hand"),
    ("card_points", lambda n, k: k, "per relative side, card points of the tricks it won / 120"),
    ("meld_points", lambda n, k: k, "per relative side, points of its declared melds / 120"),
    ("totals", lambda n, k: k, "per relative side, the exposed total / 120 (0 when not exposed)"),
    ("trick_index", lambda n, k: 1, "completed tricks / tricks per hand"),
)
"""Name, size for (players, sides) and meaning of every block, in tensor order: the blocks of
48 cards first (:data:`CARD_BLOCKS`, filled at once from the engine's card masks), then the
other 0/1 blocks, the blocks of fractions (:data:`SCALARS`) last."""

CARD_BLOCKS: Final = ("hand", "trick_cards", "trump_card", "face_up_card", "played", "holdings")
"""The leading blocks, 48 bits per card set each."""

SCALARS: Final = frozenset({"talon_size", "tricks_won", "card_points", "meld_points", "totals", "trick_index"})
"""The blocks that hold fractions; every other block holds only 0 and 1."""

_POINTS: Final = POINTS_OF

_PHASES: Final = {"opening": 0, "play": 1, "aus_window": 2, "meld_window": 3}


def layout(players: int, sides: int) -> dict[str, tuple[int, int]]:
    """Start and size of each block of the tensor for *players* seats and *sides* sides."""
    out: dict[str, tuple[int, int]] = {}
    at = 0
    for name, size, _ in FEATURES:
        width = size(players, sides)
        out[name] = (at, width)
        at += width
    return out


def tensor_size(players: int, sides: int) -> int:
    """The length of the tensor for *players* seats and *sides* sides."""
    size = _SIZES.get((players, sides))
    if size is None:
        size = _SIZES[(players, sides)] = sum(width(players, sides) for _, width, _ in FEATURES)
    return size


_SIZES: dict[tuple[int, int], int] = {}


_LAYOUTS: dict[tuple[int, int], dict[str, int]] = {}


def _starts(players: int, sides: int) -> dict[str, int]:
    got = _LAYOUTS.get((players, sides))
    if got is None:
        got = _LAYOUTS[(players, sides)] = {name: start for name, (start, _) in layout(players, sides).items()}
    return got


def encode(obs: Observation, out: Vector | None = None) -> Vector:
    """The tensor of *obs* (written into *out*, zeroed first, when given)."""
    n = obs.players
    k = len(obs.sides)
    at = _starts(n, k)
    v = np.zeros(tensor_size(n, k), np.float32) if out is None else out
    if out is not None:
        v.fill(0.0)
    seat = obs.seat
    side_of = [0] * n
    for x, seats in enumerate(obs.sides):
        for s in seats:
            side_of[s] = x
    me = side_of[seat]

    def rel(s: int) -> int:
        return (s - seat) % n

    def rside(x: int) -> int:
        return (x - me) % k

    for c in obs.hand:
        v[at["hand"] + c] = 1.0
    for s, shown in obs.current_trick:
        if shown is None:
            v[at["trick_hidden"] + rel(s)] = 1.0
        else:
            v[at["trick_cards"] + 48 * rel(s) + shown] = 1.0
    v[at["trick_leader"] + rel(obs.trick_leader)] = 1.0
    v[at["trump_suit"] + obs.trump_suit] = 1.0
    v[at["trump_card"] + obs.trump_card] = 1.0
    if obs.face_up_card is not None:
        v[at["face_up_card"] + obs.face_up_card] = 1.0
    v[at["talon_size"]] = obs.talon_size / 48.0
    per_hand = 48 // n
    won = [0] * k
    points = [0] * k
    played = at["played"]
    for t in obs.tricks:
        for j, c in enumerate(t.cards):
            v[played + 48 * rel((t.leader + j) % n) + c] = 1.0
        x = side_of[t.winner]
        won[x] += 1
        points[x] += sum(POINTS_OF[c] for c in t.cards)
    for s, held in enumerate(obs.public_holdings):
        base = at["holdings"] + 48 * rel(s)
        for c in held:
            v[base + c] = 1.0
    melded = [0] * k
    for m in obs.melds:
        v[at["melds"] + 8 * rel(m.seat) + 2 * m.suit + int(m.double)] = 1.0
        melded[side_of[m.seat]] += m.points
    if obs.robbed_by is not None:
        v[at["robbed_by"] + rel(obs.robbed_by)] = 1.0
    if obs.rob_reserved_seat is not None:
        v[at["rob_reserved"] + rel(obs.rob_reserved_seat)] = 1.0
    for x in range(k):
        r = rside(x)
        v[at["tricks_won"] + r] = won[x] / per_hand
        v[at["card_points"] + r] = points[x] / 120.0
        v[at["meld_points"] + r] = melded[x] / 120.0
    if obs.scores is not None:
        v[at["scores_exposed"]] = 1.0
        for x, sc in enumerate(obs.scores):
            v[at["totals"] + rside(x)] = sc.total / 120.0
    if obs.opening is not None:
        v[at["opening"] + int(obs.opening)] = 1.0
        if not obs.tricks and obs.phase == "play":
            v[at["first_trick"]] = 1.0
    if obs.dissle_declarer is not None:
        v[at["dissle_declarer"] + rel(obs.dissle_declarer)] = 1.0
    phase = _PHASES.get(obs.phase)
    if phase is not None:
        v[at["phase"] + phase] = 1.0
    if obs.to_act is not None:
        v[at["to_act"] + rel(obs.to_act)] = 1.0
    v[at["forehand"] + rel(obs.forehand)] = 1.0
    for s in obs.sides[me]:
        v[at["partners"] + rel(s)] = 1.0
    v[at["trick_index"]] = len(obs.tricks) / per_hand
    return v


def encode_state(state: GaigelState, seat: int, out: Vector | None = None) -> Vector:
    """The tensor of *seat*'s observation of *state*, read straight from the state: the fast path.

    Reads only what :func:`gaigel.observation.observe` shows *seat* (tests/rl check it equals
    ``encode(state.observation(seat))`` at every decision, and stays equal when the hidden
    cards are swapped); it skips building the :class:`Observation`, which costs more than a
    decision of the engine.
    """
    n = state.n
    rules = state.rules
    k = state.num_sides
    at = _starts(n, k)
    v = np.zeros(tensor_size(n, k), np.float32) if out is None else out
    if out is not None:
        v.fill(0.0)
    side_of = state.side_of
    me = side_of[seat]
    # The card blocks as one integer of 48-bit slots, unpacked in one call.
    hands = state.hands
    big = hands[seat]
    leader = state.leader
    ones: list[int] = []
    hidden_base = at["trick_hidden"]
    for i, c in enumerate(state.trick_cards):
        r = (leader + i - seat) % n
        if state.face_down and r:
            ones.append(hidden_base + r)
        else:
            big |= 1 << (c + 48 * (1 + r))
    big |= 1 << (state.trump_card + 48 * (1 + n))
    if state.face_up >= 0:
        big |= 1 << (state.face_up + 48 * (2 + n))
    won = [0] * k
    points = [0] * k
    for t_leader, cards, winner in state.tricks:
        for j, c in enumerate(cards):
            big |= 1 << (c + 48 * (3 + n + (t_leader + j - seat) % n))
        x = side_of[winner]
        won[x] += 1
        points[x] += sum([_POINTS[c] for c in cards])
    known = state.known
    for s in range(n):
        held = known[s] & hands[s]
        if held:
            big |= held << (48 * (3 + 2 * n + (s - seat) % n))
    width = 48 * (3 + 3 * n)
    v[:width] = np.unpackbits(np.frombuffer(big.to_bytes(width // 8, "little"), np.uint8), bitorder="little")
    ones.append(at["trick_leader"] + (leader - seat) % n)
    ones.append(at["trump_suit"] + state.trump)
    melded = [0] * k
    meld_base = at["melds"]
    for m_seat, suit, double, _, m_points in state.melds:
        ones.append(meld_base + 8 * ((m_seat - seat) % n) + 2 * suit + int(double))
        melded[side_of[m_seat]] += m_points
    if state.robbed_by >= 0:
        ones.append(at["robbed_by"] + (state.robbed_by - seat) % n)
    if state.reserved_seat >= 0:
        ones.append(at["rob_reserved"] + (state.reserved_seat - seat) % n)
    phase = state.phase
    if state.opening is not None:
        ones.append(at["opening"] + int(state.opening))
        if not state.tricks and phase == Phase.PLAY:
            ones.append(at["first_trick"])
    if state.declarer >= 0:
        ones.append(at["dissle_declarer"] + (state.declarer - seat) % n)
    if phase != Phase.TERMINAL:
        ones.append(at["phase"] + int(phase))
        ones.append(at["to_act"] + (state.to_act - seat) % n)
    ones.append(at["forehand"] + (state.forehand - seat) % n)
    partners = at["partners"]
    ones.extend(partners + (s - seat) % n for s in rules.seats_of(me))
    per_hand = 48 // n
    exposed = rules.expose_scores
    if exposed:
        ones.append(at["scores_exposed"])
    v[ones] = 1.0
    # The fractions are the tail of the tensor, in FEATURES order: one slice assignment.
    won_r, points_r, melded_r, totals_r = [0.0] * k, [0.0] * k, [0.0] * k, [0.0] * k
    for x in range(k):
        r = (x - me) % k
        won_r[r] = won[x] / per_hand
        points_r[r] = points[x] / 120.0
        melded_r[r] = melded[x] / 120.0
        if exposed:
            totals_r[r] = state.side_total(x) / 120.0
    v[at["talon_size"] :] = [
        state.talon_size / 48.0,
        *won_r,
        *points_r,
        *melded_r,
        *totals_r,
        len(state.tricks) / per_hand,
    ]
    return v


def action_mask(legal: Sequence[int]) -> npt.NDArray[np.int8]:
    """The 165-entry mask over the protocol's action ids: 1 for each legal action."""
    mask = bytearray(NUM_ACTIONS)
    for a in legal:
        mask[a] = 1
    return np.frombuffer(mask, np.int8)


# --- from the protocol ----------------------------------------------------------------------

_PROTO_PHASES: Final = {
    gm.PHASE_OPENING: "opening",
    gm.PHASE_FIRST_TRICK: "play",
    gm.PHASE_TALON: "play",
    gm.PHASE_STRICT: "play",
    gm.PHASE_AUS_WINDOW: "aus_window",
    gm.PHASE_MELD_WINDOW: "meld_window",
}


def observation_from_proto(msg: gm.Observation, sides: Sequence[Sequence[int]]) -> Observation:
    """The engine :class:`Observation` carried by a ``gaigel.v1.Observation`` message.

    *sides* are the seats of each side in side order (``MatchStart.sides``, or
    ``Ruleset.seats_of``): the message does not repeat them. Fields the message does not
    carry and the tensor does not read (``strict``, ``outcome``) are left at neutral
    values; the tensor is the same as from the engine's own observation.
    """
    o = msg
    n = int(o.players)
    tricks = tuple(
        TrickView(t.leader_seat, tuple(p.card.id for p in t.plays), t.winner_seat) for t in o.completed_tricks
    )
    holdings: list[tuple[int, ...]] = [() for _ in range(n)]
    for h in o.public_holdings:
        holdings[h.seat] = tuple(c.id for c in h.cards)
    robbed = o.HasField("robbery")
    side_list = tuple(tuple(s) for s in sides)
    won = [0] * len(side_list)
    side_of = {s: x for x, seats in enumerate(side_list) for s in seats}
    for t in tricks:
        won[side_of[t.winner]] += 1
    scores = None
    if o.scores_exposed:
        scores = tuple(SideScore(t.card_points, t.meld_points, t.total_points) for t in o.side_totals)
    return Observation(
        seat=o.seat,
        players=n,
        sides=side_list,
        forehand=o.forehand_seat,
        phase=_PROTO_PHASES.get(o.phase, "terminal"),
        to_act=o.turn_seat if o.HasField("turn_seat") else None,
        trump_suit=o.trump_suit - 1,
        trump_card=o.trump_card.id,
        face_up_card=o.face_up_card.id if o.HasField("face_up_card") else None,
        talon_size=o.talon_size,
        hand=tuple(c.id for c in o.hand),
        public_holdings=tuple(holdings),
        opening=Opening(o.opening - 1) if o.opening else None,
        dissle_declarer=o.dissle_declarer_seat if o.HasField("dissle_declarer_seat") else None,
        trick_leader=o.leader_seat,
        current_trick=tuple((p.seat, p.card.id if p.HasField("card") else None) for p in o.current_trick),
        tricks=tricks,
        tricks_won=tuple(won),
        melds=tuple(
            MeldView(x.seat, x.suit - 1, x.kind == cm.MELD_KIND_DOUBLE_MARRIAGE, tuple(c.id for c in x.cards), x.points)
            for x in o.melds
        ),
        robbed_by=o.robbery.seat if robbed else None,
        robbed_cards=(o.robbery.seven.id, o.robbery.trump_card.id) if robbed else None,
        rob_reserved_seat=o.rob_reserved_seat if o.HasField("rob_reserved_seat") else None,
        strict=o.phase == gm.PHASE_STRICT,
        scores=scores,
        outcome=None,
    )


def encode_proto(msg: gm.Observation, sides: Sequence[Sequence[int]]) -> Vector:
    """The tensor of a ``gaigel.v1.Observation`` message (see :func:`observation_from_proto`)."""
    return encode(observation_from_proto(msg, sides))
