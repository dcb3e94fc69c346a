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
    """The streams that have not yet sent their first message, oldest first, also per peer.

    One address may hold *per_peer* of them: its next one pushes out its own oldest, so a
    client opening streams that never Join evicts only itself, and the rest of the budget
    stays for other addresses (a seated bot's Resume among them).
    """

    def __init__(self, limit: int, per_peer: int | None = None) -> None:
        self.limit = limit
        self.per_peer = per_peer or limit
        self._waiting: OrderedDict[int, tuple[str, Callable[[], None]]] = OrderedDict()
        self._by_peer: dict[str, OrderedDict[int, None]] = {}
        self._next = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._waiting)

    def admit(self, evict: Callable[[], None], peer: str = "") -> int:
        """Registers a new waiting stream of *peer*; *evict* ends it if it is pushed out. Returns its ticket."""
        mine = self._by_peer.setdefault(peer, OrderedDict())
        while len(mine) >= self.per_peer:
            self._evict(next(iter(mine)))
        while len(self._waiting) >= self.limit:
            self._evict(next(iter(self._waiting)))
        self._next += 1
        self._waiting[self._next] = (peer, evict)
        mine = self._by_peer.setdefault(peer, mine)
        mine[self._next] = None
        return self._next

    def _evict(self, ticket: int) -> None:
        _, evict = self._waiting[ticket]
        self.done(ticket)
        self.evicted += 1
        evict()

    def done(self, ticket: int) -> None:
        """The stream sent its first message or ended (unknown tickets are ignored)."""
        entry = self._waiting.pop(ticket, None)
        if entry is None:
            return
        mine = self._by_peer.get(entry[0])
        if mine is not None:
            mine.pop(ticket, None)
            if not mine:
                del self._by_peer[entry[0]]


class ByteBudget:
    """A token bucket of bytes: what one session may send per second, with a burst.

    A bot answers one decision at a time with an Action of a few dozen bytes; a flood of
    64 KiB messages made the server parse and reject hundreds of megabytes a second for one
    token. When the bucket is empty the session's reader waits, so HTTP/2 flow control holds
    the sender back and other tables keep the event loop.
    """

    __slots__ = ("_at", "_clock", "_level", "burst", "rate")

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._level = burst
        self._at = clock()

    def _refill(self) -> float:
        """The level now, refilled for the time since the last call (capped at *burst*)."""
        now = self._clock()
        self._level = min(self.burst, self._level + (now - self._at) * self.rate)
        self._at = now
        return self._level

    def delay(self, size: int) -> float:
        """Takes *size* bytes; the seconds to wait before reading on (0 while within budget)."""
        self._level = self._refill() - size
        return 0.0 if self._level >= 0 else -self._level / self.rate


class TokenBucket(ByteBudget):
    """*burst* tokens, refilled at *rate* per second: :meth:`take` says whether one is left.
    The front door's budgets (resets per connection, churn and connections per address)."""

    __slots__ = ()

    def take(self) -> bool:
        """Takes one token; False (and nothing taken) when none is left."""
        if self._refill() < 1:
            return False
        self._level -= 1
        return True


class RateLimitedLog:
    """Logs an event at most *burst* times per *interval* seconds; the next line carries how
    many were not logged (``suppressed_since_last``).

    A client guessing the admin token, or opening streams that never Join, causes thousands of
    refusals a second: one line each would fill the operator's disk and hide everything else.
    The metrics count every one.
    """

    def __init__(self, interval: float = 10.0, clock: Callable[[], float] = time.monotonic, burst: int = 1) -> None:
        self.interval = interval
        self.burst = burst
        self._clock = clock
        self._window: dict[str, tuple[float, int]] = {}
        self._suppressed: dict[str, int] = {}

    def allow(self, key: str) -> bool:
        """True when a line for *key* may be written now (counted), False when it is suppressed."""
        now = self._clock()
        start, used = self._window.get(key, (-1e18, 0))
        if now - start >= self.interval:
            start, used = now, 0
        if used >= self.burst:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False
        self._window[key] = (start, used + 1)
        return True

    def _emit(self, level: str, log: Any, event: str, key: str | None, fields: dict[str, object]) -> bool:
        k = key or event
        if not self.allow(k):
            return False
        getattr(log, level)(event, suppressed_since_last=self._suppressed.pop(k, 0), **fields)
        return True

    def warning(self, log: Any, event: str, key: str | None = None, **fields: object) -> bool:
        """Logs *event* at WARNING unless its budget is spent; True when a line was written."""
        return self._emit("warning", log, event, key, fields)

    def info(self, log: Any, event: str, key: str | None = None, **fields: object) -> bool:
        """Logs *event* at INFO unless its budget is spent; True when a line was written."""
        return self._emit("info", log, event, key, fields)


MAX_ECHO = 80
"""Characters of a client-supplied string that are ever logged, echoed or stored."""


def clip(text: str, limit: int = MAX_ECHO) -> str:
    """*text*, or its first *limit* characters and how long it was: a client's 60 KB name
    must not become 60 KB of log line or a status message grpc cannot send."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


class Backoff:
    """Refusals of one key (a bot name whose token was valid) that keep coming: after each, new
    attempts are refused at once for a doubling interval, and :meth:`strikes` counts them so the
    caller can end the connection. *quiet* seconds without a refusal forgive, as does
    :meth:`forgive` (the caller's choice: the servicer forgives a success unless the key was cut off)."""

    def __init__(
        self,
        first: float = 0.25,
        longest: float = 30.0,
        quiet: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        limit: int = 4096,
    ) -> None:
        self.first = first
        self.longest = longest
        self.quiet = quiet
        self.limit = limit
        self._clock = clock
        self._state: OrderedDict[str, tuple[float, float, int]] = OrderedDict()  # until, interval, strikes

    def waiting(self, key: str) -> float:
        """Seconds *key* must still wait (0: it may try)."""
        state = self._state.get(key)
        if state is None:
            return 0.0
        now = self._clock()
        until, _, _ = state
        if now - until > self.quiet:
            del self._state[key]
            return 0.0
        return max(0.0, until - now)

    def refused(self, key: str) -> tuple[float, int]:
        """Records a refusal of *key*: the seconds it now waits and its strikes so far."""
        now = self._clock()
        _, interval, strikes = self._state.pop(key, (now, self.first / 2, 0))
        interval = min(self.longest, interval * 2)
        self._state[key] = (now + interval, interval, strikes + 1)
        while len(self._state) > self.limit:
            self._state.popitem(last=False)
        return interval, strikes + 1

    def strike(self, key: str) -> int:
        """Counts an attempt refused while *key* waits; its strikes so far."""
        state = self._state.get(key)
        if state is None:
            return 0
        self._state[key] = (state[0], state[1], state[2] + 1)
        return state[2] + 1

    def strike_count(self, key: str) -> int:
        """The refusals of *key* since it was last forgiven."""
        state = self._state.get(key)
        return state[2] if state is not None else 0

    def forgive(self, key: str) -> None:
        self._state.pop(key, None)


__all__ = ["MAX_ECHO", "Backoff", "ByteBudget", "PendingStreams", "RateLimitedLog", "TokenBucket", "clip"]
