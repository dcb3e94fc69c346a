"""What happens in a hand, as typed events (the server turns them into protocol messages).

A :class:`~gaigel.state.GaigelState` built with ``record_events=True`` appends one of
these to ``state.events`` at every visible change, in order. They hold full information
(a face-down card, a drawn card): whoever forwards them filters them for the receiver.
Each is a :class:`~typing.NamedTuple`, so an event is cheap to make, immutable and
compares by value; dispatch on the class (``match ev: case CardPlayed(seat, card, _): ...``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, TypeAlias

from gaigel.cards import CardId
from gaigel.ruleset import Opening

if TYPE_CHECKING:
    from gaigel.state import Termination


class OpeningDeclared(NamedTuple):
    """The forehand declared the trick-1 opening (RULES.md §4)."""

    seat: int
    opening: Opening


class CardPlayed(NamedTuple):
    """*seat* played *card* to the current trick; *face_down* under a face-down opening."""

    seat: int
    card: CardId
    face_down: bool


class TrickTaken(NamedTuple):
    """A trick is complete: who led, the cards in playing order, the winner and its points.

    *points* includes the last-trick bonus (``last_trick_bonus``) when this was the last trick.
    """

    leader: int
    cards: tuple[CardId, ...]
    winner: int
    points: int


class Melded(NamedTuple):
    """*seat* declared a (double) marriage of *suit*, showing *cards*, worth *points*."""

    seat: int
    suit: int
    double: bool
    cards: tuple[CardId, ...]
    points: int


class Robbed(NamedTuple):
    """*seat* exchanged its trump *seven* for the face-up trump card *taken* (§7)."""

    seat: int
    seven: CardId
    taken: CardId


class RobReserved(NamedTuple):
    """*seat* reserved the right to rob (``rob.reservation``)."""

    seat: int


class SevenShown(NamedTuple):
    """*seat* showed the second trump *seven* for *points* (``rob.second_seven_points``)."""

    seat: int
    seven: CardId
    points: int


class FiveSevens(NamedTuple):
    """*seat* holds five Sevens and shows them: the hand ends (§10.6)."""

    seat: int
    sevens: tuple[CardId, ...]


class CardDrawn(NamedTuple):
    """*seat* drew *card* from the talon; *face_up* when it was the public face-up trump card."""

    seat: int
    card: CardId
    face_up: bool


class AusCalled(NamedTuple):
    """*seat* called Aus in the Aus window (``aus_mode = explicit``)."""

    seat: int


class AusPassed(NamedTuple):
    """*seat* passed in the Aus window."""

    seat: int


class MeldPassed(NamedTuple):
    """*seat* let its meld privilege go (``meld.timing = trick_winner``)."""

    seat: int


class MeldGiven(NamedTuple):
    """*seat* handed its meld privilege on to its partner *to_seat* (``meld.partner_privilege``)."""

    seat: int
    to_seat: int


class HandTerminated(NamedTuple):
    """The hand is over; :meth:`~gaigel.state.GaigelState.outcome` has the full result."""

    termination: Termination


Event: TypeAlias = (
    OpeningDeclared
    | CardPlayed
    | TrickTaken
    | Melded
    | Robbed
    | RobReserved
    | SevenShown
    | FiveSevens
    | CardDrawn
    | AusCalled
    | AusPassed
    | MeldPassed
    | MeldGiven
    | HandTerminated
)
"""Any event of a hand."""

__all__ = [
    "AusCalled",
    "AusPassed",
    "CardDrawn",
    "CardPlayed",
    "Event",
    "FiveSevens",
    "HandTerminated",
    "MeldGiven",
    "MeldPassed",
    "Melded",
    "OpeningDeclared",
    "RobReserved",
    "Robbed",
    "SevenShown",
    "TrickTaken",
]
