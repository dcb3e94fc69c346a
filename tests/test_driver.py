"""The match driver: the same match, record and events as stepping the engine by hand, and a clean early end."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gaigel import actions as A
from gaigel.cards import RANK_OF, Rank
from gaigel.events import Event, FiveSevens, HandTerminated
from gaigel.match import (
    Bot,
    DecisionRequest,
    HandEnded,
    HandStarted,
    MatchDriver,
    MatchOver,
    MatchScore,
    MatchSpec,
    MatchTermination,
    hand_setup,
    play_match,
)
from gaigel.record import RecordWriter
from gaigel.replay import replay
from gaigel.ruleset import Ruleset, preset
from gaigel.state import GaigelState, IllegalActionError, Termination


@dataclasses.dataclass(frozen=True)
class Match:
    players: int
    rules: str
    match_format: str
    seed: int
    hands: int
    rng_seed: int

    def spec(self) -> MatchSpec:
        rules = dataclasses.replace(preset(self.rules, self.players), match_format=self.match_format)
        hands = self.hands * rules.num_sides if self.match_format == "duplicate" else self.hands
        return MatchSpec(ruleset=rules, seed=self.seed, hands=hands, bots=tuple(f"bot{s}" for s in range(self.players)))


matches = st.builds(
    Match,
    players=st.sampled_from([2, 3, 4, 6]),
    rules=st.sampled_from(["default", "parlett"]),
    match_format=st.sampled_from(["fixed_hands", "duplicate", "putzen"]),
    seed=st.integers(0, 2**64 - 1),
    hands=st.integers(1, 3),
    rng_seed=st.integers(0, 2**32 - 1),
)
VERSIONS = ["1", "2", "3", "4", "5", "6"]


def answer(rng: random.Random, legal: list[int] | tuple[int, ...]) -> tuple[int, float, tuple[str, ...]]:
    """A random legal action, a made-up time used and, now and then, a flag."""
    flags = ("TIMEOUT_FALLBACK",) if rng.random() < 0.1 else ()
    return rng.choice(legal), round(rng.random(), 6), flags


def by_hand(spec: MatchSpec, rng: random.Random) -> tuple[dict[str, Any], list[Event]]:
    """The match record and every event, stepping the engine directly (the loop the driver replaces)."""
    writer = RecordWriter(spec, versions=VERSIONS[: spec.players])
    score = MatchScore(spec)
    events: list[Event] = []
    k = 0
    while not score.finished():
        d, dealer, forehand = hand_setup(spec, k)
        state = GaigelState(spec.ruleset, d, forehand, record_events=True)
        writer.begin_hand(k, dealer, forehand, d)
        while not state.is_terminal():
            seat = state.to_act
            action, seconds, flags = answer(rng, state.legal_actions())
            state.apply_checked(action)
            writer.action(seat, action, seconds, state.state_hash(), flags)
        outcome = state.outcome()
        assert outcome is not None and state.events is not None
        events += state.events
        score.add(outcome)
        writer.end_hand(outcome)
        k += 1
    return writer.finish(score, "completed"), events


def driven(spec: MatchSpec, rng: random.Random) -> tuple[dict[str, Any], list[Event], list[str]]:
    """The same through the driver, with the order of the steps it returned."""
    driver = MatchDriver(spec, versions=VERSIONS[: spec.players], events=True)
    events: list[Event] = []
    steps: list[str] = []
    while True:
        step = driver.next()
        steps.append(type(step).__name__)
        events += driver.take_events()
        if isinstance(step, DecisionRequest):
            driver.decide(*answer(rng, step.legal_actions))
            events += driver.take_events()
        elif isinstance(step, MatchOver):
            assert step.record is not None
            return step.record, events, steps


class TestSameAsByHand:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(matches)
    def test_record_and_events_match_a_hand_stepped_match(self, m: Match) -> None:
        """Driving a match gives the record and the event sequence of stepping its hands by hand."""
        spec = m.spec()
        expected_record, expected_events = by_hand(spec, random.Random(m.rng_seed))
        record, events, _ = driven(spec, random.Random(m.rng_seed))
        assert record == expected_record
        assert events == expected_events
        assert replay(record).ok

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(matches)
    def test_steps_come_in_order(self, m: Match) -> None:
        """Each hand is HandStarted, its decisions, HandEnded; then one MatchOver."""
        _, _, steps = driven(m.spec(), random.Random(m.rng_seed))
        hands = " ".join(steps).split(" MatchOver")[0]
        assert steps[-1] == "MatchOver" and steps.count("MatchOver") == 1
        for hand in hands.split("HandStarted ")[1:]:
            assert hand.strip().endswith("HandEnded")
            assert set(hand.split()) <= {"DecisionRequest", "HandEnded"}


def driver_at_decision(players: int = 4, hands: int = 2, decisions: int = 5) -> MatchDriver:
    """A driver of a default match in its first hand, *decisions* decisions in."""
    spec = MatchSpec(ruleset=preset("default", players), seed=7, hands=hands, bots=("first",) * players)
    driver = MatchDriver(spec, versions=["1"] * players, events=True)
    assert isinstance(driver.next(), HandStarted)
    for _ in range(decisions):
        step = driver.next()
        assert isinstance(step, DecisionRequest)
        driver.decide(step.legal_actions[0], 0.01)
    return driver


class TestDecisions:
    def test_next_repeats_the_open_decision(self) -> None:
        """Asking again before answering returns the same request."""
        driver = driver_at_decision()
        assert driver.next() is driver.next()

    def test_illegal_action_leaves_the_decision_open(self) -> None:
        """An illegal or non-integer answer raises, applies nothing and records nothing; a legal one then goes in."""
        driver = driver_at_decision()
        request = driver.next()
        assert isinstance(request, DecisionRequest) and driver.state is not None and driver.writer is not None
        before = driver.state.state_hash()
        illegal = next(a for a in range(A.NUM_ACTIONS) if a not in request.legal_actions)
        with pytest.raises(IllegalActionError, match=f"illegal action {illegal}"):
            driver.decide(illegal)
        with pytest.raises(IllegalActionError, match="integer id"):
            driver.decide(True)
        assert driver.state.state_hash() == before
        assert driver.next() is request
        assert len(driver.writer.data["hands"][0]["actions"]) == 5
        driver.decide(request.legal_actions[-1], 0.25, ("REJECTED_ANSWERS",))
        entry = driver.writer.data["hands"][0]["actions"][-1]
        assert (entry["action"], entry["ms"], entry["flags"]) == (
            request.legal_actions[-1],
            250.0,
            ["REJECTED_ANSWERS"],
        )
        assert driver.step == 6

    def test_decide_without_an_open_decision(self) -> None:
        """decide() before the request was asked for is a caller's bug: a RuntimeError."""
        spec = MatchSpec(ruleset=preset("default", 2), seed=1, hands=1, bots=("a", "b"))
        driver = MatchDriver(spec)
        with pytest.raises(RuntimeError, match="no decision is open"):
            driver.decide(0)

    def test_observation_is_the_seats_own(self) -> None:
        """The request's observation is the deciding seat's, of the current state."""
        driver = driver_at_decision()
        request = driver.next()
        assert isinstance(request, DecisionRequest) and driver.state is not None
        assert request.observation == driver.state.observation(request.seat)
        assert request.seat == driver.state.to_act and request.hand_index == 0

    def test_without_events_nothing_to_take(self) -> None:
        """A driver built without events=True has none to give."""
        spec = MatchSpec(ruleset=preset("default", 2), seed=1, hands=1, bots=("a", "b"))
        driver = MatchDriver(spec)
        driver.next()
        request = driver.next()
        assert isinstance(request, DecisionRequest)
        driver.decide(request.legal_actions[0])
        assert driver.take_events() == []


def test_a_hand_decided_at_the_deal() -> None:
    """Five Sevens dealt: the hand ends with no decision, and its deal-time events are there to take."""
    spec = MatchSpec(ruleset=preset("default", 6), seed=34, hands=1, bots=("a",) * 6)
    driver = MatchDriver(spec, events=True)
    started = driver.next()
    assert isinstance(started, HandStarted)
    holder = (started.forehand + 2) % 6  # seed 34, hand 0: the third hand from the forehand holds five Sevens
    assert sum(RANK_OF[c] == Rank.SEVEN for c in started.deal.hands[2]) == 5
    sevens, ended = driver.take_events()
    assert isinstance(sevens, FiveSevens) and sevens.seat == holder and len(sevens.sevens) == 5
    assert ended == HandTerminated(Termination.FIVE_SEVENS)
    step = driver.next()
    assert isinstance(step, HandEnded) and step.outcome.termination is Termination.FIVE_SEVENS
    over = driver.next()
    assert isinstance(over, MatchOver) and over.record is not None
    assert over.record["hands"][0]["actions"] == []
    assert over.record["hands"][0]["result"]["termination"] == "five_sevens"


class TestEarlyEnd:
    def test_forfeit_mid_hand_aborts_the_open_hand(self) -> None:
        """A forfeit in a hand records that hand as aborted, the forfeit sides and the others as winners."""
        driver = driver_at_decision(players=4, hands=3)
        over = driver.end(MatchTermination.FORFEIT, [1])
        assert over.aborted_hand == 0 and over.forfeit_sides == (1,)
        record = over.record
        assert record is not None
        last = record["hands"][-1]
        assert last["aborted"] is True and last["result"] is None and len(last["actions"]) == 5
        assert record["result"]["termination"] == "forfeit"
        assert record["result"]["forfeit_sides"] == [1]
        assert record["result"]["winners"] == [0]
        assert record["result"]["hands_played"] == 0
        assert replay(record).ok

    def test_the_end_is_final(self) -> None:
        """After the end next() keeps returning it, a second end changes nothing, decide() and fault() refuse."""
        driver = driver_at_decision()
        over = driver.end(MatchTermination.ABORTED)
        assert driver.next() is over
        assert driver.end(MatchTermination.CANCELLED) is over
        assert over.termination is MatchTermination.ABORTED
        with pytest.raises(RuntimeError):
            driver.decide(0)
        with pytest.raises(RuntimeError, match="over"):
            driver.fault(0, "TIMEOUT_FALLBACK", "too late")

    def test_cancel_between_hands_aborts_nothing(self) -> None:
        """Cancelled after a hand ended: every recorded hand keeps its result and counts."""
        spec = MatchSpec(ruleset=preset("default", 2), seed=3, hands=3, bots=("a", "b"))
        driver = MatchDriver(spec)
        while not isinstance(step := driver.next(), HandEnded):
            if isinstance(step, DecisionRequest):
                driver.decide(step.legal_actions[0])
        over = driver.end(MatchTermination.CANCELLED)
        assert over.aborted_hand is None and over.score.hands_played == 1
        assert over.record is not None
        assert [h.get("aborted") for h in over.record["hands"]] == [None]
        assert over.record["hands"][0]["result"] is not None
        assert over.record["result"]["termination"] == "cancelled"

    def test_a_finished_hand_not_yet_reported_still_counts(self) -> None:
        """Ended right after a hand's last action, before next() reported it: the hand is scored, not aborted."""
        spec = MatchSpec(ruleset=preset("default", 2), seed=3, hands=2, bots=("a", "b"))
        driver = MatchDriver(spec)
        driver.next()
        while driver.state is not None and not driver.state.is_terminal():
            request = driver.next()
            assert isinstance(request, DecisionRequest)
            driver.decide(request.legal_actions[0])
        over = driver.end(MatchTermination.ABORTED)
        assert over.aborted_hand is None and over.score.hands_played == 1
        assert over.record is not None and over.record["hands"][0]["result"] is not None

    @pytest.mark.parametrize(
        ("termination", "sides", "message"),
        [
            (MatchTermination.COMPLETED, (), "completed by playing"),
            (MatchTermination.FORFEIT, (), "names the sides"),
            (MatchTermination.CANCELLED, (0,), "names the sides"),
            (MatchTermination.FORFEIT, (2,), "sides 0..1"),
        ],
    )
    def test_bad_ends_are_refused(self, termination: MatchTermination, sides: tuple[int, ...], message: str) -> None:
        """end() refuses COMPLETED, a forfeit without sides, sides without a forfeit and unknown sides."""
        driver = driver_at_decision(players=2)
        with pytest.raises(ValueError, match=message):
            driver.end(termination, sides)
        assert driver.over is None


class TestFaults:
    def test_faults_carry_hand_and_step(self) -> None:
        """A fault is recorded at the current hand and step; between hands without a step."""
        spec = MatchSpec(ruleset=preset("default", 2), seed=3, hands=2, bots=("a", "b"))
        driver = MatchDriver(spec)
        driver.fault(0, "DISCONNECT", "before the match")
        driver.next()
        for _ in range(3):
            request = driver.next()
            assert isinstance(request, DecisionRequest)
            driver.decide(request.legal_actions[0])
        assert driver.hand_open
        driver.fault(1, "TIMEOUT_FALLBACK", "in hand 0")
        while not isinstance(driver.next(), HandEnded):
            request = driver.next()
            assert isinstance(request, DecisionRequest)
            driver.decide(request.legal_actions[0])
        assert not driver.hand_open
        driver.fault(0, "RESUMED", "between hands")
        assert driver.writer is not None
        faults = [(f["seat"], f["hand"], f["step"]) for f in driver.writer.data["faults"]]
        assert faults == [(0, None, None), (1, 0, 3), (0, 0, None)]


class IllegalBot(Bot):
    def decide(self, request: DecisionRequest) -> int:
        return 999


def test_play_match_refuses_an_illegal_in_process_bot() -> None:
    """play_match still turns an illegal answer of an in-process bot into a ValueError."""
    spec = MatchSpec(ruleset=Ruleset(players=2), seed=0, hands=1, bots=("x", "y"))
    with pytest.raises(ValueError, match="illegal action 999"):
        play_match(spec, [IllegalBot(), IllegalBot()])
