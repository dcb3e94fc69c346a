"""Where tables go and which idle sessions move, for ``gaigel serve --processes N``: pure functions
of the table processes' status (:func:`gaigel_server.worker.status`), no I/O.

A table plays in one process, so the sessions of all its seats must be there. Tables are placed
where most of their bots' idle sessions already are; a waiting table that lacks a session gets
one moved from another process (its idle session is ended with MOVED, its bot joins again and
the front door routes that Join here) or, when no process has one to spare, the next new Join
of that bot. The oldest waiting table is served first, so two tables that each hold what the
other needs cannot wait for each other for ever.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

Status = Mapping[str, Any]
"""One process's status: ``idle`` {bot: [[session_id, peer], ...]}, ``waiting`` [[match_id,
{bot: sessions needed}], ...] oldest first, ``seated`` [bot, ...], ``tables`` (not yet ended)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Move:
    """An idle session to end in process *source* so that its bot joins again in *target*."""

    bot: str
    source: int
    target: int
    session_id: str
    peer: str


def spare(status: Status) -> Counter[str]:
    """Idle sessions per bot that no waiting table of that process needs."""
    out = Counter({bot: len(sessions) for bot, sessions in status["idle"].items()})
    for _, need in status["waiting"]:
        out.subtract(need)
    return Counter({b: n for b, n in out.items() if n > 0})


def place(statuses: Sequence[Status], bots: Sequence[str], routed: Sequence[int] = ()) -> int:
    """The process for a new table seating *bots* (its remote seats' bot names): the one with
    the most of them in spare idle sessions, then the fewest tables, then the fewest connections
    routed to it lately (*routed*), then the lowest index."""
    need = Counter(bots)

    def key(k: int) -> tuple[int, int, int, int]:
        free = spare(statuses[k])
        covered = sum(min(n, free[b]) for b, n in need.items())
        return (-covered, int(statuses[k]["tables"]), routed[k] if k < len(routed) else 0, k)

    return min(range(len(statuses)), key=key)


def plan(
    statuses: Sequence[Status],
    order: Mapping[str, int],
    expected: Mapping[tuple[int, str], int],
    moving: set[str],
) -> tuple[list[Move], list[tuple[int, str]]]:
    """The moves that bring waiting tables their sessions, oldest table first (*order*: a match
    id's creation number; unknown ones last), and the (process, bot) pairs that should get the
    next new Join of that bot because no process has a session to spare.

    *expected* counts the Joins already on their way to a process (moved sessions, earlier
    plans); *moving* holds the sessions whose move is under way (they are still listed idle)."""
    free = [
        {bot: [s for s in sessions if s[0] not in moving] for bot, sessions in st["idle"].items()} for st in statuses
    ]
    coming = Counter(expected)
    tables = sorted(
        (order.get(match_id, len(order) + 1), k, match_id, need)
        for k, st in enumerate(statuses)
        for match_id, need in st["waiting"]
    )
    moves: list[Move] = []
    arrivals: list[tuple[int, str]] = []
    for _, k, _, need in tables:
        for bot, n in sorted(need.items()):
            local = free[k].get(bot, [])
            take = min(n, len(local))
            del local[:take]
            n -= take
            use = min(coming[k, bot], n)
            coming[k, bot] -= use
            n -= use
            others = sorted((j for j in range(len(free)) if j != k), key=lambda j: -len(free[j].get(bot, [])))
            for j in others:
                pool = free[j].get(bot, [])
                while n and pool:
                    session_id, peer = pool.pop()
                    moves.append(Move(bot, j, k, session_id, peer))
                    n -= 1
            arrivals += [(k, bot)] * n
    return moves, arrivals


__all__ = ["Move", "Status", "place", "plan", "spare"]
