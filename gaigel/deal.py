"""The seeded deal of DEALS.md (deal format v1), reproducible in any language.

The engine never draws randomness itself: a hand starts from a :class:`Deal`, which comes
either from :func:`deal` (seed, hand index, players) or from explicit cards (tests,
positions written by hand).
"""

from __future__ import annotations

import dataclasses
import hashlib
import types
from typing import TYPE_CHECKING, Any

from gaigel._pickling import reduce_through_constructor
from gaigel.cards import CardId, card_code

if TYPE_CHECKING:  # mypyc's machine integers; plain int when the module runs as Python
    from mypy_extensions import i64

STANDARD_PLAYER_COUNTS: tuple[int, ...] = (2, 3, 4, 6)
"""The table sizes of the standard game (RULES.md)."""
PLAYER_COUNTS: tuple[int, ...] = (*STANDARD_PLAYER_COUNTS, 8)
"""Every table size the engine deals and plays: 48 cards split into 5-card hands and whole
draw rounds; 8 is a RULES.md §14 variant. The one source of these numbers for every layer."""


def player_counts_text(counts: tuple[int, ...] = PLAYER_COUNTS) -> str:
    """*counts* for messages, e.g. ``2, 3, 4 or 6 (8 as a variant)``."""
    standard = [n for n in counts if n in STANDARD_PLAYER_COUNTS]
    text = ", ".join(map(str, standard[:-1])) + f" or {standard[-1]}"
    variants = [str(n) for n in counts if n not in STANDARD_PLAYER_COUNTS]
    return text + (f" ({' or '.join(variants)} as a variant)" if variants else "")


DEAL_FORMAT = "gaigel-deal-v1"
MAX_SEED = (1 << 64) - 1
_MASK64 = (1 << 64) - 1


class SplitMix64:
    """The SplitMix64 generator of DEALS.md, on unsigned 64-bit integers."""

    __slots__ = ("state",)

    def __init__(self, state: int) -> None:
        self.state = state & _MASK64

    def next(self) -> int:
        """Returns the next 64-bit output."""
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """A uniform integer in [0, n) without modulo bias (rejection sampling)."""
        limit = (1 << 64) - ((1 << 64) % n)
        while True:
            x = self.next()
            if x < limit:
                return x % n


def check_seed(seed: int) -> int:
    """Returns *seed* if it is an unsigned 64-bit integer.

    :raises ValueError: otherwise, naming the allowed range.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise ValueError(f"seed must be an integer in 0..{MAX_SEED}, got {seed!r}")
    return seed


def hand_stream(seed: int, hand: int) -> SplitMix64:
    """The generator of hand *hand* of the match with seed *seed*."""
    check_seed(seed)
    if hand < 0:
        raise ValueError(f"hand index must be >= 0, got {hand}")
    digest = hashlib.sha256(f"gaigel-deal-v1:{seed}:{hand}".encode("ascii")).digest()
    return SplitMix64(int.from_bytes(digest[:8], "big"))


def shuffled_deck(seed: int, hand: int) -> list[CardId]:
    """The 48 cards after the Fisher-Yates shuffle of hand *hand* (DEALS.md)."""
    if _NATIVE_INTS:
        check_seed(seed)
        if hand < 0:
            raise ValueError(f"hand index must be >= 0, got {hand}")
        digest = hashlib.sha256(f"gaigel-deal-v1:{seed}:{hand}".encode("ascii")).digest()
        return _shuffle_i64(int.from_bytes(digest[:8], "big", signed=True))
    return _shuffle_int(hand_stream(seed, hand).state)


def _shuffle_int(state: int) -> list[CardId]:
    """The shuffle on Python integers (masked to 64 bits): the pure-Python engine's."""
    deck = list(range(48))
    # SplitMix64.below inlined: dealing is part of every self-play hand.
    for i in range(47, 0, -1):
        n = i + 1
        limit = (1 << 64) - ((1 << 64) % n)
        while True:
            state = (state + 0x9E3779B97F4A7C15) & _MASK64
            z = state
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
            z ^= z >> 31
            if z < limit:
                break
        j = z % n
        deck[i], deck[j] = deck[j], deck[i]
    return deck


def _shuffle_i64(state: i64) -> list[CardId]:
    """The same shuffle on machine integers, for the compiled engine (mypyc ``i64``).

    A 64-bit word is held as a signed i64 with the same bits (*state* is the unsigned start
    value minus 2**64 when at least 2**63). ``+`` and ``*`` wrap modulo 2**64 (C with
    -fwrapv, see setup.py), so they give the unsigned results' bits; the constants are the
    DEALS.md ones minus 2**64. What differs for signed words is written out:

    * ``>>`` sign-extends, so the logical shift by k masks the top k bits off again;
    * unsigned ``x < limit`` with ``limit = 2**64 - r`` (``r = 2**64 % n``) rejects exactly
      the r largest words, the signed ``-r <= x < 0``;
    * the unsigned ``x % n`` of a negative word is ``(x % n + r) % n`` (floor modulo).

    Only correct compiled: as Python the products do not wrap (:data:`_NATIVE_INTS`).
    """
    deck = list(range(48))
    i: i64 = 47
    while i > 0:
        n: i64 = i + 1
        r: i64 = ((0x7FFFFFFFFFFFFFFF % n + 1) * 2) % n  # 2**64 % n, from 2**63 - 1
        while True:
            state += -7046029254386353131  # 0x9E3779B97F4A7C15
            z: i64 = state
            z = (z ^ ((z >> 30) & 0x3FFFFFFFF)) * -4658895280553007687  # 0xBF58476D1CE4E5B9
            z = (z ^ ((z >> 27) & 0x1FFFFFFFFF)) * -7723592293110705685  # 0x94D049BB133111EB
            z ^= (z >> 31) & 0x1FFFFFFFF
            if z >= 0 or z < -r:
                break
        j: i64 = z % n if z >= 0 else (z % n + r) % n
        deck[i], deck[j] = deck[j], deck[i]
        i -= 1
    return deck


_NATIVE_INTS = not isinstance(_shuffle_i64, types.FunctionType)
"""True when this module runs compiled by mypyc (its functions are then built-in functions,
and ``i64`` arithmetic wraps); the Python sources shuffle on :func:`_shuffle_int`."""


@dataclasses.dataclass(frozen=True)
class Deal:
    """The cards of one hand before the first decision.

    ``hands[i]`` belongs to the i-th player in playing order *starting with the forehand*;
    ``talon`` lists the face-down stock top card first; the face-up ``trump_card`` lies
    under it and is drawn last.
    """

    hands: tuple[tuple[CardId, ...], ...]
    trump_card: CardId
    talon: tuple[CardId, ...]

    def __reduce__(self) -> tuple[type[Any], tuple[object, ...]]:
        return reduce_through_constructor(self)  # (compiled frozen dataclasses need it)

    def __post_init__(self) -> None:
        cards = [c for h in self.hands for c in h] + [self.trump_card, *self.talon]
        if sorted(cards) != list(range(48)):
            raise ValueError("a deal must hold each of the 48 cards exactly once")
        if any(len(h) != 5 for h in self.hands):
            raise ValueError("every player must be dealt 5 cards")

    @property
    def players(self) -> int:
        """Number of players."""
        return len(self.hands)

    @classmethod
    def from_deck(cls, deck: list[CardId] | tuple[CardId, ...], players: int, packets: str = "3-T-2") -> Deal:
        """Deals a shuffled *deck* to *players* in packets ``3-T-2`` (DEALS.md) or ``5-T``."""
        n = players
        if packets == "3-T-2":
            hands = tuple(
                tuple(deck[3 * i : 3 * i + 3]) + tuple(deck[3 * n + 1 + 2 * i : 3 * n + 3 + 2 * i]) for i in range(n)
            )
            trump = deck[3 * n]
        elif packets == "5-T":
            hands = tuple(tuple(deck[5 * i : 5 * i + 5]) for i in range(n))
            trump = deck[5 * n]
        else:
            raise ValueError(f"unknown deal packets {packets!r}")
        return cls(hands=hands, trump_card=trump, talon=tuple(deck[5 * n + 1 :]))

    def digest(self) -> str:
        """A short stable hash of the deal, for match records."""
        text = ";".join(
            [" ".join(map(card_code, h)) for h in self.hands]
            + [card_code(self.trump_card), " ".join(map(card_code, self.talon))]
        )
        return hashlib.blake2b(text.encode("ascii"), digest_size=16).hexdigest()

    def to_json(self) -> dict[str, object]:
        """The deal with card codes, in the shape of vectors/deals.json."""
        return {
            "hands_from_forehand": [[card_code(c) for c in h] for h in self.hands],
            "trump_card": card_code(self.trump_card),
            "talon_top_first": [card_code(c) for c in self.talon],
        }


def deal(seed: int, hand: int, players: int, packets: str = "3-T-2") -> Deal:
    """The deal of hand *hand* (0-based) of the match with *seed* for *players* players."""
    if players not in PLAYER_COUNTS:
        raise ValueError(f"cannot deal to {players} players (allowed: {', '.join(map(str, PLAYER_COUNTS))})")
    return Deal.from_deck(shuffled_deck(seed, hand), players, packets)
