"""The host: the arena's in-process gaigel match server, its thread and event loop, and its matches.

One server (``gaigel_server.server.create_server``) runs on an asyncio loop in a background
thread of its process (a table worker, or the runner for an arena with remote bots). The
arena's own bots reach it on a loopback port without TLS (and, for confined bots, a unix
socket in *socket_dir*); remote bots use ``[arena] listen``, with TLS when configured.

Matches go through the server's in-process front door, exactly as CreateMatch checks them:
:meth:`MatchHost.open` validates a ``CreateMatchRequest`` (:func:`gaigel_server.matches.validate`)
and lists its table (``Lobby.open``), :meth:`MatchHost.play` awaits its end (``Lobby.play``,
whose *watch* may cancel it). Both run on the host's loop; :meth:`run` and :meth:`call_soon`
bring work there from other threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import secrets
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from gaigel_arena import sandbox
from gaigel_arena.config import ArenaConfig
from gaigel_arena.executors import MatchJob

if TYPE_CHECKING:
    from gaigel_server.table import Table

__all__ = ["MatchHost"]

log = structlog.get_logger("gaigel_arena")

T = TypeVar("T")


class MatchHost:
    """The in-process match server of an arena executor, on a loop thread of its own.

    *tokens*: every bot's name and token (registered from the start); *socket_dir*: a folder for
    the server's unix socket (for confined bots), or ``""``.
    """

    def __init__(self, config: ArenaConfig, tokens: Mapping[str, str], socket_dir: str = "") -> None:
        from gaigel_server.clock import Clock
        from gaigel_server.server import ServerConfig

        self._listen = config.listen
        self._socket_dir = socket_dir
        self._server_config = ServerConfig(
            admin_token=secrets.token_urlsafe(18),
            bots=dict(tokens),
            tls_cert=config.tls_cert,
            tls_key=config.tls_key,
            clock=Clock(
                decision_time=config.clock.decision_ms / 1000.0,
                bank=config.clock.bank_ms / 1000.0,
                resume_grace=config.clock.resume_grace_ms / 1000.0,
            ),
        )
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="gaigel-arena-grpc", daemon=True)
        self._thread.start()
        self._server: Any = None
        self.published_port = 0
        """The port of ``[arena] listen`` (remote bots), or the loopback port without it."""
        self.port: int = self.run(self._start()).result(timeout=30)
        """The loopback port of the arena's own bots."""

    async def _start(self) -> int:
        from gaigel_server.server import create_server

        listen = self._listen
        self._server, published = create_server(listen or "127.0.0.1:0", self._server_config)
        # The arena's own bots use a loopback port without TLS; only remote bots use the published one.
        port = self._server.grpc.add_insecure_port("127.0.0.1:0") if listen else published
        if self._socket_dir:  # for confined bots, which have no network
            socket_path = os.path.join(self._socket_dir, sandbox.SOCKET_NAME)
            if self._server.grpc.add_insecure_port(f"unix:{socket_path}") == 0:
                raise ValueError(f"cannot listen on unix:{socket_path}")
        await self._server.start()
        if self._socket_dir:
            os.chmod(self._socket_dir, 0o755)  # the container's uid must reach the socket
            os.chmod(os.path.join(self._socket_dir, sandbox.SOCKET_NAME), 0o666)
        log.info("arena_grpc_server_started", port=port, listen=listen or None, published_port=published)
        self.published_port = int(published)
        return int(port)

    # --- the loop ------------------------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Runs *coro* on the host's loop (from any other thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call_soon(self, callback: Callable[[], object]) -> None:
        """Calls *callback* on the host's loop (from any thread)."""
        self.loop.call_soon_threadsafe(callback)

    # --- bots (on the loop) --------------------------------------------------------------

    def connected(self, bots: Iterable[str]) -> dict[str, bool]:
        """Whether each of *bots* has a connected, open session now."""
        sessions = self._server.lobby.sessions
        return {b: any(s.connected and not s.closed for s in sessions.get(b, ())) for b in bots}

    def joined(self, want: Mapping[str, int]) -> bool:
        """Whether each bot of *want* has at least that many connected sessions."""
        sessions = self._server.lobby.sessions
        return all(len([x for x in sessions.get(b, ()) if x.connected]) >= n for b, n in want.items())

    def register(self, name: str) -> str:
        """Registers bot *name* (a one-match alias); its token."""
        token: str = self._server.bots.register(name)
        self._server.metrics.bot(name)
        return token

    def unregister(self, name: str) -> None:
        """Revokes bot *name* and ends its sessions, as UnregisterBot does; a bot still seated in a
        match that has not ended is left (it is revoked at shutdown with the server)."""
        from gaigel_server.lobby import ServiceError

        if name not in self._server.bots:
            return
        try:
            self._server.lobby.retire(name)
        except ServiceError:  # still seated: revoked at shutdown
            return
        self._server.bots.unregister(name)
        self._server.metrics.forget_bot(name)

    # --- matches (on the loop) -----------------------------------------------------------

    def open(self, job: MatchJob, seat_bots: list[str]) -> Table:
        """Lists the table of *job* with *seat_bots* (the process names of its seats); it starts once
        their sessions are there.

        :raises gaigel_server.matches.InvalidMatch: for a match the server would refuse.
        """
        from gaigel_api.v1 import match_service_pb2 as ms
        from gaigel_server import matches

        rules = job.ruleset.to_dict()
        rules.pop("players", None)
        request = ms.CreateMatchRequest(
            players=job.ruleset.players,
            seat_bots=seat_bots,
            hands=job.hands,
            seed=job.seed,
            ruleset_preset="default",
            ruleset_overrides_json=json.dumps(rules),
            first_dealer_seat=job.ruleset.players - 1,  # as MatchSpec's default: seat 0 leads hand 0
            # One id per attempt: a retried (void) match must not get the ended match of its last attempt.
            request_id=f"{job.match_id}.{secrets.token_hex(4)}",
            withhold_seed=True,  # duplicate sets play this seed again under other seatings
            match_key=job.match_id,  # bot seeds from the schedule, not the server's random id: reruns match
        )
        plan = matches.validate(request, self._server.bots, self._server_config.clock)
        table: Table = self._server.lobby.open(plan)
        return table

    async def play(
        self, table: Table, watch: Callable[[Table], Awaitable[str]] | None = None, every: float = 0.05
    ) -> Table:
        """Returns *table* once it has ended; *watch* is asked every *every* seconds until then, and a
        reason it returns cancels the match with it."""
        ended: Table = await self._server.lobby.play(table, watch, every)
        return ended

    # --- shutdown ------------------------------------------------------------------------

    def stop(self) -> None:
        """Stops the server (running matches are aborted, their records written) and the loop thread."""

        async def stop() -> None:
            if self._server is not None:
                await self._server.stop(1.0)

        try:
            self.run(stop()).result(timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)
