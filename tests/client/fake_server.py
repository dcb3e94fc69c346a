"""A scripted BotService on 127.0.0.1 for testing the Python SDK against real gRPC.

Each incoming stream runs the next script: a generator function that takes a
:class:`Conn` (to read the bot's messages) and yields the server's messages. A script
ends the stream with OK by returning, or with an error by calling ``conn.abort``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from typing import Any

import grpc

from gaigel.cards import card_code, card_points, card_rank, card_suit
from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_api.v1 import bot_service_pb2_grpc as pb_grpc
from gaigel_api.v1 import common_pb2, game_pb2

Script = Callable[["Conn"], Iterator[pb.PlayResponse]]


class Conn:
    """One stream as a script sees it; every message the bot sent is kept in ``received``."""

    def __init__(self, requests: Iterator[pb.PlayRequest], context: grpc.ServicerContext) -> None:
        self._requests = requests
        self.context = context
        self.received: list[pb.PlayRequest] = []

    def recv(self) -> pb.PlayRequest | None:
        """The bot's next message, or None when the bot closed its side."""
        try:
            msg = next(self._requests)
        except StopIteration:
            return None
        self.received.append(msg)
        return msg

    def recv_action(self) -> pb.Action:
        """The bot's next Action (Leave messages on the way are kept in ``received``)."""
        while True:
            msg = self.recv()
            assert msg is not None, "the bot closed the stream while an action was expected"
            if msg.HasField("action"):
                return msg.action
            assert msg.HasField("leave"), f"expected an Action, got {msg}"

    def drain(self) -> None:
        """Reads until the bot closes its side (or cancels)."""
        try:
            while self.recv() is not None:
                pass
        except Exception:  # the bot cancelled the call
            pass

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.context.abort(code, details)


class FakeBotService(pb_grpc.BotServiceServicer):
    """Runs ``scripts[i]`` for the i-th stream; streams beyond the scripts get UNAVAILABLE."""

    def __init__(self, scripts: Sequence[Script]) -> None:
        self.scripts = list(scripts)
        self.conns: list[Conn] = []
        self.errors: list[BaseException] = []
        self.done = threading.Event()
        self._lock = threading.Lock()

    def Play(self, request_iterator: Any, context: Any) -> Iterator[pb.PlayResponse]:
        conn = Conn(request_iterator, context)
        with self._lock:
            index = len(self.conns)
            self.conns.append(conn)
        if index >= len(self.scripts):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "fake server: no more scripts")
        try:
            yield from self.scripts[index](conn)
        except AssertionError as e:  # a failed expectation: fail the test, not just the stream
            self.errors.append(e)
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"fake server: script assertion: {e}")
        finally:
            if index == len(self.scripts) - 1:
                self.done.set()


def start(scripts: Sequence[Script], port: int = 0) -> tuple[grpc.Server, int, FakeBotService]:
    """Starts a fake server on 127.0.0.1 (*port* 0 picks a free one)."""
    service = FakeBotService(scripts)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    pb_grpc.add_BotServiceServicer_to_server(service, server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, bound, service


# --- message builders ---------------------------------------------------------------


def card(card_id: int) -> common_pb2.Card:
    return common_pb2.Card(
        id=card_id,
        code=card_code(card_id),
        suit=int(card_suit(card_id)) + 1,  # type: ignore[arg-type]
        rank=int(card_rank(card_id)) + 1,  # type: ignore[arg-type]
        points=card_points(card_id),
    )


def welcome(resumed: bool = False) -> pb.PlayResponse:
    return pb.PlayResponse(
        sequence=0,
        welcome=pb.Welcome(
            session_id="s-1", bot_name="tester", protocol_version=1, server_version="fake", resumed=resumed
        ),
    )


def match_start(seq: int, match_id: str = "m-1", seat: int = 1, token: str = "resume-secret") -> pb.PlayResponse:
    sides = [
        common_pb2.Side(side=0, seats=[common_pb2.SeatInfo(seat=0, bot_name="a")]),
        common_pb2.Side(side=1, seats=[common_pb2.SeatInfo(seat=1, bot_name="tester")]),
    ]
    clock = common_pb2.ClockSettings(strikes_limit=3)
    clock.resume_grace.FromSeconds(10)
    clock.decision_time.FromSeconds(1)
    return pb.PlayResponse(
        sequence=seq,
        match_start=pb.MatchStart(
            match_id=match_id,
            seat=seat,
            side=seat,
            players=2,
            sides=sides,
            ruleset_preset="default",
            ruleset_json='{"players": 2}',
            hands=1,
            first_dealer_seat=0,
            clock=clock,
            resume_token=token,
        ),
    )


def hand_start(seq: int, hand: Sequence[int] = (3, 7, 9, 20, 30)) -> pb.PlayResponse:
    return pb.PlayResponse(
        sequence=seq,
        hand_start=game_pb2.HandStart(
            hand_index=0,
            dealer_seat=0,
            forehand_seat=1,
            hand=[card(c) for c in hand],
            trump_card=card(40),
            trump_suit=common_pb2.SUIT_SCHELLEN,
            talon_size=38,
        ),
    )


def decision(
    seq: int, decision_id: str, legal: Sequence[int], hand: Sequence[int] = (3, 7, 9, 20, 30)
) -> pb.PlayResponse:
    obs = game_pb2.Observation(
        seat=1,
        hand_index=0,
        phase=game_pb2.PHASE_TALON,
        turn_seat=1,
        hand=[card(c) for c in hand],
        trump_card=card(40),
        trump_suit=common_pb2.SUIT_SCHELLEN,
        face_up_card=card(40),
        talon_size=38,
        trick_index=1,
        leader_seat=0,
        current_trick=[game_pb2.TrickPlay(seat=0, card=card(5))],
    )
    req = pb.DecisionRequest(
        decision_id=decision_id,
        legal_actions=[
            pb.LegalAction(id=a, label=f"play {card(a).code}", kind=pb.ACTION_KIND_PLAY, card=card(a)) for a in legal
        ],
        observation=obs,
    )
    req.time_left.FromSeconds(1)
    return pb.PlayResponse(sequence=seq, decision_request=req)


def rejected(seq: int, action: pb.Action, reason: int, decision_open: bool = True, strikes: int = 1) -> pb.PlayResponse:
    return pb.PlayResponse(
        sequence=seq,
        action_rejected=pb.ActionRejected(
            decision_id=action.decision_id,
            action_id=action.action_id,
            reason=reason,  # type: ignore[arg-type]
            message=f"action {action.action_id} is not accepted",
            decision_open=decision_open,
            strikes=strikes,
            strikes_limit=3,
        ),
    )


def card_played(seq: int, seat: int, card_id: int) -> pb.PlayResponse:
    return pb.PlayResponse(
        sequence=seq,
        event=game_pb2.Event(
            hand_index=0, card_played=game_pb2.CardPlayed(seat=seat, trick_index=1, card=card(card_id))
        ),
    )


def hand_end(seq: int) -> pb.PlayResponse:
    return pb.PlayResponse(
        sequence=seq,
        hand_end=game_pb2.HandEnd(
            hand_index=0, termination=common_pb2.HAND_TERMINATION_CARDS_EXHAUSTED, winner_sides=[1]
        ),
    )


def match_end(seq: int, match_id: str = "m-1") -> pb.PlayResponse:
    return pb.PlayResponse(
        sequence=seq,
        match_end=game_pb2.MatchEnd(
            match_id=match_id,
            termination=common_pb2.MATCH_TERMINATION_COMPLETED,
            winner_sides=[1],
            hands_played=1,
            seed=42,
        ),
    )
