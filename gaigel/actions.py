"""The closed action-id space of protocol v1 (never changes within v1).

=========  ==========================================================================
id         action
=========  ==========================================================================
0..47      ``play <card>``: play card id *c* (DEALS.md numbering)
48..95     ``play <card> +marriage``: play card ``id-48`` (a King or Ober) and declare
           the marriage of its suit (RULES.md §6)
96..143    ``play <card> +double``: play card ``id-96`` and declare the double marriage
144        ``rob``: exchange the trump Seven for the face-up trump card (§7)
145..149   ``opening <kind>``: the forehand's trick-1 declaration (§4), 145 + Opening
150        ``aus``: claim 101 (explicit Aus mode, §10.3)
151        ``pass``: let the Aus window go by
152        ``reserve rob``: place the trump Seven under the trump card (rob.reservation)
153        ``show seven``: show the second trump Seven for points (rob.second_seven_points)
154        ``five sevens``: declare five Sevens, winning the hand (five_sevens_anytime)
155..158   ``meld <suit>``: declare a marriage without playing (meld.timing trick_winner
           or any_time), 155 + suit
159..162   ``meld double <suit>``: the same for a double marriage
163        ``no meld``: decline the trick winner's meld privilege
164        ``give meld``: hand the meld privilege to the next partner
=========  ==========================================================================

Labels are context-free (they need no state) and parse back with :func:`parse_action`.
"""

from __future__ import annotations

from typing import Final, TypeAlias

from gaigel.cards import CODE_OF, SUIT_LETTERS, parse_card
from gaigel.ruleset import Opening

ActionId: TypeAlias = int

PLAY_BASE: Final = 0
MELD_PLAY_BASE: Final = 48
DOUBLE_PLAY_BASE: Final = 96
ROB: Final = 144
OPENING_BASE: Final = 145
AUS: Final = 150
PASS: Final = 151
RESERVE_ROB: Final = 152
SHOW_SEVEN: Final = 153
FIVE_SEVENS: Final = 154
MELD_BASE: Final = 155
DOUBLE_MELD_BASE: Final = 159
NO_MELD: Final = 163
GIVE_MELD: Final = 164
NUM_ACTIONS: Final = 165

_OPENING_SLUGS = {o: o.name.lower() for o in Opening}


def opening_action(kind: Opening) -> ActionId:
    """The action id declaring opening *kind*."""
    return OPENING_BASE + int(kind)


def action_label(action: ActionId) -> str:
    """The readable, context-free label of *action*, for example ``"play HKa +marriage"``.

    :raises ValueError: for an id outside 0..164.
    """
    if 0 <= action < 48:
        return f"play {CODE_OF[action]}"
    if 48 <= action < 96:
        return f"play {CODE_OF[action - 48]} +marriage"
    if 96 <= action < 144:
        return f"play {CODE_OF[action - 96]} +double"
    if OPENING_BASE <= action < OPENING_BASE + 5:
        return f"opening {_OPENING_SLUGS[Opening(action - OPENING_BASE)]}"
    if MELD_BASE <= action < MELD_BASE + 4:
        return f"meld {SUIT_LETTERS[action - MELD_BASE]}"
    if DOUBLE_MELD_BASE <= action < DOUBLE_MELD_BASE + 4:
        return f"meld double {SUIT_LETTERS[action - DOUBLE_MELD_BASE]}"
    named = _NAMED.get(action)
    if named is None:
        raise ValueError(f"action id {action} is outside the action space 0..{NUM_ACTIONS - 1}")
    return named


_NAMED = {
    ROB: "rob",
    AUS: "aus",
    PASS: "pass",
    RESERVE_ROB: "reserve rob",
    SHOW_SEVEN: "show seven",
    FIVE_SEVENS: "five sevens",
    NO_MELD: "no meld",
    GIVE_MELD: "give meld",
}
_BY_LABEL = {action_label(a): a for a in range(NUM_ACTIONS)}


def parse_action(label: str) -> ActionId:
    """Parses a label made by :func:`action_label` (or a bare card code meaning ``play``).

    :raises ValueError: if *label* names no action.
    """
    text = " ".join(label.split())
    if text in _BY_LABEL:
        return _BY_LABEL[text]
    try:
        return parse_card(text)
    except ValueError:
        raise ValueError(
            f"not an action label: {label!r} (e.g. 'play HKa', 'play HKa +marriage', 'rob', 'opening hoeher_hat')"
        ) from None


def played_card(action: ActionId) -> int | None:
    """The card a play action plays (with or without a meld), else None."""
    if 0 <= action < 144:
        return action % 48
    return None
