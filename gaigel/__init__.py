"""Gaigel: the Swabian card game as a pure rules engine (no I/O, no clock, no randomness).

Start with :func:`gaigel.deal.deal` and :class:`gaigel.state.GaigelState`; the server,
the arena and Python bots all build on these.
"""

from gaigel.actions import ActionId, action_label, parse_action
from gaigel.cards import CardId, card_code, parse_card
from gaigel.deal import Deal, deal
from gaigel.phase import Phase
from gaigel.ruleset import Opening, Ruleset, RulesetError, preset
from gaigel.state import ENGINE_VERSION, GaigelState, HandOutcome, IllegalActionError, Termination

__version__ = "0.1.0"

__all__ = [
    "ENGINE_VERSION",
    "ActionId",
    "CardId",
    "Deal",
    "GaigelState",
    "HandOutcome",
    "IllegalActionError",
    "Opening",
    "Phase",
    "Ruleset",
    "RulesetError",
    "Termination",
    "action_label",
    "card_code",
    "deal",
    "parse_action",
    "parse_card",
    "preset",
]
