"""House bots over gRPC: the observation conversion, the adapter and the ``gaigel bot`` command."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterator
from typing import Any

import fake_server as fs
import grpc
import pytest

from gaigel.deal import deal
from gaigel.observation import Observation
from gaigel.ruleset import Ruleset, preset
from gaigel.state import GaigelState
from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_api.v1 import common_pb2, game_pb2
from gaigel_harness import commands
from gaigel_harness.house import HouseBotAdapter, engine_observation

FAST: dict[str, Any] = {"initial_backoff": 0.02, "max_backoff": 0.1, "connect_timeout": 5.0}


def to_proto(o: Observation) -> game_pb2.Observation:
    """The protocol Observation a server would send for the engine's *o* (test's own reading of game.proto)."""
    c = fs.card
    if o.phase == "opening":
        phase = game_pb2.PHASE_OPENING
    elif o.phase == "aus_window":
        phase = game_pb2.PHASE_AUS_WINDOW
    elif o.phase == "meld_window":
        phase = game_pb2.PHASE_MELD_WINDOW
    elif o.phase == "terminal":
        phase = game_pb2.PHASE_HAND_OVER
    elif o.strict:
        phase = game_pb2.PHASE_STRICT
    elif not o.tricks and o.opening is not None:
        phase = game_pb2.PHASE_FIRST_TRICK
    else:
        phase = game_pb2.PHASE_TALON
    p = game_pb2.Observation(
        seat=o.seat,
        phase=phase,
        hand=[c(x) for x in o.hand],
        trump_card=c(o.trump_card),
        trump_suit=o.trump_suit + 1,  # type: ignore[arg-type]
        talon_size=o.talon_size,
        opening=0 if o.opening is None else int(o.opening) + 1,  # type: ignore[arg-type]
        trick_index=len(o.tricks),
        leader_seat=o.trick_leader,
        current_trick=[
            game_pb2.TrickPlay(seat=s, face_down=x is None, card=None if x is None else c(x))
            for s, x in o.current_trick
        ],
        completed_tricks=[
            game_pb2.Trick(
                trick_index=i,
                leader_seat=t.leader,
                plays=[game_pb2.TrickPlay(seat=(t.leader + j) % o.players, card=c(x)) for j, x in enumerate(t.cards)],
                winner_seat=t.winner,
            )
            for i, t in enumerate(o.tricks)
        ],
        melds=[
            game_pb2.Meld(
                seat=m.seat,
                suit=m.suit + 1,  # type: ignore[arg-type]
                kind=common_pb2.MELD_KIND_DOUBLE_MARRIAGE if m.double else common_pb2.MELD_KIND_MARRIAGE,
                cards=[c(x) for x in m.cards],
                points=m.points,
            )
            for m in o.melds
        ],
        public_holdings=[
            game_pb2.PublicHolding(seat=s, cards=[c(x) for x in h]) for s, h in enumerate(o.public_holdings) if h
        ],
        scores_exposed=o.scores is not None,
        side_totals=[
            game_pb2.SideTotals(side=i, card_points=s.card_points, meld_points=s.meld_points, total_points=s.total)
            for i, s in enumerate(o.scores or ())
        ],
    )
    if o.to_act is not None:
        p.turn_seat = o.to_act
    if o.face_up_card is not None:
        p.face_up_card.CopyFrom(c(o.face_up_card))
    if o.dissle_declarer is not None:
        p.dissle_declarer_seat = o.dissle_declarer
    if o.robbed_by is not None and o.robbed_cards is not None:
        seven, taken = o.robbed_cards
        p.robbery.CopyFrom(game_pb2.Robbery(seat=o.robbed_by, trump_card=c(taken), seven=c(seven)))
    return p


RULESETS = [
    preset("default", 2),
    preset("default", 3),
    preset("default", 4),
    Ruleset.from_dict({"aus.mode": "explicit", "meld.timing": "trick_winner"}, base=preset("default", 4)),
]


@pytest.mark.parametrize("rules", RULESETS, ids=lambda r: f"{r.players}p-{r.aus_mode}-{r.meld_timing}")
def test_engine_observation_round_trip(rules: Ruleset) -> None:
    import random

    rng = random.Random(7)
    checked = 0
    for seed in range(6):
        state = GaigelState(rules, deal(seed, 0, rules.players), forehand=seed % rules.players)
        while not state.is_terminal():
            for seat in range(rules.players):
                obs = state.observation(seat)
                back = engine_observation(to_proto(obs), rules.players, obs.sides, obs.forehand)
                assert back == dataclasses.replace(obs, outcome=None)
                checked += 1
            state.apply(rng.choice(state.legal_actions()))
    assert checked > 100


def house_script(got: list[pb.Action], legal: list[int], token: str = "tok") -> fs.Script:
    def script(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        join = conn.recv()
        assert join is not None
        if join.join.bot_token != token:
            conn.abort(grpc.StatusCode.UNAUTHENTICATED, "unknown bot token")
        yield fs.welcome()
        yield fs.match_start(1)
        yield fs.hand_start(2)
        yield fs.decision(3, "d1", legal)
        got.append(conn.recv_action())
        yield fs.card_played(4, 1, got[-1].action_id)
        yield fs.hand_end(5)
        yield fs.match_end(6)
        conn.drain()

    return script


@pytest.mark.parametrize("name", ["first", "random"])
def test_house_bot_adapter_plays_legal_actions(name: str) -> None:
    from gaigel_client import run

    got: list[pb.Action] = []
    server, port, service = fs.start([house_script(got, [9, 20, 30])])
    try:
        assert run(HouseBotAdapter(name), f"127.0.0.1:{port}", "tok", matches=1, **FAST) == 1
    finally:
        server.stop(0)
    assert not service.errors
    assert got[0].action_id in (9, 20, 30)
    if name == "first":
        assert got[0].action_id == 9
    assert service.conns[0].received[0].join.bot_name == name


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gaigel")
    commands.register(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_bot_command(capsys: pytest.CaptureFixture[str]) -> None:
    got: list[pb.Action] = []
    server, port, _ = fs.start([house_script(got, [3, 7]), house_script(got, [3, 7])])
    try:
        args = parse(["bot", "first", "--server", f"127.0.0.1:{port}", "--token", "tok", "--matches", "1"])
        assert args.func(args) == 0
        assert got[0].action_id == 3
        args = parse(["bot", "first", "--server", f"127.0.0.1:{port}", "--token", "bad", "--matches", "1"])
        assert args.func(args) == 1
    finally:
        server.stop(0)
    err = capsys.readouterr().err
    assert "UNAUTHENTICATED" in err and "unknown bot token" in err


def test_bot_command_unknown_house_bot() -> None:
    args: Any = parse(["bot", "nosuchbot", "--token", "t"])
    with pytest.raises(ValueError, match="house bots"):
        args.func(args)


@pytest.mark.parametrize("rules", RULESETS, ids=lambda r: f"{r.players}p-{r.aus_mode}-{r.meld_timing}")
def test_engine_observation_matches_server_codec(rules: Ruleset) -> None:
    """Cross-check with the real server's encoder, when it is installed."""
    import random

    codec = pytest.importorskip("gaigel_server.codec")
    rng = random.Random(11)
    for seed in range(4):
        state = GaigelState(rules, deal(seed, 0, rules.players), forehand=seed % rules.players)
        while not state.is_terminal():
            for seat in range(rules.players):
                obs = state.observation(seat)
                back = engine_observation(codec.observation(obs, 0), rules.players, obs.sides, obs.forehand)
                assert back == dataclasses.replace(obs, outcome=None)
            state.apply(rng.choice(state.legal_actions()))
