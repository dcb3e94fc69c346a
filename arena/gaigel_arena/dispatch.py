"""The idle-worker dispatch loop of the executors that play one match per worker at a time.

:class:`gaigel_arena.workers.WorkerExecutor` (table worker processes) and
:class:`gaigel_arena.ray_executor.RayExecutor` (table-worker actors) queue the matches the
runner submits and hand each to an idle worker only, so a worker that dies takes exactly one
match with it. A worker is whatever the executor knows it by (a slot, an actor's index).
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from gaigel_arena.executors import MatchJob, MatchOutcome

__all__ = ["Dispatcher"]

W = TypeVar("W")
Queued = tuple[MatchJob, concurrent.futures.Future[MatchOutcome]]


class Dispatcher(Generic[W]):
    """Matches waiting for an idle worker; *start* gives a match to a worker (called under :attr:`lock`).

    :attr:`lock` (reentrant) also guards what the executor keeps about its workers and matches.
    """

    def __init__(self, start: Callable[[W, MatchJob, concurrent.futures.Future[MatchOutcome]], None]) -> None:
        self._start = start
        self.lock = threading.RLock()
        self.queue: collections.deque[Queued] = collections.deque()
        self.idle: list[W] = []
        self.closing = False
        self.failed = ""
        """Why no match can be played any more (set by :meth:`fail`): new matches fail with it."""

    def submit(self, job: MatchJob) -> concurrent.futures.Future[MatchOutcome]:
        """Queues *job* for the next idle worker; the future raises for a void match."""
        future: concurrent.futures.Future[MatchOutcome] = concurrent.futures.Future()
        with self.lock:
            if self.failed:
                future.set_exception(RuntimeError(self.failed))
                return future
            self.queue.append((job, future))
        self.dispatch()
        return future

    def dispatch(self) -> None:
        """Gives queued matches to idle workers, one match per worker."""
        with self.lock:
            while self.idle and self.queue and not self.closing:
                job, future = self.queue.popleft()
                if not future.set_running_or_notify_cancel():
                    continue  # the runner gave up on it
                self._start(self.idle.pop(), job, future)

    def release(self, worker: W) -> None:
        """*worker* is idle again (its match has ended), unless the executor is closing."""
        with self.lock:
            if not self.closing:
                self.idle.append(worker)

    def fail(self, message: str) -> None:
        """No match can be played any more: the queued ones and every later one fail with *message*."""
        with self.lock:
            self.failed = message
            queued = list(self.queue)
            self.queue.clear()
        for _, future in queued:
            if future.set_running_or_notify_cancel():
                future.set_exception(RuntimeError(message))

    def close(self) -> list[W]:
        """Stops dispatching and cancels the queued matches; the workers idle at that moment."""
        with self.lock:
            self.closing = True
            queued = list(self.queue)
            self.queue.clear()
            idle = list(self.idle)
        for _, future in queued:
            future.cancel()
        return idle
