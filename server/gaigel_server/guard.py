"""Admission of Play streams and rate-limited logging: what keeps one hostile client from
starving everyone else.

Streams before their first message (Join or Resume) have their own small budget: they cost
the server little while waiting, but when they counted against ``--max-streams`` a client
holding a thousand silent streams kept real bots out. When that budget is full, the stream
that has waited longest is ended to make room: a real bot sends Join at once, so it is never
the oldest waiting stream for long, and a Join or Resume always finds a place.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any


class PendingStreams:
    """The streams that have not yet sent their first message, oldest first."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._waiting: OrderedDict[int, Callable[[], None]] = OrderedDict()
        self._next = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._waiting)

    def admit(self, evict: Callable[[], None]) -> int:
        """Registers a new waiting stream; *evict* ends it if it is pushed out. Returns its ticket."""
        while len(self._waiting) >= self.limit:
            _, oldest = self._waiting.popitem(last=False)
            self.evicted += 1
            oldest()
        self._next += 1
        self._waiting[self._next] = evict
        return self._next

    def done(self, ticket: int) -> None:
        """The stream sent its first message or ended (unknown tickets are ignored)."""
        self._waiting.pop(ticket, None)


class ByteBudget:
    """A token bucket of bytes: what one session may send per second, with a burst.

    A bot answers one decision at a time with an Action of a few dozen bytes; a flood of
    64 KiB messages made the server parse and reject hundreds of megabytes a second for one
    token. When the bucket is empty the session's reader waits, so HTTP/2 flow control holds
    the sender back and other tables keep the event loop.
    """

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._level = burst
        self._at = clock()

    def delay(self, size: int) -> float:
        """Takes *size* bytes; the seconds to wait before reading on (0 while within budget)."""
        now = self._clock()
        self._level = min(self.burst, self._level + (now - self._at) * self.rate) - size
        self._at = now
        return 0.0 if self._level >= 0 else -self._level / self.rate


class RateLimitedLog:
    """Logs an event at most once per *interval* seconds; the line carries how many were not logged.

    A client guessing the admin token makes thousands of refused calls: one line per call
    would fill the operator's disk and hide everything else. The metric counts every one.
    """

    def __init__(self, interval: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def warning(self, log: Any, event: str, **fields: object) -> bool:
        """Logs *event* unless it was logged less than *interval* ago; True when a line was written."""
        now = self._clock()
        last = self._last.get(event)
        if last is not None and now - last < self.interval:
            self._suppressed[event] = self._suppressed.get(event, 0) + 1
            return False
        self._last[event] = now
        log.warning(event, suppressed_since_last=self._suppressed.pop(event, 0), **fields)
        return True


__all__ = ["ByteBudget", "PendingStreams", "RateLimitedLog"]
