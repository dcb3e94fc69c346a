"""Executors play scheduled matches and hand back results (gomill's job manager role).

An executor takes :class:`MatchJob` values and returns futures of :class:`MatchOutcome`.
It never touches the journal: the runner stores each outcome and only then fixes the
match as done. An exception from a future means a *void* game (infrastructure failure):
the runner returns the match to pending and replays it. A bot that misbehaves inside a
match is not an exception: the match ends as a forfeit and the forfeit is rated.

* :class:`LocalExecutor` plays in worker processes, one per core by default, with
  in-process house bots through :func:`gaigel.match.play_match`.
* :class:`InlineExecutor` plays in the calling process (tests, debugging).
* :class:`gaigel_arena.workers.WorkerExecutor` (``grpc``) plays on table worker
  processes, each with a match server of its own
  (:class:`gaigel_arena.grpc_executor.GrpcExecutor`) and its bots' processes, so
  ``command`` bots (processes that connect over gRPC) can take part; an arena with
  ``remote`` bots plays on one such server in the runner process instead.
* :class:`gaigel_arena.ray_executor.RayExecutor` plays on a Ray cluster (the optional
  ``ray`` extra): house-bot matches as Ray tasks, command-bot matches on table workers
  as Ray actors; the journal stays with the runner.
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.process
import dataclasses
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from gaigel.match import MatchSpec, MatchTermination, play_match
from gaigel.record import write_json_atomic
from gaigel.ruleset import Ruleset
from gaigel_arena import lifeline
from gaigel_arena.config import BotConfig

__all__ = [
    "DISQUALIFIED",
    "BotFailure",
    "Executor",
    "InlineExecutor",
    "LocalExecutor",
    "MatchJob",
    "MatchOutcome",
    "NoRemoteBots",
    "play_house_match",
    "play_local_match",
    "unplayed_forfeit",
    "with_hooks",
    "worker_initializer",
]


class BotFailure(RuntimeError):
    """A match that cannot be played because one of its bots cannot: it exited before it joined,
    or its processes keep exiting. Void for this attempt; the runner counts these per bot and
    disqualifies the bot after :data:`gaigel_arena.runner.MAX_BOT_FAILURES` (the contest goes on)."""

    def __init__(self, bot: str, message: str) -> None:
        super().__init__(message)
        self.bot = bot

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (BotFailure, (self.bot, str(self)))


DISQUALIFIED = "DISQUALIFIED"
"""Reason code of a forfeit, without a match played, of a bot disqualified for repeated failures."""


def unplayed_forfeit(
    ruleset: Ruleset, seats: tuple[str, ...], losers: list[str], reason: str, message: str
) -> dict[str, Any]:
    """The result of a match not played: the sides with a bot of *losers* forfeit (all sides when every
    side has one), with *reason* and *message* in ``forfeit``."""
    sides = [seats[ruleset.seats_of(x)[0]] for x in range(ruleset.num_sides)]
    lost = [x for x in range(ruleset.num_sides) if any(seats[s] in losers for s in ruleset.seats_of(x))]
    first = lost[0]
    return {
        "winners": [x for x in range(ruleset.num_sides) if x not in lost] or lost,
        "sides": [
            {
                "side": x,
                "seats": list(ruleset.seats_of(x)),
                "bots": [seats[s] for s in ruleset.seats_of(x)],
                "hands_won": 0,
                "dashes": 0,
            }
            for x in range(ruleset.num_sides)
        ],
        "termination": MatchTermination.FORFEIT.value,
        "hands_played": 0,
        "forfeit_sides": lost,
        "forfeit": {
            "side": first,
            "seat": ruleset.seats_of(first)[0],
            "bot": sides[first],
            "reason": reason,
            "message": message,
        },
    }


@dataclasses.dataclass(frozen=True)
class MatchJob:
    """Everything a worker needs to play one scheduled match (picklable)."""

    match_id: str
    ruleset: Ruleset
    seed: int
    hands: int
    seats: tuple[str, ...]
    bots: Mapping[str, BotConfig]
    record_path: str | None
    """Where to write the JSON match record (atomically), or None to keep no record."""

    def spec(self) -> MatchSpec:
        """The engine's match spec."""
        return MatchSpec(ruleset=self.ruleset, seed=self.seed, hands=self.hands, bots=self.seats)


@dataclasses.dataclass(frozen=True)
class MatchOutcome:
    """A played match: the result dict (per side dashes, winners, termination) and where its record is."""

    match_id: str
    result: dict[str, Any]
    record_path: str | None
    duration_s: float

    @property
    def termination(self) -> str:
        """``completed``, ``forfeit``, ..."""
        return str(self.result.get("termination", MatchTermination.COMPLETED.value))


@runtime_checkable
class Executor(Protocol):
    """Plays matches concurrently: every hook the runner calls."""

    workers: int

    def submit(self, job: MatchJob) -> concurrent.futures.Future[MatchOutcome]:
        """Starts *job*; the future holds its outcome or the void-game exception."""
        ...

    def ready(self, seats: tuple[str, ...]) -> bool:
        """Whether a match with *seats* can be issued now (its remote bots are connected, or their
        wait is over); True for an executor without remote bots."""
        ...

    def attach_presence_log(self, path: Path) -> None:
        """Has the remote bots' connected and absent time written to *path*; a no-op without remote bots."""
        ...

    def shutdown(self) -> None:
        """Stops the workers (running matches are abandoned, not counted)."""
        ...


class NoRemoteBots:
    """The hooks of an executor that plays no remote bots: every match is ready, no presence to log."""

    def ready(self, seats: tuple[str, ...]) -> bool:
        del seats
        return True

    def attach_presence_log(self, path: Path) -> None:
        del path


class _WithHooks(NoRemoteBots):
    """An executor object that has only ``workers``, ``submit`` and ``shutdown`` (one written before
    the other hooks, e.g. a test's wrapper), with the hooks of :class:`NoRemoteBots`."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.workers: int = inner.workers

    def submit(self, job: MatchJob) -> concurrent.futures.Future[MatchOutcome]:
        future: concurrent.futures.Future[MatchOutcome] = self._inner.submit(job)
        return future

    def shutdown(self) -> None:
        self._inner.shutdown()


def with_hooks(pool: Any) -> Executor:
    """*pool* when it has every hook of :class:`Executor`; else *pool* with the defaults of :class:`NoRemoteBots`."""
    if isinstance(pool, Executor):
        return pool
    return _WithHooks(pool)


def play_house_match(job: MatchJob) -> tuple[MatchOutcome, dict[str, Any] | None]:
    """Plays *job* with in-process house bots in this process; writes nothing.

    Returns the outcome and, when the job keeps a record (``record_path`` set), the
    match record for the caller to write (the Ray executor ships it back to the
    scheduler, which writes it where the journal is).

    :raises ValueError: if a seat's bot is not a house bot.
    """
    from gaigel.bots import make_bot

    bots = []
    for name in job.seats:
        cfg = job.bots[name]
        if cfg.kind != "house":
            raise ValueError(f"bot {name!r} is a {cfg.kind} bot; the local executor plays house bots only")
        bot = make_bot(cfg.house)
        bots.append(bot)
    started = time.perf_counter()
    spec = job.spec()
    # The match id as the bot seeds' key, as the gRPC executor does: both executors play the same matches.
    score, record = play_match(spec, bots, record=job.record_path is not None, match_key=job.match_id)
    duration = time.perf_counter() - started
    if record is not None:
        record["match_id"] = job.match_id
        result = dict(record["result"])
    else:
        result = score.to_dict()
        result["termination"] = MatchTermination.COMPLETED.value
        result["hands_played"] = score.hands_played
    return MatchOutcome(job.match_id, result, job.record_path, duration), record


def play_local_match(job: MatchJob) -> MatchOutcome:
    """Plays *job* with in-process house bots in this process and writes its record.

    :raises ValueError: if a seat's bot is not a house bot.
    """
    outcome, record = play_house_match(job)
    if record is not None and job.record_path is not None:
        write_json_atomic(record, job.record_path)
    return outcome


def worker_initializer(parent_pid: int) -> None:
    """Start of a worker process (a local pool worker, a table worker): it ends when the runner
    *parent_pid* dies, even by SIGKILL (:func:`gaigel_arena.lifeline.die_with_parent`), and leaves
    Ctrl-C to the runner."""
    lifeline.die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the runner's to handle


class LocalExecutor(NoRemoteBots):
    """Plays matches with house bots in a pool of worker processes."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool = self._new_pool()

    def _new_pool(self) -> concurrent.futures.ProcessPoolExecutor:
        return concurrent.futures.ProcessPoolExecutor(
            max_workers=self.workers, initializer=worker_initializer, initargs=(os.getpid(),)
        )

    def submit(self, job: MatchJob) -> concurrent.futures.Future[MatchOutcome]:
        """Starts *job*; a pool broken by a dead worker is replaced (its matches come back as void)."""
        try:
            return self._pool.submit(play_local_match, job)
        except concurrent.futures.process.BrokenProcessPool:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = self._new_pool()
            return self._pool.submit(play_local_match, job)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class InlineExecutor(NoRemoteBots):
    """Plays each match in the calling process when it is submitted (one worker)."""

    workers = 1

    def submit(self, job: MatchJob) -> concurrent.futures.Future[MatchOutcome]:
        future: concurrent.futures.Future[MatchOutcome] = concurrent.futures.Future()
        try:
            future.set_result(play_local_match(job))
        except Exception as e:
            future.set_exception(e)
        return future

    def shutdown(self) -> None:
        pass
