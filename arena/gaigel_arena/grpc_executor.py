"""The gRPC executor: matches played through a local gaigel match server.

:class:`GrpcExecutor` composes four parts:

* the **host** (:class:`gaigel_arena.host.MatchHost`): the in-process server, its thread and
  event loop; it opens a match through the server's front door and awaits its end;
* the **bot pool** (:class:`gaigel_arena.botpool.BotPool`): the bot processes (once per run,
  or per match under one-match aliases), their sandboxes and limits, faults and restarts;
* **remote presence** (:class:`gaigel_arena.presence.RemotePresence`): whether each remote
  bot is connected, how long a match waits for it, the presence log;
* **records** (:mod:`gaigel_arena.records`): the post-processing of a match record (bot logs,
  sandbox faults, aliases renamed, the forfeit).

The executor runs in a table worker (:mod:`gaigel_arena.workers`, one match at a time) or, for
an arena with remote bots, in the runner process. :meth:`GrpcExecutor.submit` opens the match
(``request_id`` = the arena match id and a per-attempt suffix), waits until it has ended and
returns the result; a server-side failure raises, so the runner replays the match (void). A
bot process that exits is restarted; matches it was seated in end under the server's
disconnect policy: after ``[clock] resume_grace_ms`` without a Resume its side forfeits. The
forfeit is rated as a loss, and the result stored in the journal names it (``result["forfeit"]``:
side, seat, bot, the reason code of the fault that led to it, e.g. ``DISCONNECT``, and the
server's message); the match record holds every fault.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import secrets
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from gaigel.record import write_json_atomic
from gaigel_arena import records
from gaigel_arena.botpool import BotPool, Key
from gaigel_arena.config import ArenaConfig
from gaigel_arena.executors import BotFailure, MatchJob, MatchOutcome
from gaigel_arena.host import MatchHost
from gaigel_arena.presence import ABSENT, Presence, RemotePresence, absent_result
from gaigel_arena.records import configured_bot, forfeit_reason, match_alias
from gaigel_server.states import TableState

if TYPE_CHECKING:
    from gaigel_server.table import Table

__all__ = [
    "ABSENT",
    "GrpcExecutor",
    "Presence",
    "absent_result",
    "configured_bot",
    "forfeit_reason",
    "match_alias",
]

log = structlog.get_logger("gaigel_arena")

_POLL_S = 0.02
_CHECK_S = 0.25
"""While a match runs: how often it is watched for a failed bot, an absent remote bot, a gone process."""
_RESTART_CHECK_S = 0.2
_STAYED_AWAY = "a remote bot stayed away"
"""The cancel reason of a waiting match whose remote bot stayed away, or whose process exited."""


class GrpcExecutor:
    """Plays matches through a local match server with bot processes started once per run."""

    def __init__(self, config: ArenaConfig, workers: int, *, skip_bots: Iterable[str] = (), warn: bool = True) -> None:
        """Starts the server and the bot processes for *workers* concurrent matches.

        *skip_bots* are not started (a table worker whose node lacks their command fails their
        matches itself); *warn* logs the duplicate-memory warning (the runner's, once per run).
        """
        self.workers = workers
        self._config = config
        tokens = {b.name: b.token if b.kind == "remote" else secrets.token_urlsafe(18) for b in config.bots}
        self.bots = BotPool(config, tokens)
        try:
            self.host = MatchHost(config, tokens, self.bots.socket_dir)
        except BaseException:
            self.bots.remove_folders()
            raise
        self.presence = RemotePresence(config, self.host.connected)
        self.port = self.host.port
        self.published_port = self.host.published_port
        self.bots.start(self.host.loop, self.port, workers, skip_bots)
        self._monitor = self.host.run(self._watch())
        if warn:
            self._warn_about_memory()

    def _warn_about_memory(self) -> None:
        """Says which bots can carry what they saw from one seating of a duplicate set to the next."""
        remembering = list(self.presence.bots)
        if not self.bots.per_match:
            remembering += [b.name for b in self._config.bots if b.kind == "command"]
        if remembering:
            log.warning(
                "duplicate_memory",
                bots=remembering,
                why="these bots keep their memory between matches (remote, or bot_processes = per_run): "
                "a bot that recognises a deal knows its opponent's cards in the other seating",
            )

    @property
    def bot_faults(self) -> list[dict[str, Any]]:
        """Every bot process that ended: bot, instance, reason code, message, monotonic time ``at``."""
        return self.bots.bot_faults

    async def _watch(self) -> None:
        while not self.bots.closing:
            await asyncio.sleep(_RESTART_CHECK_S)
            self.presence.tick()
            await self.bots.check()

    # --- matches (on the host's loop) ----------------------------------------------------

    async def _play(self, job: MatchJob, write_record: bool = True) -> tuple[MatchOutcome, dict[str, Any] | None]:
        """Plays *job*: its outcome and its record (written to ``job.record_path`` if *write_record*)."""
        failure = self.bots.failure(job)
        if failure is not None:
            raise failure
        started = time.perf_counter()
        absent = await self._wait_for_remote(job)
        if absent:
            return self.presence.absent_outcome(job, absent, started), None
        keys: list[Key] = []
        aliases: dict[str, str] = {}
        try:
            if self.bots.per_match:
                self.bots.start_match(job, self.host.register, aliases, keys)
            return await self._play_on_server(job, aliases, keys, started, write_record)
        finally:
            if self.bots.per_match:
                await self.bots.end_match(keys)
                for alias in aliases:
                    with contextlib.suppress(Exception):  # a still-seated alias is revoked at shutdown with the server
                        self.host.unregister(alias)

    async def _wait_for_remote(self, job: MatchJob) -> list[str]:
        """Waits while a remote bot of *job* is absent but within its wait; the bots that stayed away."""
        while True:
            absent, expired = self.presence.absent(set(job.seats))
            if not absent or expired:
                return absent
            failure = self.bots.failure(job)
            if failure is not None:
                raise failure
            await asyncio.sleep(_POLL_S * 5)

    async def _play_on_server(
        self, job: MatchJob, aliases: dict[str, str], keys: list[Key], started: float, write_record: bool
    ) -> tuple[MatchOutcome, dict[str, Any] | None]:
        seat_bots = list(job.seats)
        if aliases:  # each seat of a command bot has its own alias, in seat order
            pending = list(aliases)
            seat_bots = [pending.pop(0) if name in aliases.values() else name for name in job.seats]
        window_start = time.monotonic()
        stopped: list[BotFailure | list[str]] = []
        """Why the match was cancelled while it waited: the remote bots that stayed away, or a failure."""

        async def watch(table: Table) -> str:
            # The end comes from the table itself; this only looks for what ends no match by
            # itself: a failed bot, an absent remote bot, a process gone before it joined.
            # No await between a check and the answer: the table cannot start in between.
            failure = self.bots.failure(job)
            if failure is not None:
                raise failure
            waiting = table.state is TableState.WAITING
            if waiting and self.presence:
                absent, expired = self.presence.absent(set(job.seats))
                if expired:
                    stopped.append(absent)
                    return _STAYED_AWAY
            gone = self.bots.exited_before_join(keys, aliases, job) if waiting else None
            if gone is not None:
                stopped.append(gone)
                return _STAYED_AWAY
            return ""

        try:
            table = await self.host.play(self.host.open(job, seat_bots), watch, _CHECK_S)
        finally:
            self.bots.match_over(keys)
        if stopped:
            if isinstance(stopped[0], BotFailure):
                raise stopped[0]
            return self.presence.absent_outcome(job, stopped[0], started), None
        duration = time.perf_counter() - started
        record = table.record
        if record is None:
            raise RuntimeError(f"match {job.match_id} ended without a result (server match {table.match_id})")
        record = records.rename(record, aliases)
        result = record.get("result")
        if not isinstance(result, dict) or "sides" not in result:
            raise RuntimeError(f"match {job.match_id} ended without a result (server match {table.match_id})")
        await self.bots.await_lost_exits(keys, records.disconnected_seats(record))
        records.finish_record(
            record,
            match_id=job.match_id,
            server_match_id=table.match_id,
            sandboxes={n: self.bots.sandbox_info[n] for n in sorted(set(job.seats)) if n in self.bots.sandbox_info},
            bot_logs=self.bots.log_names(keys),
            bot_faults=self.bots.bot_faults,
            window=(window_start, time.monotonic()),
        )
        result = dict(result)
        if table.forfeit is not None:
            forfeit = records.forfeit_result(table.forfeit, record, aliases)
            result["forfeit"] = forfeit
            log.warning("match_forfeit", match_id=job.match_id, **forfeit)
        if job.record_path is not None and write_record:
            write_json_atomic(record, job.record_path)
        return MatchOutcome(job.match_id, result, job.record_path, duration), record

    # --- the executor's hooks ------------------------------------------------------------

    def ready(self, seats: tuple[str, ...]) -> bool:
        """Whether a match with *seats* can be issued now: its remote bots are connected or past their wait.

        Read from the runner's thread: a snapshot of the presence states, good enough for ordering.
        """
        return self.presence.ready(seats)

    def attach_presence_log(self, path: Path) -> None:
        """Has the remote bots' connected and absent time written to *path* (kept across resumed runs)."""
        self.presence.attach(path)

    def submit(self, job: MatchJob) -> concurrent.futures.Future[MatchOutcome]:
        """Plays *job* on the server; the future raises for a void match."""
        return self.host.run(self._outcome(job))

    async def _outcome(self, job: MatchJob) -> MatchOutcome:
        outcome, _ = await self._play(job)
        return outcome

    def wait_for_bots(self, timeout: float) -> bool:
        """Waits until every bot process started for the run has joined (a table worker reports ready
        then); False if some have not within *timeout* seconds (their matches wait for them)."""

        async def joined() -> bool:
            want = self.bots.expected_sessions()
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.host.joined(want):
                    return True
                await asyncio.sleep(_POLL_S)
            return False

        return self.host.run(joined()).result()

    def play(self, job: MatchJob, write_record: bool = True) -> tuple[MatchOutcome, dict[str, Any] | None]:
        """Plays *job* and waits for it (a table worker's call): its outcome and its record (None for a
        match not played); the record is written to ``job.record_path`` only if *write_record*.

        :raises Exception: for a void match.
        """
        return self.host.run(self._play(job, write_record)).result()

    def shutdown(self) -> None:
        """Stops the bots, the server and the loop thread."""
        self.bots.closing = True
        if self.presence:

            async def last() -> None:
                self.presence.tick(force=True)

            with contextlib.suppress(Exception):  # the loop may be gone already; the last periodic write stands
                self.host.run(last()).result(timeout=5)
        self.bots.shutdown()
        self.host.stop()
