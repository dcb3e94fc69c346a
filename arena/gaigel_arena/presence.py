"""Remote presence: whether each remote bot is connected, how long it waits, and the presence log.

``remote`` bots connect on their own, with their configured token, to the address in
``[arena] listen``. A match with a remote bot is created on the server only while that bot has
a connected session; otherwise it waits until ``[clock] connect_wait_ms`` have passed since the
bot was last connected (or since the start), and then the absent bot's side forfeits without a
match being played (reason ``ABSENT``; both sides when both are absent). :class:`Presence`
counts each remote bot's connected and absent time; the runner has it written to
``presence.json`` for the report.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import structlog

from gaigel.record import write_json_atomic
from gaigel_arena.config import ArenaConfig
from gaigel_arena.executors import MatchJob, MatchOutcome, unplayed_forfeit

__all__ = ["ABSENT", "PRESENCE_FORMAT", "Presence", "RemotePresence", "absent_result"]

ABSENT = "ABSENT"
"""Reason code of a forfeit for a remote bot that was not connected within ``connect_wait_ms``."""
PRESENCE_FORMAT = "gaigel.arena.presence.v1"
_PRESENCE_WRITE_S = 2.0

log = structlog.get_logger("gaigel_arena")


def absent_result(job: MatchJob, sides: tuple[str, ...], absent: list[str], wait_s: float) -> dict[str, Any]:
    """The result of a match not played because remote bot(s) *absent* stayed away: their sides forfeit."""
    del sides  # (the sides follow from the seats)
    message = f"remote bot(s) {', '.join(absent)} not connected within {wait_s:g} s; the match was not played"
    return unplayed_forfeit(job.ruleset, job.seats, absent, ABSENT, message)


class Presence:
    """Connected and absent time of each remote bot in this run, kept as the arena's ``presence.json``.

    The file holds one entry per run (a resumed arena appends one), so the report adds them up.
    """

    def __init__(self, bots: list[str]) -> None:
        now = time.monotonic()
        self.connected: dict[str, bool] = dict.fromkeys(bots, False)
        self.seconds: dict[str, dict[str, float]] = {b: {"connected_s": 0.0, "absent_s": 0.0} for b in bots}
        self.absent_since: dict[str, float] = dict.fromkeys(bots, now)
        self.forfeits: dict[str, int] = dict.fromkeys(bots, 0)
        self._last = now
        self._started = time.time()
        self._path: Path | None = None
        self._earlier: list[Any] = []
        self._written = 0.0

    def update(self, connected: dict[str, bool]) -> None:
        """Adds the time since the last update to each bot's state, then takes the new states."""
        now = time.monotonic()
        for bot, was in self.connected.items():
            self.seconds[bot]["connected_s" if was else "absent_s"] += now - self._last
            if was and not connected[bot]:
                self.absent_since[bot] = now
            self.connected[bot] = connected[bot]
        self._last = now

    def attach(self, path: Path) -> None:
        """Keeps the runs already in *path* (an earlier run of the same arena) and writes to it from now on."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            self._earlier = list(data["runs"]) if data.get("format") == PRESENCE_FORMAT else []
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self._earlier = []
        self._path = path
        self.write()

    def write(self, force: bool = True) -> None:
        """Writes the file (every :data:`_PRESENCE_WRITE_S` at most unless *force*)."""
        if self._path is None or (not force and time.monotonic() - self._written < _PRESENCE_WRITE_S):
            return
        self._written = time.monotonic()
        run = {
            "started": self._started,
            "updated": time.time(),
            "bots": {
                b: {
                    "connected_s": round(self.seconds[b]["connected_s"], 3),
                    "absent_s": round(self.seconds[b]["absent_s"], 3),
                    "absent_forfeits": self.forfeits[b],
                }
                for b in self.seconds
            },
        }
        with contextlib.suppress(OSError):  # a report aid: a full disk must not stop the arena
            write_json_atomic({"format": PRESENCE_FORMAT, "runs": [*self._earlier, run]}, self._path)


class RemotePresence:
    """The remote bots of an arena: their connection state (read through *connected*, which maps
    bot names to whether each has a live session) and :class:`Presence` log.

    The methods run on the server's loop, except :meth:`ready` (the runner's thread: a snapshot).
    """

    def __init__(self, config: ArenaConfig, connected: Callable[[Iterable[str]], dict[str, bool]]) -> None:
        self.bots = [b.name for b in config.bots if b.kind == "remote"]
        self.log = Presence(self.bots)
        self._connected = connected
        self._config = config
        self.wait_s = config.clock.connect_wait_ms / 1000.0

    def __bool__(self) -> bool:
        return bool(self.bots)

    def tick(self, force: bool = False) -> None:
        """Takes the bots' connection states now, and writes the log (at most every few seconds unless *force*)."""
        if self.bots:
            self.log.update(self._connected(self.bots))
            self.log.write(force=force)

    def absent(self, bots: set[str]) -> tuple[list[str], bool]:
        """The remote bots of *bots* not connected now, and whether all of them are past their wait."""
        self.log.update(self._connected(self.bots))
        absent = [b for b in self.bots if b in bots and not self.log.connected[b]]
        now = time.monotonic()
        return absent, bool(absent) and all(now - self.log.absent_since[b] >= self.wait_s for b in absent)

    def ready(self, seats: tuple[str, ...]) -> bool:
        """Whether a match with *seats* can be issued now: its remote bots are connected or past their wait."""
        if not self.bots:
            return True
        now = time.monotonic()
        return all(self.log.connected.get(b, True) or now - self.log.absent_since[b] >= self.wait_s for b in set(seats))

    def attach(self, path: Path) -> None:
        """Has the connected and absent time written to *path* (kept across resumed runs)."""
        if self.bots:
            self.log.attach(path)

    def absent_outcome(self, job: MatchJob, absent: list[str], started: float) -> MatchOutcome:
        """The outcome of *job* not played because *absent* stayed away (counted in the log)."""
        rules = self._config.ruleset
        sides = tuple(job.seats[rules.seats_of(x)[0]] for x in range(rules.num_sides))
        result = absent_result(job, sides, absent, self.wait_s)
        for bot in absent:
            self.log.forfeits[bot] += 1
        self.log.write()
        log.warning("match_forfeit", match_id=job.match_id, **result["forfeit"])
        return MatchOutcome(job.match_id, result, None, time.perf_counter() - started)
