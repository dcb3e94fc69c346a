"""Properties of the rules engine over many random hands (hypothesis, derandomized).

Each property plays seeded deals (``gaigel.deal.deal``) for 2, 3, 4 and 6 players under the
``default`` and ``parlett`` presets with random legal actions drawn from a
hypothesis-provided seed. In explicit-Aus hands the random player usually calls Aus
exactly when its side has the target, so that hands run long instead of ending in an
early untergaigelt.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gaigel import actions as A
from gaigel.cards import ALL_CARDS, POINTS_OF, RANK_OF, SUIT_OF, Rank, card_code, cards_of
from gaigel.deal import _NATIVE_INTS as NATIVE_INTS
from gaigel.deal import SplitMix64, _shuffle_i64, _shuffle_int, deal, hand_stream, shuffled_deck
from gaigel.phase import Phase
from gaigel.ruleset import Opening, Ruleset, preset
from gaigel.state import GaigelState, IllegalActionError, Termination

PLAYER_COUNTS = (2, 3, 4, 6)
CONFIGS = [(name, n) for name in ("default", "parlett") for n in PLAYER_COUNTS]
CONFIG_IDS = [f"{name}-{n}p" for name, n in CONFIGS]
SPECIAL = {Termination.FIVE_SEVENS, Termination.DISSLE_WON, Termination.DISSLE_FAILED, Termination.REDEAL}
FACE_DOWN_OPENINGS = {Opening.ANDERE_ALTE, Opening.HOEHER_HAT, Opening.TRUMPF_HOEHER}

SEEDS = st.integers(min_value=0, max_value=(1 << 64) - 1)
RNG_SEEDS = st.integers(min_value=0, max_value=(1 << 32) - 1)


def fast(examples: int) -> settings:
    """Derandomized hypothesis settings without deadline for *examples* examples."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


def choose(state: GaigelState, rng: random.Random) -> int:
    """A random legal action; in an Aus window mostly the right answer."""
    acts = state.legal_actions()
    if state.phase == Phase.AUS_WINDOW and rng.random() < 0.97:
        at_target = state.side_total(state.side_of[state.to_act]) >= state.rules.target
        return A.AUS if at_target else A.PASS
    return rng.choice(acts)


def hands(ruleset: Ruleset, seed: int, count: int) -> Iterator[GaigelState]:
    """Fresh states for hands 0..count-1 of the match *seed*, the forehand rotating."""
    n = ruleset.players
    for h in range(count):
        yield GaigelState(ruleset, deal(seed, h, n), forehand=h % n)


def check_cards_conserved(state: GaigelState) -> None:
    """Each of the 48 cards lies in exactly one place: a hand, the talon, face up, the trick or a completed trick."""
    places = [*state.hands]
    places.append(sum(1 << c for c in state.talon[state.tpos :]))
    if state.face_up >= 0:
        places.append(1 << state.face_up)
    places.append(sum(1 << c for c in state.trick_cards))
    places.extend(sum(1 << c for c in cards) for _, cards, _ in state.tricks)
    assert sum(m.bit_count() for m in places) == 48, str(state)
    mask = 0
    for m in places:
        mask |= m
    assert mask == ALL_CARDS, str(state)


def trick_points(state: GaigelState) -> int:
    """Card points in the completed tricks."""
    return sum(POINTS_OF[c] for _, cards, _ in state.tricks for c in cards)


# --- an independent reading of the rules, used as an oracle -------------------------------------


def suit(c: int) -> int:
    """The suit of card *c*."""
    return SUIT_OF[c]


def beats(x: int, y: int, trump: int | None) -> bool:
    """RULES.md §5.1: does *x*, played later, beat the current winner *y*?"""
    if suit(x) == suit(y):
        return RANK_OF[x] < RANK_OF[y]  # strict: the identical copy loses
    return suit(x) == trump


def winner_index(cards: tuple[int, ...] | list[int], trump: int | None) -> int:
    """RULES.md §5.1: the index of the winning card."""
    w = 0
    for i in range(1, len(cards)):
        if beats(cards[i], cards[w], trump):
            w = i
    return w


def expected_trick_winner(cards: tuple[int, ...], trump: int, opening: Opening | None) -> int:
    """The winning index of a completed trick; *opening* is the opening of trick 1, else None (§4, §5.1)."""
    if opening == Opening.ANDERE_ALTE:
        return next((i for i in range(1, len(cards)) if cards[i] == cards[0] ^ 1), 0)
    if opening == Opening.GE_ELFEN:
        return 0
    if opening is not None:  # Höher hat, Trumpf höher, Auf Dissle: higher of the led suit, no trump power
        return winner_index(cards, None)
    return winner_index(cards, trump)


def expected_openings(hand: list[int], trump: int) -> set[Opening]:
    """RULES.md §4.7 with the default options."""
    non_trump = [c for c in hand if suit(c) != trump]
    options = set()
    if any(RANK_OF[c] == Rank.ACE for c in non_trump):
        options |= {Opening.ANDERE_ALTE, Opening.GE_ELFEN}
    if any(RANK_OF[c] != Rank.ACE for c in non_trump):
        options.add(Opening.HOEHER_HAT)
    if sum(RANK_OF[c] == Rank.SEVEN for c in hand) == 4 and non_trump:
        options.add(Opening.AUF_DISSLE)
    return options or {Opening.TRUMPF_HOEHER}


def expected_leads(hand: list[int], trump: int, opening: Opening) -> set[int]:
    """The cards the forehand may lead to trick 1 under *opening* (§4.2-§4.6, §17)."""
    non_trump = [c for c in hand if suit(c) != trump]
    if opening in (Opening.ANDERE_ALTE, Opening.GE_ELFEN):
        return {c for c in non_trump if RANK_OF[c] == Rank.ACE}
    if opening == Opening.HOEHER_HAT:
        return {c for c in non_trump if RANK_OF[c] != Rank.ACE}
    if opening == Opening.AUF_DISSLE:
        return set(non_trump)
    return set(hand)


def expected_strict(hand: list[int], trick: list[int], trump: int, mode: str) -> set[int]:
    """RULES.md §8.1 (head_trick) and §8.2 (parlett_literal), undertrumping compulsory."""
    if not trick:
        return set(hand)
    led = suit(trick[0])
    win = trick[winner_index(trick, trump)]
    same = [c for c in hand if suit(c) == led]
    if same:
        if mode == "head_trick" and suit(win) != led:
            return set(same)  # already trumped: any card of the led suit
        best = win if mode == "head_trick" else min((c for c in trick if suit(c) == led), key=lambda c: RANK_OF[c])
        return {c for c in same if RANK_OF[c] < RANK_OF[best]} or set(same)
    trumps = [c for c in hand if suit(c) == trump]
    if trumps:
        if suit(win) == trump:
            return {c for c in trumps if RANK_OF[c] < RANK_OF[win]} or set(trumps)
        return set(trumps)
    return set(hand)


class Referee:
    """Follows a hand action by action and checks it against the oracle above."""

    def __init__(self, state: GaigelState) -> None:
        self.rules = state.rules
        self.talon_rounds = 48 // state.n - 5
        self.opening: Opening | None = None
        self.declarer_side: int | None = None
        self.melded: set[tuple[int, int]] = set()
        self.meld_cards: set[int] = set()

    def marriages(self, seat: int, hand: list[int]) -> dict[int, tuple[list[int], bool]]:
        """Suits *seat* may meld now (§6.2): unused King and Ober in hand, suit not melded by him; with the double flag."""
        out = {}
        for s in range(4):
            if (seat, s) in self.melded:
                continue
            ko = [c for c in hand if suit(c) == s and RANK_OF[c] in (Rank.KING, Rank.OBER) and c not in self.meld_cards]
            kings = [c for c in ko if RANK_OF[c] == Rank.KING]
            if kings and len(kings) < len(ko):
                out[s] = (ko, len(ko) == 4)
        return out

    def before(self, state: GaigelState) -> None:
        """Checks the legal actions of a decision."""
        acts = state.legal_actions()
        seat = state.to_act
        hand = cards_of(state.hands[seat])
        if state.phase == Phase.OPENING:
            assert {A.opening_action(o) for o in expected_openings(hand, state.trump)} == set(acts)
            return
        if state.phase == Phase.MELD_WINDOW:
            expected = {A.NO_MELD}
            for s, (_, double) in self.marriages(seat, hand).items():
                expected.add(A.MELD_BASE + s)
                if double:
                    expected.add(A.DOUBLE_MELD_BASE + s)
            assert expected == set(acts) - {A.GIVE_MELD}
            return
        if state.phase != Phase.PLAY:
            return
        done = len(state.tricks)
        assert state.strict == (done >= self.talon_rounds)
        if not state.trick_cards:  # every hand is full in the talon phase
            sizes = {len(cards_of(h)) for h in state.hands}
            assert {5 if done < self.talon_rounds else 48 // state.n - done} == sizes
        plays = {a for a in acts if a < 48}
        if done == 0 and self.opening is not None:
            expected = expected_leads(hand, state.trump, self.opening) if not state.trick_cards else set(hand)
            assert expected == plays
            assert all(a < 48 for a in acts), "no meld and no rob in trick 1"
        elif done < self.talon_rounds:
            assert set(hand) == plays  # no compulsion while the talon lasts (§5.2)
        else:
            assert expected_strict(hand, state.trick_cards, state.trump, self.rules.strict_mode) == plays
            assert A.ROB not in acts
        side = state.side_of[seat]
        meld_plays = {a for a in acts if A.MELD_PLAY_BASE <= a < A.ROB}
        if (
            self.rules.meld_timing != "own_turn"
            or (done == 0 and self.opening is not None)
            or not state.side_tricks[side]
        ):
            assert not meld_plays
        else:
            expected = set()
            for ko, double in self.marriages(seat, hand).values():
                for c in set(ko) & plays:
                    expected.add(A.MELD_PLAY_BASE + c)
                    if double:
                        expected.add(A.DOUBLE_PLAY_BASE + c)
            assert expected == meld_plays
        if self.rules.rob_requires_side_trick and not state.side_tricks[side]:
            assert A.ROB not in acts
        if self.rules.meld_requires_side_trick and not state.side_tricks[side]:
            assert not [a for a in acts if A.MELD_PLAY_BASE <= a < A.ROB or A.MELD_BASE <= a < A.NO_MELD]
        if A.ROB in acts:
            assert RANK_OF[state.face_up] != Rank.SEVEN
            assert any(suit(c) == state.trump and RANK_OF[c] == Rank.SEVEN for c in hand)

    def after(self, state: GaigelState, seat: int, act: int, tricks_before: int) -> None:
        """Checks the effects of *act* by *seat*."""
        if A.OPENING_BASE <= act < A.OPENING_BASE + 5:
            self.opening = Opening(act - A.OPENING_BASE)
            if self.opening == Opening.AUF_DISSLE:
                self.declarer_side = state.side_of[seat]
        if A.MELD_PLAY_BASE <= act < A.ROB or A.MELD_BASE <= act < A.NO_MELD:
            key = (seat, state.melds[-1][1])
            assert key not in self.melded, "a player melded a suit twice"
            self.melded.add(key)
            _, meld_suit, double, _, points = state.melds[-1]
            value = (80 if double else 40) if meld_suit == state.trump else (40 if double else 20)
            assert value == points
            cards = set(state.melds[-1][3])
            assert not cards & self.meld_cards, "a card was used in two melds"
            if act < A.ROB:
                assert act % 48 in cards, "the played card belongs to the meld"
            self.meld_cards |= cards
        if len(state.tricks) > tricks_before:
            leader, cards, winner = state.tricks[-1]
            opening = self.opening if tricks_before == 0 else None
            assert (leader + expected_trick_winner(cards, state.trump, opening)) % state.n == winner
            for x in range(state.num_sides):
                won = sum(POINTS_OF[c] for _, cs, w in state.tricks if state.side_of[w] == x for c in cs)
                assert won == state.side_cards[x] - (
                    self.rules.last_trick_bonus
                    if state.side_of[state.tricks[-1][2]] == x and len(state.tricks) == self.rules.tricks_per_hand
                    else 0
                )
            if self.rules.aus_mode == "automatic" and not state.is_terminal():
                assert all(state.side_total(x) < self.rules.target for x in range(state.num_sides))

    def drawn(self, state: GaigelState, tpos_before: int, face_up_before: int) -> None:
        """Checks a draw round: the trick winner first, then in playing order; the last drawer takes the face-up card (§5.3)."""
        draws = list(state.talon[tpos_before : state.tpos])
        if face_up_before >= 0 and state.face_up < 0:
            draws.append(face_up_before)
        if not draws:
            return
        assert state.n == len(draws)
        winner = state.tricks[-1][2]
        for i, c in enumerate(draws):
            assert state.hands[(winner + i) % state.n] >> c & 1, f"card {card_code(c)} went to the wrong seat"

    def outcome(self, state: GaigelState, last_seat: int | None) -> None:
        """Checks winners and dashes (RULES.md §10.4-§10.6, §17); *last_seat* made the last decision."""
        out = state.outcome()
        assert out is not None
        rules, sides = self.rules, state.num_sides
        totals = [state.side_total(x) for x in range(sides)]
        dissle = self.declarer_side

        def trickless(x: int) -> bool:
            return totals[x] == 0 if rules.gigackel_criterion == "no_points" else state.side_tricks[x] == 0

        t = out.termination
        expected = [0] * sides
        if t in (Termination.FIVE_SEVENS, Termination.DISSLE_WON):
            expected = [0 if x in out.winners else 1 for x in range(sides)]
        elif t == Termination.DISSLE_FAILED:
            assert dissle is not None and set(out.winners) == set(range(sides)) - {dissle}
            expected[dissle] = 1
        elif t in (Termination.UEBERGAIGELT, Termination.UNTERGAIGELT):
            losers = set(range(sides)) - set(out.winners)
            if t == Termination.UEBERGAIGELT:
                assert losers == {x for x in range(sides) if totals[x] >= rules.target}
            else:
                assert last_seat is not None and losers == {state.side_of[last_seat]}
                assert totals[state.side_of[last_seat]] < rules.target
            expected = [2 if x in losers else 0 for x in range(sides)]
        elif t == Termination.CARDS_EXHAUSTED and not out.winners:
            assert rules.tie_break == "void" and totals.count(max(totals)) > 1
        elif t == Termination.REDEAL:
            pass
        else:
            assert len(out.winners) == 1
            (won,) = out.winners
            if t == Termination.CARDS_EXHAUSTED:
                assert totals[won] == max(totals) and totals.count(max(totals)) == 1
            else:
                assert totals[won] >= rules.target
            beaten = [x for x in range(sides) if x != won]
            if sides == 2:
                (x,) = beaten
                expected[x] = 2 if trickless(x) and x != dissle else 1
            elif dissle in beaten:
                expected[dissle] = 1
                for x in beaten:
                    if x != dissle and trickless(x):
                        expected[x] = 2
            elif any(trickless(x) for x in beaten):
                expected = [2 if x in beaten and trickless(x) else 0 for x in range(sides)]
            else:
                low = min(totals[x] for x in beaten)
                expected = [1 if x in beaten and totals[x] == low else 0 for x in range(sides)]
        assert tuple(expected) == out.dashes, (out, totals)


class TestPlayouts:
    """Random playouts keep the cards, the action lists and the outcomes consistent."""

    @pytest.mark.parametrize(("preset_name", "players"), CONFIGS, ids=CONFIG_IDS)
    @fast(120)
    @given(seed=SEEDS, rng_seed=RNG_SEEDS)
    def test_cards_conserved_and_actions_well_formed(
        self, preset_name: str, players: int, seed: int, rng_seed: int
    ) -> None:
        """At every step the 48 cards are conserved and the legal actions are sorted, distinct and non-empty."""
        ruleset = preset(preset_name, players)
        rng = random.Random(rng_seed)
        for state in hands(ruleset, seed, 8):
            check_cards_conserved(state)
            while not state.is_terminal():
                acts = state.legal_actions()
                assert acts, str(state)
                assert sorted(set(acts)) == acts
                assert acts[0] >= 0 and acts[-1] < A.NUM_ACTIONS
                assert state.current_seat() is not None
                state.apply(choose(state, rng))
                check_cards_conserved(state)
                assert sum(state.side_cards) == trick_points(state) + (
                    ruleset.last_trick_bonus if len(state.tricks) == ruleset.tricks_per_hand else 0
                )
                assert sum(state.side_tricks) == len(state.tricks)
            out = state.outcome()
            assert out is not None
            assert state.legal_actions() == [] and state.current_seat() is None
            if len(state.tricks) == ruleset.tricks_per_hand:
                assert trick_points(state) == 240
                assert all(h == 0 for h in state.hands) and not state.trick_cards
            if out.termination == Termination.CARDS_EXHAUSTED:
                assert len(state.tricks) == ruleset.tricks_per_hand
            assert all(d in (0, 1, 2) for d in out.dashes)
            assert not set(out.winners) & {x for x, d in enumerate(out.dashes) if d}

    @pytest.mark.parametrize(("preset_name", "players"), CONFIGS, ids=CONFIG_IDS)
    @fast(100)
    @given(seed=SEEDS, rng_seed=RNG_SEEDS)
    def test_engine_agrees_with_an_independent_reading_of_the_rules(
        self, preset_name: str, players: int, seed: int, rng_seed: int
    ) -> None:
        """Openings, legal plays, trick winners, points and dashes match RULES.md §4, §5, §8 and §10 at every step."""
        ruleset = preset(preset_name, players)
        rng = random.Random(rng_seed)
        for state in hands(ruleset, seed, 5):
            referee = Referee(state)
            seat = None
            while not state.is_terminal():
                referee.before(state)
                seat, before = state.to_act, len(state.tricks)
                tpos, face_up = state.tpos, state.face_up
                act = choose(state, rng)
                state.apply(act)
                referee.after(state, seat, act, before)
                referee.drawn(state, tpos, face_up)
            referee.outcome(state, seat)

    @pytest.mark.parametrize("players", (2, 4, 6))
    @fast(150)
    @given(seed=SEEDS, rng_seed=RNG_SEEDS)
    def test_two_sides_always_finish(self, players: int, seed: int, rng_seed: int) -> None:
        """A two-side automatic hand ends with a winner at 101 or more, or by a special termination (RULES.md §9)."""
        ruleset = preset("default", players)
        rng = random.Random(rng_seed)
        for state in hands(ruleset, seed, 6):
            while not state.is_terminal():
                state.apply(rng.choice(state.legal_actions()))
            out = state.outcome()
            assert out is not None
            if out.termination in SPECIAL:
                continue
            assert out.termination == Termination.TARGET_REACHED, out
            assert len(out.winners) == 1
            assert out.points[out.winners[0]] >= ruleset.target


class TestActionChecking:
    """apply_checked accepts exactly the legal actions."""

    @pytest.mark.parametrize(("preset_name", "players"), CONFIGS, ids=CONFIG_IDS)
    @fast(4)
    @given(seed=SEEDS, rng_seed=RNG_SEEDS)
    def test_legal_actions_apply_and_all_others_are_rejected(
        self, preset_name: str, players: int, seed: int, rng_seed: int
    ) -> None:
        """Every legal id applies with apply_checked; every other id in 0..164 raises IllegalActionError and changes nothing."""
        ruleset = preset(preset_name, players)
        rng = random.Random(rng_seed)
        for state in hands(ruleset, seed, 1):
            while True:
                acts = set(state.legal_actions())
                before = state.state_hash()
                for a in range(A.NUM_ACTIONS):
                    if a in acts:
                        checked, unchecked = state.clone(), state.clone()
                        checked.apply_checked(a)
                        unchecked.apply(a)
                        assert checked.state_hash() == unchecked.state_hash()
                    else:
                        with pytest.raises(IllegalActionError) as err:
                            state.apply_checked(a)
                        assert err.value.action == a and f"illegal action {a} (" in str(err.value)
                        assert A.action_label(a) in str(err.value) and err.value.reason
                        assert before == state.state_hash()
                for bad in (-1, A.NUM_ACTIONS):
                    with pytest.raises(IllegalActionError):
                        state.apply_checked(bad)
                if state.is_terminal():
                    break
                state.apply(choose(state, rng))


def reveal_public(
    state: GaigelState, seat: int, act: int, face_up_before: int, hand_before: int, public: set[int]
) -> None:
    """Adds to *public* what RULES.md §3.5 makes public when *seat* applies *act* (computed from the action)."""
    if state.face_up >= 0:
        public.add(state.face_up)  # the face-up card, or the Seven that replaced it
    if face_up_before >= 0 and state.face_up != face_up_before:
        public.add(face_up_before)  # robbed, or taken by the last drawer
    if act == A.ROB:
        trump_sevens = {c for c in cards_of(hand_before) if SUIT_OF[c] == state.trump and RANK_OF[c] == Rank.SEVEN}
        assert state.face_up in trump_sevens
    if A.MELD_PLAY_BASE <= act < A.ROB or A.MELD_BASE <= act < A.NO_MELD:
        _, suit, double, cards, _ = state.melds[-1]
        shown = set(cards)
        assert shown <= set(cards_of(hand_before)), "a meld shows a card the seat did not hold"
        assert all(SUIT_OF[c] == suit and RANK_OF[c] in (Rank.KING, Rank.OBER) for c in shown)
        assert len(shown) == (4 if double else 2)
        public |= shown
    if act == A.SHOW_SEVEN:
        public |= {c for c in cards_of(hand_before) if SUIT_OF[c] == state.trump and RANK_OF[c] == Rank.SEVEN}
    if act == A.FIVE_SEVENS:
        public |= {c for c in cards_of(hand_before) if RANK_OF[c] == Rank.SEVEN}
    for _, cards, _ in state.tricks:
        public.update(cards)


def check_observation(state: GaigelState, seat: int, public: set[int], face_down: bool) -> None:
    """The observation of *seat* holds its own hand and public cards only, and all of them truthfully."""
    obs = state.observation(seat)
    own = set(cards_of(state.hands[seat]))
    trick_seats = [(obs.trick_leader + i) % state.n for i in range(len(state.trick_cards))]
    own_trick = {c for s, c in zip(trick_seats, state.trick_cards, strict=True) if s == seat}
    table = set() if face_down else set(state.trick_cards)
    allowed = own | public | own_trick | table | {state.trump_card}
    hidden = set()
    for s in range(state.n):
        if s != seat:
            hidden |= set(cards_of(state.hands[s]))
    hidden |= set(state.talon[state.tpos :])
    if face_down:
        hidden |= set(state.trick_cards) - own_trick
    hidden -= public
    visible = obs.visible_cards()
    assert visible <= allowed, f"seat {seat} sees {sorted(map(card_code, visible - allowed))}"
    assert not visible & hidden
    text = json.dumps(obs.to_dict())
    assert not [card_code(c) for c in hidden if f'"{card_code(c)}"' in text]
    # What is shown is true.
    assert own == set(obs.hand)
    for s, held in enumerate(obs.public_holdings):
        assert set(held) <= set(cards_of(state.hands[s])) & (public | (own if s == seat else set()))
    assert len(obs.current_trick) == len(state.trick_cards)
    for (s, shown), real, s_real in zip(obs.current_trick, state.trick_cards, trick_seats, strict=True):
        assert s == s_real
        assert shown == (None if face_down and s != seat else real)
    assert (None if state.face_up < 0 else state.face_up) == obs.face_up_card
    assert len(state.talon) - state.tpos + (state.face_up >= 0) == obs.talon_size
    assert [(t.leader, t.cards, t.winner) for t in obs.tricks] == state.tricks


class TestObservation:
    """observation(seat) shows exactly what that seat may know (RULES.md §3.5, §17)."""

    @pytest.mark.parametrize(("preset_name", "players"), CONFIGS, ids=CONFIG_IDS)
    @fast(16)
    @given(seed=SEEDS, rng_seed=RNG_SEEDS)
    def test_observation_never_shows_a_hidden_card(
        self, preset_name: str, players: int, seed: int, rng_seed: int
    ) -> None:
        """No seat ever observes another seat's unrevealed card or an undrawn talon card."""
        ruleset = preset(preset_name, players)
        rng = random.Random(rng_seed)
        for state in hands(ruleset, seed, 2):
            public = {state.trump_card}
            opening: Opening | None = None
            while True:
                face_down = opening in FACE_DOWN_OPENINGS and len(state.tricks) == 0 and bool(state.trick_cards)
                for seat in range(players):
                    check_observation(state, seat, public, face_down)
                if state.is_terminal():
                    break
                seat = state.to_act
                act = choose(state, rng)
                if A.OPENING_BASE <= act < A.OPENING_BASE + 5:
                    opening = Opening(act - A.OPENING_BASE)
                face_up_before, hand_before = state.face_up, state.hands[seat]
                state.apply(act)
                reveal_public(state, seat, act, face_up_before, hand_before, public)


class TestStateHash:
    """state_hash() is a pure function of the deal, the forehand and the actions."""

    @pytest.mark.parametrize(("preset_name", "players"), CONFIGS, ids=CONFIG_IDS)
    @fast(25)
    @given(seed=SEEDS, rng_seed=RNG_SEEDS)
    def test_hash_depends_only_on_deal_forehand_and_actions(
        self, preset_name: str, players: int, seed: int, rng_seed: int
    ) -> None:
        """Replaying the actions in a fresh state gives the same hashes; clones hash alike and stay independent."""
        ruleset = preset(preset_name, players)
        rng = random.Random(rng_seed)
        for state in hands(ruleset, seed, 2):
            start = (state.deal, state.forehand)
            hashes = [state.state_hash()]
            actions: list[int] = []
            while not state.is_terminal():
                copy = state.clone()
                assert hashes[-1] == copy.state_hash()
                act = choose(state, rng)
                side_step = rng.choice(copy.legal_actions())
                copy.apply(side_step)  # moving the clone leaves the original alone
                assert hashes[-1] == state.state_hash()
                state.apply(act)
                actions.append(act)
                hashes.append(state.state_hash())
            assert actions == state.history
            replay = GaigelState(ruleset, start[0], forehand=start[1])
            assert hashes[0] == replay.state_hash()
            for act, expected in zip(actions, hashes[1:], strict=True):
                replay.apply_checked(act)
                assert expected == replay.state_hash()
            assert replay.outcome() == state.outcome()


DEAL_VECTORS = json.loads((Path(__file__).parent / "data" / "deals.json").read_text())


@pytest.mark.parametrize("vector", DEAL_VECTORS, ids=lambda v: f"s{v['seed']}-h{v['hand']}-p{v['players']}")
def test_deal_vectors(vector: dict[str, Any]) -> None:
    """Every vector of DEALS.md, in the build that runs (the compiled deal shuffles on i64)."""
    assert [card_code(c) for c in shuffled_deck(vector["seed"], vector["hand"])] == vector["deck"]
    d = deal(vector["seed"], vector["hand"], vector["players"])
    assert d.to_json() == {k: vector[k] for k in ("hands_from_forehand", "trump_card", "talon_top_first")}


@fast(300)
@given(seed=SEEDS, hand=st.integers(min_value=0, max_value=1 << 40))
def test_deal_shuffle_matches_splitmix64(seed: int, hand: int) -> None:
    """The shuffle in use equals the one on Python integers, and SplitMix64.below step by step."""
    rng = hand_stream(seed, hand)
    deck = list(range(48))
    for i in range(47, 0, -1):
        j = rng.below(i + 1)
        deck[i], deck[j] = deck[j], deck[i]
    assert shuffled_deck(seed, hand) == deck == _shuffle_int(hand_stream(seed, hand).state)


def _unmix(z: int) -> int:
    """The SplitMix64 state whose output is *z* (the finalizer is a bijection of 64-bit words)."""
    mask = (1 << 64) - 1

    def unshift(y: int, k: int) -> int:
        x = y
        for _ in range(64 // k + 1):
            x = y ^ (x >> k)
        return x

    z = unshift(z, 31)
    z = unshift((z * pow(0x94D049BB133111EB, -1, 1 << 64)) & mask, 27)
    z = unshift((z * pow(0xBF58476D1CE4E5B9, -1, 1 << 64)) & mask, 30)
    return (z - 0x9E3779B97F4A7C15) & mask


@pytest.mark.parametrize("first_output", [(1 << 64) - 1, (1 << 64) - 16, (1 << 64) - 17, 1 << 63, (1 << 63) - 1, 0])
def test_deal_shuffle_rejection_edges(first_output: int) -> None:
    """Around the rejection limit of the first draw (n = 48: the top 2**64 % 48 = 16 words are
    drawn again) and the sign bit, the shuffle in use equals the one on Python integers."""
    state = _unmix(first_output)
    rng = SplitMix64(state)
    assert rng.next() == first_output
    expected = _shuffle_int(state)
    if NATIVE_INTS:
        assert _shuffle_i64(state - (1 << 64) if state >= 1 << 63 else state) == expected
