"""Helpers for writing Gaigel positions by hand: explicit deals, scripted play, arranged phases.

Every position the tests use is built from an explicit :class:`~gaigel.deal.Deal` and a
sequence of actions applied with :meth:`~gaigel.state.GaigelState.apply_checked`; no helper
writes to a private field of the state.

Cards are written as codes (``"HAa"`` = Herz Ace copy a; suits E B H S = Ei Bl He Sc of
RULES.md, copies a/b = #1/#2). Hands are given per seat, either as a list of codes or as
one space-separated string.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence

from gaigel import actions as A
from gaigel.actions import action_label, parse_action
from gaigel.cards import card_code, cards_of, parse_card
from gaigel.deal import Deal
from gaigel.phase import Phase
from gaigel.ruleset import Opening, Ruleset
from gaigel.state import GaigelState

Cards = str | Sequence[str]


def ids(cards: Cards) -> list[int]:
    """Card ids of *cards* (codes as a list or as one space-separated string), in the given order."""
    if isinstance(cards, str):
        cards = cards.split()
    return [parse_card(c) for c in cards]


def codes(card_ids: Iterable[int]) -> set[str]:
    """The set of codes of *card_ids*."""
    return {card_code(c) for c in card_ids}


def hand_codes(state: GaigelState, seat: int) -> set[str]:
    """The codes of the cards *seat* holds."""
    return codes(cards_of(state.hands[seat]))


def make_deal(players: int, hands: Sequence[Cards], trump: str, talon_order: Cards = ()) -> Deal:
    """An explicit deal: *hands* in playing order from the forehand, *trump* the face-up card.

    The talon starts with *talon_order* (top card first); the remaining cards follow in
    ascending id order, so every deal is fully determined by its arguments.
    """
    if len(hands) != players:
        raise ValueError(f"need {players} hands, got {len(hands)}")
    hand_ids = [ids(h) for h in hands]
    top = ids(talon_order)
    trump_id = parse_card(trump)
    used = [c for h in hand_ids for c in h] + top + [trump_id]
    if len(set(used)) != len(used):
        raise ValueError("a card is used twice")
    rest = [c for c in range(48) if c not in set(used)]
    return Deal(hands=tuple(tuple(h) for h in hand_ids), trump_card=trump_id, talon=tuple(top + rest))


def scripted_deal(
    players: int,
    acquired: Sequence[Cards],
    trump: str,
    winners: Sequence[int] = (),
    forehand: int = 0,
) -> Deal:
    """A deal in which every seat receives exactly the cards a script needs, in order.

    ``acquired[seat]`` lists the cards seat *seat* (absolute seat number) receives: the
    first five are dealt to it, the sixth is its draw after trick 1, the seventh its draw
    after trick 2, and so on. ``winners[t]`` is the planned winner of trick ``t + 1``; it
    fixes the drawing order of that round (RULES.md §5.3: the trick winner first, then the
    others in playing order), so a draw can only be placed for a round whose winner is
    given. The face-up *trump* card is the last card of the talon; unplanned places are
    filled with the unused cards in ascending id order.
    """
    n = players
    rounds = 48 // n - 5
    size = rounds * n  # face-down talon plus the face-up card
    wanted = [ids(a) for a in acquired]
    if len(wanted) != n:
        raise ValueError(f"need {n} acquisition lists, got {len(wanted)}")
    trump_id = parse_card(trump)
    slots: list[int | None] = [None] * size
    slots[-1] = trump_id
    for seat, cards in enumerate(wanted):
        for k, c in enumerate(cards[5:]):
            if k >= len(winners):
                raise ValueError(f"seat {seat} draws after trick {k + 1}, but its winner is not planned")
            pos = k * n + (seat - winners[k]) % n
            if pos == size - 1:
                if c != trump_id:
                    raise ValueError(f"the last drawer takes the face-up card {trump}, not {card_code(c)}")
                continue
            slots[pos] = c
    used = [c for cards in wanted for c in cards[:5]] + [c for c in slots if c is not None]
    if len(set(used)) != len(used):
        raise ValueError("a card is used twice")
    pool = iter(c for c in range(48) if c not in set(used))
    hands = []
    for i in range(n):
        seat = (forehand + i) % n
        h = wanted[seat][:5]
        hands.append(tuple(h + [next(pool) for _ in range(5 - len(h))]))
    talon = [c if c is not None else next(pool) for c in slots[:-1]]
    return Deal(hands=tuple(hands), trump_card=trump_id, talon=tuple(talon))


def new_state(rules: Ruleset, deal: Deal, forehand: int = 0) -> GaigelState:
    """A fresh state of *deal* with *forehand* leading trick 1."""
    return GaigelState(rules, deal, forehand=forehand)


def action(label: str) -> int:
    """The action id of *label* (``"play HKa +marriage"``, ``"rob"``, or a bare card code)."""
    return parse_action(label)


def play(state: GaigelState, *labels: str) -> GaigelState:
    """Applies the actions *labels* in order with ``apply_checked``; returns *state*."""
    for label in labels:
        state.apply_checked(parse_action(label))
    return state


def legal(state: GaigelState) -> set[str]:
    """The labels of all legal actions."""
    return {action_label(a) for a in state.legal_actions()}


def legal_cards(state: GaigelState) -> set[str]:
    """The codes of the cards that may be played without a meld."""
    return {card_code(a) for a in state.legal_actions() if a < 48}


def trick_winner(state: GaigelState, trick: int = -1) -> int:
    """The seat that won completed trick number *trick* (default: the latest)."""
    return state.tricks[trick][2]


def close_windows(state: GaigelState) -> GaigelState:
    """Passes every open Aus window and declines every meld window (explicit / parlett rules)."""
    while state.phase in (Phase.AUS_WINDOW, Phase.MELD_WINDOW):
        state.apply_checked(A.PASS if state.phase == Phase.AUS_WINDOW else A.NO_MELD)
    return state


def play_trick(state: GaigelState, *labels: str) -> GaigelState:
    """Plays one trick's worth of actions, then closes the windows that follow it."""
    play(state, *labels)
    return close_windows(state)


# --- arranged positions: a scripted prefix filled by a deterministic player -------------------


class _OldestFirst:
    """A deterministic filler: plays the legal card held longest, never melds or robs.

    It declares the lowest opening other than Auf Dissle, passes Aus windows and declines
    meld windows. Because it always plays its oldest card, a seat's hand after the draw of
    round r (r >= 5) is exactly its last five draws.
    """

    def __init__(self, state: GaigelState) -> None:
        self.order = [cards_of(state.hands[s]) for s in range(state.n)]

    def sync(self, state: GaigelState) -> None:
        for s in range(state.n):
            held = state.hands[s]
            kept = [c for c in self.order[s] if held >> c & 1]
            known = set(kept)
            self.order[s] = kept + [c for c in cards_of(held) if c not in known]

    def choose(self, state: GaigelState) -> int | None:
        acts = state.legal_actions()
        if state.phase == Phase.OPENING:
            options = [a for a in acts if a != A.opening_action(Opening.AUF_DISSLE)]
            return options[0] if options else None
        if state.phase == Phase.AUS_WINDOW:
            return A.PASS
        if state.phase == Phase.MELD_WINDOW:
            return A.NO_MELD
        playable = set(acts)
        for c in self.order[state.to_act]:
            if c in playable:
                return c
        return None


def _fill(state: GaigelState, tricks: int) -> list[int] | None:
    """Plays *tricks* tricks with the oldest-first filler; returns the trick winners or None."""
    filler = _OldestFirst(state)
    while len(state.tricks) < tricks or state.phase != Phase.PLAY:
        if state.is_terminal():
            return None
        a = filler.choose(state)
        if a is None:
            return None
        state.apply_checked(a)
        filler.sync(state)
    return [t[2] for t in state.tricks]


def arranged_state(
    rules: Ruleset,
    hands: Sequence[Cards],
    trump: str,
    *,
    before_trick: int,
    leader: int,
    talon_rest: Cards = (),
    forehand: int = 0,
    cap: int = 100,
    require: Callable[[GaigelState], bool] | None = None,
    attempts: int = 4000,
) -> GaigelState:
    """The state at the start of trick *before_trick*, with the given hands and *leader* to lead.

    ``hands[seat]`` (absolute seats) are the five cards each seat holds at that moment.
    The earlier tricks are played by a deterministic oldest-first filler with the other
    cards, dealt in an order found by a seeded search such that *leader* wins the trick
    before, no side's total exceeds *cap*, and *require* (if given) holds. The hands
    arrive in the last five draw rounds, placed by the drawing order of RULES.md §5.3.

    With ``before_trick = 48 / n - 4`` (the first strict trick) the talon is empty and the
    last drawer, the seat before *leader*, must hold *trump*. Earlier, *talon_rest* lists
    the face-down cards still to be drawn (top first) and *trump* still lies face up.

    :raises AssertionError: if the engine deals the hands differently from §5.3.
    :raises LookupError: if no filler order satisfies the conditions.
    """
    n = rules.players
    rounds = 48 // n - 5
    b = before_trick
    if not 6 <= b <= rounds + 1:
        raise ValueError(f"before_trick must be 6..{rounds + 1} for {n} players")
    hand_ids = [ids(h) for h in hands]
    rest = ids(talon_rest)
    trump_id = parse_card(trump)
    strict = b == rounds + 1
    if strict:
        if rest or trump_id not in hand_ids[(leader - 1) % n]:
            raise ValueError("at the strict start the talon is empty and the last drawer holds the trump card")
    elif len(rest) != (rounds - b + 1) * n - 1 or any(trump_id in h for h in hand_ids):
        raise ValueError("talon_rest must hold the cards of the remaining draw rounds but the face-up card")
    fixed = {c for h in hand_ids for c in h} | set(rest) | {trump_id}
    if len(fixed) != 5 * n + len(rest) + (0 if strict else 1):
        raise ValueError("a card is used twice")
    junk = [c for c in range(48) if c not in fixed]
    placed = [c for h in hand_ids for c in h if c != trump_id]
    for attempt in range(attempts):
        rng = random.Random(attempt)
        order = junk[:]
        rng.shuffle(order)
        dealt = tuple(tuple(order[5 * i : 5 * i + 5]) for i in range(n))
        prefix = order[5 * n :]
        probe = Deal(hands=dealt, trump_card=trump_id, talon=tuple(prefix + placed + rest))
        state = GaigelState(rules, probe, forehand=forehand)
        winners = _fill(state, b - 1)
        if winners is None or winners[-1] != leader or any(state.side_total(x) > cap for x in range(state.num_sides)):
            continue
        if require is not None and not require(state):
            continue
        # Place each seat's cards on the talon positions it draws in rounds b-5 .. b-1.
        todo = {s: [c for c in hand_ids[s] if c != trump_id] for s in range(n)}
        slots = []
        for r in range(b - 5, b):
            for i in range(n):
                seat = (winners[r - 1] + i) % n
                if strict and r == rounds and i == n - 1:
                    continue  # the last drawer takes the face-up trump card
                slots.append(todo[seat].pop(0))
        final = Deal(hands=dealt, trump_card=trump_id, talon=tuple(prefix + slots + rest))
        state = GaigelState(rules, final, forehand=forehand)
        again = _fill(state, b - 1)
        assert again == winners, "the filler's tricks changed when only undrawn cards moved"
        for s in range(n):
            assert hand_codes(state, s) == codes(hand_ids[s]), (
                f"seat {s} holds {sorted(hand_codes(state, s))} instead of {sorted(codes(hand_ids[s]))}: "
                "the engine does not draw in the order of RULES.md §5.3"
            )
        return state
    raise LookupError("no filler order reaches the wanted position")
