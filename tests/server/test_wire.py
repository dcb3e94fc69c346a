"""gaigel_server.wire writes protobuf's own bytes: every observation, event and DecisionRequest
of whole seeded matches, for every seat and the public, equals what protobuf serializes for the
same message built as objects (tests/server/proto_oracle.py), and the primitives agree with
protobuf's for any value (hypothesis)."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gaigel import actions as A
from gaigel.match import DecisionRequest, HandStarted, MatchDriver, MatchOver, MatchSpec
from gaigel.ruleset import Ruleset, preset
from gaigel.state import GaigelState
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import game_pb2 as gm
from gaigel_server import codec, wire
from tests.server import proto_oracle as oracle

HANDS = 30

RULESETS = {
    "default 2": preset("default", 2),
    "default 3": preset("default", 3),
    "default 4": preset("default", 4),
    "parlett 4": preset("parlett", 4),
    "default 6 hidden scores": dataclasses.replace(preset("default", 6), expose_scores=False),
    "explicit aus, reservation 2": dataclasses.replace(
        preset("default", 2), aus_mode="explicit", rob_reservation=True, rob_second_seven_points=10
    ),
    "trick-winner melds 4": dataclasses.replace(
        preset("default", 4), meld_timing="trick_winner", meld_partner_privilege=True, last_trick_bonus=10
    ),
    "parlett 3 anytime sevens": dataclasses.replace(preset("parlett", 3), five_sevens_anytime=True),
    "second seven 2": dataclasses.replace(preset("default", 2), rob_second_seven_points=10),
}


def _choose(request: DecisionRequest, state: GaigelState, rng: random.Random) -> int:
    """Random, but prefers melds, robbing and openings (the rarer messages) and calls Aus at the target."""
    legal = request.legal_actions
    if A.AUS in legal and state.side_total(state.side_of[request.seat]) >= state.rules.target:
        return A.AUS
    if A.RESERVE_ROB in legal:
        return A.RESERVE_ROB
    rare = [a for a in legal if a >= 48 and a not in (A.PASS, A.NO_MELD, A.AUS)]
    if rare and rng.random() < 0.7:
        return rng.choice(rare)
    return rng.choice(legal)


@pytest.mark.parametrize("name", RULESETS)
def test_whole_matches_are_protobufs_own_bytes(name: str) -> None:
    rules = RULESETS[name]
    spec = MatchSpec(ruleset=rules, seed=sum(map(ord, name)), hands=HANDS, bots=("b",) * rules.players)
    driver = MatchDriver(spec, record=False, events=True)
    rng = random.Random(name)
    caches: list[wire.TrickCache] = []
    built: list[list[gm.Trick]] = []
    ours: codec.HandEvents | None = None
    theirs: oracle.HandEvents | None = None
    kinds: set[str] = set()
    observations = 0
    while not isinstance(step := driver.next(), MatchOver):
        if isinstance(step, HandStarted):
            caches = [wire.TrickCache() for _ in range(rules.players)]
            built = [[] for _ in range(rules.players)]
            ours = codec.HandEvents(rules, step.hand_index, step.state.talon_size)
            theirs = oracle.HandEvents(rules, step.hand_index, step.state.talon_size)
        elif isinstance(step, DecisionRequest):
            state = driver.state
            assert state is not None
            for seat in range(rules.players):  # every seat's view, not only the deciding one
                obs = state.observation(seat)
                want = oracle.observation(obs, step.hand_index, built[seat]).SerializeToString()
                assert wire.observation(obs, step.hand_index, caches[seat]) == want
                assert wire.observation(obs, step.hand_index) == want  # without a cache
                observations += 1
            driver.decide(_choose(step, state, rng))
        assert ours is not None and theirs is not None
        for ev in driver.take_events():
            got, expected = ours.feed(ev), theirs.feed(ev)
            assert len(got) == len(expected)
            for r, e in zip(got, expected, strict=True):
                kinds.add(str(e.event.WhichOneof("kind")))
                assert r.owner == e.owner
                for viewer in [*range(rules.players), None]:
                    assert r.for_viewer(viewer) == e.for_viewer(viewer).SerializeToString(), (ev, viewer)
    assert observations > 100
    assert {"card_played", "trick_won"} <= kinds


def test_the_rare_messages_were_covered() -> None:
    """The rulesets above reach melds, robbing, face-down openings and exposed and hidden scores
    (else the byte comparison would not have seen them)."""
    seen: set[str] = set()
    for name, rules in RULESETS.items():
        spec = MatchSpec(ruleset=rules, seed=sum(map(ord, name)), hands=HANDS, bots=("b",) * rules.players)
        driver = MatchDriver(spec, record=False, events=True)
        rng = random.Random(name)
        events: oracle.HandEvents | None = None
        while not isinstance(step := driver.next(), MatchOver):
            if isinstance(step, HandStarted):
                events = oracle.HandEvents(rules, step.hand_index, step.state.talon_size)
            assert events is not None
            for ev in driver.take_events():
                seen.update(f"event {r.event.WhichOneof('kind')}" for r in events.feed(ev))
            if isinstance(step, DecisionRequest):
                state = driver.state
                assert state is not None
                obs = oracle.observation(state.observation(step.seat), step.hand_index)
                seen.update(f.name for f, _ in obs.ListFields())
                seen.update(f"trick play face_down={p.face_down}" for p in obs.current_trick)
                driver.decide(_choose(step, state, rng))
    assert {"melds", "robbery", "completed_tricks", "side_totals", "dissle_declarer_seat", "public_holdings"} <= seen
    assert {"trick play face_down=True", "trick play face_down=False", "rob_reserved_seat"} <= seen
    kinds = {f"event {f.name}" for f in gm.Event.DESCRIPTOR.oneofs_by_name["kind"].fields if f.name != "fault"}
    assert kinds <= seen, kinds - seen  # (faults are the table's, tested with it)


ids = st.text(max_size=40)
seconds = st.floats(min_value=-10, max_value=10**9, allow_nan=False)


@given(decision_id=ids, time_left=seconds, bank_left=seconds, legal=st.lists(st.sampled_from(range(165)), max_size=12))
def test_decision_requests_are_protobufs_own_bytes(
    decision_id: str, time_left: float, bank_left: float, legal: list[int]
) -> None:
    observation = gm.Observation(seat=1, hand=[oracle.card(3)], turn_seat=0)
    want = bs.DecisionRequest(
        decision_id=decision_id,
        legal_actions=[oracle.legal_action(a) for a in legal],
        observation=observation,
        time_left=oracle.duration(time_left),
        bank_left=oracle.duration(bank_left),
    )
    got = wire.decision_request(
        decision_id, wire.legal_actions(legal), observation.SerializeToString(), time_left, bank_left
    )
    assert got == want.SerializeToString()


@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_varints_of_int32_are_protobufs(n: int) -> None:
    assert wire.tag(cm.Card, "id") + wire.varint(n) == cm.Card(id=n).SerializeToString() or n == 0


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.binary(max_size=300))
def test_varints_of_int64_and_long_fields_are_protobufs(n: int, payload: bytes) -> None:
    from google.protobuf import duration_pb2

    if n:
        assert b"\x08" + wire.varint(n) == duration_pb2.Duration(seconds=n).SerializeToString()
    code = payload.decode("latin-1")
    assert wire.field(wire.tag(cm.Card, "code"), code.encode()) == cm.Card(code=code).SerializeToString() or not code


def test_a_field_type_the_encoder_does_not_write_fails_at_import() -> None:
    """wire.tag refuses what it cannot write (a packed repeated scalar), so a proto change that
    makes a field one fails when the server is imported, not on the wire."""
    with pytest.raises(ImportError, match="packed"):
        wire.tag(gm.HandEnd, "winner_sides")


def test_codec_observation_is_the_wire_bytes_parsed() -> None:
    rules: Ruleset = preset("default", 4)
    state = MatchDriver(MatchSpec(ruleset=rules, seed=5, hands=1, bots=("b",) * 4), record=False)
    step = state.next()
    assert isinstance(step, HandStarted)
    obs = step.state.observation(2)
    assert codec.observation(obs, 0) == oracle.observation(obs, 0)
