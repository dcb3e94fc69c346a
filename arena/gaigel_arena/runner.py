"""Orchestration (gomill's ringmaster role): schedule, journal, executor, ratings, progress.

:func:`run_arena` opens (or creates) the journal, returns matches left ``started`` by a
crash to pending (they are replayed from their seed), issues the pending matches in
schedule order to the executor's workers, stores each result and only then fixes the
match as done. Ratings are always recomputed from the journal in schedule order, so a
resumed arena ends with exactly the numbers of an uninterrupted one.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import errno
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import structlog

from gaigel.match import MATCH_TERMINATIONS, MatchTermination
from gaigel_arena.config import ArenaConfig
from gaigel_arena.executors import (
    DISQUALIFIED,
    BotFailure,
    Executor,
    InlineExecutor,
    LocalExecutor,
    MatchJob,
    MatchOutcome,
    unplayed_forfeit,
    with_hooks,
)
from gaigel_arena.journal import DbTarget, Journal, redact_url, resolve_db
from gaigel_arena.metrics import VOID, ArenaMetrics
from gaigel_arena.ratings import GameResult, Standings, build_standings
from gaigel_arena.results import pairwise_results, unrated_bots
from gaigel_arena.schedule import ScheduledMatch, build_schedule

__all__ = [
    "ArenaError",
    "Progress",
    "RunSummary",
    "drive",
    "journal_results",
    "make_executor",
    "run_arena",
    "standings_from_journal",
]

MAX_ATTEMPTS = 3
"""A match that fails (void) this many times in one run stops the arena (infrastructure failures;
a failure of a bot counts against the bot instead, see :data:`MAX_BOT_FAILURES`)."""
MAX_BOT_FAILURES = 3
"""A bot whose matches could not be played this many times in one run (it exited before it joined,
or its processes kept exiting) is disqualified: its remaining matches are forfeits with reason
``DISQUALIFIED``, never played, and every other match goes on."""

PRESENCE_FILE = "presence.json"
"""Connected and absent time of remote bots, per run, in the arena folder (read by the report)."""

RATINGS_REFRESH_S = 2.0
"""Without a progress line, the live ratings (metrics) are recomputed this often."""

log = structlog.get_logger("gaigel_arena")


class ArenaError(RuntimeError):
    """The arena cannot go on (a match keeps failing); the message names the match."""


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """What a run did."""

    scheduled: int
    done: int
    played_now: int
    replayed: int
    seconds: float
    standings: Standings
    db_path: DbTarget
    """The journal: the SQLite file, or the PostgreSQL URL (print :attr:`db_label` instead)."""

    @property
    def db_label(self) -> str:
        """The journal for messages: a URL's password replaced by ``***``."""
        return redact_url(self.db_path)


def journal_results(journal: Journal) -> list[GameResult]:
    """Pairwise results of every done match, in schedule order, without the bots that only forfeited."""
    rows = journal.rows("done")
    unrated = unrated_bots((row.sides, row.result or {}) for row in rows)  # only forfeits: listed apart
    out: list[GameResult] = []
    for row in rows:
        assert row.result is not None
        out.extend(r for r in pairwise_results(row.set_id, row.sides, row.result) if not {r.a, r.b} & unrated)
    return out


def standings_from_journal(journal: Journal, samples: int = 1000, seed: int = 0) -> Standings:
    """The standings of the done matches (``samples=0``: no bootstrap, for live tables)."""
    return build_standings(journal_results(journal), samples=samples, seed=seed)


class Progress:
    """A live progress line with ETA and the top of the table.

    On a terminal the line is redrawn in place every ``interval`` seconds; otherwise a
    plain line is printed every ``interval`` seconds (default 10 off a terminal).
    """

    def __init__(self, stream: TextIO | None = None, interval: float | None = None, top: int = 3) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (0.25 if self.tty else 10.0)
        self.top = top
        self._last = 0.0
        self._width = 0

    def due(self, now: float) -> bool:
        """Whether a refresh is due."""
        return now - self._last >= self.interval

    def show(self, done: int, total: int, done_now: int, elapsed: float, standings: Standings | None) -> None:
        """Draws the line (pass the final numbers once more with :meth:`finish`)."""
        self._last = time.monotonic()
        rate = done_now / elapsed if elapsed > 0 else 0.0
        left = total - done
        eta = _duration(left / rate) if rate > 0 else "?"
        bar = ""
        if self.tty:
            filled = int(20 * done / total) if total else 20
            bar = "[" + "#" * filled + "." * (20 - filled) + "] "
        leaders = ""
        if standings is not None and standings.rows:
            leaders = "  top: " + ", ".join(f"{r.name} {r.elo:.0f}" for r in standings.rows[: self.top])
        pct = 100.0 * done / total if total else 100.0
        line = f"{bar}{done}/{total} ({pct:.0f}%) {rate:.1f} matches/s ETA {eta}{leaders}"
        if self.tty:
            pad = max(0, self._width - len(line))
            self.stream.write("\r" + line + " " * pad)
            self._width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self) -> None:
        """Ends the in-place line on a terminal."""
        if self.tty and self._width:
            self.stream.write("\n")
            self.stream.flush()


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def run_arena(
    config: ArenaConfig,
    out_dir: Path,
    *,
    db: str | None = None,
    workers: int | None = None,
    executor: str = "auto",
    executor_factory: Callable[[ArenaConfig, int], Executor] | None = None,
    progress: Progress | None = None,
    metrics: ArenaMetrics | None = None,
    bootstrap_samples: int = 1000,
) -> RunSummary:
    """Plays every pending match of *config* into the journal in *out_dir* and rates the result.

    *db* is the journal: a SQLite file path (default ``out_dir/arena.sqlite``) or a
    ``postgresql://`` URL; match records are written to ``out_dir/records`` either way.

    :raises JournalError: if the journal belongs to another config or another run holds it.
    :raises ArenaError: if a match fails :data:`MAX_ATTEMPTS` times in a row.
    :raises NotImplementedError: when the executor needed is not installed (see :func:`make_executor`).
    """
    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    config = dataclasses.replace(config, run_dir=str(out_dir.resolve()))  # where the bots' logs go
    db_path = resolve_db(out_dir, db)
    schedule = build_schedule(
        config.bot_names, config.ruleset, config.sets_per_pairing, config.seed, config.gauntlet or None
    )
    records_dir = out_dir / "records"
    if config.keep_records:
        records_dir.mkdir(exist_ok=True)
    n_workers = workers or config.workers
    metrics = metrics or ArenaMetrics(config.bot_names)

    # a changed config is refused now, not after the workers (and their bots) have started
    Journal.check_config(db_path, config.canonical_json(), config.config_hash())
    factory = executor_factory or (lambda c, w: make_executor(c, w, executor))
    pool = with_hooks(factory(config, n_workers))  # fails fast (before the journal exists) for an unavailable executor
    pool.attach_presence_log(out_dir / PRESENCE_FILE)  # executors with remote bots count their presence
    try:
        return _run(
            config, schedule, db_path, records_dir, pool, n_workers, metrics, progress, started, bootstrap_samples
        )
    finally:
        pool.shutdown()


def _run(
    config: ArenaConfig,
    schedule: list[ScheduledMatch],
    db_path: DbTarget,
    records_dir: Path,
    pool: Executor,
    n_workers: int,
    metrics: ArenaMetrics,
    progress: Progress | None,
    started: float,
    bootstrap_samples: int,
) -> RunSummary:
    by_id = {m.match_id: m for m in schedule}
    with Journal.create_or_open(db_path, config.canonical_json(), config.config_hash(), schedule) as journal:
        replayed = journal.rollback()
        if records_dir.is_dir():  # half-written records of workers killed with their runner
            for stale in records_dir.glob("*.tmp"):
                stale.unlink(missing_ok=True)
        pending = journal.pending()
        counts = journal.counts()
        done = counts["done"]
        total = counts["total"]
        metrics.set_progress(done, total)
        log.info(
            "arena_start",
            arena=config.name,
            db=redact_url(db_path),
            scheduled=total,
            done=done,
            pending=len(pending),
            replayed=replayed,
            workers=n_workers,
        )
        played_now = 0
        if pending:
            played_now = drive(
                config, journal, pool, [by_id[i] for i in pending], records_dir, metrics, progress, started
            )
        counts = journal.counts()
        standings = standings_from_journal(journal, samples=bootstrap_samples, seed=config.seed)
        _set_ratings(metrics, standings)
        metrics.set_progress(counts["done"], counts["total"])
        if progress is not None:
            progress.show(counts["done"], counts["total"], played_now, time.monotonic() - started, standings)
            progress.finish()
        seconds = time.monotonic() - started
        log.info(
            "arena_done",
            arena=config.name,
            done=counts["done"],
            scheduled=counts["total"],
            played=played_now,
            seconds=round(seconds, 3),
        )
        return RunSummary(counts["total"], counts["done"], played_now, replayed, seconds, standings, db_path)


def _job(config: ArenaConfig, match: ScheduledMatch, records_dir: Path) -> MatchJob:
    return MatchJob(
        match_id=match.match_id,
        ruleset=config.ruleset,
        seed=match.seed,
        hands=config.hands,
        seats=match.seats,
        bots={b.name: b for b in config.bots},
        record_path=str(records_dir / f"{match.match_id}.json") if config.keep_records else None,
    )


def _set_ratings(metrics: ArenaMetrics, standings: Standings) -> None:
    for row in standings.rows:
        metrics.rating_elo.labels(bot=row.name).set(row.elo)
        metrics.rating_bt.labels(bot=row.name).set(row.bt)


def drive(
    config: ArenaConfig,
    journal: Journal,
    pool: Executor,
    todo: list[ScheduledMatch],
    records_dir: Path,
    metrics: ArenaMetrics,
    progress: Progress | None,
    started: float,
) -> int:
    """Issues *todo* to *pool* with a bounded window, fixing results as they arrive."""
    window = max(2, 2 * pool.workers)
    queue = list(reversed(todo))  # pop() from the end keeps schedule order
    in_flight: dict[concurrent.futures.Future[MatchOutcome], ScheduledMatch] = {}
    failures: dict[str, int] = {}
    bot_failures: dict[str, int] = {}
    disqualified = _disqualified(journal)
    played = 0
    next_ratings = 0.0
    counts = journal.counts()
    done, total = counts["done"], counts["total"]
    try:
        while queue or in_flight:
            batch = _next_batch(queue, window - len(in_flight), bool(in_flight), pool.ready)
            for m in [m for m in batch if disqualified.keys() & set(m.seats)]:
                batch.remove(m)
                _forfeit_disqualified(journal, config, m, disqualified)
                done += 1
                metrics.matches_total.labels(outcome=MatchTermination.FORFEIT.value).inc()
                metrics.set_progress(done, total)
            if batch:
                journal.issue(m.match_id for m in batch)
                for m in batch:
                    in_flight[pool.submit(_job(config, m, records_dir))] = m
            finished, _ = concurrent.futures.wait(
                in_flight, timeout=1.0, return_when=concurrent.futures.FIRST_COMPLETED
            )
            for future in finished:
                match = in_flight.pop(future)
                try:
                    outcome = future.result()
                except Exception as e:  # a void game: infrastructure failure, replay it
                    journal.release(match.match_id)
                    if isinstance(e, OSError) and e.errno in _DISK_ERRORS:
                        raise  # a full or read-only disk: replaying cannot help, stop with one line
                    metrics.matches_total.labels(outcome=VOID).inc()
                    log.warning("match_void", match_id=match.match_id, error=f"{type(e).__name__}: {e}")
                    if isinstance(e, BotFailure):  # the bot's fault, not the arena's: counted against it
                        bot_failures[e.bot] = bot_failures.get(e.bot, 0) + 1
                        if bot_failures[e.bot] >= MAX_BOT_FAILURES and e.bot not in disqualified:
                            disqualified[e.bot] = f"{bot_failures[e.bot]} matches could not be played; last: {e}"
                            log.error("bot_disqualified", bot=e.bot, failures=bot_failures[e.bot], message=str(e))
                        queue.append(match)  # played again, or a forfeit once its bot is disqualified
                        continue
                    failures[match.match_id] = failures.get(match.match_id, 0) + 1
                    if failures[match.match_id] >= MAX_ATTEMPTS:
                        raise ArenaError(
                            f"match {match.match_id} failed {MAX_ATTEMPTS} times; last error: {type(e).__name__}: {e}"
                        ) from e
                    queue.append(match)
                    continue
                journal.fix(match.match_id, outcome.result, outcome.record_path, outcome.duration_s)
                played += 1
                done += 1
                termination = outcome.termination
                metrics.matches_total.labels(
                    outcome=termination if termination in _KNOWN else MatchTermination.COMPLETED.value
                ).inc()
                metrics.match_duration_seconds.observe(outcome.duration_s)
                metrics.set_progress(done, total)
                log.info(
                    "match_done",
                    match_id=match.match_id,
                    sides=list(match.sides),
                    dashes=[s["dashes"] for s in outcome.result["sides"]],
                    termination=termination,
                    seconds=round(outcome.duration_s, 4),
                )
            now = time.monotonic()
            if (progress is not None and progress.due(now)) or (progress is None and now >= next_ratings):
                live = standings_from_journal(journal, samples=0)  # also keeps the ratings gauges current
                _set_ratings(metrics, live)
                next_ratings = now + RATINGS_REFRESH_S
                if progress is not None:
                    progress.show(done, total, played, now - started, live)
    except BaseException:
        for future in in_flight:
            future.cancel()
        raise
    return played


def _disqualified(journal: Journal) -> dict[str, str]:
    """Bots disqualified earlier in this run (a resumed run keeps them out): bot -> why."""
    out = {}
    for row in journal.rows():
        forfeit = (row.result or {}).get("forfeit") or {}
        if forfeit.get("reason") == DISQUALIFIED:
            out[str(forfeit.get("bot"))] = str(forfeit.get("message", ""))
    return out


def _forfeit_disqualified(journal: Journal, config: ArenaConfig, match: ScheduledMatch, out: dict[str, str]) -> None:
    """Stores *match* as a forfeit of its disqualified bot(s), without playing it."""
    losers = sorted(out.keys() & set(match.seats))
    message = f"disqualified: {out[losers[0]]}"
    result = unplayed_forfeit(config.ruleset, match.seats, losers, DISQUALIFIED, message)
    journal.issue([match.match_id])
    journal.fix(match.match_id, result, None, 0.0)
    log.warning("match_forfeit", match_id=match.match_id, **result["forfeit"])


_KNOWN: frozenset[str] = frozenset(MATCH_TERMINATIONS)
_DISK_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES})


def _next_batch(
    queue: list[ScheduledMatch], room: int, busy: bool, ready: Callable[[tuple[str, ...]], bool]
) -> list[ScheduledMatch]:
    """Up to *room* matches from the end of *queue* (schedule order), taken out of it.

    With remote bots the executor's *ready* says whether a match can go now (its remote bots
    are connected, or their wait is over): matches that are not ready stay queued behind the
    ready ones; only when nothing else runs does the first of them go (to wait for its bot).
    """
    batch: list[ScheduledMatch] = []
    i = len(queue) - 1
    while i >= 0 and len(batch) < room:
        if ready(queue[i].seats):
            batch.append(queue.pop(i))
        i -= 1
    if not batch and not busy and queue and room > 0:
        batch.append(queue.pop())
    return batch


def make_executor(config: ArenaConfig, workers: int, kind: str = "auto") -> Executor:
    """The executor for *config*: local when every bot is a house bot, else gRPC.

    ``grpc`` starts *workers* table worker processes, each with its own match server and bot
    processes (:mod:`gaigel_arena.workers`); an arena with remote bots plays on one server in
    this process instead, *workers* matches at a time, since remote bots connect to it by themselves.

    *kind* is ``auto``, ``local``, ``inline``, ``grpc`` or ``ray`` (never chosen by
    ``auto``; it connects to ``config.ray_address``).

    :raises ValueError: for an unknown kind, or a local, inline or ray executor with
        non-house bots.
    :raises NotImplementedError: when the gRPC executor is needed but gaigel_server is
        missing, or for the ray executor without Ray.
    :raises gaigel_arena.ray_executor.RayConnectError: when the Ray cluster cannot be reached.
    """
    only_house = all(b.kind == "house" for b in config.bots)
    if kind == "auto":
        kind = "local" if only_house else "grpc"
    if kind in ("local", "inline") and not only_house:
        raise ValueError(f"the {kind} executor plays house bots only; this arena has command or remote bots")
    if kind == "local":
        return LocalExecutor(workers)
    if kind == "inline":
        return InlineExecutor()
    if kind == "grpc":
        try:
            from gaigel_arena.grpc_executor import GrpcExecutor
            from gaigel_arena.workers import WorkerExecutor
        except ImportError as e:
            raise NotImplementedError(
                f"the gRPC executor needs the server package (gaigel_server), which cannot be imported: {e}"
            ) from None
        if any(b.kind == "remote" for b in config.bots):
            return GrpcExecutor(config, workers)  # remote bots connect to the runner's published server
        return WorkerExecutor(config, workers)
    if kind == "ray":
        from gaigel_arena.ray_executor import RayExecutor  # imports Ray itself only when constructed

        return RayExecutor(config, workers, config.ray_address)
    raise ValueError(f"unknown executor {kind!r} (known: auto, local, inline, grpc, ray)")
