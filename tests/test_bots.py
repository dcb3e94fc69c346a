"""House bots: legal answers, observation-only decisions, and strength ordering."""

from __future__ import annotations

import functools
import random

import pytest

import gaigel.state
from gaigel.bots import HOUSE_BOTS, SearchBot, make_bot
from gaigel.deal import deal
from gaigel.determinize import determinize, forbidden_cards
from gaigel.match import DecisionRequest, MatchSpec, play_match
from gaigel.ruleset import preset
from gaigel.state import GaigelState


def request_for(state: GaigelState, hand_index: int = 0) -> DecisionRequest:
    seat = state.to_act
    return DecisionRequest(
        seat, hand_index, tuple(state.legal_actions()), functools.partial(state.observation, seat), state.rules
    )


class TestLegalAnswers:
    @pytest.mark.parametrize("name", sorted(set(HOUSE_BOTS) - {"search"}))
    @pytest.mark.parametrize("players", [2, 3, 4, 6])
    @pytest.mark.parametrize("rules", ["default", "parlett"])
    def test_every_answer_is_legal(self, name: str, players: int, rules: str) -> None:
        """Each house bot plays whole matches answering only legal actions (apply_checked would raise)."""
        spec = MatchSpec(ruleset=preset(rules, players), seed=17, hands=players * 2, bots=(name,) * players)
        score, _ = play_match(spec, [make_bot(name) for _ in range(players)], record=False)
        assert score.hands_played == spec.hands

    def test_search_plays_a_match(self) -> None:
        """The search bot (small budget) finishes a 4-player match with legal answers."""
        spec = MatchSpec(ruleset=preset("default", 4), seed=3, hands=1, bots=("search", "random") * 2)
        score, _ = play_match(spec, [SearchBot(samples=4), make_bot("random")] * 2, record=False)
        assert score.hands_played == 1


class TestObservationOnly:
    def test_search_ignores_hidden_cards(self) -> None:
        """Two real states with the same observation but different hidden cards get the same search decision."""
        rules = preset("default", 4)
        rng = random.Random(2)
        checked = 0
        for k in range(12):
            state = GaigelState(rules, deal(99, k, 4), forehand=k % 4)
            for _ in range(rng.randrange(4, 30)):
                if state.is_terminal():
                    break
                legal = state.legal_actions()
                state.apply(legal[rng.randrange(len(legal))])
            if state.is_terminal() or len(state.legal_actions()) < 2:
                continue
            seat = state.to_act
            other = determinize(state.observation(seat), rules, random.Random(k))
            assert other.observation(seat) == state.observation(seat)
            if [other.hands[s] for s in range(4) if s != seat] == [state.hands[s] for s in range(4) if s != seat]:
                continue  # the sample happened to equal the truth: no information in this case
            bot_a, bot_b = SearchBot(samples=6, max_seconds=60), SearchBot(samples=6, max_seconds=60)
            assert bot_a.decide(request_for(state, k)) == bot_b.decide(request_for(other, k))
            checked += 1
        assert checked >= 5


class TestDeterminization:
    @pytest.mark.parametrize("players", [2, 3, 4, 6])
    def test_samples_reproduce_the_observation(self, players: int) -> None:
        """A sampled full state shows the acting seat exactly its observation, and the same legal actions."""
        rules = preset("default", players)
        rng = random.Random(players)
        for k in range(30):
            state = GaigelState(rules, deal(5, k, players), forehand=k % players)
            while not state.is_terminal():
                seat = state.to_act
                obs = state.observation(seat)
                sample = determinize(obs, rules, rng)
                assert sample.observation(seat) == obs
                assert sample.legal_actions() == state.legal_actions()
                legal = state.legal_actions()
                state.apply(legal[rng.randrange(len(legal))])

    @pytest.mark.parametrize("players", [2, 4])
    def test_void_constraints_are_sound(self, players: int) -> None:
        """What the strict phase reveals never excludes a card a seat really holds."""
        rules = preset("default", players)
        rng = random.Random(11)
        constrained = 0
        for k in range(120):
            state = GaigelState(rules, deal(6, k, players), forehand=k % players)
            while not state.is_terminal():
                forbidden = forbidden_cards(state.observation(state.to_act), rules)
                constrained += sum(1 for f in forbidden if f)
                assert all(forbidden[s] & state.hands[s] == 0 for s in range(players))
                legal = state.legal_actions()
                state.apply(legal[rng.randrange(len(legal))])
        assert constrained > 0


def test_heuristic_beats_random() -> None:
    """Over 60 two-player hands (both seatings of each deal) the heuristic bot wins most hands."""
    rules = preset("default", 2).replace(match_format="duplicate")
    spec = MatchSpec(ruleset=rules, seed=2026, hands=60, bots=("heuristic", "random"))
    score, _ = play_match(spec, [make_bot("heuristic"), make_bot("random")], record=False)
    assert score.hands_won[0] > 2 * score.hands_won[1]


def test_clone_copies_every_field() -> None:
    """clone() copies every slot, and its lists are independent of the original's."""
    rules = preset("default", 4)
    state = GaigelState(rules, deal(1, 2, 4), forehand=1)
    rng = random.Random(0)
    for _ in range(20):
        legal = state.legal_actions()
        state.apply(legal[rng.randrange(len(legal))])
    copy = state.clone()
    for name in gaigel.state._SLOTS:  # the compiled class has no __slots__; this tuple is its source
        assert getattr(copy, name) == getattr(state, name), name
        if isinstance(getattr(state, name), list):
            assert getattr(copy, name) is not getattr(state, name), name
    assert copy.state_hash() == state.state_hash()
