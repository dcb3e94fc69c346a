"""Full states consistent with one seat's observation, for search bots.

A search bot sees only its :class:`~gaigel.observation.Observation`. To simulate, it
samples the cards it cannot see (other hands, the talon order, face-down trick-1 cards)
consistently with everything the seat has observed: cards played, melds shown, the
robbed and face-up cards, and what the strict phase revealed (a seat that did not follow
suit holds none of that suit; one that did not trump holds no trump; one that followed
or trumped without heading the trick holds nothing higher). :func:`determinize` returns a
:class:`~gaigel.state.GaigelState` whose ``observation(seat)`` equals the given one.
"""

from __future__ import annotations

import random
from typing import cast

from gaigel.cards import POINTS_OF, RANK_OF, SUIT_MASK, SUIT_OF, CardId, CardMask, cards_of, mask_of
from gaigel.observation import Observation
from gaigel.phase import Phase
from gaigel.ruleset import Opening, Ruleset
from gaigel.state import BEATS, HIGHER, NEVER_BEATS, NO_TRUMP, OTHER_ACE_BEATS, GaigelState, trick_winner

_FULL = (1 << 48) - 1


def forbidden_cards(obs: Observation, rules: Ruleset) -> list[CardMask]:
    """Per seat, the cards it cannot hold given how it played in the strict phase (RULES.md §8)."""
    n = obs.players
    forbidden = [0] * n
    if rules.strict_mode == "follow_only":
        head = False
    else:
        head = True
    first_strict = rules.tricks_per_hand - 5
    trump = obs.trump_suit
    tricks = [(t.leader, list(t.cards)) for i, t in enumerate(obs.tricks) if i >= first_strict]
    if obs.strict and obs.current_trick:
        tricks.append((obs.trick_leader, [c for _, c in obs.current_trick if c is not None]))
    for leader, cards in tricks:
        led = SUIT_OF[cards[0]]
        for i in range(1, len(cards)):
            seat = (leader + i) % n
            c = cards[i]
            before = cards[:i]
            win = before[trick_winner(before, trump)]
            if SUIT_OF[c] != led:
                forbidden[seat] |= SUIT_MASK[led]
                if head and SUIT_OF[c] != trump:
                    forbidden[seat] |= SUIT_MASK[trump]
                elif head and SUIT_OF[win] == trump and RANK_OF[c] > RANK_OF[win] and rules.strict_must_undertrump:
                    forbidden[seat] |= HIGHER[win]  # under-trumped: held no higher trump
            elif head and rules.strict_mode == "head_trick" and SUIT_OF[win] == led and RANK_OF[c] > RANK_OF[win]:
                forbidden[seat] |= HIGHER[win]  # followed without heading: nothing higher
    return forbidden


def _hand_sizes(obs: Observation) -> list[int]:
    n = obs.players
    played = {s for s, _ in obs.current_trick}
    mine = len(obs.hand) + (1 if obs.seat in played else 0)
    return [mine - (1 if s in played else 0) for s in range(n)]


def determinize(obs: Observation, rules: Ruleset, rng: random.Random, tries: int = 50) -> GaigelState:
    """Samples a full state consistent with *obs* (uniform over the unseen cards, subject to the
    strict-phase constraints; after *tries* failed attempts the constraints are dropped)."""
    n = obs.players
    seen = mask_of(obs.hand) | mask_of(c for t in obs.tricks for c in t.cards)
    seen |= mask_of(c for _, c in obs.current_trick if c is not None)
    for held in obs.public_holdings:
        seen |= mask_of(held)
    if obs.face_up_card is not None:
        seen |= 1 << obs.face_up_card
    unseen = cards_of(_FULL & ~seen)
    sizes = _hand_sizes(obs)
    hidden_plays = [i for i, (_, c) in enumerate(obs.current_trick) if c is None]
    need = [0 if s == obs.seat else sizes[s] - len(obs.public_holdings[s]) for s in range(n)]
    forbidden = forbidden_cards(obs, rules)
    assignment = None
    for attempt in range(tries + 1):
        assignment = _assign(unseen, need, forbidden if attempt < tries else [0] * n, rng)
        if assignment is not None:
            break
    assert assignment is not None
    hands_extra, rest = assignment
    trick_cards = [c for _, c in obs.current_trick]
    for i in hidden_plays:
        trick_cards[i] = rest.pop()
    talon = tuple(rest)
    hands = [mask_of(obs.public_holdings[s]) | mask_of(hands_extra[s]) for s in range(n)]
    hands[obs.seat] = mask_of(obs.hand)
    return _build(obs, rules, hands, talon, cast(list[CardId], trick_cards))


def _assign(
    unseen: list[CardId], need: list[int], forbidden: list[CardMask], rng: random.Random
) -> tuple[list[list[CardId]], list[CardId]] | None:
    """Deals *unseen* to the seats' unknown slots, most constrained seat first; the rest is talon
    (and face-down trick cards)."""
    pool = unseen[:]
    rng.shuffle(pool)
    hands: list[list[CardId]] = [[] for _ in need]
    order = sorted(range(len(need)), key=lambda s: -(forbidden[s]).bit_count())
    for s in order:
        if not need[s]:
            continue
        ok = [c for c in pool if not forbidden[s] >> c & 1]
        if len(ok) < need[s]:
            return None
        chosen = ok[: need[s]]
        hands[s] = chosen
        taken = set(chosen)
        pool = [c for c in pool if c not in taken]
    return hands, pool


def _build(
    obs: Observation, rules: Ruleset, hands: list[CardMask], talon: tuple[CardId, ...], trick_cards: list[CardId]
) -> GaigelState:
    n = obs.players
    st = GaigelState(rules, None)
    st.n = n
    st.num_sides = rules.num_sides
    st.side_of = tuple(rules.side_of(s) for s in range(n))
    st.forehand = obs.forehand
    st.deal = None
    st.trump_card = obs.trump_card
    st.trump = obs.trump_suit
    st.hands = hands
    st.talon = talon
    st.tpos = 0
    st.face_up = -1 if obs.face_up_card is None else obs.face_up_card
    st.phase = Phase[obs.phase.upper()]
    st.to_act = obs.to_act if obs.to_act is not None else 0
    st.leader = obs.trick_leader
    st.trick_cards = trick_cards
    st.trick_no = len(obs.tricks)
    st._n_tricks = 48 // n
    st.strict = obs.strict
    st.opening = obs.opening
    st.trick1_special = obs.opening is not None and st.trick_no == 0 and st.phase != Phase.OPENING
    st.declarer = -1 if obs.dissle_declarer is None else obs.dissle_declarer
    st._lead_mask = 0
    if st.trick1_special:
        from gaigel.state import opening_options

        kind = cast(Opening, obs.opening)
        options = opening_options(rules, hands[obs.forehand] | mask_of(trick_cards[:1]), st.trump)
        st._lead_mask = options.get(kind, hands[obs.forehand])
        st._tb, st.face_down = {
            Opening.ANDERE_ALTE: (OTHER_ACE_BEATS, True),
            Opening.GE_ELFEN: (NEVER_BEATS, False),
            Opening.HOEHER_HAT: (BEATS[NO_TRUMP], True),
            Opening.TRUMPF_HOEHER: (BEATS[NO_TRUMP], True),
            Opening.AUF_DISSLE: (
                BEATS[NO_TRUMP] if rules.dissle_first_trick == "no_trump_open" else BEATS[st.trump],
                False,
            ),
        }[kind]
    else:
        st._tb, st.face_down = BEATS[st.trump], False
    st.win_idx, st.win_card = 0, -1
    for i, c in enumerate(trick_cards):
        if i == 0 or st._tb[st.win_card * 48 + c]:
            st.win_idx, st.win_card = i, c
    sides = rules.num_sides
    st.side_cards = [0] * sides
    st.side_tricks = list(obs.tricks_won)
    for i, t in enumerate(obs.tricks):
        pts = sum(POINTS_OF[c] for c in t.cards) + (rules.last_trick_bonus if i == st._n_tricks - 1 else 0)
        st.side_cards[rules.side_of(t.winner)] += pts
    st.side_melds = [0] * sides
    st.melded_suits = [0] * n
    st.meld_used = 0
    for m in obs.melds:
        st.side_melds[rules.side_of(m.seat)] += m.points
        st.melded_suits[m.seat] |= 1 << m.suit
        st.meld_used |= mask_of(m.cards)
    if obs.scores is not None:  # exposed totals include shown Sevens and bonuses we cannot see otherwise
        for x, score in enumerate(obs.scores):
            st.side_cards[x], st.side_melds[x] = score.card_points, score.meld_points
    st.crossed = [x for x in range(sides) if st.side_cards[x] + st.side_melds[x] >= rules.target]
    st.known = [mask_of(h) for h in obs.public_holdings]
    st.robbed_by = -1 if obs.robbed_by is None else obs.robbed_by
    st.rob_cards = obs.robbed_cards if obs.robbed_cards is not None else (-1, -1)
    st.reserved_seat = -1 if obs.rob_reserved_seat is None else obs.rob_reserved_seat
    st.shown_sevens = 0
    st.seven_drawer = -1  # who drew which card is not observed
    st.tricks = list(obs.tricks)
    st.melds = [(m.seat, m.suit, m.double, m.cards, m.points) for m in obs.melds]
    st.history = []
    st._outcome = None
    st.last_winner = obs.tricks[-1].winner if obs.tricks else -1
    st.window = []
    st.window_over = ()
    if st.phase == Phase.AUS_WINDOW:
        order = [(st.last_winner + i) % n for i in range(n)]
        st.window = order[order.index(st.to_act) :]
        st.window_over = tuple(x for x in range(sides) if st.side_total(x) >= rules.target)
    elif st.phase == Phase.MELD_WINDOW:
        st.window = [st.to_act]
    st.events = None
    st._set_switches()
    return st
