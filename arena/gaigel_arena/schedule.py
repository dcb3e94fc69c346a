"""The schedule: a pure, deterministic list of the matches an arena plays.

* Bots form *groups*, one bot per side: every pair when the table has two sides (2
  players, or 4 and 6 players in two teams, a bot filling every seat of its side), every
  triple with three sides (3 players, or 6 players as three pairs).
* **Duplicate sets.** Set *s* has one deal seed, derived from the arena seed and *s* only
  (:func:`set_seed`). Each group plays that seed once per rotation of the sides over the
  seats: rotation *r* puts ``group[(x + r) % sides]`` on side *x*. With the same seed
  and the same first dealer the same cards reach each seat, so every bot of the group
  holds every side's cards once and the card luck cancels.
* A **gauntlet** (``candidate`` given) keeps only the groups with the candidate in them:
  one bot against a field, on the same duplicate sets.
* The order is set by set, then group by group in configuration order, then rotation,
  so a partly played arena is balanced and a resumed arena plays the same list.
* Every match has a stable id such as ``s0003-r1-alice-bob`` (set, rotation, the group
  in configuration order). Bot names may contain ``-``; a schedule whose ids would then
  collide (bots ``a-b`` and ``c`` beside ``a`` and ``b-c``) is refused.

Nothing here reads a clock, does I/O or draws randomness.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Iterator, Sequence
from typing import TypeAlias

from gaigel.ruleset import Ruleset

__all__ = ["MatchId", "ScheduledMatch", "build_schedule", "check_unambiguous_ids", "groups", "set_seed"]

MatchId: TypeAlias = str
"""A scheduled match's stable id, e.g. ``s0003-r1-alice-bob``."""


@dataclasses.dataclass(frozen=True)
class ScheduledMatch:
    """One match of the schedule: which bots sit where and which deal seed they play."""

    index: int
    """Position in the schedule (0-based); Elo is computed in this order."""
    set_index: int
    rotation: int
    seed: int
    group: tuple[str, ...]
    """The bots of this duplicate set, one per side, in configuration order."""
    sides: tuple[str, ...]
    """The bot on each side in this rotation: ``sides[x] == group[(x + rotation) % len(group)]``."""
    seats: tuple[str, ...]
    """The bot in each seat."""

    @property
    def match_id(self) -> MatchId:
        """Stable id: ``s<set>-r<rotation>-<group joined by ->``."""
        return f"s{self.set_index:04d}-r{self.rotation}-{'-'.join(self.group)}"

    @property
    def set_id(self) -> str:
        """The duplicate set this match belongs to (its correlated siblings share it)."""
        return f"s{self.set_index:04d}-{'-'.join(self.group)}"

    def to_dict(self) -> dict[str, object]:
        """JSON-ready description."""
        return {
            "match_id": self.match_id,
            "index": self.index,
            "set": self.set_index,
            "rotation": self.rotation,
            "seed": self.seed,
            "group": list(self.group),
            "sides": list(self.sides),
            "seats": list(self.seats),
        }


def set_seed(arena_seed: int, set_index: int) -> int:
    """The deal seed of duplicate set *set_index*: 63 bits of SHA-256, so it fits SQLite integers."""
    digest = hashlib.sha256(f"gaigel-arena-set:{arena_seed}:{set_index}".encode("ascii")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def groups(bots: Sequence[str], sides: int) -> list[tuple[str, ...]]:
    """Every choice of *sides* distinct bots, in configuration order.

    :raises ValueError: if there are fewer bots than sides or a name repeats.
    """
    if len(set(bots)) != len(bots):
        raise ValueError("bot names must be unique")
    if sides < 2 or len(bots) < sides:
        raise ValueError(f"{sides} sides need at least {sides} bots, got {len(bots)}")
    return list(itertools.combinations(bots, sides))


def _iter_schedule(
    bots: Sequence[str], ruleset: Ruleset, sets: int, arena_seed: int, candidate: str | None
) -> Iterator[ScheduledMatch]:
    sides = ruleset.num_sides
    all_groups = [g for g in groups(bots, sides) if candidate is None or candidate in g]
    index = 0
    for s in range(sets):
        seed = set_seed(arena_seed, s)
        for group in all_groups:
            for r in range(sides):
                by_side = tuple(group[(x + r) % sides] for x in range(sides))
                seats = tuple(by_side[ruleset.side_of(seat)] for seat in range(ruleset.players))
                yield ScheduledMatch(index, s, r, seed, group, by_side, seats)
                index += 1


def build_schedule(
    bots: Sequence[str], ruleset: Ruleset, sets: int, arena_seed: int, candidate: str | None = None
) -> list[ScheduledMatch]:
    """The full schedule: ``sets * len(groups) * sides`` matches in play order; with *candidate*
    a gauntlet (only the groups that hold the candidate).

    :raises ValueError: for fewer bots than sides, repeated or empty names, ``sets < 1``, a
        candidate that is not one of *bots*, or names whose match ids would collide.
    """
    if candidate is not None and candidate not in bots:
        raise ValueError(f"gauntlet candidate {candidate!r} is not one of the bots")
    if sets < 1:
        raise ValueError(f"need at least one duplicate set, got {sets}")
    if not all(bots):
        raise ValueError("bot names must be non-empty")
    check_unambiguous_ids(bots, ruleset.num_sides)
    return list(_iter_schedule(bots, ruleset, sets, arena_seed, candidate))


def check_unambiguous_ids(bots: Sequence[str], sides: int) -> None:
    """Refuses bot names whose groups join (with ``-``) to the same match id.

    :raises ValueError: naming the two groups.
    """
    seen: dict[str, tuple[str, ...]] = {}
    for group in groups(bots, sides):
        joined = "-".join(group)
        if joined in seen:
            raise ValueError(
                f"bot names {' + '.join(seen[joined])} and {' + '.join(group)} give the same match ids ({joined}): "
                "rename one of them"
            )
        seen[joined] = group
