"""A friendly, read-only view of a DecisionRequest: card codes instead of messages."""

from __future__ import annotations

import dataclasses

from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_api.v1 import common_pb2, game_pb2

SUIT_LETTERS = {
    common_pb2.SUIT_EICHEL: "E",
    common_pb2.SUIT_BLATT: "B",
    common_pb2.SUIT_HERZ: "H",
    common_pb2.SUIT_SCHELLEN: "S",
}


@dataclasses.dataclass(frozen=True)
class ObservationView:
    """The parts of an observation most bots need, with cards as codes such as ``"HKa"``.

    ``current_trick`` holds ``(seat, code)`` pairs in playing order, with ``None`` for a
    card face down; ``legal`` maps every legal action id to its label, in canonical order.
    """

    seat: int
    phase: str
    to_act: int | None
    hand: tuple[str, ...]
    trump_suit: str
    trump_card: str
    face_up_card: str | None
    talon_size: int
    trick_index: int
    leader_seat: int
    current_trick: tuple[tuple[int, str | None], ...]
    legal: dict[int, str]


def legal_action_ids(request: pb.DecisionRequest) -> list[int]:
    """The legal action ids of *request*, in ascending (canonical) order."""
    return [a.id for a in request.legal_actions]


def observation_view(request: pb.DecisionRequest) -> ObservationView:
    """Converts the request's observation into an :class:`ObservationView`."""
    obs = request.observation
    return ObservationView(
        seat=obs.seat,
        phase=game_pb2.Phase.Name(obs.phase).removeprefix("PHASE_").lower(),
        to_act=obs.turn_seat if obs.HasField("turn_seat") else None,
        hand=tuple(c.code for c in obs.hand),
        trump_suit=SUIT_LETTERS.get(obs.trump_suit, "?"),
        trump_card=obs.trump_card.code,
        face_up_card=obs.face_up_card.code if obs.HasField("face_up_card") else None,
        talon_size=obs.talon_size,
        trick_index=obs.trick_index,
        leader_seat=obs.leader_seat,
        current_trick=tuple((p.seat, p.card.code if p.HasField("card") else None) for p in obs.current_trick),
        legal={a.id: a.label for a in request.legal_actions},
    )
