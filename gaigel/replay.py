"""Re-deriving a match from its record, hash for hash (DESIGN.md, Match records)."""

from __future__ import annotations

import dataclasses
from typing import Any

from gaigel.actions import action_label
from gaigel.match import MatchScore, hand_setup, spec_from_record
from gaigel.record import RecordError
from gaigel.state import GaigelState, IllegalActionError


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """The first place where the record and the engine disagree."""

    hand: int
    step: int
    what: str

    def __str__(self) -> str:
        return f"hand {self.hand} step {self.step}: {self.what}"


@dataclasses.dataclass(frozen=True)
class ReplayReport:
    """What a replay found: counts, and the first mismatch if any."""

    hands: int
    actions: int
    mismatch: Mismatch | None
    result: dict[str, Any] | None

    @property
    def ok(self) -> bool:
        """True when every hash matched."""
        return self.mismatch is None


def replay(record: dict[str, Any]) -> ReplayReport:
    """Replays *record* from its seed and actions, stopping at the first mismatch.

    :raises RecordError: when the record does not describe a valid match.
    """
    spec = spec_from_record(record)
    score = MatchScore(spec)
    actions = 0
    for hand in record["hands"]:
        k = hand["index"]
        d, dealer, forehand = hand_setup(spec, k)
        if hand.get("deal_hash") != d.digest():
            return ReplayReport(k, actions, Mismatch(k, 0, "the deal differs from the seed's deal"), None)
        if hand.get("dealer", dealer) != dealer:
            return ReplayReport(
                k, actions, Mismatch(k, 0, f"dealer {hand.get('dealer')} recorded, {dealer} expected"), None
            )
        state = GaigelState(spec.ruleset, d, forehand)
        for step, entry in enumerate(hand["actions"]):
            a = entry["action"]
            if state.is_terminal():
                return ReplayReport(k, actions, Mismatch(k, step, "action recorded after the hand ended"), None)
            if entry.get("seat", state.to_act) != state.to_act:
                return ReplayReport(
                    k,
                    actions,
                    Mismatch(k, step, f"seat {entry.get('seat')} recorded, seat {state.to_act} to act"),
                    None,
                )
            try:
                state.apply_checked(a)
            except IllegalActionError as e:
                return ReplayReport(k, actions, Mismatch(k, step, str(e)), None)
            actions += 1
            if state.state_hash() != entry["hash"]:
                return ReplayReport(
                    k,
                    actions,
                    Mismatch(
                        k,
                        step,
                        f"state hash differs after {action_label(a)}: recorded {entry['hash']}, got {state.state_hash()}",
                    ),
                    None,
                )
        outcome = state.outcome()
        if outcome is None:
            if hand.get("aborted") or hand is record["hands"][-1]:
                break  # an interrupted last hand (forfeit, abort): nothing more to check
            return ReplayReport(
                k, actions, Mismatch(k, len(hand["actions"]), "the hand is not over but the record goes on"), None
            )
        if hand.get("result") is not None and hand["result"] != outcome.to_dict():
            return ReplayReport(
                k,
                actions,
                Mismatch(
                    k, len(hand["actions"]), f"hand result differs: recorded {hand['result']}, got {outcome.to_dict()}"
                ),
                None,
            )
        score.add(outcome)
    return ReplayReport(len(record["hands"]), actions, None, score.to_dict())


__all__ = ["Mismatch", "RecordError", "ReplayReport", "replay"]
