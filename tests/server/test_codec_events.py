"""codec.HandEvents: the proto events built from the engine's typed events agree with the hand they describe."""

from __future__ import annotations

import dataclasses
import random

import pytest

from gaigel import actions as A
from gaigel.match import DecisionRequest, HandEnded, HandStarted, MatchDriver, MatchOver, MatchSpec
from gaigel.ruleset import Opening, Ruleset, preset
from gaigel.state import GaigelState, Termination
from gaigel_api.v1 import game_pb2 as gm
from gaigel_server import codec

FACE_DOWN = {Opening.ANDERE_ALTE, Opening.HOEHER_HAT, Opening.TRUMPF_HOEHER}

RULESETS = {
    "default 4": preset("default", 4),
    "parlett 3": preset("parlett", 3),
    "parlett 4": preset("parlett", 4),
    "explicit aus 2": dataclasses.replace(preset("default", 2), aus_mode="explicit", rob_second_seven_points=10),
    "trick-winner melds 6": dataclasses.replace(preset("default", 6), meld_timing="trick_winner"),
}


def choose(request: DecisionRequest, state: GaigelState, rng: random.Random) -> int:
    """Random, but calls Aus when at the target (so explicit-Aus hands end by a call)."""
    legal = request.legal_actions
    if A.AUS in legal and state.side_total(state.side_of[request.seat]) >= state.rules.target:
        return A.AUS
    if A.PASS in legal:
        return A.PASS
    return rng.choice(legal)


@dataclasses.dataclass
class Parsed:
    """A routed event with its full form parsed (the codec writes bytes)."""

    routed: codec.Routed
    event: gm.Event
    owner: int | None

    def for_viewer(self, viewer: int | None) -> gm.Event:
        return gm.Event.FromString(self.routed.for_viewer(viewer))


def parsed(routed: list[codec.Routed]) -> list[Parsed]:
    return [Parsed(r, gm.Event.FromString(r.event), r.owner) for r in routed]


def check_hand(rules: Ruleset, state: GaigelState, routed: list[Parsed], deciding: int | None) -> None:
    tricks = [r.event.trick_won for r in routed if r.event.HasField("trick_won")]
    assert [t.winner_seat for t in tricks] == [w for _, _, w in state.tricks]
    card_points = [0] * rules.num_sides
    for t in tricks:
        card_points[t.winner_side] += t.card_points
    if len(state.tricks) == rules.tricks_per_hand:
        card_points[rules.side_of(state.tricks[-1][2])] += rules.last_trick_bonus
    assert card_points == state.side_cards
    revealed = [r.event.trick_revealed.trick_index for r in routed if r.event.HasField("trick_revealed")]
    assert revealed == ([0] if state.opening in FACE_DOWN and state.tricks else [])
    melds = [r.event.meld for r in routed if r.event.HasField("meld")]
    assert [(m.seat, m.suit - 1, tuple(c.id for c in m.cards), m.points) for m in melds] == [
        (s, suit, cards, points) for s, suit, _, cards, points in state.melds
    ]
    robberies = [r.event.robbery for r in routed if r.event.HasField("robbery")]
    assert [(x.seat, x.seven.id, x.trump_card.id) for x in robberies] == (
        [(state.robbed_by, *state.rob_cards)] if state.robbed_by >= 0 else []
    )
    draws = [r for r in routed if r.event.HasField("card_drawn")]
    if draws:
        assert draws[-1].event.card_drawn.talon_size == state.talon_size
    plays = [r for r in routed if r.event.HasField("card_played")]
    assert len(plays) == sum(len(cards) for _, cards, _ in state.tricks) + len(state.trick_cards)
    for r in plays + draws:
        played = r.event.HasField("card_played")
        hidden = r.event.card_played.face_down if played else not r.event.card_drawn.face_up_card
        owner = r.event.card_played.seat if played else r.event.card_drawn.seat
        assert r.owner == (owner if hidden else None)
        other = r.for_viewer((owner + 1) % rules.players)
        shown = other.card_played if other.HasField("card_played") else other.card_drawn
        assert shown.HasField("card") != hidden
    outcome = state.outcome()
    assert outcome is not None
    if outcome.termination in (Termination.AUS_CALLED, Termination.UNTERGAIGELT):
        callers = [r.event.aus_answered.seat for r in routed if r.event.HasField("aus_answered")]
        assert deciding is not None and deciding in callers


@pytest.mark.parametrize("name", RULESETS)
def test_events_agree_with_the_hand(name: str) -> None:
    """Over many random hands, the routed events retell the tricks, melds, robbery, draws and who decided."""
    rules = RULESETS[name]
    spec = MatchSpec(ruleset=rules, seed=11, hands=40, bots=("r",) * rules.players)
    driver = MatchDriver(spec, record=False, events=True)
    rng = random.Random(5)
    hev: codec.HandEvents | None = None
    routed: list[Parsed] = []
    seen: set[str] = set()
    while not isinstance(step := driver.next(), MatchOver):
        if isinstance(step, HandStarted):
            hev, routed = codec.HandEvents(rules, step.hand_index, step.state.talon_size), []
        elif isinstance(step, DecisionRequest):
            assert driver.state is not None
            driver.decide(choose(step, driver.state, rng))
        assert hev is not None
        for ev in driver.take_events():
            routed += parsed(hev.feed(ev))
        if isinstance(step, HandEnded):
            check_hand(rules, step.state, routed, hev.deciding_seat)
            assert all(r.event.hand_index == step.hand_index for r in routed)
            seen.update(str(r.event.WhichOneof("kind")) for r in routed)
    assert {"card_played", "trick_won", "card_drawn"} <= seen, seen
    if name.startswith("explicit"):
        assert "aus_answered" in seen
    if name.startswith("trick-winner"):
        assert "meld_privilege_passed" in seen


def test_an_event_the_codec_does_not_know_fails_loudly() -> None:
    """A new engine event class without a codec branch is an error, not a silently dropped event."""
    hev = codec.HandEvents(preset("default", 2), 0, 10)
    with pytest.raises(AssertionError):
        hev.feed(gm.Event())  # type: ignore[arg-type]
