"""Runs an in-process house bot (``gaigel.bots.make_bot``) over gRPC.

The engine bots take a :class:`gaigel.match.DecisionRequest` whose observation is an
engine :class:`gaigel.observation.Observation`; :func:`engine_observation` rebuilds that
from the protocol's Observation plus what MatchStart and HandStart said (players, sides,
forehand).
"""

from __future__ import annotations

import json
import logging

from gaigel.bots import make_bot
from gaigel.match import DecisionRequest, MatchSpec
from gaigel.observation import MeldView, Observation, SideScore, TrickView
from gaigel.ruleset import Opening, Ruleset, preset
from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_api.v1 import common_pb2, game_pb2
from gaigel_client.bot import Bot

log = logging.getLogger("gaigel_harness.house")

_PHASES = {
    game_pb2.PHASE_OPENING: "opening",
    game_pb2.PHASE_FIRST_TRICK: "play",
    game_pb2.PHASE_TALON: "play",
    game_pb2.PHASE_STRICT: "play",
    game_pb2.PHASE_AUS_WINDOW: "aus_window",
    game_pb2.PHASE_MELD_WINDOW: "meld_window",
    game_pb2.PHASE_HAND_OVER: "terminal",
}


def engine_observation(
    obs: game_pb2.Observation, players: int, sides: tuple[tuple[int, ...], ...], forehand: int
) -> Observation:
    """The engine Observation equal to the protocol's *obs* (``outcome`` is always None).

    *players* and *sides* come from MatchStart, *forehand* from HandStart.
    """
    side_of = {seat: i for i, seats in enumerate(sides) for seat in seats}
    tricks_won = [0] * len(sides)
    for t in obs.completed_tricks:
        tricks_won[side_of[t.winner_seat]] += 1
    holdings: list[tuple[int, ...]] = [() for _ in range(players)]
    for h in obs.public_holdings:
        holdings[h.seat] = tuple(c.id for c in h.cards)
    robbed = obs.HasField("robbery")
    return Observation(
        seat=obs.seat,
        players=players,
        sides=sides,
        forehand=forehand,
        phase=_PHASES.get(obs.phase, "play"),
        to_act=obs.turn_seat if obs.HasField("turn_seat") else None,
        trump_suit=obs.trump_suit - 1,
        trump_card=obs.trump_card.id,
        face_up_card=obs.face_up_card.id if obs.HasField("face_up_card") else None,
        talon_size=obs.talon_size,
        hand=tuple(c.id for c in obs.hand),
        public_holdings=tuple(holdings),
        opening=Opening(obs.opening - 1) if obs.opening else None,
        dissle_declarer=obs.dissle_declarer_seat if obs.HasField("dissle_declarer_seat") else None,
        trick_leader=obs.leader_seat,
        current_trick=tuple((p.seat, p.card.id if p.HasField("card") else None) for p in obs.current_trick),
        tricks=tuple(
            TrickView(t.leader_seat, tuple(p.card.id for p in t.plays), t.winner_seat) for t in obs.completed_tricks
        ),
        tricks_won=tuple(tricks_won),
        melds=tuple(
            MeldView(
                m.seat,
                m.suit - 1,
                m.kind == common_pb2.MELD_KIND_DOUBLE_MARRIAGE,
                tuple(c.id for c in m.cards),
                m.points,
            )
            for m in obs.melds
        ),
        robbed_by=obs.robbery.seat if robbed else None,
        robbed_cards=(obs.robbery.seven.id, obs.robbery.trump_card.id) if robbed else None,
        rob_reserved_seat=obs.rob_reserved_seat if obs.HasField("rob_reserved_seat") else None,
        strict=obs.phase == game_pb2.PHASE_STRICT,
        scores=tuple(SideScore(s.card_points, s.meld_points, s.total_points) for s in obs.side_totals)
        if obs.scores_exposed
        else None,
        outcome=None,
    )


class HouseBotAdapter(Bot):
    """A house bot such as ``random`` or ``first``, playing over the protocol.

    Randomised house bots are seeded from the seat's ``MatchStart.bot_seed`` (the match
    seed is secret), passed as the spec's seed exactly as the server does for its own house
    seats, so a rematch with the same seed and match key plays the same.
    """

    def __init__(self, name: str) -> None:
        self.inner = make_bot(name)
        self.name = name
        self.version = f"house-{getattr(self.inner, 'version', '1')}"
        self.ruleset = Ruleset()
        self.players = 2
        self.sides: tuple[tuple[int, ...], ...] = ((0,), (1,))
        self.forehand = 0

    def on_match_start(self, msg: pb.MatchStart) -> None:
        self.players = msg.players
        self.sides = tuple(tuple(s.seat for s in side.seats) for side in msg.sides)
        try:
            self.ruleset = Ruleset.from_dict(json.loads(msg.ruleset_json or "{}"))
        except Exception as e:  # a newer server's option: play on with the preset
            log.warning("cannot read the ruleset (%s); using preset %r", e, msg.ruleset_preset)
            self.ruleset = preset(msg.ruleset_preset or "default", msg.players)
        names = {s.seat: s.bot_name for side in msg.sides for s in side.seats}
        try:
            spec = MatchSpec(
                ruleset=self.ruleset,
                seed=msg.bot_seed,
                hands=max(1, msg.hands),
                bots=tuple(names.get(i, "?") for i in range(msg.players)),
                first_dealer=msg.first_dealer_seat,
            )
        except ValueError as e:
            log.warning("cannot build a match spec for the house bot (%s)", e)
            return
        self.inner.start_match(spec, msg.seat)

    def on_hand_start(self, msg: game_pb2.HandStart) -> None:
        self.forehand = msg.forehand_seat

    def decide(self, request: pb.DecisionRequest) -> int:
        obs = request.observation
        engine_request = DecisionRequest(
            seat=obs.seat,
            hand_index=obs.hand_index,
            legal_actions=tuple(a.id for a in request.legal_actions),
            observe=lambda: engine_observation(obs, self.players, self.sides, self.forehand),
            ruleset=self.ruleset,
        )
        choice = self.inner.decide(engine_request)
        self.time_capped = bool(getattr(self.inner, "time_capped", False))  # the search bot's safety cap
        return choice
