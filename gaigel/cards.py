"""Cards, suits and ranks of the double 24-card Gaigel deck (DEALS.md, RULES.md §2).

A card is an int 0..47: ``suit * 12 + rank * 2 + copy``. Ranks are numbered from the
highest (Ace = 0) to the lowest (Seven = 5), so inside one suit a *smaller* id is a
*stronger* card, and the two copies of a face sit next to each other. No rule may depend
on the copy bit; it exists for bookkeeping only.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Final, TypeAlias

CardId: TypeAlias = int
"""0..47 = suit * 12 + rank * 2 + copy."""

CardMask: TypeAlias = int
"""A set of cards as a 48-bit int, bit ``c`` set for card ``c``."""


class Suit(enum.IntEnum):
    """The four suits in DEALS.md order; none ranks above another."""

    EICHEL = 0
    BLATT = 1
    HERZ = 2
    SCHELLEN = 3


class Rank(enum.IntEnum):
    """The six ranks, strongest first (RULES.md §2: A 10 K O U 7)."""

    ACE = 0
    TEN = 1
    KING = 2
    OBER = 3
    UNTER = 4
    SEVEN = 5


SUIT_LETTERS = "EBHS"
RANK_LETTERS = "ATKOU7"
COPY_LETTERS = "ab"
SUIT_NAMES = ("Eichel", "Blatt", "Herz", "Schellen")
RANK_POINTS = (11, 10, 4, 3, 2, 0)

ALL_CARDS: Final[CardMask] = (1 << 48) - 1
DECK_POINTS = 240

# Per-card tables, computed once; the engine's hot paths index these instead of calling.
SUIT_OF: Final[tuple[int, ...]] = tuple(c // 12 for c in range(48))
RANK_OF: Final[tuple[int, ...]] = tuple((c % 12) // 2 for c in range(48))
POINTS_OF: Final[tuple[int, ...]] = tuple(RANK_POINTS[(c % 12) // 2] for c in range(48))
CODE_OF: Final[tuple[str, ...]] = tuple(
    SUIT_LETTERS[c // 12] + RANK_LETTERS[(c % 12) // 2] + COPY_LETTERS[c % 2] for c in range(48)
)
_CARD_BY_CODE = {code: c for c, code in enumerate(CODE_OF)}

SUIT_MASK: Final[tuple[CardMask, ...]] = tuple(0xFFF << (12 * s) for s in range(4))
"""All twelve cards of each suit."""


def card(suit: Suit | int, rank: Rank | int, copy: int = 0) -> CardId:
    """Builds a card id from its suit, rank and copy (0 or 1)."""
    return int(suit) * 12 + int(rank) * 2 + copy


def card_suit(c: CardId) -> Suit:
    """Gets the suit of *c*."""
    return Suit(c // 12)


def card_rank(c: CardId) -> Rank:
    """Gets the rank of *c*."""
    return Rank((c % 12) // 2)


def card_points(c: CardId) -> int:
    """Gets the card points of *c* (11, 10, 4, 3, 2 or 0)."""
    return POINTS_OF[c]


def card_code(c: CardId) -> str:
    """Gets the three-letter code of *c*, for example ``"EAa"`` for id 0."""
    return CODE_OF[c]


def parse_card(code: str) -> CardId:
    """Parses a card code such as ``"HKb"``.

    :raises ValueError: if *code* is not one of the 48 card codes.
    """
    try:
        return _CARD_BY_CODE[code]
    except KeyError:
        raise ValueError(f"not a card code: {code!r} (expected suit E/B/H/S, rank A/T/K/O/U/7, copy a/b)") from None


def mask_of(cards: Iterable[CardId]) -> CardMask:
    """The bit mask of *cards*."""
    m = 0
    for c in cards:
        m |= 1 << c
    return m


def cards_of(mask: CardMask) -> list[CardId]:
    """The cards of *mask* in ascending id order."""
    out: list[CardId] = []
    for s in range(4):
        chunk = (mask >> (12 * s)) & 0xFFF
        if chunk:
            out.extend(SUIT_CARDS[s][chunk])
    return out


def _suit_table(suit: int) -> tuple[tuple[CardId, ...], ...]:
    base = 12 * suit
    return tuple(tuple(base + b for b in range(12) if chunk >> b & 1) for chunk in range(4096))


SUIT_CARDS: Final[tuple[tuple[tuple[CardId, ...], ...], ...]] = tuple(_suit_table(s) for s in range(4))
"""``SUIT_CARDS[s][chunk]``: the card ids of a 12-bit suit chunk, ascending."""
