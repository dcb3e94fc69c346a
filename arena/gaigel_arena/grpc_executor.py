"""The gRPC executor: matches played through a local gaigel match server.

One server (``gaigel_server.server.create_server`` on ``127.0.0.1:0``) runs on an
asyncio loop in a background thread of the runner process. Every bot gets a token, and
enough bot processes are started once, for the whole run, to fill every seat of
``workers`` concurrent matches:

* ``command`` bots run their command with ``GAIGEL_SERVER``, ``GAIGEL_TOKEN`` and
  ``GAIGEL_BOT_NAME`` in the environment;
* ``house`` bots run as ``gaigel bot NAME`` (the Python client SDK), so mixed tables work.

:meth:`GrpcExecutor.submit` creates the match through the MatchService (admin token,
``request_id`` = the arena match id), waits until it has ended, fetches the match record
and returns the result; a server-side failure raises, so the runner replays the match
(void). A bot process that exits is restarted; matches it was seated in end under the
server's disconnect policy (forfeits are recorded in the record and rated). If the
runner itself is killed, the bot processes lose the server and exit after their
client's reconnect timeout.
``remote`` bots (connecting on their own to a published server) are not supported yet.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from typing import Any

import structlog

from gaigel_arena.config import ArenaConfig, BotConfig
from gaigel_arena.executors import MatchJob, MatchOutcome, write_json_atomic

__all__ = ["GrpcExecutor"]

log = structlog.get_logger("gaigel_arena")

_POLL_S = 0.02
_RESTART_CHECK_S = 0.2
MAX_RESTARTS = 10
"""A bot whose processes exit this many times in one run stops the arena."""


class GrpcExecutor:
    """Plays matches through a local match server with bot processes started once per run."""

    def __init__(self, config: ArenaConfig, workers: int) -> None:
        remote = [b.name for b in config.bots if b.kind == "remote"]
        if remote:
            raise NotImplementedError(
                f"remote bots ({', '.join(remote)}) need a published server; not supported by the arena yet"
            )
        from gaigel_server.server import ServerConfig
        from gaigel_server.table import Clock

        self.workers = workers
        self._config = config
        self._tokens = {b.name: secrets.token_urlsafe(18) for b in config.bots}
        self._admin = secrets.token_urlsafe(18)
        self._server_config = ServerConfig(
            admin_token=self._admin,
            bots=dict(self._tokens),
            clock=Clock(decision_time=config.clock.decision_ms / 1000.0, bank=config.clock.bank_ms / 1000.0),
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="gaigel-arena-grpc", daemon=True)
        self._thread.start()
        self._server: Any = None
        self._stub: Any = None
        self._channel: Any = None
        self._closing = False
        self._failed = ""
        self._restarts: dict[str, int] = {}
        self.port: int = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        seats_per_side = config.ruleset.players // config.ruleset.num_sides
        self._procs: dict[tuple[str, int], subprocess.Popen[bytes]] = {}
        for bot in config.bots:
            for k in range(workers * seats_per_side):
                self._spawn(bot, k)
        self._monitor = asyncio.run_coroutine_threadsafe(self._watch_bots(), self._loop)

    # --- server and bots -----------------------------------------------------------------

    async def _start(self) -> int:
        import grpc

        from gaigel_api.v1 import match_service_pb2_grpc
        from gaigel_server.server import create_server

        self._server, port = create_server("127.0.0.1:0", self._server_config)
        await self._server.start()
        self._channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self._stub = match_service_pb2_grpc.MatchServiceStub(self._channel)
        log.info("arena_grpc_server_started", port=port)
        return int(port)

    def _command(self, bot: BotConfig) -> list[str]:
        if bot.kind == "house":
            return [sys.executable, "-m", "gaigel.cli", "bot", bot.house]
        return list(bot.command)

    def _spawn(self, bot: BotConfig, k: int) -> None:
        env = {
            **os.environ,
            "GAIGEL_SERVER": f"127.0.0.1:{self.port}",
            "GAIGEL_TOKEN": self._tokens[bot.name],
            "GAIGEL_BOT_NAME": bot.name,
        }
        try:
            proc = subprocess.Popen(
                self._command(bot),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )  # no preexec_fn: running Python code between fork and exec is unsafe with gRPC threads
        except OSError as e:
            raise ValueError(f"cannot start bot {bot.name!r} ({' '.join(self._command(bot))}): {e.strerror}") from None
        self._procs[(bot.name, k)] = proc

    async def _watch_bots(self) -> None:
        while not self._closing:
            await asyncio.sleep(_RESTART_CHECK_S)
            for (name, k), proc in list(self._procs.items()):
                if proc.poll() is not None and not self._closing and not self._failed:
                    self._restarts[name] = self._restarts.get(name, 0) + 1
                    if self._restarts[name] >= MAX_RESTARTS:
                        self._failed = (
                            f"bot {name!r} exited {self._restarts[name]} times (last exit code {proc.returncode}); "
                            f"check its command: {' '.join(self._command(self._config.bot(name)))}"
                        )
                        log.error("bot_failed", bot=name, exit_code=proc.returncode)
                        continue
                    log.warning("bot_restarted", bot=name, exit_code=proc.returncode)
                    self._spawn(self._config.bot(name), k)

    # --- matches -------------------------------------------------------------------------

    async def _play(self, job: MatchJob) -> MatchOutcome:
        from gaigel_api.v1 import match_service_pb2 as ms

        if self._failed:
            raise RuntimeError(self._failed)
        metadata = (("authorization", f"Bearer {self._admin}"),)
        rules = job.ruleset.to_dict()
        rules.pop("players", None)
        started = time.perf_counter()
        created = await self._stub.CreateMatch(
            ms.CreateMatchRequest(
                players=job.ruleset.players,
                seat_bots=list(job.seats),
                hands=job.hands,
                seed=job.seed,
                ruleset_preset="default",
                ruleset_overrides_json=json.dumps(rules),
                first_dealer_seat=job.ruleset.players - 1,  # as MatchSpec's default: seat 0 leads hand 0
                request_id=job.match_id,
            ),
            metadata=metadata,
        )
        server_id = created.match.match_id
        while True:
            got = await self._stub.GetMatch(ms.GetMatchRequest(match_id=server_id), metadata=metadata)
            if got.match.state == ms.MATCH_STATE_ENDED:
                break
            if self._failed:
                raise RuntimeError(self._failed)
            await asyncio.sleep(_POLL_S)
        duration = time.perf_counter() - started
        reply = await self._stub.GetMatchRecord(ms.GetMatchRecordRequest(match_id=server_id), metadata=metadata)
        record = json.loads(reply.record_json)
        result = record.get("result")
        if not isinstance(result, dict) or "sides" not in result:
            raise RuntimeError(f"match {job.match_id} ended without a result (server match {server_id})")
        record["match_id"] = job.match_id
        if job.record_path is not None:
            write_json_atomic(record, job.record_path)
        return MatchOutcome(job.match_id, dict(result), job.record_path, duration)

    def submit(self, job: MatchJob) -> concurrent.futures.Future[MatchOutcome]:
        """Plays *job* on the server; the future raises for a void match."""
        return asyncio.run_coroutine_threadsafe(self._play(job), self._loop)

    def shutdown(self) -> None:
        """Stops the bots, the server and the loop thread."""
        self._closing = True
        for proc in self._procs.values():
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 3.0
        for proc in self._procs.values():
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

        async def stop() -> None:
            if self._channel is not None:
                await self._channel.close()
            if self._server is not None:
                await self._server.stop(1.0)

        try:
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
