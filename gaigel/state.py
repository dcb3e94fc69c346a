"""The rules of one hand of Gaigel (RULES.md), as a fast mutable state.

A :class:`GaigelState` starts from a :class:`~gaigel.deal.Deal` and a forehand seat and
follows the OpenSpiel shape: :meth:`~GaigelState.current_seat`,
:meth:`~GaigelState.legal_actions` (ascending ids), the unchecked
:meth:`~GaigelState.apply` for search and replay, the checked
:meth:`~GaigelState.apply_checked` for untrusted input, :meth:`~GaigelState.observation`
for what one seat may know, :meth:`~GaigelState.outcome` and
:meth:`~GaigelState.state_hash`.

Hands are 48-bit masks and every per-card property is a table lookup, because random
playouts for search bots call :meth:`legal_actions` and :meth:`apply` millions of times.

List items are updated as ``x[i] = x[i] op v``, never as ``x[i] op= v``: compiled with mypyc
(setup.py), an augmented assignment to a ``list[int]`` item goes through the generic
``PyNumber_InPlace*`` calls (about 220 instructions each) while the spelled-out form works on
native ints; about 5 % of the instructions per decision (commit fc33a4c). Locals and
attributes may use ``op=``.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from typing import TYPE_CHECKING, Any, Final

from gaigel import actions as A
from gaigel._pickling import reduce_through_constructor
from gaigel.cards import (
    POINTS_OF,
    RANK_OF,
    SUIT_CARDS,
    SUIT_MASK,
    SUIT_OF,
    CardId,
    CardMask,
    Rank,
    card_code,
    cards_of,
)
from gaigel.deal import Deal
from gaigel.events import (
    AusCalled,
    AusPassed,
    CardDrawn,
    CardPlayed,
    Event,
    FiveSevens,
    HandTerminated,
    Melded,
    MeldGiven,
    MeldPassed,
    OpeningDeclared,
    Robbed,
    RobReserved,
    SevenShown,
    TrickTaken,
)
from gaigel.observation import TrickView
from gaigel.phase import Phase
from gaigel.ruleset import Opening, Ruleset

if TYPE_CHECKING:
    from gaigel.observation import Observation

ENGINE_VERSION = "1.0.0"
STATE_HASH_FORMAT = "gaigel-state-v1"
"""Changes only when the hashed serialisation changes, so that a new engine version that
plays the same rules still replays old records."""

_DECIMALS: Final[tuple[str, ...]] = tuple(str(i) for i in range(-1, 1024))


def _decimal(x: int) -> str:
    """``str(x)``, from a table for -1..1022: the state hash spells some 70 numbers, and
    converting each was most of its cost."""
    if -1 <= x < 1023:
        return _DECIMALS[x + 1]
    return str(x)


class Termination(enum.Enum):
    """Why a hand ended (RULES.md §10)."""

    TARGET_REACHED = "target_reached"
    """Automatic Aus: a side had the target (101) after a trick."""
    AUS_CALLED = "aus_called"
    """Explicit mode: a side called Aus with the target reached."""
    UEBERGAIGELT = "uebergaigelt"
    """Explicit mode: a side at the target let the Aus window pass (Gigackel)."""
    UNTERGAIGELT = "untergaigelt"
    """Explicit mode: a side called Aus below the target (Gigackel)."""
    CARDS_EXHAUSTED = "cards_exhausted"
    """All tricks played without an Aus: most points wins (or void on a tie)."""
    FIVE_SEVENS = "five_sevens"
    """A player held five Sevens (§10.6)."""
    DISSLE_WON = "dissle_won"
    """The Auf Dissle declarer drew his fifth Seven (§4.5)."""
    DISSLE_FAILED = "dissle_failed"
    """The Auf Dissle declarer won a trick, or the talon ran out (§4.5)."""
    REDEAL = "redeal"
    """opening.all_trump_fallback = REDEAL and the forehand held only trumps: void hand."""


@dataclasses.dataclass(frozen=True)
class HandOutcome:
    """The result of one hand: winning sides and the dashes (1 loss, 2 Gigackel) per side."""

    termination: Termination
    winners: tuple[int, ...]
    dashes: tuple[int, ...]
    points: tuple[int, ...]
    tricks: tuple[int, ...]

    def __reduce__(self) -> tuple[type[Any], tuple[object, ...]]:
        return reduce_through_constructor(self)  # (compiled frozen dataclasses need it)

    @property
    def is_void(self) -> bool:
        """True when nobody won (a tie at the end of the cards, or a redeal)."""
        return not self.winners

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "termination": self.termination.value,
            "winners": list(self.winners),
            "dashes": list(self.dashes),
            "points": list(self.points),
            "tricks": list(self.tricks),
        }


class IllegalActionError(ValueError):
    """An action id that is not legal in the current state; the message says why."""

    def __init__(self, action: int, reason: str) -> None:
        self.action = action
        self.reason = reason
        try:
            label = A.action_label(action)
        except ValueError:
            label = "unknown"
        super().__init__(f"illegal action {action} ({label}): {reason}")


# --- tables computed once ---------------------------------------------------------------
# NO_TRUMP, HIGHER and the *BEATS tables are public: gaigel.determinize and gaigel.bots.search
# read them too (Final, so compiled code uses them as C statics, not dict lookups).

NO_TRUMP: Final = 4
"""The index of the no-trump table in :data:`BEATS` (Hoeher hat, Trumpf hoeher; ``trump=None``)."""
_SEVENS: Final[CardMask] = sum(1 << (12 * s + 10) | 1 << (12 * s + 11) for s in range(4))
_ACES: Final[CardMask] = sum(1 << (12 * s) | 1 << (12 * s + 1) for s in range(4))
HIGHER: Final[tuple[CardMask, ...]] = tuple(((1 << (2 * RANK_OF[c])) - 1) << (12 * SUIT_OF[c]) for c in range(48))
"""HIGHER[c]: the cards of c's suit that rank strictly above c (identical copy excluded)."""


def _beats_table(trump: int) -> tuple[bool, ...]:
    """Flat 48x48 table: does card x, played later, beat the current winner w? (§5.1)"""
    out = []
    for w in range(48):
        for x in range(48):
            if SUIT_OF[x] == SUIT_OF[w]:
                out.append(RANK_OF[x] < RANK_OF[w])
            else:
                out.append(SUIT_OF[x] == trump)
    return tuple(out)


BEATS: Final[tuple[tuple[bool, ...], ...]] = tuple(_beats_table(t) for t in range(5))
"""BEATS[trump][w * 48 + x]: does x, played after the current winner w, beat it (index
:data:`NO_TRUMP`: no trump suit)."""
NEVER_BEATS: Final[tuple[bool, ...]] = tuple(False for _ in range(48 * 48))
"""The first trick of Ge-Elfen, indexed like a :data:`BEATS` table: the forehand always wins."""
OTHER_ACE_BEATS: Final[tuple[bool, ...]] = tuple(
    x == w ^ 1 and RANK_OF[w] == Rank.ACE for w in range(48) for x in range(48)
)
"""The first trick of Andere Alte, indexed like a :data:`BEATS` table: only the other copy of the led Ace wins."""


_KINGS: Final[CardMask] = sum(0x30 << (12 * s) for s in range(4))
_OBERS: Final[CardMask] = sum(0xC0 << (12 * s) for s in range(4))
_KING_A: Final[CardMask] = sum(0x10 << (12 * s) for s in range(4))


def beats(x: CardId, w: CardId, trump: int | None) -> bool:
    """Does card *x*, played after *w*, beat it? (RULES.md §5.1; ``trump=None``: no trump suit)."""
    return BEATS[NO_TRUMP if trump is None else trump][w * 48 + x]


def trick_winner(cards: list[CardId] | tuple[CardId, ...], trump: int | None) -> int:
    """Index of the winning card of an ordinary trick in playing order (RULES.md §5.1)."""
    table = BEATS[NO_TRUMP if trump is None else trump]
    w = 0
    for i in range(1, len(cards)):
        if table[cards[w] * 48 + cards[i]]:
            w = i
    return w


def _marriages(cards: CardMask) -> CardMask:
    """Non-zero when *cards* hold a King and an Ober of some suit (bit 4 of each such suit)."""
    k = cards & _KINGS
    o = cards & _OBERS
    return (k | k >> 1) & ((o | o >> 1) >> 2) & _KING_A


def _bits(mask: CardMask) -> list[CardId]:
    """The cards of *mask*, ascending, by one table lookup per suit (faster than bit loops)."""
    out: list[CardId] = []
    if mask & 0xFFF:
        out.extend(_S0[mask & 0xFFF])
    if mask & 0xFFF000:
        out.extend(_S1[(mask >> 12) & 0xFFF])
    if mask & 0xFFF000000:
        out.extend(_S2[(mask >> 24) & 0xFFF])
    if mask >> 36:
        out.extend(_S3[mask >> 36])
    return out


_S0: Final = SUIT_CARDS[0]
_S1: Final = SUIT_CARDS[1]
_S2: Final = SUIT_CARDS[2]
_S3: Final = SUIT_CARDS[3]


def opening_options(rules: Ruleset, hand: CardMask, trump: int) -> dict[Opening, CardMask]:
    """The openings the forehand may declare with *hand*, each with the cards it may lead (§4.7)."""
    non_trump = hand & ~SUIT_MASK[trump]
    aces = hand & _ACES
    leadable = hand if not rules.opening_trump_lead_forbidden else non_trump
    options: dict[Opening, CardMask] = {}
    enabled = rules.opening_enabled
    if Opening.ANDERE_ALTE in enabled and aces & leadable:
        options[Opening.ANDERE_ALTE] = aces & leadable
    ge_leads = aces if rules.opening_ge_elfen_trump_ace else aces & leadable
    if Opening.GE_ELFEN in enabled and ge_leads:
        options[Opening.GE_ELFEN] = ge_leads
    hh_leads = leadable & ~_ACES
    if Opening.HOEHER_HAT in enabled and hh_leads and not (rules.opening_ace_compulsory and aces & leadable):
        options[Opening.HOEHER_HAT] = hh_leads
    sevens = (hand & _SEVENS).bit_count()
    if (
        Opening.AUF_DISSLE in enabled
        and sevens >= rules.dissle_min_sevens
        and (sevens < 5 or not rules.five_sevens_dealt_wins)
        and leadable
    ):
        options[Opening.AUF_DISSLE] = leadable
    if not options and (rules.opening_all_trump_fallback == "TRUMPF_HOEHER" or non_trump):
        # The all-trump fallback (§4.6); with a narrowed opening.enabled it also covers any
        # other hand that has no enabled option, REDEAL or not (§17): lead anything, higher
        # of its suit wins. REDEAL voids only an all-trump hand.
        options[Opening.TRUMPF_HOEHER] = hand
    return options


_SLOTS = (
    "_explicit_aus",
    "_extras_without_trick",
    "_lead_mask",
    "_meld_own_turn",
    "_meld_with_play",
    "_n_tricks",
    "_other_extras",
    "_outcome",
    "_target",
    "_tb",
    "_trump_sevens",
    "_winner_melds",
    "crossed",
    "deal",
    "declarer",
    "events",
    "face_down",
    "face_up",
    "forehand",
    "hands",
    "history",
    "known",
    "last_winner",
    "leader",
    "meld_used",
    "melded_suits",
    "melds",
    "n",
    "num_sides",
    "opening",
    "phase",
    "reserved_seat",
    "rob_cards",
    "robbed_by",
    "rules",
    "seven_drawer",
    "shown_sevens",
    "side_cards",
    "side_melds",
    "side_of",
    "side_tricks",
    "strict",
    "talon",
    "to_act",
    "tpos",
    "trick1_special",
    "trick_cards",
    "trick_no",
    "tricks",
    "trump",
    "trump_card",
    "win_card",
    "win_idx",
    "window",
    "window_over",
)  # fmt: skip
"""GaigelState's attributes: its __slots__ in pure Python, and what pickling saves and restores."""


class GaigelState:
    """One hand of Gaigel from the deal to its outcome.

    Seats are 0..n-1 in playing order; ``deal.hands[i]`` goes to seat ``(forehand + i) % n``.

    >>> from gaigel.deal import deal
    >>> from gaigel.ruleset import Ruleset
    >>> s = GaigelState(Ruleset(players=4), deal(0, 0, 4), forehand=0)
    >>> s.current_seat(), [A.action_label(a) for a in s.legal_actions()]
    (0, ['opening andere_alte', 'opening ge_elfen', 'opening hoeher_hat'])
    """

    __slots__ = _SLOTS

    def __init__(self, rules: Ruleset, deal: Deal | None, forehand: int = 0, record_events: bool = False) -> None:
        self.rules = rules
        if deal is None:
            return  # an empty shell that clone() and gaigel.determinize fill in field by field
        n = rules.players
        if deal.players != n:
            raise ValueError(f"the deal is for {deal.players} players, the ruleset for {n}")
        if not 0 <= forehand < n:
            raise ValueError(f"forehand must be a seat 0..{n - 1}, got {forehand}")
        self.n = n
        self.num_sides = rules.num_sides
        self.side_of = tuple(rules.side_of(s) for s in range(n))
        self.forehand = forehand
        self.deal: Deal | None = deal
        self.trump_card = deal.trump_card
        self.trump = SUIT_OF[deal.trump_card]
        self.hands = [0] * n
        for i, cards in enumerate(deal.hands):
            m = 0
            for c in cards:
                m |= 1 << c
            self.hands[(forehand + i) % n] = m
        self.talon = deal.talon
        self.tpos = 0
        self.face_up = deal.trump_card
        self.phase = Phase.PLAY
        self.to_act = forehand
        self.leader = forehand
        self.trick_cards: list[CardId] = []
        self.win_idx = 0
        self.win_card = -1
        self._tb = BEATS[self.trump]
        self.face_down = False
        self.trick_no = 0
        self._n_tricks = 48 // n
        self.strict = False
        self.opening: Opening | None = None
        self.trick1_special = False
        self._lead_mask = 0
        self.declarer = -1
        self.side_cards = [0] * self.num_sides
        self.side_melds = [0] * self.num_sides
        self.side_tricks = [0] * self.num_sides
        self.crossed: list[int] = []
        self.melded_suits = [0] * n
        self.meld_used = 0
        self.known = [0] * n
        self.robbed_by = -1
        self.rob_cards = (-1, -1)
        self.reserved_seat = -1
        self.shown_sevens = 0
        self.seven_drawer = -1
        self.tricks: list[TrickView] = []
        self.melds: list[tuple[int, int, bool, tuple[CardId, ...], int]] = []
        self.history: list[int] = []
        self._outcome: HandOutcome | None = None
        self.window: list[int] = []
        self.window_over: tuple[int, ...] = ()
        self.last_winner = -1
        self.events: list[Event] | None = [] if record_events else None
        self._set_switches()
        self._start()

    def _set_switches(self) -> None:
        """Rule switches read on the hot path, looked up once."""
        rules = self.rules
        self._meld_with_play = rules.meld_timing in ("own_turn", "lead_only")
        self._meld_own_turn = rules.meld_timing == "own_turn"
        self._other_extras = rules.five_sevens_anytime or rules.meld_timing == "any_time"
        self._extras_without_trick = (
            not rules.meld_requires_side_trick
            or not rules.rob_requires_side_trick
            or rules.rob_reservation
            or rules.five_sevens_anytime
        )
        self._trump_sevens = 3 << (12 * self.trump + 10)
        self._target = rules.target
        self._explicit_aus = rules.aus_mode == "explicit"
        self._winner_melds = rules.meld_timing == "trick_winner"

    def _start(self) -> None:
        rules = self.rules
        if rules.five_sevens_dealt_wins:
            for seat in range(self.n):
                if (self.hands[seat] & _SEVENS).bit_count() == 5:
                    if self.events is not None:
                        self.events.append(FiveSevens(seat, tuple(cards_of(self.hands[seat] & _SEVENS))))
                    self._finish(Termination.FIVE_SEVENS, [self.side_of[seat]])
                    return
        if rules.opening_special_first_trick:
            if not opening_options(rules, self.hands[self.forehand], self.trump):
                self._finish(Termination.REDEAL, [])
                return
            self.phase = Phase.OPENING

    # --- queries ---------------------------------------------------------------------

    def current_seat(self) -> int | None:
        """The seat to decide, or None once the hand is over."""
        return None if self.phase == Phase.TERMINAL else self.to_act

    def is_terminal(self) -> bool:
        """True once the hand is over."""
        return self.phase == Phase.TERMINAL

    def outcome(self) -> HandOutcome | None:
        """The result once the hand is over, else None."""
        return self._outcome

    def side_total(self, side: int) -> int:
        """Card points plus meld points (plus bonuses) of *side* so far."""
        return self.side_cards[side] + self.side_melds[side]

    @property
    def talon_size(self) -> int:
        """Cards still to be drawn, the face-up card included while it lies there."""
        return len(self.talon) - self.tpos + (1 if self.face_up >= 0 else 0)

    def hand(self, seat: int) -> list[CardId]:
        """The cards of *seat* (full information; bots get :meth:`observation`)."""
        return cards_of(self.hands[seat])

    def legal_actions(self) -> list[int]:
        """Every legal action id of the seat to act, ascending; empty once terminal."""
        phase = self.phase
        if phase == Phase.PLAY:  # the hot path of every playout
            s = self.to_act
            hand = self.hands[s]
            if self.trick1_special:
                acts = _bits(self._trick1_playable(hand))
                if self.rules.five_sevens_anytime and (hand & _SEVENS).bit_count() == 5:
                    acts.append(A.FIVE_SEVENS)  # also in trick 1 (§17), instead of playing
                return acts
            strict = self.strict
            playable = self._strict_playable(hand) if strict else hand
            acts = _bits(playable)
            has_trick = self.side_tricks[self.side_of[s]] > 0
            if has_trick or self._extras_without_trick:
                if (
                    self._meld_with_play
                    and (has_trick or not self.rules.meld_requires_side_trick)
                    and (not strict or self.rules.meld_after_talon)
                    and (self._meld_own_turn or not self.trick_cards)
                    and _marriages(hand & ~self.meld_used)
                ):
                    self._meld_plays(s, hand, playable, acts)
                if not strict:
                    if hand & self._trump_sevens or self._other_extras:
                        self._extra_actions(s, self.side_of[s], has_trick, acts)
                else:
                    if s == self.seven_drawer and self._may_show_seven(has_trick):
                        acts.append(A.SHOW_SEVEN)  # drawn in the final round (§17)
                    if self.rules.five_sevens_anytime and (hand & _SEVENS).bit_count() == 5:
                        acts.append(A.FIVE_SEVENS)
                    if self.rules.meld_timing == "any_time" and self.rules.meld_after_talon:
                        self._standalone_melds(s, hand, acts, has_trick)
            return acts
        if phase == Phase.OPENING:
            hand = self.hands[self.to_act]
            options = opening_options(self.rules, hand, self.trump)
            acts = [A.OPENING_BASE + int(o) for o in sorted(options)]
            if self.rules.five_sevens_anytime and (hand & _SEVENS).bit_count() == 5:
                acts.append(A.FIVE_SEVENS)  # instead of an opening (§17)
            return acts
        if phase == Phase.AUS_WINDOW:
            return [A.AUS, A.PASS]
        if phase == Phase.MELD_WINDOW:
            acts = []
            self._standalone_melds(self.to_act, self.hands[self.to_act], acts, True)
            acts.append(A.NO_MELD)
            if self._next_partner(self.to_act) is not None:
                acts.append(A.GIVE_MELD)
            return acts
        return []

    def _strict_playable(self, hand: CardMask) -> CardMask:
        """Cards allowed in the last five tricks (RULES.md §8)."""
        tc = self.trick_cards
        if not tc:
            return hand
        led = SUIT_OF[tc[0]]
        same = hand & SUIT_MASK[led]
        mode = self.rules.strict_mode
        win = self.win_card
        if same:
            if mode == "follow_only":
                return same
            if mode == "head_trick":
                if SUIT_OF[win] == led:
                    return (same & HIGHER[win]) or same
                return same
            best = tc[0]  # parlett_literal: beat the best card of the led suit, trumped or not
            for c in tc:
                if SUIT_OF[c] == led and RANK_OF[c] < RANK_OF[best]:
                    best = c
            return (same & HIGHER[best]) or same
        if mode == "follow_only":
            return hand
        trumps = hand & SUIT_MASK[self.trump]
        if trumps:
            if SUIT_OF[win] == self.trump:
                over = trumps & HIGHER[win]
                if over:
                    return over
                return trumps if self.rules.strict_must_undertrump else hand
            return trumps
        return hand

    def _trick1_playable(self, hand: CardMask) -> CardMask:
        """Cards allowed in a trick 1 played under an opening (RULES.md §4)."""
        if not self.trick_cards:
            return hand & self._lead_mask
        if self.rules.opening_followers_no_trump:
            non_trump = hand & ~SUIT_MASK[self.trump]
            if non_trump:
                return non_trump
        return hand

    def _meld_plays(self, s: int, hand: CardMask, playable: CardMask, acts: list[int]) -> None:
        """Appends play-with-meld actions (48 + card, 96 + card) in id order."""
        rules = self.rules
        avail = hand & ~self.meld_used
        done = self.melded_suits[s] if rules.meld_once_per_suit_per_player else 0
        singles: list[int] = []
        doubles: list[int] = []
        for suit in range(4):
            if done >> suit & 1:
                continue
            ko = (avail >> (12 * suit + 4)) & 15  # bits: K a, K b, O a, O b
            if not (ko & 3 and ko & 12):
                continue
            for c in _bits(playable & (ko << (12 * suit + 4))):
                singles.append(A.MELD_PLAY_BASE + c)
                if ko == 15:
                    doubles.append(A.DOUBLE_PLAY_BASE + c)
        acts.extend(singles)
        acts.extend(doubles)

    def _standalone_melds(self, s: int, hand: CardMask, acts: list[int], has_trick: bool) -> None:
        """Appends meld-without-play actions (155 + suit, 159 + suit)."""
        rules = self.rules
        if not has_trick and rules.meld_requires_side_trick:
            return
        avail = hand & ~self.meld_used
        done = self.melded_suits[s] if rules.meld_once_per_suit_per_player else 0
        doubles = []
        for suit in range(4):
            if done >> suit & 1:
                continue
            ko = (avail >> (12 * suit + 4)) & 15
            if ko & 3 and ko & 12:
                acts.append(A.MELD_BASE + suit)
                if ko == 15:
                    doubles.append(A.DOUBLE_MELD_BASE + suit)
        acts.extend(doubles)

    def _extra_actions(self, s: int, side: int, has_trick: bool, acts: list[int]) -> None:
        """Appends rob and the other talon-phase actions of the seat to act, in id order."""
        rules = self.rules
        hand = self.hands[s]
        trump_sevens = hand & (3 << (12 * self.trump + 10))
        timing_ok = rules.rob_timing != "lead_only" or not self.trick_cards
        if trump_sevens and rules.rob_enabled and timing_ok:
            if (
                RANK_OF[self.face_up] != Rank.SEVEN
                and (has_trick or not rules.rob_requires_side_trick)
                and (self.reserved_seat < 0 or self.side_of[self.reserved_seat] == side)
            ):
                acts.append(A.ROB)
            if rules.rob_reservation and self.reserved_seat < 0 and RANK_OF[self.face_up] != Rank.SEVEN:
                acts.append(A.RESERVE_ROB)
            if s == self.seven_drawer and self._may_show_seven(has_trick):
                acts.append(A.SHOW_SEVEN)
        if rules.five_sevens_anytime and (hand & _SEVENS).bit_count() == 5:
            acts.append(A.FIVE_SEVENS)
        if rules.meld_timing == "any_time":
            self._standalone_melds(s, hand, acts, has_trick)

    def _may_show_seven(self, has_trick: bool) -> bool:
        """The drawer of the second Seven shows it under the conditions of robbing (§7)."""
        rules = self.rules
        return (has_trick or not rules.rob_requires_side_trick) and (
            rules.rob_timing != "lead_only" or not self.trick_cards
        )

    def _next_partner(self, seat: int) -> int | None:
        """The next partner who may receive the meld privilege (meld.partner_privilege)."""
        return self.window[1] if len(self.window) > 1 else None

    # --- transitions -----------------------------------------------------------------

    def __reduce__(self) -> tuple[Any, tuple[object, ...]]:
        # The compiled class cannot be made without __init__'s arguments (pickle's default),
        # so it is rebuilt as clone() builds it: an empty shell filled slot by slot.
        return (_restore_state, (self.rules, tuple(getattr(self, name) for name in _STATE_SLOTS)))

    def clone(self) -> GaigelState:
        """An independent copy (for search)."""
        new = GaigelState(self.rules, None)
        new._explicit_aus = self._explicit_aus
        new._extras_without_trick = self._extras_without_trick
        new._lead_mask = self._lead_mask
        new._meld_own_turn = self._meld_own_turn
        new._meld_with_play = self._meld_with_play
        new._n_tricks = self._n_tricks
        new._other_extras = self._other_extras
        new._outcome = self._outcome
        new._target = self._target
        new._tb = self._tb
        new._trump_sevens = self._trump_sevens
        new._winner_melds = self._winner_melds
        new.crossed = self.crossed[:]
        new.deal = self.deal
        new.declarer = self.declarer
        new.events = None if self.events is None else self.events[:]
        new.face_down = self.face_down
        new.face_up = self.face_up
        new.forehand = self.forehand
        new.hands = self.hands[:]
        new.history = self.history[:]
        new.known = self.known[:]
        new.last_winner = self.last_winner
        new.leader = self.leader
        new.meld_used = self.meld_used
        new.melded_suits = self.melded_suits[:]
        new.melds = self.melds[:]
        new.n = self.n
        new.num_sides = self.num_sides
        new.opening = self.opening
        new.phase = self.phase
        new.reserved_seat = self.reserved_seat
        new.rob_cards = self.rob_cards
        new.robbed_by = self.robbed_by
        new.rules = self.rules
        new.seven_drawer = self.seven_drawer
        new.shown_sevens = self.shown_sevens
        new.side_cards = self.side_cards[:]
        new.side_melds = self.side_melds[:]
        new.side_of = self.side_of
        new.side_tricks = self.side_tricks[:]
        new.strict = self.strict
        new.talon = self.talon
        new.to_act = self.to_act
        new.tpos = self.tpos
        new.trick1_special = self.trick1_special
        new.trick_cards = self.trick_cards[:]
        new.trick_no = self.trick_no
        new.tricks = self.tricks[:]
        new.trump = self.trump
        new.trump_card = self.trump_card
        new.win_card = self.win_card
        new.win_idx = self.win_idx
        new.window = self.window[:]
        new.window_over = self.window_over
        return new

    def enable_events(self) -> list[Event]:
        """Starts recording the typed events of :mod:`gaigel.events` (the server turns them into protocol messages).

        Pass ``record_events=True`` to the constructor to also get the events of a hand
        that ends at the deal (five Sevens, redeal)."""
        if self.events is None:
            self.events = []
        return self.events

    def apply_checked(self, action: int) -> None:
        """Applies *action* after checking it against :meth:`legal_actions`.

        :raises IllegalActionError: naming the action and why it is illegal.
        """
        if isinstance(action, bool) or not isinstance(action, int):
            raise IllegalActionError(-1, f"an action must be an integer id, got {action!r}")
        if action not in self.legal_actions():
            raise IllegalActionError(action, self.why_illegal(action))
        self.apply(action)

    def apply(self, action: int) -> None:
        """Applies a legal *action* without checking it (the caller's responsibility)."""
        self.history.append(action)
        if action < 48:
            self._play(action)
        elif action < 144:
            self._play_with_meld(action)
        elif action == A.PASS:
            self._pass_aus()
        elif action == A.ROB:
            self._rob()
        elif action < A.AUS:
            self._declare_opening(Opening(action - A.OPENING_BASE))
        elif action == A.AUS:
            self._call_aus()
        elif action == A.RESERVE_ROB:
            self.reserved_seat = self.to_act
            if self.events is not None:
                self.events.append(RobReserved(self.to_act))
        elif action == A.SHOW_SEVEN:
            self._show_seven()
        elif action == A.FIVE_SEVENS:
            if self.events is not None:
                self.events.append(FiveSevens(self.to_act, tuple(cards_of(self.hands[self.to_act] & _SEVENS))))
            self._finish(Termination.FIVE_SEVENS, [self.side_of[self.to_act]])
        elif action < A.NO_MELD:
            double = action >= A.DOUBLE_MELD_BASE
            suit = action - (A.DOUBLE_MELD_BASE if double else A.MELD_BASE)
            self._meld(self.to_act, suit, double, -1)
            if self.phase == Phase.MELD_WINDOW:
                self._close_meld_window()
        elif action == A.NO_MELD:
            if self.events is not None:
                self.events.append(MeldPassed(self.to_act))
            self._close_meld_window()
        elif action == A.GIVE_MELD:
            self.window.pop(0)
            if self.events is not None:
                self.events.append(MeldGiven(self.to_act, self.window[0]))
            self.to_act = self.window[0]
        else:
            raise IllegalActionError(action, f"not an action id (0..{A.NUM_ACTIONS - 1})")

    def _play(self, c: CardId) -> None:
        s = self.to_act
        self.hands[s] = self.hands[s] ^ (1 << c)  # not ^=: see the module docstring (mypyc)
        if self.known[s]:
            self.known[s] = self.known[s] & ~(1 << c)
        tc = self.trick_cards
        tc.append(c)
        if self.events is not None:
            self.events.append(CardPlayed(s, c, self.face_down))
        k = len(tc)
        if k == 1:
            self.win_idx = 0
            self.win_card = c
        elif self._tb[self.win_card * 48 + c]:
            self.win_idx = k - 1
            self.win_card = c
        if k == self.n:
            self._finish_trick()
        else:
            self.to_act = s + 1 if s + 1 < self.n else 0

    def _play_with_meld(self, action: int) -> None:
        double = action >= A.DOUBLE_PLAY_BASE
        c = action % 48
        self._meld(self.to_act, SUIT_OF[c], double, c)
        self._play(c)

    def _meld(self, s: int, suit: int, double: bool, played: CardId) -> None:
        """Declares a marriage of *suit* for seat *s*; *played* is the card going to the trick (or -1)."""
        rules = self.rules
        base = 12 * suit + 4
        avail = self.hands[s] & ~self.meld_used & (15 << base)
        if double:
            used = avail
        else:
            kings = avail & (3 << base)
            obers = avail & (12 << base)
            if played >= 0:
                other = obers if RANK_OF[played] == Rank.KING else kings
                used = (1 << played) | (other & -other)
            else:
                used = (kings & -kings) | (obers & -obers)
        if suit == self.trump:
            points = rules.meld_double_trump if double else rules.meld_single_trump
        else:
            points = rules.meld_double_plain if double else rules.meld_single_plain
        self.meld_used |= used
        self.melded_suits[s] = self.melded_suits[s] | (1 << suit)
        shown = used & ~(1 << played) if played >= 0 else used
        self.known[s] = self.known[s] | shown
        side = self.side_of[s]
        self.side_melds[side] = self.side_melds[side] + points
        self._note_points(side)
        cards = tuple(cards_of(used))
        self.melds.append((s, suit, double, cards, points))
        if self.events is not None:
            self.events.append(Melded(s, suit, double, cards, points))

    def _note_points(self, side: int) -> None:
        if side not in self.crossed and self.side_cards[side] + self.side_melds[side] >= self.rules.target:
            self.crossed.append(side)

    def _rob(self) -> None:
        s = self.to_act
        seven = (self.hands[s] & (3 << (12 * self.trump + 10))).bit_length() - 1
        taken = self.face_up
        self.hands[s] = self.hands[s] ^ ((1 << seven) | (1 << taken))
        self.known[s] = self.known[s] | (1 << taken)
        self.face_up = seven
        self.robbed_by = s
        self.rob_cards = (seven, taken)
        if self.events is not None:
            self.events.append(Robbed(s, seven, taken))

    def _show_seven(self) -> None:
        s = self.to_act
        seven_bits = self.hands[s] & (3 << (12 * self.trump + 10)) & ~self.shown_sevens
        seven = (seven_bits & -seven_bits).bit_length() - 1
        self.shown_sevens |= 1 << seven
        self.seven_drawer = -1
        self.known[s] = self.known[s] | (1 << seven)
        side = self.side_of[s]
        self.side_melds[side] = self.side_melds[side] + self.rules.rob_second_seven_points
        self._note_points(side)
        if self.events is not None:
            self.events.append(SevenShown(s, seven, self.rules.rob_second_seven_points))

    def _declare_opening(self, kind: Opening) -> None:
        rules = self.rules
        self._lead_mask = opening_options(rules, self.hands[self.to_act], self.trump)[kind]
        self.opening = kind
        self.trick1_special = True
        self.phase = Phase.PLAY
        if kind == Opening.ANDERE_ALTE:
            self._tb, self.face_down = OTHER_ACE_BEATS, True
        elif kind == Opening.GE_ELFEN:
            self._tb, self.face_down = NEVER_BEATS, False
        elif kind == Opening.AUF_DISSLE:
            self.declarer = self.to_act
            self.face_down = False
            self._tb = BEATS[NO_TRUMP] if rules.dissle_first_trick == "no_trump_open" else BEATS[self.trump]
        else:  # HOEHER_HAT, TRUMPF_HOEHER: higher of the led suit, face down
            self._tb, self.face_down = BEATS[NO_TRUMP], True
        if self.events is not None:
            self.events.append(OpeningDeclared(self.to_act, kind))

    def _finish_trick(self) -> None:
        if self.seven_drawer >= 0:
            self.seven_drawer = -1  # the second Seven could be shown only in this trick (§17)
        tc = self.trick_cards
        n = self.n
        winner = self.leader + self.win_idx
        if winner >= n:
            winner -= n
        side = self.side_of[winner]
        points = 0
        for c in tc:
            points += POINTS_OF[c]
        self.trick_no += 1
        if self.trick_no == self._n_tricks:
            points += self.rules.last_trick_bonus
        self.side_cards[side] = self.side_cards[side] + points
        self.side_tricks[side] = self.side_tricks[side] + 1
        cards = tuple(tc)
        self.tricks.append(TrickView(self.leader, cards, winner))
        if self.events is not None:
            self.events.append(TrickTaken(self.leader, cards, winner, points))
        self.trick_cards = []
        self.last_winner = winner
        if self.trick1_special:
            self.trick1_special = False
            self.face_down = False
            self._tb = BEATS[self.trump]
        if side not in self.crossed and self.side_cards[side] + self.side_melds[side] >= self._target:
            self.crossed.append(side)
        # RULES.md §10.7: 1. a Dissle declarer who wins a trick fails
        if self.declarer >= 0 and winner == self.declarer:
            self._finish(Termination.DISSLE_FAILED, [x for x in range(self.num_sides) if x != side])
            return
        # 2. Aus check or window
        if self._explicit_aus:
            self.phase = Phase.AUS_WINDOW
            self.window = [(winner + i) % n for i in range(n)]
            self.window_over = tuple(x for x in range(self.num_sides) if self.side_total(x) >= self._target)
            self.to_act = winner
            return
        if self.crossed:
            self._finish(Termination.TARGET_REACHED, [self.crossed[0]])
            return
        if self._winner_melds:
            self._after_aus()
            return
        # 3. and 4. (inlined _after_meld for the common rules: this runs once per trick)
        if self.face_up >= 0:
            self._draw_round()
            if self.declarer >= 0 and self._dissle_after_draw():
                return
        if self.trick_no == self._n_tricks:
            self._decide_by_points()
            return
        self.phase = Phase.PLAY
        self.leader = self.to_act = winner

    def _after_aus(self) -> None:
        rules = self.rules
        if (
            rules.meld_timing == "trick_winner"
            and self.trick_no < self._n_tricks
            and (not self.strict or rules.meld_after_talon)
        ):
            w = self.last_winner
            self.phase = Phase.MELD_WINDOW
            self.window = [w]
            if rules.meld_partner_privilege:  # the winner, then his partners in playing order
                self.window += [
                    x for x in ((w + i) % self.n for i in range(1, self.n)) if self.side_of[x] == self.side_of[w]
                ]
            self.to_act = w
            return
        self._after_meld()

    def _close_meld_window(self) -> None:
        self.window = []
        self._after_meld()

    def _after_meld(self) -> None:
        # 3. draw round while the talon lasts, then the Dissle checks
        if self.face_up >= 0:
            self._draw_round()
            if self.declarer >= 0 and self._dissle_after_draw():
                return
        # 4. no cards left: decide by points
        if self.trick_no == self._n_tricks:
            self._decide_by_points()
            return
        self.phase = Phase.PLAY
        self.leader = self.to_act = self.last_winner

    def _dissle_after_draw(self) -> bool:
        """§10.7 step 3: five Sevens win the Dissle; an exhausted talon fails it. True if the hand ended."""
        if (self.hands[self.declarer] & _SEVENS).bit_count() == 5:
            self._finish(Termination.DISSLE_WON, [self.side_of[self.declarer]])
            return True
        if self.strict and self.rules.dissle_fail_on_talon_exhausted:
            side = self.side_of[self.declarer]
            self._finish(Termination.DISSLE_FAILED, [x for x in range(self.num_sides) if x != side])
            return True
        return False

    def _draw_round(self) -> None:
        """Every seat draws one card, the trick winner first; the last drawer of the final
        round takes the face-up card (RULES.md §5.3)."""
        n = self.n
        talon = self.talon
        hands = self.hands
        seat = self.last_winner
        tpos = self.tpos
        final = len(talon) - tpos < n
        events = self.events
        for i in range(n - 1 if final else n):
            c = talon[tpos + i]
            hands[seat] = hands[seat] | (1 << c)
            if events is not None:
                events.append(CardDrawn(seat, c, False))
            seat = seat + 1 if seat + 1 < n else 0
        if final:
            c = self.face_up
            self.face_up = -1
            self.known[seat] = self.known[seat] | (1 << c)
            hands[seat] = hands[seat] | (1 << c)
            if events is not None:
                events.append(CardDrawn(seat, c, True))
            self.tpos = len(talon)
            self.strict = True
        else:
            self.tpos = tpos + n
        if self.robbed_by >= 0 and self.rules.rob_second_seven_points:
            self._note_second_seven(tpos, n - 1 if final else n)

    def _note_second_seven(self, tpos: int, count: int) -> None:
        """Remembers who drew the second trump Seven (the one that did not rob) in this
        round: he alone may show it, at his next decision (rob.second_seven_points, §17)."""
        other = self.rob_cards[0] ^ 1
        for i in range(count):
            if self.talon[tpos + i] == other:
                self.seven_drawer = (self.last_winner + i) % self.n

    def _call_aus(self) -> None:
        s = self.to_act
        side = self.side_of[s]
        if self.events is not None:
            self.events.append(AusCalled(s))
        if self.side_total(side) >= self.rules.target:
            self._finish(Termination.AUS_CALLED, [side])
        else:
            self._finish(Termination.UNTERGAIGELT, [x for x in range(self.num_sides) if x != side], losers=[side])

    def _pass_aus(self) -> None:
        if self.events is not None:
            self.events.append(AusPassed(self.to_act))
        self.window.pop(0)
        if self.window:
            self.to_act = self.window[0]
            return
        over = self.window_over
        self.window_over = ()
        if over and self.trick_no < self._n_tricks:
            self._finish(
                Termination.UEBERGAIGELT, [x for x in range(self.num_sides) if x not in over], losers=list(over)
            )
            return
        self._after_aus()

    def _decide_by_points(self) -> None:
        totals = [self.side_total(x) for x in range(self.num_sides)]
        best = max(totals)
        tied = [x for x in range(self.num_sides) if totals[x] == best]
        if len(tied) > 1:
            if self.rules.tie_break == "void":
                self._finish(Termination.CARDS_EXHAUSTED, [])
                return
            # last_trick: the tied side that won the latest trick
            for _, _, w in reversed(self.tricks):
                if self.side_of[w] in tied:
                    tied = [self.side_of[w]]
                    break
        self._finish(Termination.CARDS_EXHAUSTED, tied[:1])

    def _trickless(self, side: int) -> bool:
        if self.rules.gigackel_criterion == "no_points":
            return self.side_total(side) == 0
        return self.side_tricks[side] == 0

    def _finish(self, term: Termination, winners: list[int], losers: list[int] | None = None) -> None:
        """Ends the hand and computes the dashes (RULES.md §10.4-10.6)."""
        sides = self.num_sides
        dashes = [0] * sides
        if term in (Termination.UEBERGAIGELT, Termination.UNTERGAIGELT):
            for x in losers or ():
                dashes[x] = 2
        elif term == Termination.DISSLE_FAILED:
            dashes[self.side_of[self.declarer]] = 1
        elif term in (Termination.DISSLE_WON, Termination.FIVE_SEVENS):
            for x in range(sides):
                if x not in winners:
                    dashes[x] = 1
        elif winners:  # an Aus or the end of the cards: §10.4-10.5
            dissle_side = self.side_of[self.declarer] if self.declarer >= 0 else -1
            beaten = [x for x in range(sides) if x not in winners]
            trickless = [x for x in beaten if x != dissle_side and self._trickless(x)]
            if sides == 2 or self.rules.three_player_losers == "all_non_winners":
                for x in beaten:
                    dashes[x] = 2 if x in trickless else 1
            elif dissle_side in beaten:
                dashes[dissle_side] = 1
                for x in trickless:
                    dashes[x] = 2
            elif trickless:
                for x in trickless:
                    dashes[x] = 2
            else:
                low = min(self.side_total(x) for x in beaten)
                for x in beaten:
                    if self.side_total(x) == low:
                        dashes[x] = 1
        self._outcome = HandOutcome(
            termination=term,
            winners=tuple(sorted(winners)),
            dashes=tuple(dashes),
            points=tuple(self.side_total(x) for x in range(sides)),
            tricks=tuple(self.side_tricks),
        )
        self.phase = Phase.TERMINAL
        self.window = []
        if self.events is not None:
            self.events.append(HandTerminated(term))

    # --- diagnostics, observation, hashing -------------------------------------------

    def why_illegal(self, action: int) -> str:
        """A sentence saying why *action* is not legal now (for error messages)."""
        from gaigel.explain import why_illegal

        return why_illegal(self, action)

    def observation(self, seat: int) -> Observation:
        """Exactly what *seat* may know now (RULES.md §3.5)."""
        from gaigel.observation import observe

        return observe(self, seat)

    def state_hash(self) -> str:
        """A hash of the full state, stable across processes, platforms and Python versions."""
        d = _decimal
        parts: list[str] = [
            STATE_HASH_FORMAT, d(self.trump_card), d(int(self.phase)), d(self.to_act), d(self.leader), d(self.forehand),
            d(self.tpos), d(self.face_up), d(self.trick_no), d(int(self.strict)),
            d(-1 if self.opening is None else int(self.opening)), d(self.declarer), d(self.robbed_by),
            d(self.reserved_seat), d(self.shown_sevens), d(self.meld_used), d(self.win_idx),
        ]  # fmt: skip
        for name, values in (
            ("h", self.hands), ("k", self.known), ("t", self.trick_cards), ("c", self.side_cards),
            ("m", self.side_melds), ("x", self.side_tricks), ("o", self.crossed), ("s", self.melded_suits),
            ("w", self.window), ("v", self.window_over),
        ):  # fmt: skip
            parts.append(name)
            for v in values:
                parts.append(d(v))
        parts.append("d")
        talon = self.talon
        for i in range(self.tpos, len(talon)):
            parts.append(d(talon[i]))
        if self.seven_drawer >= 0:  # (only then, so that every other state hashes as before)
            parts += ["z", d(self.seven_drawer)]
        if self._outcome is not None:
            parts += ["r", self._outcome.termination.value]
            parts += [d(x) for x in self._outcome.winners]
            parts += [d(x) for x in self._outcome.dashes]
        return hashlib.blake2b(",".join(parts).encode("ascii"), digest_size=16).hexdigest()

    def __str__(self) -> str:
        hands = " | ".join(" ".join(card_code(c) for c in cards_of(h)) for h in self.hands)
        trick = " ".join(card_code(c) for c in self.trick_cards)
        return (
            f"phase={self.phase.name} to_act={self.to_act} trump={'EBHS'[self.trump]} "
            f"face_up={card_code(self.face_up) if self.face_up >= 0 else '-'} talon={self.talon_size} "
            f"trick_no={self.trick_no} trick=[{trick}] hands=[{hands}] totals={[self.side_total(x) for x in range(self.num_sides)]}"
        )


_STATE_SLOTS: tuple[str, ...] = tuple(name for name in _SLOTS if name != "rules")


def _restore_state(rules: Ruleset, values: tuple[object, ...]) -> GaigelState:
    """The inverse of ``GaigelState.__reduce__`` (pickle, deepcopy, the arena's worker processes)."""
    state = GaigelState(rules, None)
    for name, value in zip(_STATE_SLOTS, values, strict=True):
        setattr(state, name, value)
    return state
