"""The lobby: every table of the server and the pools of idle sessions per bot name.

It starts a table once every remote seat has an idle session, finds the session of a seat
for Resume, keeps ended tables for a while (GetMatch, GetMatchRecord, WatchMatch), and
writes records. Tables do not know the lobby: each gets its :class:`~gaigel_server.table.TableHooks`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc

from gaigel.bots import make_bot
from gaigel.match import MatchTermination
from gaigel.record import dump_record
from gaigel_server.logging import get_logger
from gaigel_server.matches import MatchPlan
from gaigel_server.metrics import ServerMetrics
from gaigel_server.session import Abort, BotSession
from gaigel_server.states import TableState
from gaigel_server.table import Table, TableHooks


class ServiceError(Exception):
    """An RPC failure with its status code and a message that says what to fix."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class RecordsDir:
    """Where the records of ended matches go, one JSON file per match (nowhere without a path)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.log = get_logger()

    def save(self, match_id: str, record: dict[str, Any]) -> None:
        """Writes *record* atomically; a failure is logged, the match result stands."""
        if self.path is None:
            return
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            dump_record(record, self.path / f"{match_id}.json")
        except OSError as e:
            self.log.error("record_write_failed", match_id=match_id, error=str(e))


class Lobby:
    """All tables and the pools of idle sessions per bot name."""

    def __init__(
        self, metrics: ServerMetrics, records_dir: Path | None, max_sessions_per_bot: int, keep_ended: int = 5000
    ) -> None:
        self.metrics = metrics
        self.records = RecordsDir(records_dir)
        self.max_sessions_per_bot = max_sessions_per_bot
        self.keep_ended = keep_ended
        self.tables: dict[str, Table] = {}  # in creation order
        self.waiting: dict[str, Table] = {}  # the tables try_start looks at, oldest first
        self.ended: deque[str] = deque()  # ended tables still kept, oldest first
        self.evicted = 0
        self.by_request: dict[str, str] = {}
        self.idle: dict[str, list[BotSession]] = {}
        self.sessions: dict[str, set[BotSession]] = {}
        self.closing = False
        self.log = get_logger()
        self.hooks = TableHooks(metrics, self.records.save, self._ended)

    # --- sessions --------------------------------------------------------------------

    def add_session(self, session: BotSession) -> None:
        """Counts a new session against its bot's limit.

        :raises ServiceError: RESOURCE_EXHAUSTED when the bot has too many sessions.
        """
        live = self.sessions.setdefault(session.bot_name, set())
        if len(live) >= self.max_sessions_per_bot:
            raise ServiceError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"too many sessions for bot {session.bot_name!r}: at most {self.max_sessions_per_bot} at once; close one first",
            )
        live.add(session)

    def make_idle(self, session: BotSession) -> None:
        """Puts *session* in its bot's pool and starts any table that can start now."""
        self.idle.setdefault(session.bot_name, []).append(session)
        self.try_start()

    def drop(self, session: BotSession) -> None:
        """Forgets a closed session."""
        session.closed = True
        pool = self.idle.get(session.bot_name, [])
        if session in pool:
            pool.remove(session)
        self.sessions.get(session.bot_name, set()).discard(session)

    def stream_closed(self, session: BotSession) -> None:
        """The stream of *session* ended: in a match the disconnect policy applies, else the session ends."""
        seat = session.seat
        if seat is not None and seat.running and not session.closed:
            seat.stream_broke(session)
        else:
            self.drop(session)

    def seated(self, bot_name: str) -> list[str]:
        """The matches not yet ended that seat *bot_name*."""
        return [t.match_id for t in self.tables.values() if t.state is not TableState.ENDED and bot_name in t.spec.bots]

    def retire(self, bot_name: str) -> int:
        """Ends every session of a bot being unregistered and returns how many there were.

        :raises ServiceError: FAILED_PRECONDITION while the bot is seated in a match not yet ended.
        """
        seated = self.seated(bot_name)
        if seated:
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"bot {bot_name!r} is seated in match(es) {', '.join(seated)}: cancel them or wait for their end",
            )
        sessions = self.sessions.pop(bot_name, set())
        self.idle.pop(bot_name, None)
        for session in sessions:  # none is in a match (checked above), so all are idle
            session.close()
        return len(sessions)

    def leave(self, session: BotSession) -> None:
        """A Leave: end now if idle, else after the current match."""
        session.leaving = True
        if session.seat is None:
            self.drop(session)
            session.close()

    def resume(self, match_id: str, seat: int, token: str) -> tuple[Table, BotSession]:
        """Finds the session of a seat for Resume.

        :raises ServiceError: NOT_FOUND, UNAUTHENTICATED or FAILED_PRECONDITION with the reason.
        """
        table = self.tables.get(match_id)
        if table is None:
            raise ServiceError(grpc.StatusCode.NOT_FOUND, f"Resume: no match {match_id!r} on this server")
        if not 0 <= seat < table.spec.players:
            raise ServiceError(
                grpc.StatusCode.INVALID_ARGUMENT, f"Resume: seat must be 0..{table.spec.players - 1}, got {seat}"
            )
        place = table.seats[seat]
        if not hmac.compare_digest(token.encode(), place.resume_token.encode()):
            raise ServiceError(
                grpc.StatusCode.UNAUTHENTICATED, f"Resume: wrong resume token for match {match_id} seat {seat}"
            )
        session = place.session
        if table.state is not TableState.RUNNING or session is None:
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"Resume: match {match_id} is over (or seat {seat} is not played over a stream)",
            )
        if (
            session.disconnected_at is not None
            and time.monotonic() - session.disconnected_at > table.clock.resume_grace
        ):
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"Resume: the grace period of {table.clock.resume_grace:g} s has expired",
            )
        if session.connected and session.stream is not None:
            old = session.stream
            session.detach(old)
            old.end(Abort(grpc.StatusCode.ABORTED, "this session was taken over by a Resume on another stream"))
            table.on_disconnect(seat, session)
        return table, session

    # --- tables ----------------------------------------------------------------------

    def requested(self, request_id: str) -> Table | None:
        """The table an earlier request with this (non-empty) *request_id* opened, if kept."""
        match_id = self.by_request.get(request_id) if request_id else None
        return None if match_id is None else self.tables.get(match_id)

    def open(self, plan: MatchPlan) -> Table:
        """Lists a new waiting table for *plan* (see :func:`gaigel_server.matches.validate`) and starts
        it once its sessions are there; a plan whose request id opened a table already gets that table.

        :raises ServiceError: UNAVAILABLE once the server is shutting down.
        """
        earlier = self.requested(plan.request_id)
        if earlier is not None:
            return earlier
        if self.closing:
            raise ServiceError(grpc.StatusCode.UNAVAILABLE, "the server is shutting down")
        house = {seat: make_bot(kind) for seat, kind in plan.house.items()}
        table = Table(secrets.token_hex(8), plan.spec, plan.clock, plan.preset, house, self.hooks, plan.request_id)
        table.withhold_seed = plan.withhold_seed
        table.match_key = plan.match_key or table.match_id
        table.to_proto(admin=True)  # whatever cannot be encoded fails here, before the table is listed
        for bot in plan.remote_bots:
            self.metrics.bot(bot)
        self.tables[table.match_id] = table
        self.waiting[table.match_id] = table
        if table.request_id:
            self.by_request[table.request_id] = table.match_id
        self.log.info("match_created", match_id=table.match_id, players=table.spec.players, bots=list(table.spec.bots))
        self.try_start()
        return table

    async def play(
        self, table: Table, watch: Callable[[Table], Awaitable[str]] | None = None, every: float = 0.05
    ) -> Table:
        """Returns once *table* has ended (its record and termination are set).

        *watch*, if given, is asked every *every* seconds until then; a reason it returns cancels
        the match with it (its first line is the record's cancel_reason).
        """
        while not table.over.is_set():
            if watch is None:
                await table.over.wait()
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(every):
                    await table.over.wait()
            why = "" if table.over.is_set() else await watch(table)
            if why:
                self.cancel(table, MatchTermination.CANCELLED, why.split("\n")[0])
                await table.over.wait()
        return table

    def try_start(self) -> None:
        """Starts every waiting table (oldest first) whose remote seats all have idle sessions."""
        if self.closing:
            return
        for table in list(self.waiting.values()):
            if table.state is not TableState.WAITING:
                self.waiting.pop(table.match_id, None)
                continue
            remote = [s for s in range(table.spec.players) if s not in table.house]
            need = Counter(table.seat_bot(s) for s in remote)
            if any(len([x for x in self.idle.get(b, []) if x.connected]) < c for b, c in need.items()):
                continue
            chosen: dict[int, BotSession] = {}
            for s in remote:
                pool = self.idle[table.seat_bot(s)]
                sess = next(x for x in pool if x.connected)
                pool.remove(sess)
                chosen[s] = sess
            del self.waiting[table.match_id]
            table.start(chosen)

    def _ended(self, table: Table) -> None:
        """Returns the sessions of an ended table to their pools (or ends them); keeps the table."""
        for sess in table.release_sessions():
            if sess.leaving:
                self.drop(sess)
                sess.close()
            elif sess.connected:
                self.make_idle(sess)
            else:
                self.drop(sess)
        self._retain(table)
        self.try_start()

    def _retain(self, table: Table) -> None:
        """Keeps *table* for GetMatch/GetMatchRecord/WatchMatch, forgetting the oldest ended table
        beyond ``keep_ended``: a server that runs for days must not grow with every match."""
        self.waiting.pop(table.match_id, None)
        self.ended.append(table.match_id)
        while len(self.ended) > self.keep_ended:
            old = self.tables.pop(self.ended.popleft(), None)
            if old is not None:
                self.evicted += 1
                if old.request_id and self.by_request.get(old.request_id) == old.match_id:
                    del self.by_request[old.request_id]

    def cancel(self, table: Table, termination: MatchTermination, reason: str = "") -> None:
        """Ends a waiting or running table as *termination* (cancelled or aborted)."""
        table.cancel(termination, reason)

    async def shutdown(self) -> None:
        """Aborts every table (records written), then ends every session."""
        self.closing = True
        for table in list(self.tables.values()):
            if table.state is not TableState.ENDED:
                self.cancel(table, MatchTermination.ABORTED, "server shutdown")  # ends it at once
        for live in list(self.sessions.values()):
            for sess in list(live):
                sess.close()


__all__ = ["Lobby", "RecordsDir", "ServiceError"]
