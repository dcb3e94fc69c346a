"""Sentences that say why an action is illegal, for bots and their authors.

Kept apart from the state: it runs only on the error path, so it may be slow and wordy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gaigel import actions as A
from gaigel.cards import SUIT_NAMES, SUIT_OF, card_code, cards_of
from gaigel.phase import Phase

if TYPE_CHECKING:
    from gaigel.state import GaigelState


def why_illegal(state: GaigelState, action: int) -> str:
    """Explains why *action* is not among ``state.legal_actions()``."""
    if not 0 <= action < A.NUM_ACTIONS:
        return f"not an action id (the action space is 0..{A.NUM_ACTIONS - 1})"
    if action in state.legal_actions():
        return "the action is legal"
    if state.phase == Phase.TERMINAL:
        return "the hand is over"
    legal = ", ".join(A.action_label(a) for a in state.legal_actions())
    seat = state.to_act
    phase_need = {
        Phase.OPENING: "the forehand must first declare an opening",
        Phase.AUS_WINDOW: "the Aus window is open: answer aus or pass",
        Phase.MELD_WINDOW: "the trick winner's meld window is open: meld, no meld or give meld",
    }
    if state.phase in phase_need:
        return f"{phase_need[state.phase]} (legal: {legal})"
    card = A.played_card(action)
    if card is not None:
        if not state.hands[seat] >> card & 1:
            return f"seat {seat} does not hold {card_code(card)} (hand: {' '.join(map(card_code, cards_of(state.hands[seat])))})"
        if action >= 48:
            return _why_no_meld(state, seat, SUIT_OF[card], legal)
        if state.trick1_special and not state.trick_cards:
            return f"the opening {state.opening.name if state.opening else ''} does not allow leading {card_code(card)} (legal: {legal})"
        if state.strict:
            return f"the last five tricks are strict (follow suit, head the trick, trump, overtrump): {card_code(card)} is not allowed (legal: {legal})"
        return f"{card_code(card)} cannot be played now (legal: {legal})"
    if action == A.ROB:
        return _why_no_rob(state, seat, legal)
    if A.OPENING_BASE <= action < A.OPENING_BASE + 5:
        return f"openings are declared only by the forehand before trick 1 (legal: {legal})"
    if action == A.SHOW_SEVEN:
        return (
            "only the player who drew the second trump Seven (after a robbery) may show it, at his next decision "
            f"(rob.second_seven_points; legal: {legal})"
        )
    if action in (A.AUS, A.PASS):
        return f"aus and pass are answers in the Aus window of aus_mode = explicit (legal: {legal})"
    return f"not available now (legal: {legal})"


def _why_no_meld(state: GaigelState, seat: int, suit: int, legal: str) -> str:
    rules = state.rules
    side = state.side_of[seat]
    if rules.meld_timing not in ("own_turn", "lead_only"):
        return f"meld.timing = {rules.meld_timing}: melds are declared with the meld actions, not with a play"
    if state.trick1_special:
        return "no meld in trick 1"
    if rules.meld_requires_side_trick and not state.side_tricks[side]:
        return "your side has not won a trick yet, so it cannot meld"
    if rules.meld_once_per_suit_per_player and state.melded_suits[seat] >> suit & 1:
        return f"seat {seat} has already melded {SUIT_NAMES[suit]} in this hand"
    if rules.meld_timing == "lead_only" and state.trick_cards:
        return "meld.timing = lead_only: melding only when leading"
    return f"no marriage of {SUIT_NAMES[suit]} with this card (you need its King and Ober in hand, unused, and the card must be a legal play; legal: {legal})"


def _why_no_rob(state: GaigelState, seat: int, legal: str) -> str:
    rules = state.rules
    if not rules.rob_enabled:
        return "robbing is disabled in this ruleset"
    if state.strict or state.face_up < 0:
        return "the talon is exhausted: no more robbing"
    if not state.hands[seat] & (3 << (12 * state.trump + 10)):
        return "robbing needs the trump Seven in hand"
    if state.face_up % 12 >= 10:
        return "the face-up card is already a Seven: it has been robbed"
    if rules.rob_requires_side_trick and not state.side_tricks[state.side_of[seat]]:
        return "your side has not won a trick yet, so it cannot rob"
    return f"robbing is not possible now (legal: {legal})"
