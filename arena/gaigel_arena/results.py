"""From match results (as the journal stores them) to pairwise :class:`GameResult` values.

A match result is the engine's ``MatchScore.to_dict()`` plus ``termination`` and, after a
forfeit, ``forfeit_sides``. Sides are compared by dashes (fewer is better):

* two sides give one result, 1, 0 or 0.5 for the first side;
* three sides give one result per pair of sides, from the dash order;
* a side that forfeited loses against every side that did not (forfeits are rated,
  void games never reach the journal as done);
* but a bot whose side forfeited every match it has (it never connected, could not start,
  was disqualified before it played) is not rated at all: its forfeits would rate nothing
  but its absence (:func:`unrated_bots`); the report lists it apart.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gaigel_arena.ratings import GameResult

__all__ = ["pairwise_results", "unrated_bots"]


def unrated_bots(matches: Iterable[tuple[Sequence[str], Mapping[str, Any]]]) -> set[str]:
    """The bots of the done *matches* (``(sides, result)``) that played no game: their side forfeited
    each of them, or won it by a forfeit before a hand was played (against a disqualified bot, say)."""
    seen: set[str] = set()
    played: set[str] = set()
    for sides, result in matches:
        lost = set(result.get("forfeit_sides") or ())
        seen.update(sides)
        if not lost or int(result.get("hands_played", 1)) > 0:
            played.update(bot for x, bot in enumerate(sides) if x not in lost)
    return seen - played


def pairwise_results(set_id: str, sides: Sequence[str], result: Mapping[str, Any]) -> list[GameResult]:
    """The pairwise results of one match; ``sides[x]`` is the bot on side *x*.

    :raises ValueError: if the result does not list one dash count per side.
    """
    dashes = [int(side["dashes"]) for side in result["sides"]]
    if len(dashes) != len(sides):
        raise ValueError(f"result has {len(dashes)} sides, the match has {len(sides)}")
    forfeits = set(result.get("forfeit_sides") or ())
    out: list[GameResult] = []
    for i, j in itertools.combinations(range(len(sides)), 2):
        if (i in forfeits) != (j in forfeits):
            score = 0.0 if i in forfeits else 1.0
        elif dashes[i] < dashes[j]:
            score = 1.0
        elif dashes[i] > dashes[j]:
            score = 0.0
        else:
            score = 0.5
        out.append(GameResult(set_id, sides[i], sides[j], score))
    return out
