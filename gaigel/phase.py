"""The phases of a hand: what kind of decision the state waits for.

A module of its own so that the state and the wordy error explanations can both use it
without importing each other.
"""

from __future__ import annotations

import enum


class Phase(enum.IntEnum):
    """What kind of decision the state waits for."""

    OPENING = 0
    """The forehand declares the trick-1 opening (RULES.md §4)."""
    PLAY = 1
    """The seat to act plays a card (and may meld, rob, ... first)."""
    AUS_WINDOW = 2
    """Explicit Aus mode: each seat answers aus or pass after a trick (§10.3)."""
    MELD_WINDOW = 3
    """meld.timing = trick_winner: the trick winner may meld before the draw (§6.3)."""
    TERMINAL = 4
    """The hand is over; see :meth:`gaigel.state.GaigelState.outcome`."""


__all__ = ["Phase"]
