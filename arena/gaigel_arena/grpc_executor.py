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
server's disconnect policy: after ``[clock] resume_grace_ms`` without a Resume its side
forfeits. The forfeit is rated as a loss, and the result stored in the journal names it
(``result["forfeit"]``: side, seat, bot, the reason code of the fault that led to it,
e.g. ``DISCONNECT``, and the server's message); the match record holds every fault.

Bot processes run in process groups of their own (so shutdown also ends what a bot
command started) and, on Linux, die with the runner even when it is killed with
``kill -9``: a small launcher sets ``PR_SET_PDEATHSIG`` and then execs the bot command
(no ``preexec_fn``: running Python code between fork and exec is unsafe with gRPC
threads). Processes that a bot command starts itself are not covered by that signal.
``remote`` bots (connecting on their own to a published server) are not supported yet.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import structlog

from gaigel.record import write_json_atomic
from gaigel_arena.config import ArenaConfig, BotConfig
from gaigel_arena.executors import MatchJob, MatchOutcome
from gaigel_harness.launch import bot_environment, find_program

__all__ = ["GrpcExecutor", "forfeit_reason"]

log = structlog.get_logger("gaigel_arena")

_POLL_S = 0.02
_RESTART_CHECK_S = 0.2
MAX_RESTARTS = 10
"""A bot whose processes exit this many times within :data:`RESTART_WINDOW_S` stops the arena."""
RESTART_WINDOW_S = 60.0
"""A bot command that cannot start is caught within seconds; one that crashes now and then
over an overnight run is restarted every time (its matches are forfeits, not a stopped arena)."""

_LAUNCHER = """
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the runner
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):  # the runner died before the signal was armed
    os._exit(1)
try:
    os.execvp(sys.argv[2], sys.argv[2:])  # the signal survives exec
except OSError as e:
    sys.stderr.write(f"cannot start {sys.argv[2]}: {e.strerror}\\n")
    os._exit(127)
"""
"""Runs ``python -I -c _LAUNCHER RUNNER_PID COMMAND...`` on Linux: arms the parent-death
signal, then becomes the bot command."""


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Sends *sig* to the process group of *proc* (a session leader), ignoring a group that is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def forfeit_reason(record: dict[str, Any]) -> dict[str, Any] | None:
    """Why a forfeited match was forfeited, from its record's faults; None without a forfeit.

    ``reason`` is the code of the last fault of the forfeiting seat before the FORFEIT
    (``DISCONNECT`` for a bot that crashed and did not resume, ``TIMEOUT_FALLBACK`` or
    ``ILLEGAL_ACTION`` for strikes over the limit), ``message`` the server's FORFEIT message.
    """
    result = record.get("result") or {}
    if not result.get("forfeit_sides"):
        return None
    faults = [f for f in record.get("faults", []) if isinstance(f, dict)]
    final = next((f for f in reversed(faults) if f.get("reason") == "FORFEIT"), None)
    if final is None:
        return {"side": result["forfeit_sides"][0], "reason": "FORFEIT", "message": ""}
    seat = final.get("seat")
    before = [f for f in faults[: faults.index(final)] if f.get("seat") == seat and f.get("reason") != "RESUMED"]
    seats = record.get("seats") or []
    bot = (
        seats[seat].get("bot")
        if isinstance(seat, int) and seat < len(seats) and isinstance(seats[seat], dict)
        else None
    )
    return {
        "side": result["forfeit_sides"][0],
        "seat": seat,
        "bot": bot,
        "reason": before[-1].get("reason", "FORFEIT") if before else "FORFEIT",
        "message": final.get("message", ""),
    }


class GrpcExecutor:
    """Plays matches through a local match server with bot processes started once per run."""

    def __init__(self, config: ArenaConfig, workers: int) -> None:
        remote = [b.name for b in config.bots if b.kind == "remote"]
        if remote:
            raise NotImplementedError(
                f"remote bots ({', '.join(remote)}) need a published server; not supported by the arena yet"
            )
        from gaigel_server.clock import Clock
        from gaigel_server.server import ServerConfig

        self.workers = workers
        self._config = config
        self._tokens = {b.name: secrets.token_urlsafe(18) for b in config.bots}
        self._admin = secrets.token_urlsafe(18)
        self._server_config = ServerConfig(
            admin_token=self._admin,
            bots=dict(self._tokens),
            clock=Clock(
                decision_time=config.clock.decision_ms / 1000.0,
                bank=config.clock.bank_ms / 1000.0,
                resume_grace=config.clock.resume_grace_ms / 1000.0,
            ),
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="gaigel-arena-grpc", daemon=True)
        self._thread.start()
        self._server: Any = None
        self._stub: Any = None
        self._channel: Any = None
        self._closing = False
        self._failed = ""
        self._restarts: dict[str, list[float]] = {}
        """Per bot: when its processes exited, within the last :data:`RESTART_WINDOW_S`."""
        self._exits: dict[str, int] = {}
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
        env = bot_environment(
            GAIGEL_SERVER=f"127.0.0.1:{self.port}", GAIGEL_TOKEN=self._tokens[bot.name], GAIGEL_BOT_NAME=bot.name
        )
        command = self._command(bot)
        program = command[0]
        if find_program(program, env) is None:
            raise ValueError(f"cannot start bot {bot.name!r} ({' '.join(command)}): {program} is not an executable")
        if sys.platform.startswith("linux"):
            command = [sys.executable, "-I", "-c", _LAUNCHER, str(os.getpid()), *command]
        try:
            proc = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # a process group of its own, set up without Python code in the child
            )
        except OSError as e:
            raise ValueError(f"cannot start bot {bot.name!r} ({' '.join(command)}): {e.strerror}") from None
        self._procs[(bot.name, k)] = proc

    async def _watch_bots(self) -> None:
        while not self._closing:
            await asyncio.sleep(_RESTART_CHECK_S)
            for (name, k), proc in list(self._procs.items()):
                if proc.poll() is not None and not self._closing and not self._failed:
                    now = time.monotonic()
                    recent = [t for t in self._restarts.get(name, []) if now - t < RESTART_WINDOW_S] + [now]
                    self._restarts[name] = recent
                    self._exits[name] = self._exits.get(name, 0) + 1
                    if len(recent) >= MAX_RESTARTS:
                        self._failed = (
                            f"bot {name!r} exited {len(recent)} times within {RESTART_WINDOW_S:g} s "
                            f"(last exit code {proc.returncode}); "
                            f"check its command: {' '.join(self._command(self._config.bot(name)))}"
                        )
                        log.error("bot_failed", bot=name, exit_code=proc.returncode)
                        continue
                    log.warning(
                        "bot_restarted",
                        bot=name,
                        exit_code=proc.returncode,
                        restarts=self._exits[name],
                        recent=len(recent),
                    )
                    _kill_group(proc, signal.SIGKILL)  # whatever the dead bot left running
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
                withhold_seed=True,  # duplicate sets play this seed again under other seatings
                match_key=job.match_id,  # bot seeds from the schedule, not the server's random id: reruns match
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
        record["server_match_id"] = server_id  # links the record to the server's logs and the bots' view
        record["match_id"] = job.match_id
        result = dict(result)
        forfeit = forfeit_reason(record)
        if forfeit is not None:
            result["forfeit"] = forfeit
            log.warning("match_forfeit", match_id=job.match_id, **forfeit)
        if job.record_path is not None:
            write_json_atomic(record, job.record_path)
        return MatchOutcome(job.match_id, result, job.record_path, duration)

    def submit(self, job: MatchJob) -> concurrent.futures.Future[MatchOutcome]:
        """Plays *job* on the server; the future raises for a void match."""
        return asyncio.run_coroutine_threadsafe(self._play(job), self._loop)

    def shutdown(self) -> None:
        """Stops the bots, the server and the loop thread."""
        self._closing = True
        for proc in self._procs.values():
            _kill_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 3.0
        for proc in self._procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            _kill_group(proc, signal.SIGKILL)  # the bot if it did not stop, and what it started
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
