"""The engine test cases of RULES.md §15, the §17 clarifications they touch, and the parlett preset.

Every position is an explicit deal plus checked actions (tests/helpers.py). Seats are
absolute; the forehand is seat 0 unless a test says otherwise. Card codes: suits E B H S =
Ei Bl He Sc, copies a/b = #1/#2.
"""

from __future__ import annotations

import random
from collections import Counter

from helpers import (
    action,
    arranged_state,
    close_windows,
    codes,
    hand_codes,
    legal,
    legal_cards,
    make_deal,
    new_state,
    play,
    play_trick,
    scripted_deal,
    trick_winner,
)

from gaigel import actions as A
from gaigel.cards import DECK_POINTS, POINTS_OF, RANK_OF, SUIT_OF, card_code, parse_card
from gaigel.deal import deal
from gaigel.phase import Phase
from gaigel.ruleset import Opening, Ruleset, preset
from gaigel.state import GaigelState, IllegalActionError, Termination


def rules(players: int, **options: object) -> Ruleset:
    """The default ruleset for *players*, with some options changed."""
    return preset("default", players).replace(**options)


def rejected(state: GaigelState, label: str) -> bool:
    """True if ``apply_checked`` rejects *label* with IllegalActionError and leaves the state unchanged."""
    before = state.state_hash()
    try:
        state.apply_checked(action(label))
    except IllegalActionError as err:
        assert str(action(label)) in str(err)
        return state.state_hash() == before
    return False


def play_seat_scripts(state: GaigelState, plays: list[str], tricks: int) -> list[int]:
    """Plays *tricks* tricks in which each seat plays the next card of its script ``plays[seat]``; returns the winners."""
    n = state.n
    leader = state.leader
    for k in range(tricks):
        assert not state.is_terminal()
        play(state, *[plays[(leader + i) % n].split()[k] for i in range(n)])
        leader = trick_winner(state)
    return [t[2] for t in state.tricks]


def strict_trick_start(n: int) -> int:
    """The number of the first strict trick: the talon runs out after trick 48/n - 5."""
    return 48 // n - 4


# --- RULES.md §2 ---------------------------------------------------------------------------


class TestDeck:
    """RULES.md §2: the double 24-card deck."""

    def test_case_01_deck_integrity(self) -> None:
        """A new deck has 48 cards, each of the 24 faces exactly twice, worth 240 points in all."""
        faces = Counter((SUIT_OF[c], RANK_OF[c]) for c in range(48))
        assert len(faces) == 24
        assert {2} == set(faces.values())
        assert len({card_code(c) for c in range(48)}) == 48
        assert 240 == sum(POINTS_OF) == DECK_POINTS
        assert [POINTS_OF[parse_card(f"H{r}a")] for r in "ATKOU7"] == [11, 10, 4, 3, 2, 0]
        d = deal(7, 0, 4)
        assert list(range(48)) == sorted([c for h in d.hands for c in h] + [d.trump_card, *d.talon])


# --- RULES.md §5.1 -------------------------------------------------------------------------


def after_plain_trick_1(players: int, hands: list[str], trump: str = "ETa", talon_order: str = "") -> GaigelState:
    """A state at trick 2 led by seat 0: trick 1 is a Höher hat that seat 0 wins with BOa.

    Every hand must start with the card it plays to trick 1 (seat 0: BOa; the others a
    card that does not beat it).
    """
    state = new_state(rules(players), make_deal(players, hands, trump, talon_order))
    play(state, "opening hoeher_hat", *[h.split()[0] for h in hands])
    assert trick_winner(state) == 0
    assert len(state.tricks) == 1
    return state


class TestTrickWinner:
    """RULES.md §5.1: highest trump, else highest card of the led suit, the earlier copy on ties."""

    def test_case_02_identical_cards_plain_suit(self) -> None:
        """In the talon phase, He-A#2 played after He-A#1 does not beat it."""
        state = after_plain_trick_1(2, ["BOa HAa SKa SOa SUa", "S7a HAb BKa BUa B7a"])
        play(state, "HAa", "HAb")
        assert trick_winner(state) == 0

    def test_case_03_identical_trumps(self) -> None:
        """With three players the first of two identical trump Kings wins the trick."""
        state = after_plain_trick_1(3, ["BOa HTa SKa SOa SUa", "S7a EKa BKa BUa B7a", "S7b EKb BKb BUb B7b"])
        play(state, "HTa", "EKa", "EKb")
        assert trick_winner(state) == 1

    def test_case_04_trump_and_off_suit(self) -> None:
        """A trump Seven beats an off-suit Ace; without the trump the leader wins."""
        state = after_plain_trick_1(3, ["BOa HUa SKa SOa SUa", "S7a SAa BKa BUa H7a", "S7b E7a B7a BUb B7b"])
        play(state, "HUa", "SAa")
        other = state.clone()
        play(state, "E7a")
        assert trick_winner(state) == 2
        play(other, "B7a")
        assert trick_winner(other) == 0


# --- RULES.md §5.2 and §8 ------------------------------------------------------------------

# The strict positions below are reached by arranged_state: an oldest-first filler plays the
# talon phase with the other cards, the hands given arrive in the last five draw rounds.
# "Preliminary" strict tricks bring the hands down to the holdings RULES.md §15 names.


def case_06_position(ruleset: Ruleset) -> GaigelState:
    """3 players, trump Ei, first strict trick, seat 0 to lead; seat 1 will hold HAa H7a ETa."""
    return arranged_state(
        ruleset,
        ["SAa BAa HKa SKa BKa", "S7a B7a HAa H7a ETa", "S7b B7b EUa EOa E7a"],
        "EUa",
        before_trick=strict_trick_start(3),
        leader=0,
        require=lambda s: s.side_total(0) <= 70,
    )


def case_08_position(ruleset: Ruleset) -> GaigelState:
    """3 players, trump Ei, first strict trick; after two tricks seat 2 holds HAa HUa EAa."""
    return arranged_state(
        ruleset,
        ["SAa BAa HTa SKa BKa", "S7a B7a E7a EUa EOa", "S7b B7b HAa HUa EAa"],
        "EAa",
        before_trick=strict_trick_start(3),
        leader=0,
        require=lambda s: s.side_total(0) <= 70,
    )


def case_08_to_the_test(state: GaigelState) -> GaigelState:
    """Plays the two preliminary tricks and He-10 led, Ei-7 from seat 1."""
    play_trick(state, "SAa", "S7a", "S7b")
    play_trick(state, "BAa", "B7a", "B7b")
    play(state, "HTa")
    assert {"E7a", "EUa", "EOa"} == legal_cards(state)  # void in He: must trump, any trump
    play(state, "E7a")
    assert {"HAa", "HUa", "EAa"} == hand_codes(state, 2)
    return state


class TestLegalPlay:
    """RULES.md §5.2 (no compulsion while the talon lasts) and §8 (strict play in the last five tricks)."""

    def test_case_05_no_compulsion_in_talon_phase(self) -> None:
        """In the talon phase a player holding the led suit may discard any card."""
        state = after_plain_trick_1(2, ["BOa HOa SKa SOa SUa", "S7a HKa S7b BUa B7a"], talon_order="HUa HUb")
        play(state, "HOa")
        assert {"HKa", "S7b", "BUa", "B7a", "HUb"} == hand_codes(state, 1)
        assert "S7b" in legal_cards(state)
        assert hand_codes(state, 1) == legal_cards(state)
        play(state, "S7b")
        assert trick_winner(state) == 0

    def test_case_06_strict_follow_and_beat(self) -> None:
        """He-K led to a holder of He-A, He-7 and Ei-10 (trump Ei): only He-A is legal."""
        state = case_06_position(rules(3))
        assert state.strict and state.talon_size == 0
        play(state, "SAa")
        assert {"S7a"} == legal_cards(state)
        play(state, "S7a")
        assert {"S7b"} == legal_cards(state)
        play(state, "S7b")
        play(state, "BAa", "B7a", "B7b")
        assert [trick_winner(state, -2), trick_winner(state, -1)] == [0, 0]
        play(state, "HKa")
        assert {"HAa", "H7a", "ETa"} == hand_codes(state, 1)
        assert {"HAa"} == legal_cards(state)
        assert rejected(state, "H7a") and rejected(state, "ETa")

    def test_case_07_strict_identical_copy_not_higher(self) -> None:
        """He-K#2 does not head He-K#1: both He cards are legal, and He-K#1 keeps the trick."""
        state = arranged_state(
            rules(3),
            ["EAa SAa BAa HKa BKa", "E7a S7a B7a HKb HOa", "EUb S7b B7b HUa H7a"],
            "EUb",
            before_trick=strict_trick_start(3),
            leader=0,
            require=lambda s: s.side_total(0) <= 60,
        )
        play(state, "EAa")
        assert {"E7a"} == legal_cards(state)
        play(state, "E7a", "EUb")
        play(state, "SAa", "S7a", "S7b")
        play(state, "BAa", "B7a", "B7b")
        play(state, "HKa")
        assert {"HKb", "HOa"} == hand_codes(state, 1)
        assert {"HKb", "HOa"} == legal_cards(state)
        play(state, "HKb")
        assert {"HUa", "H7a"} == legal_cards(state)
        play(state, "H7a")
        assert trick_winner(state) == 0

    def test_case_08_strict_trick_already_trumped(self) -> None:
        """Once the lead is trumped a follower must follow suit but need not beat; parlett_literal demands He-A."""
        state = case_08_to_the_test(case_08_position(rules(3)))
        assert {"HAa", "HUa"} == legal_cards(state)
        literal = case_08_to_the_test(case_08_position(rules(3, strict_mode="parlett_literal")))
        assert {"HAa"} == legal_cards(literal)
        assert rejected(literal, "HUa")

    def test_case_09_strict_void_must_trump(self) -> None:
        """A player void in the led suit must overtrump if able, else undertrump, else play anything."""
        # Holding Ei-K, Ei-U, Sc-A after seat 1 trumped with Ei-O: must overtrump with Ei-K.
        state = arranged_state(
            rules(3),
            ["HAa BAa HKa HOa SKa", "H7a B7a EOa S7a SUa", "H7b B7b EKa EUa SAa"],
            "EUa",
            before_trick=strict_trick_start(3),
            leader=0,
            require=lambda s: s.side_total(0) <= 70,
        )
        play(state, "HAa", "H7a", "H7b", "BAa", "B7a", "B7b", "HKa")
        assert {"EOa"} == legal_cards(state)
        play(state, "EOa")
        assert {"EKa", "EUa", "SAa"} == hand_codes(state, 2)
        assert {"EKa"} == legal_cards(state)
        # Holding Ei-U, Sc-A: cannot overtrump, must undertrump.
        state = arranged_state(
            rules(3),
            ["HAa BAa BTa HKa SKa", "H7a B7a BKa EOa S7a", "H7b B7b BUb EUa SAa"],
            "EUa",
            before_trick=strict_trick_start(3),
            leader=0,
            require=lambda s: s.side_total(0) <= 60,
        )
        play(state, "HAa", "H7a", "H7b", "BAa")
        assert {"B7a", "BKa"} == legal_cards(state)
        play(state, "B7a", "B7b", "BTa")
        assert {"BKa"} == legal_cards(state)
        play(state, "BKa")
        assert {"BUb"} == legal_cards(state)
        play(state, "BUb", "HKa", "EOa")
        assert {"EUa", "SAa"} == hand_codes(state, 2)
        assert {"EUa"} == legal_cards(state)
        # Holding Sc-A, Bl-7: no He, no trump, anything goes.
        state = arranged_state(
            rules(3),
            ["HAa EAa ETa HKa SKa", "H7a E7a EKb EOa S7a", "H7b EUb E7b SAa B7a"],
            "EUb",
            before_trick=strict_trick_start(3),
            leader=0,
            require=lambda s: s.side_total(0) <= 60,
        )
        play(state, "HAa", "H7a", "H7b", "EAa")
        assert {"E7a", "EKb", "EOa"} == legal_cards(state)
        play(state, "E7a")
        assert {"EUb", "E7b"} == legal_cards(state)
        play(state, "EUb", "ETa", "EKb", "E7b", "HKa")
        assert {"EOa"} == legal_cards(state)
        play(state, "EOa")
        assert {"SAa", "B7a"} == hand_codes(state, 2) == legal_cards(state)


# --- RULES.md §4 ---------------------------------------------------------------------------

FOUR_HANDS = ["HAa BAa SKa SOa SUa", "S7a BKa BOa BUb B7a", "HAb HTa SUb S7b B7b", "EAa HKa HKb H7a H7b"]


class TestOpenings:
    """RULES.md §4: the forehand's trick-1 declarations."""

    def test_case_10_andere_alte(self) -> None:
        """The other copy of the led ace wins; followers learn nothing about the led card until the trick is complete."""
        d = make_deal(4, FOUR_HANDS, "ETa")
        state = new_state(rules(4), d)
        play(state, "opening andere_alte")
        assert {"HAa", "BAa"} == legal_cards(state)  # non-trump aces only
        other_lead = state.clone()
        play(state, "HAa")
        play(other_lead, "BAa")
        for seat in (1, 2, 3):
            obs = state.observation(seat)
            assert obs.current_trick == ((0, None),)
            assert obs.opening == Opening.ANDERE_ALTE
            assert parse_card("HAa") not in obs.visible_cards()
            assert obs == other_lead.observation(seat)  # the led ace leaves no trace
        assert ((0, parse_card("HAa")),) == state.observation(0).current_trick
        play(state, "S7a", "HAb")
        assert ((0, None), (1, None), (2, parse_card("HAb"))) == state.observation(2).current_trick
        assert state.observation(3).current_trick == ((0, None), (1, None), (2, None))
        play(state, "EAa")
        assert trick_winner(state) == 2
        assert (0, tuple(parse_card(c) for c in ("HAa", "S7a", "HAb", "EAa")), 2) == state.tricks[0]
        assert all(parse_card("HAa") in state.observation(s).visible_cards() for s in range(4))
        # If nobody plays He-A#2 the forehand wins: here seat 2's He-A#2 stays in hand.
        nobody = new_state(rules(4), d)
        play(nobody, "opening andere_alte", "HAa", "S7a", "HTa", "EAa")
        assert trick_winner(nobody) == 0

    def test_case_11_opening_legality(self) -> None:
        """Each opening needs the cards it leads; an all-trump forehand is offered only Trumpf höher."""

        def openings(hand: str) -> set[str]:
            others = ["BUa BUb BOa BOb B7b", "SUb SOb S7b STa STb", "HUa HUb HOb H7b HTa"]
            state = new_state(rules(4), make_deal(4, [hand, *others], "ETa"))
            assert state.phase == Phase.OPENING
            return legal(state)

        # Only a trump ace: no Andere Alte and no Ge-Elfen; Höher hat with the non-aces.
        assert {"opening hoeher_hat"} == openings("EAa HKa BKa SKa HOa")
        # Aces and trumps only: no Höher hat.
        assert {"opening andere_alte", "opening ge_elfen"} == openings("HAa BAa EKa EOa E7a")
        # Four Sevens add Auf Dissle; without four Sevens it is never offered.
        assert {"opening hoeher_hat", "opening auf_dissle"} == openings("E7a E7b H7a S7a BTa")
        assert "opening auf_dissle" not in openings("HAa BAa SKa SOa SUa")
        # Five trumps: only Trumpf höher.
        assert {"opening trumpf_hoeher"} == openings("EAa EAb EKa EOa EUa")
        # Höher hat cannot lead an ace or a trump; Andere Alte cannot lead a non-ace or a trump ace.
        hands = ["HAa EAa EKa BKb H7b", "S7a BOa BUb B7a SUa", "HAb HTa SUb S7b B7b", "HKa HKb H7a BAb SAa"]
        state = new_state(rules(4), make_deal(4, hands, "ETa"))
        assert {"opening andere_alte", "opening ge_elfen", "opening hoeher_hat"} == legal(state)
        assert rejected(state, "opening auf_dissle")
        probe = state.clone()
        play(state, "opening hoeher_hat")
        assert {"BKb", "H7b"} == legal_cards(state)
        assert rejected(state, "HAa") and rejected(state, "EKa")
        play(probe, "opening andere_alte")
        assert {"HAa"} == legal_cards(probe)
        assert rejected(probe, "EAa") and rejected(probe, "BKb")

    def test_case_12_ge_elfen(self) -> None:
        """Under Ge-Elfen the forehand wins whatever the others play, here 11 + 11 + 11 + 10 = 43 points."""
        hands = ["HAa BAa SKa SOa SUa", "HAb BKa BOa BUb B7a", "EAa SAa SUb S7b B7b", "HTa HKa HKb H7a H7b"]
        state = new_state(rules(4), make_deal(4, hands, "ETa"))
        play(state, "opening ge_elfen", "HAa")
        assert ((0, parse_card("HAa")),) == state.observation(1).current_trick  # face up
        play(state, "HAb", "EAa", "HTa")
        assert trick_winner(state) == 0
        assert state.side_total(0) == 43
        assert state.side_total(1) == 0

    def test_case_13_hoeher_hat(self) -> None:
        """The highest card of the led suit wins (earlier copy on ties, trumps powerless), else the forehand."""
        hands = ["HOa BAa SKa SOa SUa", "HKa S7a BOa BUb B7a", "EAa SAa SUb S7b B7b", "HKb H7a HTa BKa H7b"]
        d = make_deal(4, hands, "ETa")
        state = new_state(rules(4), d)
        play(state, "opening hoeher_hat")
        assert {"HOa", "SKa", "SOa", "SUa"} == legal_cards(state)
        play(state, "HOa")
        assert state.observation(1).current_trick == ((0, None),)  # face down
        play(state, "HKa", "EAa", "HKb")
        assert trick_winner(state) == 1
        state = new_state(rules(4), d)
        play(state, "opening hoeher_hat", "HOa", "S7a", "EAa", "H7a")
        assert trick_winner(state) == 0


# --- RULES.md §6 ---------------------------------------------------------------------------


class TestMelding:
    """RULES.md §6: marriages need a side trick, one card of the pair is played, values 20/40/40/80."""

    def test_case_14_no_meld_or_rob_in_trick_1(self) -> None:
        """Nobody may meld or rob in trick 1, nor later while his side has no trick."""
        hands = ["BOa HAa SKa SOa E7b", "S7a E7a HKa HOa B7a"]
        state = new_state(rules(2), make_deal(2, hands, "ETa", "BUa BUb"))
        play(state, "opening hoeher_hat", "BOa")
        assert {f"play {c}" for c in hand_codes(state, 1)} == legal(state)  # plain plays only
        assert rejected(state, "rob")
        assert rejected(state, "play HKa +marriage")
        assert rejected(state, "play HOa +marriage")
        play(state, "S7a")
        assert trick_winner(state) == 0
        # Seat 0's side now has a trick: it may rob and meld.
        assert {"rob", "play SKa +marriage", "play SOa +marriage"} <= legal(state)
        play(state, "HAa")
        assert not {"rob", "play HKa +marriage", "play HOa +marriage"} & legal(state)
        assert rejected(state, "rob")
        assert rejected(state, "play HKa +marriage")

    def test_case_15_meld_needs_side_trick(self) -> None:
        """A player whose partner won a trick may meld while following; a player of a trickless side may not."""
        hands = ["HUa HAa SUb BUa B7b", "H7a BKa BOa B7a BUb", "H7b SKa SOa STa STb", "S7a S7b SAa SAb HTa"]
        state = new_state(rules(4), make_deal(4, hands, "ETa"))
        play(state, "opening hoeher_hat", "HUa", "H7a", "H7b", "S7a")
        assert trick_winner(state) == 0
        assert state.side_total(0) == 2
        play(state, "HAa")
        assert rejected(state, "play BOa +marriage")
        play(state, "B7a")
        assert "play SOa +marriage" in legal(state)
        play(state, "play SOa +marriage")
        assert state.side_total(0) == 22
        assert (2, 3, False, (parse_card("SKa"), parse_card("SOa")), 20) == state.melds[-1]
        assert parse_card("SKa") in state.observation(1).public_holdings[2]  # the unplayed card is shown

    def test_case_16_meld_values_and_restrictions(self) -> None:
        """Trump marriage 40, double 40/80, a melded card must be played, and each player melds a suit once."""

        def after_trick_1(hand0: str, players: int = 2, partner: str = "") -> GaigelState:
            hands = [f"BOa {hand0}", "S7a B7a B7b BUb SUa"]
            if players == 4:
                hands += [f"S7b {partner}", "H7a H7b E7a E7b BUa"]
            state = new_state(rules(players), make_deal(players, hands, "EAa", "BAa BAb"))
            play(state, "opening hoeher_hat", *[h.split()[0] for h in hands])
            assert trick_winner(state) == 0
            return state

        base = 3  # trick 1: BOa + S7a (+ S7b + H7a)
        state = after_trick_1("EKa EOa SUb STa")
        play(state, "play EKa +marriage")
        assert base + 40 == state.side_total(0)
        state = after_trick_1("HKa HKb HOa HOb")
        assert {"play HKa +marriage", "play HKa +double", "play HOb +double"} <= legal(state)
        assert rejected(state, "play BAa +marriage")  # not a King or Ober
        assert rejected(state, "meld H")  # no meld without playing a card of it
        assert rejected(state, "meld double H")
        play(state, "play HKa +double")
        assert base + 40 == state.side_total(0)
        assert len(state.melds[-1][3]) == 4
        assert {"HKb", "HOa", "HOb"} == codes(state.observation(1).public_holdings[0])
        state = after_trick_1("EKa EKb EOa EOb")
        play(state, "play EOa +double")
        assert base + 80 == state.side_total(0)
        # After a single marriage the suit is closed for that player, even with the other pair in hand.
        state = after_trick_1("HKa HKb HOa HOb")
        play(state, "play HKa +marriage")
        assert base + 20 == state.side_total(0)
        play(state, "SUa")
        assert trick_winner(state) == 0
        assert not any(a >= 48 and a < 144 for a in state.legal_actions())
        assert rejected(state, "play HKb +marriage") and rejected(state, "play HOb +marriage")
        assert rejected(state, "play HKb +double")
        # ... but his partner may still meld that suit with his own pair.
        state = after_trick_1("HKa HOa SUb STa", players=4, partner="HKb HOb SAa SAb")
        play(state, "play HKa +marriage", "B7a", "play HOb +marriage")
        assert base + 40 == state.side_total(0)
        # A Ober without its King cannot be melded.
        state = after_trick_1("HOa HOb SUb STa")
        assert rejected(state, "play HOa +marriage")


# --- RULES.md §7 and §5.3 ------------------------------------------------------------------


def strict_meld_position() -> GaigelState:
    """3 players, trump Ei, first strict trick, seat 0 (holding BK BO E7) to lead, every side with a trick."""
    return arranged_state(
        rules(3),
        ["SAa BKa BOa E7a HUa", "S7a HKa HOa B7a B7b", "S7b EUa E7b BUa BUb"],
        "EUa",
        before_trick=strict_trick_start(3),
        leader=0,
        require=lambda s: all(s.side_tricks),
    )


class TestRobbingAndDrawing:
    """RULES.md §7 (robbing the trump card) and §5.3 (drawing, the last drawer takes the face-up card)."""

    def test_case_17_robbing(self) -> None:
        """A trump-Seven holder whose side has a trick robs once; trickless sides, a second rob and an empty talon are refused."""
        hands = ["BOa HAa E7a SKa SUa", "S7a E7b HKa B7a BUa"]
        state = new_state(rules(2), make_deal(2, hands, "ETa", "H7a SAa H7b SAb HUb HOb"))
        play(state, "opening hoeher_hat", "BOa")
        assert rejected(state, "rob")  # trick 1
        play(state, "S7a")
        assert "rob" in legal(state)
        play(state, "rob")
        assert "ETa" in hand_codes(state, 0) and "E7a" not in hand_codes(state, 0)
        assert parse_card("E7a") == state.face_up
        obs = state.observation(1)
        assert parse_card("E7a") == obs.face_up_card
        assert (0, (parse_card("E7a"), parse_card("ETa"))) == (obs.robbed_by, obs.robbed_cards)
        assert parse_card("ETa") in obs.public_holdings[0]
        assert rejected(state, "rob")  # after a robbery the face-up card is a Seven
        play(state, "HAa")
        assert rejected(state, "rob")  # seat 1 has no trick
        play(state, "B7a", "SUa", "SAa")  # seat 1 wins trick 3
        assert trick_winner(state) == 1
        assert "E7b" in hand_codes(state, 1)
        assert rejected(state, "rob")  # the other Seven cannot rob the Seven
        # The talon is exhausted: no robbing in the strict phase.
        state = strict_meld_position()
        assert "E7a" in hand_codes(state, 0) and state.side_tricks[0] > 0
        assert rejected(state, "rob")

    def test_case_18_last_talon_card(self) -> None:
        """After trick 7 won by seat 2 the draw order is 2, 3, 0, 1 and seat 1 takes the face-up card."""

        def before_trick_7() -> GaigelState:
            return arranged_state(
                rules(4),
                ["E7a H7a SAa SKa BAa", "HOa B7a B7b BUa EAa", "HAa SUa HKa HTa EKa", "S7a S7b STb BTa ETb"],
                "ETa",
                before_trick=7,
                leader=0,
                talon_rest="BKa BKb BOa",
                require=lambda s: s.side_total(0) <= 80,
            )

        state = before_trick_7()
        assert len(state.tricks) == 6 and state.talon_size == 4
        play(state, "rob", "H7a", "HOa", "HAa", "S7a")  # robbing in the last talon trick (§17)
        assert trick_winner(state) == 2
        assert not state.is_terminal()
        assert {"ETa", "SAa", "SKa", "BAa", "BOa"} == hand_codes(state, 0)
        assert {"B7a", "B7b", "BUa", "EAa", "E7a"} == hand_codes(state, 1)
        assert {"SUa", "HKa", "HTa", "EKa", "BKa"} == hand_codes(state, 2)
        assert {"S7b", "STb", "BTa", "ETb", "BKb"} == hand_codes(state, 3)
        assert state.strict and state.talon_size == 0 and state.face_up == -1
        obs = state.observation(3)
        assert obs.face_up_card is None and obs.talon_size == 0
        assert parse_card("E7a") in obs.public_holdings[1]
        assert parse_card("ETa") in obs.public_holdings[0]
        # Tricks 8-12 are strict: follow, head the trick, trump.
        play(state, "SUa")
        assert {"STb"} == legal_cards(state)
        play(state, "STb")
        assert {"SAa"} == legal_cards(state)
        play(state, "SAa")
        assert {"EAa", "E7a"} == legal_cards(state)
        # Without a robbery seat 1 takes the original trump card.
        state = before_trick_7()
        play(state, "H7a", "HOa", "HAa", "S7a")
        assert {"B7a", "B7b", "BUa", "EAa", "ETa"} == hand_codes(state, 1)
        assert parse_card("ETa") in state.observation(0).public_holdings[1]


# --- RULES.md §9 and §10 -------------------------------------------------------------------

# Four-player scripts for the end of the hand (trump Ei). Side A = seats 0 and 2, side B =
# seats 1 and 3. Each trick lists the cards in playing order from its leader.
A_WINS_ALL = [  # seat 0 leads and wins every trick; totals after each trick: 22 48 70 89 100 103
    ["HAa", "H7a", "HAb", "H7b"],
    ["SAa", "S7b", "SAb", "SKa"],
    ["EAa", "E7a", "EAb", "E7b"],
    ["BAa", "BUa", "BKa", "BUb"],
    ["HKa", "HUa", "HUb", "SOa"],
    ["BOa", "B7a", "S7a", "B7b"],
]
B_WINS_A_ZERO_TRICK = [  # seat 1 wins trick 2 (four Sevens), side A: 42 42 64 90 103
    ["HAa", "HTa", "HAb", "HTb"],
    ["H7a", "E7a", "B7a", "S7a"],
    ["B7b", "BAa", "S7b", "BAb"],
    ["SAa", "SUa", "SAb", "SUb"],
    ["SKa", "HUa", "SOa", "HKb"],
]
B_WINS_A_ZERO_TRICK_WINNERS = [0, 1, 2, 2, 2]


def four_player_script(
    tricks: list[list[str]],
    winners: list[int],
    ruleset: Ruleset,
    trump: str = "ETa",
    extra: dict[int, str] | None = None,
) -> tuple[GaigelState, list[list[str]]]:
    """A fresh state whose deal lets every seat play its cards of *tricks*; returns it and the per-trick labels."""
    leaders = [0, *winners[:-1]]
    acquired: list[list[str]] = [[], [], [], []]
    labels = []
    for leader, trick in zip(leaders, tricks, strict=True):
        labels.append(trick)
        for i, c in enumerate(trick):
            acquired[(leader + i) % 4].append(c)
    for seat, cards in (extra or {}).items():
        acquired[seat] += cards.split()
    return new_state(ruleset, scripted_deal(4, acquired, trump, winners)), labels


class TestEndOfHand:
    """RULES.md §9-§10: Aus, Gigackel, the three-player losers, and the two-side guarantee."""

    def test_case_19_automatic_aus_and_gigackel(self) -> None:
        """Side A at 103 after trick 6 ends the hand before the draw; a trickless B gets a Gigackel, otherwise one dash."""
        state, tricks = four_player_script(A_WINS_ALL, [0] * 6, rules(4))
        play(state, "opening ge_elfen")
        for k, trick in enumerate(tricks):
            assert not state.is_terminal()
            play(state, *trick)
            assert trick_winner(state) == 0
            assert [22, 48, 70, 89, 100, 103][k] == state.side_total(0)
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.TARGET_REACHED, (0,), (0, 2))
        assert (out.points, out.tricks) == ((103, 0), (6, 0))
        assert [len(state.hand(s)) for s in range(4)] == [4, 4, 4, 4]  # no draw after trick 6
        assert state.tpos == 20
        # B holding one trick worth 0 points loses a single dash.
        state, tricks = four_player_script(B_WINS_A_ZERO_TRICK, B_WINS_A_ZERO_TRICK_WINNERS, rules(4))
        play(state, "opening ge_elfen")
        for trick in tricks:
            play(state, *trick)
        assert [t[2] for t in state.tricks] == B_WINS_A_ZERO_TRICK_WINNERS
        assert sum(POINTS_OF[c] for c in state.tricks[1][1]) == 0
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.TARGET_REACHED, (0,), (0, 1))
        assert (out.points, out.tricks) == ((103, 0), (4, 1))

    def test_case_20_meld_crossing_mid_trick(self) -> None:
        """A meld taking side A from 85 to 125 mid-trick ends the hand after the trick, which B wins: B loses single."""
        tricks = [
            ["HAa", "H7a", "HAb", "H7b"],
            ["SAa", "S7a", "SAb", "S7b"],
            ["BAa", "B7a", "BAb", "B7b"],
            ["HTa", "HUa", "HKa", "HOa"],
            ["SKa", "SUa", "EKa", "ETa"],
        ]
        state, labels = four_player_script(tricks, [0, 0, 0, 0, 3], rules(4), trump="EUa", extra={2: "EOa"})
        play(state, "opening ge_elfen")
        for trick in labels[:4]:
            play(state, *trick)
        assert (state.side_total(0), state.side_total(1)) == (85, 0)
        play(state, "SKa", "SUa", "play EKa +marriage")
        assert state.side_total(0) == 125
        assert not state.is_terminal() and state.current_seat() == 3
        play(state, "ETa")
        assert trick_winner(state) == 3
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.TARGET_REACHED, (0,), (0, 1))
        assert (out.points, out.tricks) == ((125, 20), (4, 1))

    def test_case_21_explicit_aus_uebergaigelt_untergaigelt(self) -> None:
        """Explicit mode: passing the window at 104 and calling Aus at 99 both cost a Gigackel; a right Aus wins."""
        explicit = rules(4, aus_mode="explicit")
        at_104 = [*A_WINS_ALL[:5], ["BKb", "B7a", "S7a", "B7b"]]

        def play_to_window(tricks: list[list[str]]) -> GaigelState:
            state, labels = four_player_script(tricks, [0] * len(tricks), explicit)
            play(state, "opening ge_elfen")
            for k, trick in enumerate(labels):
                if k:
                    assert state.phase == Phase.AUS_WINDOW
                    assert {"aus", "pass"} == legal(state)
                    play(state, "pass", "pass", "pass", "pass")
                play(state, *trick)
            assert state.phase == Phase.AUS_WINDOW and state.current_seat() == 0
            return state

        state = play_to_window(at_104)
        assert state.side_total(0) == 104
        probe = state.clone()
        play(state, "pass", "pass", "pass", "pass")
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.UEBERGAIGELT, (1,), (2, 0))
        # Calling Aus in the window wins; B without a trick gets a Gigackel. A partner's Aus counts too.
        play(probe, "pass", "pass", "aus")
        out = probe.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.AUS_CALLED, (0,), (0, 2))
        # Untergaigelt: Aus at 99.
        at_99 = [*A_WINS_ALL[:4], ["HKa", "HUa", "HUb", "SUb"]]
        state = play_to_window(at_99)
        assert state.side_total(0) == 99
        play(state, "aus")
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.UNTERGAIGELT, (1,), (2, 0))

    def test_case_22_three_players(self) -> None:
        """Three players: at the end of the cards the lowest gets one dash; after an Aus a trickless player gets a Gigackel."""
        # (a) A complete hand (found by a seeded search) ending 95 / 60 / 85 with nobody at 101.
        d = make_deal(
            3,
            ["EAb HUb HKa HTa EAa", "EKb BUa HOa SKa SOb", "BOb B7b EOb H7b S7b"],
            "BTb",
            "BOa EUa SAb EOa SAa ETa HAa BAa BKb SOa HOb E7a EKa HAb STa HKb BUb STb BKa SUa SUb S7a HUa EUb H7a BTa "
            "ETb HTb SKb E7b BAb B7a",
        )
        state = new_state(rules(3), d)
        moves = (
            "EAa EKb EOb HUb EUa BOb EOa HTa BUa ETa BAa EAb SAb SAa SKa S7b HKa HAa EKa BOa E7a BKa SUa SOa BUb HOa "
            "SUb H7a BTa H7b HTb SKb S7a BAb B7b BTb STb B7a BKb HAb HUa HKb HOb STa ETb E7b SOb EUb"
        )
        play(state, "opening ge_elfen", *moves.split())
        out = state.outcome()
        assert out is not None
        assert len(state.tricks) == 16
        assert sum(POINTS_OF[c] for t in state.tricks for c in t[1]) == 240
        assert (out.termination, out.winners, out.dashes) == (Termination.CARDS_EXHAUSTED, (0,), (0, 1, 0))
        assert out.points == (95, 60, 85)
        # (b) Seat 0 reaches 101 in trick 9; seat 1 has tricks and 70 points, seat 2 has none.
        plays = [
            "HAa SAa BAa H7a B7b S7a HKb HOa EAb",
            "HTa STa B7a HTb BTa STb EAa ETa BTb",
            "HAb SAb BAb HKa BKa SKa E7a E7b BUa",
        ]
        winners = [0, 0, 0, 1, 1, 1, 1, 1, 0]
        state = new_state(rules(3), scripted_deal(3, plays, "EKa", winners))
        play(state, "opening ge_elfen")
        play_seat_scripts(state, plays, 9)
        assert winners == [t[2] for t in state.tricks]
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.TARGET_REACHED, (0,), (0, 0, 2))
        assert (out.points, out.tricks) == ((109, 70, 0), (4, 5, 0))

    def test_case_23_two_sides_always_finish(self) -> None:
        """Random automatic-mode hands with two sides (2, 4, 6 players) never run out of cards below 101."""
        special = {Termination.FIVE_SEVENS, Termination.DISSLE_WON, Termination.DISSLE_FAILED, Termination.REDEAL}
        for players in (2, 4, 6):
            for seed in range(150):
                state = GaigelState(rules(players), deal(seed, 0, players), forehand=seed % players)
                rng = random.Random(seed)
                while not state.is_terminal():
                    state.apply(rng.choice(state.legal_actions()))
                out = state.outcome()
                assert out is not None
                assert out.termination != Termination.CARDS_EXHAUSTED
                if out.termination not in special:
                    assert out.termination == Termination.TARGET_REACHED
                    assert len(out.winners) == 1 and out.points[out.winners[0]] >= 101


# --- RULES.md §4.5 and §10.6 ---------------------------------------------------------------


def dissle_state(
    draws: str = "", opponent: str = "HAa BAa SAa STa EKa", script: list[int] | None = None
) -> GaigelState:
    """2 players, trump Ei: seat 0 holds four Sevens and He-U and declares Auf Dissle."""
    acquired = ["E7a B7a S7a H7a HUa " + draws, opponent]
    return new_state(rules(2), scripted_deal(2, acquired, "ETa", script or [1] * 19))


class TestSevens:
    """RULES.md §4.5 (Auf Dissle) and §10.6 (five Sevens)."""

    def test_case_24_auf_dissle(self) -> None:
        """The declarer loses on winning a trick or when the opponent reaches 101, and wins on drawing a fifth Seven."""
        # (a) He wins a later trick: single loss at once.
        state = dissle_state("SUa")
        assert "opening auf_dissle" in legal(state)
        play(state, "opening auf_dissle")
        assert {"B7a", "S7a", "H7a", "HUa"} == legal_cards(state)  # any non-trump card
        play(state, "HUa")
        assert ((0, parse_card("HUa")),) == state.observation(1).current_trick  # face up
        play(state, "HAa")
        assert trick_winner(state) == 1 and not state.is_terminal()
        play(state, "BAa", "E7a")
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.DISSLE_FAILED, (1,), (1, 0))
        # (b) After the draw he holds five Sevens: single win.
        state = dissle_state("E7b")
        play(state, "opening auf_dissle", "HUa", "HAa")
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.DISSLE_WON, (0,), (0, 1))
        assert len(state.tricks) == 1
        # (c) The opponent reaches 101 first: single loss although the declarer has no trick.
        state = dissle_state("BAa BTa BAb", opponent="HAa EKa EOa SAa STa")
        play(state, "opening auf_dissle", "HUa", "HAa")
        play(state, "play EKa +marriage", "BAa")
        play(state, "SAa", "BTa")
        assert state.side_total(1) == 89 and not state.is_terminal()
        play(state, "STa", "BAb")
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.TARGET_REACHED, (1,), (1, 0))
        assert (out.points, out.tricks) == ((0, 110), (0, 4))

    def test_case_25_five_sevens_dealt(self) -> None:
        """A player dealt five Sevens wins before the opening; every loser gets one dash."""
        sevens = "E7a E7b B7a H7a S7a"
        cases = [
            (2, 1, (1,), (1, 0)),
            (3, 2, (2,), (1, 1, 0)),
            (4, 3, (1,), (1, 0)),
            (6, 4, (0,), (0, 1)),
        ]
        fillers = [
            "HAa HAb HTa HTb HKa",
            "SAa SAb STa STb SKa",
            "BAa BAb BTa BTb BKa",
            "EAa EAb ETa ETb EKa",
            "HOa HOb HUa HUb SOa",
        ]
        for players, holder, winners, dashes in cases:
            others = iter(fillers)
            hands = [sevens if seat == holder else next(others) for seat in range(players)]
            state = new_state(rules(players), make_deal(players, hands, "EUa"))
            assert state.is_terminal() and state.current_seat() is None
            assert state.legal_actions() == [] and state.history == []
            out = state.outcome()
            assert out is not None
            assert (Termination.FIVE_SEVENS, winners, dashes) == (out.termination, out.winners, out.dashes)


# --- RULES.md §17 --------------------------------------------------------------------------


class TestClarifications:
    """RULES.md §17: points a careful implementation of the defaults still had to settle."""

    def test_dissle_declarer_winning_trick_1_fails(self) -> None:
        """An Auf Dissle declarer whose lead nobody beats wins trick 1 and fails at once."""
        state = dissle_state("SUa", opponent="BAa SAa STa EKa EOa")
        play(state, "opening auf_dissle", "HUa", "BAa")
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.DISSLE_FAILED, (1,), (1, 0))

    def test_trumpf_hoeher(self) -> None:
        """An all-trump forehand leads a trump face down; the highest trump wins, off-suit cards never do."""
        hands = ["EKa EOa EUa EUb E7a", "EAa SAa SUb S7b B7b", "HAa HTa HKa HKb H7b", "ETb BKa BAa BUb B7a"]
        state = new_state(rules(4), make_deal(4, hands, "ETa"))
        assert {"opening trumpf_hoeher"} == legal(state)
        play(state, "opening trumpf_hoeher")
        assert hand_codes(state, 0) == legal_cards(state)
        play(state, "EUa")
        assert state.observation(1).current_trick == ((0, None),)
        play(state, "SAa", "HAa", "ETb")
        assert trick_winner(state) == 3

    def test_meld_in_strict_phase_needs_a_legal_card(self) -> None:
        """In the strict phase the leader may meld, but a follower who must follow another suit may not."""
        state = strict_meld_position()
        assert {"play BKa +marriage", "play BOa +marriage"} <= legal(state)
        play(state, "SAa")
        assert {"S7a"} == legal_cards(state)
        assert not any(48 <= a < 144 for a in state.legal_actions())
        assert rejected(state, "play HKa +marriage")

    def test_rob_and_meld_in_one_turn(self) -> None:
        """The robbed trump card may be used in a marriage declared in the same turn."""
        hands = ["BOa HAa E7a EOa SUa", "S7a E7b HKa B7a BUa"]
        state = new_state(rules(2), make_deal(2, hands, "EKa", "H7a SAa"))
        play(state, "opening hoeher_hat", "BOa", "S7a", "rob")
        assert "play EKa +marriage" in legal(state)
        play(state, "play EKa +marriage")
        assert state.side_total(0) == 3 + 40

    def test_no_rob_when_the_trump_card_is_a_seven(self) -> None:
        """If the face-up trump card is itself a Seven there is nothing to rob."""
        hands = ["BOa HAa E7a EOa SUa", "S7a EKa HKa B7a BUa"]
        state = new_state(rules(2), make_deal(2, hands, "E7b", "H7a SAa"))
        play(state, "opening hoeher_hat", "BOa", "S7a")
        assert rejected(state, "rob")

    def test_first_crossing_side_wins(self) -> None:
        """When a meld and then the trick put both sides over 101, the side that crossed first (by the meld) wins."""
        tricks = [
            ["HAa", "H7a", "HAb", "H7b"],
            ["SAa", "S7a", "SAb", "S7b"],
            ["BAa", "B7a", "BAb", "B7b"],
            ["HUa", "HTa", "HKa", "HTb"],
            ["BTa", "BKa", "BTb", "BKb"],
            ["STa", "SKa", "STb", "SKb"],
            ["EAa", "EKa", "EAb", "EUa"],
        ]
        state, labels = four_player_script(tricks, [0, 0, 0, 1, 1, 1, 1], rules(4), extra={2: "EOa"})
        play(state, "opening ge_elfen")
        for trick in labels[:6]:
            play(state, *trick)
        assert (state.side_total(0), state.side_total(1)) == (66, 82)
        play(state, "EAa", "play EKa +marriage", "EAb", "EUa")
        assert trick_winner(state) == 1
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.TARGET_REACHED, (0,), (0, 1))
        assert out.points == (106, 110)

    def test_three_players_fewest_points_after_aus(self) -> None:
        """Three players, Aus with nobody trickless: only the player with the fewest points gets a dash."""
        plays = ["HAa SAa BAa H7a SUa BKa", "HTa STa BTa HKa S7a B7b", "HAb SAb BAb H7b SKa BOa"]
        winners = [0, 0, 0, 1, 2, 0]
        state = new_state(rules(3), scripted_deal(3, plays, "EKa", winners))
        play(state, "opening ge_elfen")
        assert winners == play_seat_scripts(state, plays, 6)
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.TARGET_REACHED, (0,), (0, 1, 0))
        assert (out.points, out.tricks) == ((103, 4, 6), (4, 1, 1))

    def test_three_players_ties_at_the_end_of_the_cards(self) -> None:
        """Three players out of cards: a tie for most points voids the hand; players tied for fewest each get a dash."""
        # Both hands were found by a seeded search; the moves are the complete hands.
        void = make_deal(
            3,
            ["BTb E7b BUa SKa HUb", "BAb EAb STb HOa EUa", "B7a BKa H7a BOa EKa"],
            "EOa",
            "BAa ETb SUb SKb BKb HKb HTb SAb HAa H7b EKb EOb STa HOb HTa HUa S7b HAb EUb E7a SAa SUa EAa BUb SOb SOa "
            "HKa S7a BOb BTa ETa B7b",
        )
        state = new_state(rules(3), void)
        moves = (
            "BTb EUa BOa E7b STb SUb SKb ETb H7a BAb SAb HAa HOa HKb SKa EKa BAa HTa STa HUb EAb H7b EKb EOb HUa SAa "
            "BKb B7a HOb HTb BKa SOa BUb SUa S7b EUb HKa ETa EAa BUa BTa E7a S7a B7b EOa HAb SOb BOb"
        )
        play(state, "opening hoeher_hat", *moves.split())
        out = state.outcome()
        assert out is not None
        assert (
            out.termination,
            out.winners,
            out.dashes,
            out.points,
        ) == (Termination.CARDS_EXHAUSTED, (), (0, 0, 0), (52, 94, 94))
        assert out.is_void
        low_tie = make_deal(
            3,
            ["S7b H7b EOa SOb EAa", "B7b BTb BTa BUb HUb", "HUa BAa S7a BKa STb"],
            "HAa",
            "HTb SOa SKb ETb STa SKa ETa BUa HTa EOb HKb BOa EKb SUb SAb BOb SAa HKa H7a EKa EAb EUa BAb HOb E7b HAb "
            "B7a BKb SUa HOa EUb E7a",
        )
        state = new_state(rules(3), low_tie)
        moves = (
            "EAa B7b BKa HTb BTa BAa EOa BUb S7a ETb STa HTa SKa SOb HUb BUa SKb S7b BTb STb ETa H7a EOb EAb BOa SUb "
            "H7b HOb HAb EKa BKb BAb E7b SAa SAb SOa EUb E7a EKb HAa HUa HKb EUa B7a HKa HOa BOb SUa"
        )
        play(state, "opening andere_alte", *moves.split())
        out = state.outcome()
        assert out is not None
        assert (
            out.termination,
            out.winners,
            out.dashes,
            out.points,
        ) == (Termination.CARDS_EXHAUSTED, (1,), (1, 0, 1), (70, 100, 70))

    def test_auf_dissle_lead_may_be_an_ace(self) -> None:
        """Auf Dissle needs four Sevens of any suits and may be led with any non-trump card, aces included."""
        state = new_state(rules(2), make_deal(2, ["E7a E7b H7a S7a HAa", "BAa SAa STa EKa EOa"], "ETa"))
        assert "opening auf_dissle" in legal(state)
        play(state, "opening auf_dissle")
        assert {"H7a", "S7a", "HAa"} == legal_cards(state)
        play(state, "HAa")
        trumped = state.clone()
        play(state, "SAa")
        assert trick_winner(state) == 0  # nobody beat the lead: the declarer wins trick 1 and fails
        play(trumped, "EKa")
        assert trick_winner(trumped) == 0  # a trump has no power in this trick
        for s in (state, trumped):
            out = s.outcome()
            assert out is not None and out.termination == Termination.DISSLE_FAILED

    def test_auf_dissle_with_three_players(self) -> None:
        """Three players: a failed Dissle makes both others winners, a won one gives both a dash, an Aus spares a player with a trick."""
        sevens = "E7a B7a S7a H7a HUa"
        # Failed in trick 1: nobody beats He-U.
        state = new_state(rules(3), scripted_deal(3, [sevens, "BAa SAa STa", "B7b S7b H7b"], "ETa"))
        play(state, "opening auf_dissle", "HUa", "BAa", "B7b")
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.DISSLE_FAILED, (1, 2), (1, 0, 0))
        # Won: the declarer draws his fifth Seven (seat 1 wins trick 1, so the draw order is 1, 2, 0).
        state = new_state(rules(3), scripted_deal(3, [sevens + " E7b", "HAa SAa STa", "B7b S7b H7b"], "ETa", [1]))
        play(state, "opening auf_dissle", "HUa", "HAa", "H7b")
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.DISSLE_WON, (0,), (0, 1, 1))
        # Seat 1 reaches 101: the declarer loses one dash, the trickless seat 2 a Gigackel.
        acquired = [sevens + " BTa BAb", "HAa EKa EOa SAa", "HTa BAa SKa"]
        state = new_state(rules(3), scripted_deal(3, acquired, "ETa", [1, 1, 1]))
        play(state, "opening auf_dissle", "HUa", "HAa", "HTa")
        play(state, "play EKa +marriage", "BAa", "BTa")
        assert state.side_total(1) == 88
        play(state, "SAa", "SKa", "BAb")
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.TARGET_REACHED, (1,), (1, 0, 2))
        assert (out.points, out.tricks) == ((0, 114, 0), (0, 3, 0))

    def test_dissle_fails_before_the_aus_check(self) -> None:
        """A declarer whose won trick also takes his side past 101 still fails: §10.7 step 1 precedes the Aus check."""
        acquired = [
            "E7a B7a S7a H7a HUa HAb BUa BUb SUa",  # four Sevens and He-U, then no fifth Seven
            "H7b STa BKa EKa HUb",
            "HAa SAa BAa EAa HKa",
            "HTa S7b BTa ETa HOa",
        ]
        state = new_state(rules(4), scripted_deal(4, acquired, "EUa", [2, 2, 2, 2]))
        play(state, "opening auf_dissle", "HUa", "H7b", "HAa", "HTa")
        play(state, "SAa", "S7b", "H7a", "STa")
        play(state, "BAa", "BTa", "S7a", "BKa")
        play(state, "EAa", "ETa", "E7a", "EKa")
        assert [t[2] for t in state.tricks] == [2, 2, 2, 2]
        assert state.side_total(0) == 94 and not state.is_terminal()
        play(state, "HKa", "HOa", "HAb", "HUb")
        assert trick_winner(state) == 0
        assert state.side_total(0) == 114
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.DISSLE_FAILED, (1,), (1, 0))

    def test_talon_size_counts_the_face_up_card(self) -> None:
        """The observed talon size includes the face-up card while it lies there."""
        for players in (2, 3, 4, 6):
            state = new_state(rules(players), deal(3, 0, players))
            assert 48 - 5 * players == state.observation(0).talon_size


# --- RULES.md §17, the variants decided 2026-12-02 ------------------------------------------------

ROB_HANDS = [  # trump Ei (ETa face up): seat 0 wins tricks 1-3 (Ge-Elfen, then Bl-K and Sc-K led)
    "HAa E7a BKa SKa STa",
    "H7a B7a S7a HOa BOa",
    "HKa B7b S7b HOb BOb",
    "HKb BUa SUa SOa HUb",
    "HTa BUb SUb SOb H7b",
    "HTb HUa HAb BAa BTa",
]
ROB_TRICKS = [
    ["HAa", "H7a", "HKa", "HKb", "HTa", "HTb"],
    ["BKa", "B7a", "B7b", "BUa", "BUb", "HUa"],
    ["SKa", "S7a", "S7b", "SUa", "SUb", "HAb"],
]


def second_seven_drawn(players: int, draw_round: int) -> GaigelState:
    """``rob.second_seven_points = 10`` at 4 or 6 players: seat 0 wins tricks 1 to *draw_round*,
    robbing with Ei-7a in trick 2, and seat 2 draws the other trump Seven in round *draw_round*."""
    draws = ["BAb", "BTb", "EAa"][:draw_round]
    draws[-1] = "E7b"
    acquired = [h.split()[:5] for h in ROB_HANDS[:players]]
    acquired[2] += draws
    deal_ = scripted_deal(players, acquired, "ETa", [0] * draw_round)
    state = new_state(rules(players, rob_second_seven_points=10), deal_)
    play(state, "opening ge_elfen", *ROB_TRICKS[0][:players])
    play(state, "rob", *ROB_TRICKS[1][:players])
    assert (state.robbed_by, card_code(state.face_up)) == (0, "E7a")
    for trick in ROB_TRICKS[2:draw_round]:
        play(state, *trick[:players])
    assert [t[2] for t in state.tricks] == [0] * draw_round and "E7b" in hand_codes(state, 2)
    return state


def lowest_card(state: GaigelState, avoid: str = "") -> str:
    """The lowest-numbered card the seat to act may play, other than *avoid*."""
    return min((card_code(a) for a in state.legal_actions() if a < 48 and card_code(a) != avoid), key=parse_card)


def play_until_seat(state: GaigelState, seat: int) -> None:
    """Plays the lowest legal card for every seat until it is *seat*'s turn."""
    while state.to_act != seat:
        play(state, lowest_card(state))


class TestVariantDecisions:
    """RULES.md §17, "Variants (§14), decided 2026-12-02": the four readings of the option table."""

    def test_no_enabled_opening_leads_any_card_and_never_redeals(self) -> None:
        """``opening.enabled`` leaving no option: any card is led face down, the highest of its suit wins, no redeal."""
        hands = ["BKa ETa H7a SOa BOb", "BAa EAa SUa HTa BKb"]  # no ace for the forehand: Andere Alte is impossible
        for fallback in ("TRUMPF_HOEHER", "REDEAL"):
            ruleset = rules(2, opening_enabled=frozenset({Opening.ANDERE_ALTE}), opening_all_trump_fallback=fallback)
            fresh = new_state(ruleset, make_deal(2, hands, "EUa"))
            assert not fresh.is_terminal(), fallback
            assert {"opening trumpf_hoeher"} == legal(fresh)
            play(fresh, "opening trumpf_hoeher")
            assert hand_codes(fresh, 0) == legal_cards(fresh)  # the trump Ten too
            for lead, follow, winner in [("BKa", "BAa", 1), ("BKa", "BKb", 0), ("BKa", "EAa", 0), ("ETa", "EAa", 1)]:
                state = fresh.clone()
                play(state, lead)
                assert state.observation(1).current_trick == ((0, None),)
                play(state, follow)
                assert trick_winner(state) == winner, (fallback, lead, follow)
        # The §4.6 variant itself is unchanged: an all-trump hand voids the hand under REDEAL.
        trumps = ["EAa EAb ETa EKa EOa", "BAa SUa HTa S7a HKa"]
        state = new_state(rules(2, opening_all_trump_fallback="REDEAL"), make_deal(2, trumps, "EUa"))
        out = state.outcome()
        assert out is not None and out.termination == Termination.REDEAL and out.is_void

    def test_second_seven_not_for_a_dealt_or_turned_up_seven(self) -> None:
        """The issue's example: seat 1 was dealt Sc-7a, Sc-7b was turned up, nobody robbed: nothing to show."""
        state = new_state(rules(2, rob_second_seven_points=10), deal(34, 0, 2))
        assert card_code(state.trump_card) == "S7b" and "S7a" in hand_codes(state, 1)
        for a in [147, 28, 35, 14, 30, 22, 24, 29, 16, 45, 33, 34, 9, 42, 39]:
            state.apply_checked(a)
        assert state.current_seat() == 1 and state.robbed_by == -1
        assert "show seven" not in legal(state)
        assert rejected(state, "show seven")
        # A Seven dealt to a player scores nothing after a robbery either (parlett: robbing needs no trick).
        state = new_state(preset("parlett", 2), make_deal(2, ["HAa E7a BOa SUa SKa", "HTa E7b B7a BUa S7a"], "ETa"))
        play(state, "rob", "HAa")
        assert "show seven" not in legal(state)

    def test_second_seven_drawn_is_shown_at_the_next_decision_only(self) -> None:
        """The drawer of the second trump Seven may show it in the trick after the draw, and never later."""
        state = second_seven_drawn(4, 2)
        play_until_seat(state, 2)
        shown = state.clone()
        assert "show seven" in legal(shown)
        before = shown.side_total(0)
        play(shown, "show seven")
        assert shown.side_total(0) == before + 10
        assert "show seven" not in legal(shown)
        assert rejected(shown, "show seven")
        play(state, lowest_card(state, avoid="E7b"))
        play_until_seat(state, 2)
        assert state.trick_no == 3 and not state.strict and card_code(state.face_up) == "E7a"
        assert "E7b" in hand_codes(state, 2) and state.side_tricks[0] > 0
        assert "show seven" not in legal(state)  # a round later the Seven scores nothing
        assert rejected(state, "show seven")

    def test_second_seven_drawn_in_the_final_round(self) -> None:
        """Drawn in the last draw round, the second Seven is shown in the first strict trick."""
        state = second_seven_drawn(6, 3)
        assert state.strict
        play_until_seat(state, 2)
        assert "show seven" in legal(state)
        before = state.side_total(0)
        play(state, "show seven")
        assert state.side_total(0) == before + 10

    def test_five_sevens_anytime_in_trick_1(self) -> None:
        """The issue's example: a follower dealt five Sevens declares them in trick 1 instead of playing."""
        ruleset = rules(2, five_sevens_anytime=True, five_sevens_dealt_wins=False)
        state = new_state(ruleset, deal(2108, 0, 2))
        assert hand_codes(state, 1) == {"B7a", "B7b", "H7a", "H7b", "S7a"}
        play(state, "opening hoeher_hat", "HKb")
        assert {"play B7a", "play B7b", "play H7a", "play H7b", "play S7a", "five sevens"} == legal(state)
        play(state, "five sevens")
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.FIVE_SEVENS, (1,), (1, 0))
        # The forehand may declare instead of opening, or at his lead.
        sevens = ["E7a E7b B7a H7a S7a", "BAa SAa STa EKa EOa"]
        forehand = new_state(ruleset, make_deal(2, sevens, "ETa"))
        assert {"opening auf_dissle", "five sevens"} <= legal(forehand)
        lead = forehand.clone()
        play(forehand, "five sevens")
        out = forehand.outcome()
        assert out is not None and (out.termination, out.winners) == (Termination.FIVE_SEVENS, (0,))
        play(lead, "opening hoeher_hat")
        assert "five sevens" in legal(lead)
        # With five_sevens_dealt_wins a dealt five Sevens still wins at once.
        dealt = new_state(rules(2, five_sevens_anytime=True), make_deal(2, sevens, "ETa"))
        out = dealt.outcome()
        assert out is not None and (out.termination, out.winners) == (Termination.FIVE_SEVENS, (0,))

    def test_auf_dissle_with_five_dealt_sevens_that_do_not_win(self) -> None:
        """``five_sevens_dealt_wins = false``: a forehand dealt five Sevens may declare Auf Dissle."""
        acquired = ["E7a E7b B7a H7a S7a B7b", "HAa SAa STa EKa EOa"]
        state = new_state(rules(2, five_sevens_dealt_wins=False), scripted_deal(2, acquired, "ETa", [1]))
        assert not state.is_terminal()
        assert "opening auf_dissle" in legal(state) and "five sevens" not in legal(state)
        play(state, "opening auf_dissle")
        assert {"B7a", "H7a", "S7a"} == legal_cards(state)  # the non-trump Sevens
        play(state, "H7a", "HAa")
        out = state.outcome()  # he draws a fifth Seven again: the Dissle is won
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.DISSLE_WON, (0,), (0, 1))


# --- the parlett preset (RULES.md §14, seed 000 / RU-ENC and WK) ----------------------------


def parlett(players: int) -> Ruleset:
    """The parlett preset for *players*."""
    return preset("parlett", players)


class TestParlettPreset:
    """The parlett preset: open first trick, trick-winner melds, free robbing, literal strict play, explicit Aus."""

    def test_ordinary_open_first_trick(self) -> None:
        """No opening is declared; the forehand may lead a trump and trumps win trick 1."""
        state = new_state(parlett(2), make_deal(2, ["HAa EKa BOa SUa SKa", "E7b HTa B7a BUa S7a"], "ETa"))
        assert state.phase == Phase.PLAY and state.current_seat() == 0
        assert "play EKa" in legal(state)
        assert not any(A.OPENING_BASE <= a < A.OPENING_BASE + 5 for a in state.legal_actions())
        assert state.observation(0).scores is None  # expose_scores is off
        play(state, "HAa", "E7b")
        assert trick_winner(state) == 1
        assert state.phase == Phase.AUS_WINDOW and state.current_seat() == 1

    def test_trick_winner_meld_window_and_give_meld(self) -> None:
        """After the Aus window the trick winner may meld or hand the privilege to his partner, before the draw."""
        hands = ["HAa BUa SUa SOb B7a", "H7a BKa BOa BUb S7b", "S7a HKa HOa STa STb", "H7b SAa SAb B7b BTa"]
        state = new_state(parlett(4), make_deal(4, hands, "ETa"))
        play(state, "HAa", "H7a", "S7a", "H7b")
        assert trick_winner(state) == 0
        assert {"aus", "pass"} == legal(state)
        play(state, "pass", "pass", "pass", "pass")
        assert state.phase == Phase.MELD_WINDOW and state.current_seat() == 0
        assert {"no meld", "give meld"} == legal(state)
        assert [len(state.hand(s)) for s in range(4)] == [4, 4, 4, 4]  # not drawn yet
        play(state, "give meld")
        assert state.current_seat() == 2
        assert {"meld H", "no meld"} == legal(state)
        play(state, "meld H")
        assert (2, 2, False, (parse_card("HKa"), parse_card("HOa")), 20) == state.melds[-1]
        assert state.side_total(0) == 11 + 20
        assert state.phase == Phase.PLAY and state.current_seat() == 0
        assert [len(state.hand(s)) for s in range(4)] == [5, 5, 5, 5]
        assert {parse_card("HKa"), parse_card("HOa")} <= set(state.observation(1).public_holdings[2])
        play(state, "BUa", "BUb")
        assert not any(48 <= a < 144 for a in state.legal_actions())  # no play-with-meld in this preset
        assert not {"meld H", "meld B"} & legal(state)
        play(state, "STa")  # the melded cards need not be played at once

    def test_rob_in_trick_1_without_a_trick(self) -> None:
        """Robbing needs no trick: the leader and a follower may rob in trick 1."""
        state = new_state(parlett(2), make_deal(2, ["HAa E7a BOa SUa SKa", "HTa E7b B7a BUa S7a"], "ETa"))
        assert "rob" in legal(state)
        play(state, "rob")
        assert "ETa" in hand_codes(state, 0) and parse_card("E7a") == state.face_up
        follower = new_state(parlett(2), make_deal(2, ["HAa E7b BOa SUa SKa", "HTa E7a B7a BUa S7a"], "ETa"))
        play(follower, "HAa")
        assert "rob" in legal(follower)
        assert "show seven" not in legal(follower)  # the face-up card is not a Seven yet
        play(follower, "rob")
        assert "ETa" in hand_codes(follower, 1)

    def test_second_trump_seven_shown_for_10(self) -> None:
        """After a robbery the player who draws the other trump Seven may show it once for 10 points, needing no trick."""
        acquired = ["HAa E7a BOa SUa SKa", "HTa H7a B7a BUa S7a E7b"]
        state = new_state(parlett(2), scripted_deal(2, acquired, "ETa", [0]))
        play(state, "rob", "HAa", "HTa")
        play_trick(state)
        play(state, "BOa")
        assert state.side_tricks[1] == 0 and "show seven" in legal(state)
        play(state, "show seven")
        assert state.side_total(1) == 10
        assert "show seven" not in legal(state)
        assert rejected(state, "show seven")
        assert parse_card("E7b") in state.observation(0).public_holdings[1]
        play(state, "H7a")
        assert trick_winner(state) == 0

    def test_parlett_literal_strict_play(self) -> None:
        """Under the parlett preset a follower must beat the best card of the led suit even when it is trumped."""
        state = case_08_to_the_test(case_08_position(parlett(3)))
        assert {"HAa"} == legal_cards(state)

    def test_five_sevens_declarable_in_talon_phase(self) -> None:
        """A player who draws a fifth Seven may declare it on his turn and wins; the default never offers it."""
        hands = ["HAa BAa SAa HKa BKa", "E7a B7a S7a H7a HUa"]
        d = make_deal(2, hands, "ETa", "SKa E7b")
        state = new_state(parlett(2), d)
        play(state, "HAa")
        assert "five sevens" not in legal(state)  # four are not enough
        play_trick(state, "HUa")
        play(state, "BAa")
        assert "five sevens" in legal(state)
        play(state, "five sevens")
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.FIVE_SEVENS, (1,), (1, 0))
        default = new_state(rules(2), d)
        play(default, "opening ge_elfen", "HAa", "HUa", "BAa")
        assert sum(1 for c in hand_codes(default, 1) if c[1] == "7") == 5
        assert rejected(default, "five sevens")

    def test_five_sevens_declarable_in_strict_phase(self) -> None:
        """A player holding five Sevens when the talon runs out may still declare them."""
        state = arranged_state(
            parlett(3),
            ["SAa BAa HKa SKa BKa", "E7a E7b B7a B7b H7a", "H7b S7a EUa EOa SUa"],
            "EUa",
            before_trick=strict_trick_start(3),
            leader=0,
        )
        play(state, "SAa")
        assert "five sevens" in legal(state)

    def test_explicit_aus_uebergaigelt_and_untergaigelt(self) -> None:
        """Explicit Aus: passing at 104 and calling at 99 cost a Gigackel; a right call wins."""
        at_104 = [*A_WINS_ALL[:5], ["BKb", "B7a", "S7a", "B7b"]]
        at_99 = [*A_WINS_ALL[:4], ["HKa", "HUa", "HUb", "SUb"]]

        def play_to_window(tricks: list[list[str]]) -> GaigelState:
            state, labels = four_player_script(tricks, [0] * len(tricks), parlett(4))
            for k, trick in enumerate(labels):
                if k:
                    close_windows(state)
                play(state, *trick)
                assert trick_winner(state) == 0
            assert state.phase == Phase.AUS_WINDOW and state.current_seat() == 0
            return state

        state = play_to_window(at_104)
        assert state.side_total(0) == 104
        right = state.clone()
        play(state, "pass", "pass", "pass", "pass")
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.UEBERGAIGELT, (1,), (2, 0))
        play(right, "aus")
        out = right.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.AUS_CALLED, (0,), (0, 2))
        state = play_to_window(at_99)
        assert state.side_total(0) == 99
        play(state, "aus")
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes) == (Termination.UNTERGAIGELT, (1,), (2, 0))

    def test_gigackel_on_no_points(self) -> None:
        """A side with a trick but no points loses a Gigackel under parlett, a single dash under the default."""
        state, labels = four_player_script(B_WINS_A_ZERO_TRICK, B_WINS_A_ZERO_TRICK_WINNERS, parlett(4))
        for trick in labels:
            close_windows(state)
            play(state, *trick)
        assert [t[2] for t in state.tricks] == B_WINS_A_ZERO_TRICK_WINNERS
        assert (state.side_total(0), state.side_total(1)) == (103, 0)
        assert state.phase == Phase.AUS_WINDOW and state.current_seat() == 2
        play(state, "aus")
        out = state.outcome()
        assert out is not None
        assert (out.termination, out.winners, out.dashes, out.tricks) == (Termination.AUS_CALLED, (0,), (0, 2), (4, 1))
