"""The gRPC executor: matches played through a local gaigel match server.

One server (``gaigel_server.server.create_server`` on ``127.0.0.1:0``) runs on an
asyncio loop in a background thread of its process: a table worker
(:mod:`gaigel_arena.workers`, one match at a time) or, for an arena with remote bots, the
runner process. Every bot gets a token, and
enough bot processes are started once, for the whole run, to fill every seat of
``workers`` concurrent matches:

* ``command`` bots run their command with ``GAIGEL_SERVER``, ``GAIGEL_TOKEN`` and
  ``GAIGEL_BOT_NAME`` in the environment;
* ``house`` bots run as ``gaigel bot NAME`` (the Python client SDK), so mixed tables work.

:meth:`GrpcExecutor.submit` creates the match through the MatchService (admin token,
``request_id`` = the arena match id and a per-attempt suffix), waits until it has ended (the
lobby's ``on_ended`` hook resolves a future: no polling), fetches the match record
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

``remote`` bots connect on their own, with their configured token, to the address in
``[arena] listen`` (TLS when ``tls_cert``/``tls_key`` are set; the local bot processes use
a second, loopback-only port). A match with a remote bot is created on the server only
while that bot has a connected session; otherwise it waits until ``[clock]
connect_wait_ms`` have passed since the bot was last connected (or since the start), and
then the absent bot's side forfeits without a match being played (reason ``ABSENT``;
both sides when both are absent). :class:`Presence` counts each remote bot's connected
and absent time; the runner has it written to ``presence.json`` for the report.

``[arena] bot_processes = "per_match"`` starts fresh command-bot processes for every match, each under
a one-match alias name and token (registered before, revoked after the match; the record
names the configured bot), so no process, session or token plays two seatings of a deal.

Command bots run in the sandbox their config asks for (:mod:`gaigel_arena.sandbox`):
``podman`` containers reach the server through a unix socket in a private folder (the
server listens there too), ``process`` bots get rlimits. A bot process that ends is a
fault with a reason code (``SANDBOX_OOM``, ``SANDBOX_PIDS``, ``SANDBOX_CPU``, ``BOT_EXIT``)
in :attr:`GrpcExecutor.bot_faults` and the log; the records of the matches where it
disconnected get the fault too, and a forfeit it caused is named by it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import structlog

from gaigel.match import MatchTermination
from gaigel.record import write_json_atomic
from gaigel_arena import bwrap, cgroup, sandbox
from gaigel_arena.botlog import BotLog
from gaigel_arena.config import ArenaConfig, BotConfig
from gaigel_arena.confine import bwrap_launch
from gaigel_arena.executors import BotFailure, MatchJob, MatchOutcome, unplayed_forfeit
from gaigel_harness.launch import bot_environment, find_program

__all__ = ["ABSENT", "GrpcExecutor", "Presence", "absent_result", "forfeit_reason"]

ABSENT = "ABSENT"
"""Reason code of a forfeit for a remote bot that was not connected within ``connect_wait_ms``."""
PRESENCE_FORMAT = "gaigel.arena.presence.v1"
_PRESENCE_WRITE_S = 2.0

log = structlog.get_logger("gaigel_arena")

_POLL_S = 0.02
_CHECK_S = 0.25
"""While a match runs: how often its waiter looks for a failed bot, an absent remote bot, a gone process."""
_RESTART_CHECK_S = 0.2
_LOST_EXIT_WAIT_S = 5.0
"""After a match: how long its record waits for the exit of a seat's process that dropped out
for good (seen by the watcher at its next tick, a container's after podman's teardown)."""
MAX_RESTARTS = 10
"""A bot whose processes exit this many times within :data:`RESTART_WINDOW_S` stops the arena."""
RESTART_WINDOW_S = 60.0
"""A bot command that cannot start is caught within seconds; one that crashes now and then
over an overnight run is restarted every time (its matches are forfeits, not a stopped arena)."""


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


def absent_result(job: MatchJob, sides: tuple[str, ...], absent: list[str], wait_s: float) -> dict[str, Any]:
    """The result of a match not played because remote bot(s) *absent* stayed away: their sides forfeit."""
    del sides  # (the sides follow from the seats)
    message = f"remote bot(s) {', '.join(absent)} not connected within {wait_s:g} s; the match was not played"
    return unplayed_forfeit(job.ruleset, job.seats, absent, ABSENT, message)


def match_alias(bot: str) -> str:
    """A one-match name for a process of *bot* (``bot_processes = "per_match"``): the bot's name, a
    dot and 12 hex digits, within the server's 64 characters."""
    return f"{bot[:50]}.{secrets.token_hex(6)}"


def configured_bot(process: str, bots: Iterable[str]) -> str:
    """The configured bot of a process name (a bot's name or its :func:`match_alias`); *process* if none."""
    base, dot, tail = process.rpartition(".")
    if process in bots or not dot or len(tail) != 12:
        return process
    return next((b for b in bots if b[:50] == base), process)


class Presence:
    """Connected and absent time of each remote bot in this run, kept as the arena's ``presence.json``.

    The file holds one entry per run (a resumed arena appends one), so the report adds them up.
    """

    def __init__(self, bots: list[str]) -> None:
        now = time.monotonic()
        self.connected: dict[str, bool] = dict.fromkeys(bots, False)
        self.seconds: dict[str, dict[str, float]] = {b: {"connected_s": 0.0, "absent_s": 0.0} for b in bots}
        self.absent_since: dict[str, float] = dict.fromkeys(bots, now)
        self.forfeits: dict[str, int] = dict.fromkeys(bots, 0)
        self._last = now
        self._started = time.time()
        self._path: Path | None = None
        self._earlier: list[Any] = []
        self._written = 0.0

    def update(self, connected: dict[str, bool]) -> None:
        """Adds the time since the last update to each bot's state, then takes the new states."""
        now = time.monotonic()
        for bot, was in self.connected.items():
            self.seconds[bot]["connected_s" if was else "absent_s"] += now - self._last
            if was and not connected[bot]:
                self.absent_since[bot] = now
            self.connected[bot] = connected[bot]
        self._last = now

    def attach(self, path: Path) -> None:
        """Keeps the runs already in *path* (an earlier run of the same arena) and writes to it from now on."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            self._earlier = list(data["runs"]) if data.get("format") == PRESENCE_FORMAT else []
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            self._earlier = []
        self._path = path
        self.write()

    def write(self, force: bool = True) -> None:
        """Writes the file (every :data:`_PRESENCE_WRITE_S` at most unless *force*)."""
        if self._path is None or (not force and time.monotonic() - self._written < _PRESENCE_WRITE_S):
            return
        self._written = time.monotonic()
        run = {
            "started": self._started,
            "updated": time.time(),
            "bots": {
                b: {
                    "connected_s": round(self.seconds[b]["connected_s"], 3),
                    "absent_s": round(self.seconds[b]["absent_s"], 3),
                    "absent_forfeits": self.forfeits[b],
                }
                for b in self.seconds
            },
        }
        with contextlib.suppress(OSError):  # a report aid: a full disk must not stop the arena
            write_json_atomic({"format": PRESENCE_FORMAT, "runs": [*self._earlier, run]}, self._path)


class GrpcExecutor:
    """Plays matches through a local match server with bot processes started once per run."""

    def __init__(self, config: ArenaConfig, workers: int, *, skip_bots: Iterable[str] = (), warn: bool = True) -> None:
        """Starts the server and the bot processes for *workers* concurrent matches.

        *skip_bots* are not started (a table worker whose node lacks their command fails their
        matches itself); *warn* logs the duplicate-memory warning (the runner's, once per run).
        """
        from gaigel_server.clock import Clock
        from gaigel_server.server import ServerConfig

        self.workers = workers
        self._config = config
        self._tokens = {b.name: b.token if b.kind == "remote" else secrets.token_urlsafe(18) for b in config.bots}
        self._remote = [b.name for b in config.bots if b.kind == "remote"]
        self.presence = Presence(self._remote)
        self._per_match = config.bot_processes == "per_match"
        self._admin = secrets.token_urlsafe(18)
        self._server_config = ServerConfig(
            admin_token=self._admin,
            bots=dict(self._tokens),
            tls_cert=config.tls_cert,
            tls_key=config.tls_key,
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
        self.failing: dict[str, str] = {}
        """Bots whose processes keep exiting (:data:`MAX_RESTARTS`): why; their matches raise :class:`BotFailure`."""
        self._finished: set[tuple[str, int]] = set()
        """One-match processes whose match has ended (their exit is not restarted)."""
        self._match_of: dict[str, str] = {}
        """One-match alias -> the arena match id (its log folder)."""
        self._restarts: dict[str, list[float]] = {}
        """Per bot: when its processes exited, within the last :data:`RESTART_WINDOW_S`."""
        self._exits: dict[str, int] = {}
        self._sandboxes, self._images = self._prepare_sandboxes(config)
        confined = bool(self._images) or "bwrap" in self._sandboxes.values()
        self._socket_dir = tempfile.mkdtemp(prefix="gaigel-arena-sock-") if confined else ""
        self._private = Path(tempfile.mkdtemp(prefix="gaigel-arena-private-"))
        """Mode 0700: the seccomp program and the bots' made-up passwd files; no bot sees it."""
        self._logs_root = Path(config.run_dir) / "logs" if config.run_dir else self._private / "logs"
        self._logs: dict[tuple[str, int], BotLog] = {}
        self._groups: dict[tuple[str, int], cgroup.BotCgroup] = {}
        self._stale_groups: list[cgroup.BotCgroup] = []
        """Groups not yet empty when their process was stopped: removed at shutdown."""
        self._spawned = 0
        self.sandbox_info: dict[str, dict[str, Any]] = {}
        """Per command bot: the sandbox that ran it and the limits actually enforced (for records)."""
        # conmon writes an "oom" file into its working directory when a container is OOM-killed.
        self._podman_dir = tempfile.mkdtemp(prefix="gaigel-arena-podman-") if self._images else None
        self._containers: dict[tuple[str, int], str] = {}
        self._cgroup_files: dict[tuple[str, int], dict[str, Path]] = {}
        self._cpu_used: dict[tuple[str, int], float] = {}
        self._pids_seen: dict[tuple[str, int], int] = {}
        self._limit_killed: set[tuple[str, int]] = set()
        self._bot_of: dict[str, str] = {}
        """Process name (a bot's name, or a one-match alias) -> the configured bot."""
        self._alias_tokens: dict[str, str] = {}
        self._ended: dict[str, asyncio.Future[None]] = {}
        """Server match id -> resolved when that match ends (the lobby's on_ended hook)."""
        self.bot_faults: list[dict[str, Any]] = []
        """Every bot process that ended: bot, instance, reason code, message, monotonic time ``at``."""
        self._exit_seen: weakref.WeakSet[subprocess.Popen[bytes]] = weakref.WeakSet()
        """Processes whose exit is in :attr:`bot_faults` (or had its limit's fault there already)."""
        self.port: int = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        seats_per_side = config.ruleset.players // config.ruleset.num_sides
        self._procs: dict[tuple[str, int], subprocess.Popen[bytes]] = {}
        self._match_procs: dict[tuple[str, int], subprocess.Popen[bytes]] = {}
        """One-match processes (``bot_processes = "per_match"``) by (alias, seat)."""
        skip = set(skip_bots)
        for bot in config.bots:
            if bot.kind == "remote" or (self._per_match and bot.kind == "command") or bot.name in skip:
                continue  # house bots are the project's own code: their processes may play on
            for k in range(workers * seats_per_side):
                self._spawn(bot, k)
        self._monitor = asyncio.run_coroutine_threadsafe(self._watch_bots(), self._loop)
        if warn:
            self._warn_about_memory()

    def _warn_about_memory(self) -> None:
        """Says which bots can carry what they saw from one seating of a duplicate set to the next."""
        remembering = list(self._remote)
        if not self._per_match:
            remembering += [b.name for b in self._config.bots if b.kind == "command"]
        if remembering:
            log.warning(
                "duplicate_memory",
                bots=remembering,
                why="these bots keep their memory between matches (remote, or bot_processes = per_run): "
                "a bot that recognises a deal knows its opponent's cards in the other seating",
            )

    # --- server and bots -----------------------------------------------------------------

    @staticmethod
    def _prepare_sandboxes(config: ArenaConfig) -> tuple[dict[str, str], dict[str, str]]:
        """Each command bot's concrete sandbox, and the image of each podman bot (built if asked)."""
        podman = sandbox.podman_available()
        kinds: dict[str, str] = {}
        images: dict[str, str] = {}
        for bot, kind in sandbox.command_bot_sandboxes(config, podman):
            if isinstance(kind, sandbox.SandboxError):
                raise ValueError(f"bot {bot.name!r}: {kind}")
            if (bot.image or bot.build) and kind != "podman":
                log.warning("sandbox_without_image", bot=bot.name, sandbox=kind, reason="podman is not installed")
            if kind == "podman":
                images[bot.name] = bot.image or sandbox.build_image(bot.name, bot.build)
            kinds[bot.name] = kind
            if kind == "process":
                log.warning(
                    "sandbox_unconfined",
                    bot=bot.name,
                    why='sandbox = "process": the bot can read and write what the organiser can, and reach the network',
                )
            log.info("bot_sandbox", bot=bot.name, sandbox=kind, image=images.get(bot.name, ""))
        return kinds, images

    async def _start(self) -> int:
        import grpc

        from gaigel_api.v1 import match_service_pb2_grpc
        from gaigel_server.server import create_server
        from gaigel_server.table import TableHooks

        listen = self._config.listen
        self._server, published = create_server(listen or "127.0.0.1:0", self._server_config)
        lobby = self._server.lobby
        hooks = lobby.hooks

        def on_ended(table: Any) -> None:  # match ends come as a call, not by polling GetMatch
            hooks.on_ended(table)
            waiter = self._ended.pop(table.match_id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

        lobby.hooks = TableHooks(hooks.metrics, hooks.save_record, on_ended)  # tables take it when created
        # The arena's own bots and stub use a loopback port without TLS; only remote bots use the published one.
        port = self._server.grpc.add_insecure_port("127.0.0.1:0") if listen else published
        if self._socket_dir:  # for podman bots, which have no network
            socket_path = os.path.join(self._socket_dir, sandbox.SOCKET_NAME)
            if self._server.grpc.add_insecure_port(f"unix:{socket_path}") == 0:
                raise ValueError(f"cannot listen on unix:{socket_path}")
        await self._server.start()
        if self._socket_dir:
            os.chmod(self._socket_dir, 0o755)  # the container's uid must reach the socket
            os.chmod(os.path.join(self._socket_dir, sandbox.SOCKET_NAME), 0o666)
        self._channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self._stub = match_service_pb2_grpc.MatchServiceStub(self._channel)
        log.info("arena_grpc_server_started", port=port, listen=listen or None, published_port=published)
        self.published_port = int(published)
        return int(port)

    def _command(self, bot: BotConfig) -> list[str]:
        if bot.kind == "house":
            return [sys.executable, "-m", "gaigel.cli", "bot", bot.house]
        return list(bot.command)

    def _limits(self, bot: BotConfig) -> sandbox.SandboxConfig:
        return self._config.sandbox.merged(dict(bot.limits))

    def _passed_env(self, bot: BotConfig) -> dict[str, str]:
        """The organiser's variables the config passes to *bot* (``pass_env``), and nothing else."""
        names = [*self._config.sandbox.pass_env, *bot.pass_env]
        return {n: os.environ[n] for n in names if n in os.environ}

    def _hidden(self, bot: BotConfig) -> list[Path]:
        """What a sandboxed *bot* must not see where it falls inside a folder it is shown."""
        hidden = [self._private]
        if self._config.run_dir:
            hidden.append(Path(self._config.run_dir))
        home = os.environ.get("HOME")
        if home and home != "/":
            hidden.append(Path(home))
        hidden += [Path(b.folder) for b in self._config.bots if b.folder and b.name != bot.name]
        return hidden

    def _log_name(self, path: Path) -> str:
        """*path* relative to the arena's output folder (as records name files), else absolute."""
        if self._config.run_dir:
            with contextlib.suppress(ValueError):
                return str(path.relative_to(self._config.run_dir))
        return str(path)

    def _log_path(self, bot: BotConfig, name: str, k: int, match_id: str) -> Path:
        if match_id:  # a one-match process: its seat and bot
            return self._logs_root / match_id / f"seat{k}-{bot.name}.log"
        return self._logs_root / "processes" / f"{bot.name}-{k}-{self._spawned}.log"

    def _spawn(
        self, bot: BotConfig, k: int, alias: tuple[str, str] | None = None, match_id: str = ""
    ) -> subprocess.Popen[bytes]:
        """Starts a process of *bot*: its pool process *k*, or, under a one-match *alias* (name,
        token), the process of seat *k* of match *match_id* (kept in ``_match_procs``).

        Its stdout and stderr go to its own capped log file (:class:`BotLog`), never to the runner's.
        """
        name, token = alias or (bot.name, self._tokens[bot.name])
        key = (name, k)
        self._bot_of[name] = bot.name
        self._spawned += 1
        gaigel = {"GAIGEL_TOKEN": token, "GAIGEL_BOT_NAME": name}
        command = self._command(bot)
        kind = self._sandboxes.get(bot.name, "none")
        limits = self._limits(bot)
        host_env = bot_environment(GAIGEL_SERVER=f"127.0.0.1:{self.port}", **gaigel)
        cwd = None
        pass_fds: tuple[int, ...] = ()
        info: dict[str, Any] = {"sandbox": kind}
        if kind == "podman":
            cwd = self._podman_dir
            container = f"gaigel-arena-{os.getpid()}-{name.lower()}-{k}"
            self._containers[key] = container
            self._cgroup_files.pop(key, None)
            self._cpu_used[key] = 0.0
            self._pids_seen[key] = 0
            podman, env = sandbox.podman_command(
                container, self._images[bot.name], command, gaigel, self._socket_dir, limits
            )
            command = sandbox.launcher_command(podman)
            info.update(memory=f"container cgroup ({limits.memory_mb} MB)", pids=f"container cgroup ({limits.pids})")
            info.update(uid="65534 (nobody)", network="none")
        else:
            program = find_program(command[0], host_env)
            if program is None:
                raise ValueError(
                    f"cannot start bot {bot.name!r} ({' '.join(command)}): {command[0]} is not an executable"
                )
            if kind == "bwrap":
                command, env, pass_fds, info = self._bwrap_command(bot, key, command, program, gaigel, limits)
            elif kind == "process":
                session = {**gaigel, "GAIGEL_SERVER": host_env["GAIGEL_SERVER"]}
                env = sandbox.process_environment(host_env, self._passed_env(bot), session)
                command = sandbox.process_command(command, limits)
                info.update(memory=f"RLIMIT_DATA ({limits.memory_mb} MB)", pids=f"RLIMIT_NPROC ({limits.pids})")
                info.update(uid="the organiser's", network="the organiser's")
            else:
                env = host_env
                command = sandbox.launcher_command(command)
        if bot.kind == "command":
            self.sandbox_info[bot.name] = info
        botlog = BotLog(self._log_path(bot, name, k, match_id), limits.log_bytes)
        try:
            proc = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=botlog.write_fd,
                stderr=botlog.write_fd,
                cwd=cwd,
                pass_fds=pass_fds,
                start_new_session=True,  # a process group of its own, set up without Python code in the child
            )
        except OSError as e:
            botlog.close()
            raise ValueError(f"cannot start bot {bot.name!r} ({' '.join(command)}): {e.strerror}") from None
        finally:
            for fd in pass_fds:
                os.close(fd)
        botlog.start(self._loop)
        old = self._logs.pop(key, None)
        if old is not None:
            self._loop.call_soon_threadsafe(old.close)
        self._logs[key] = botlog
        if alias is None:
            self._procs[key] = proc
        else:
            self._match_procs[key] = proc
            self._alias_tokens[name] = token
        return proc

    def _bwrap_command(
        self,
        bot: BotConfig,
        key: tuple[str, int],
        command: list[str],
        program: str,
        gaigel: dict[str, str],
        limits: sandbox.SandboxConfig,
    ) -> tuple[list[str], dict[str, str], tuple[int, ...], dict[str, Any]]:
        """The launcher command, environment and inherited file descriptors of a ``bwrap`` bot process."""
        old = self._groups.pop(key, None)
        if old is not None:
            old.kill()
            old.remove()
        self._pids_seen[key] = 0
        self._cpu_used[key] = 0.0
        confined = bwrap_launch(
            command,
            program,
            session={**gaigel, "GAIGEL_SERVER": f"unix:{bwrap.SOCKET_DIR}/{sandbox.SOCKET_NAME}"},
            passed=self._passed_env(bot),
            folders=[Path(bot.folder)] if bot.folder else [],
            hidden=self._hidden(bot),
            socket_dir=self._socket_dir,
            private=self._private,
            limits=limits,
            group_name=f"gaigel-{os.getpid()}-{self._spawned}",
        )
        if confined.group is not None:
            self._groups[key] = confined.group
        return confined.argv, confined.env, confined.pass_fds, confined.info

    def _remote_connected(self) -> dict[str, bool]:
        sessions = self._server.lobby.sessions
        return {b: any(s.connected and not s.closed for s in sessions.get(b, ())) for b in self._remote}

    async def _note_presence(self) -> None:
        self.presence.update(self._remote_connected())
        self.presence.write()

    def _record_fault(self, name: str, k: int, reason: str, message: str) -> None:
        """Keeps a fault of process (*name*, *k*) under its configured bot's name (*name* may be an alias)."""
        bot = self._bot_of.get(name, name)
        fault = {"bot": bot, "instance": k, "reason": reason, "message": message, "at": time.monotonic()}
        self.bot_faults.append(fault)
        log.warning("bot_fault", bot=bot, process=name, instance=k, reason=reason, message=message)

    def _check_pids(self, name: str, k: int) -> None:
        """Stops a container or bwrap bot whose pids limit refused a fork (a fork bomb): a SANDBOX_PIDS fault."""
        key = (name, k)
        group = self._groups.get(key)
        if group is not None:
            self._cpu_used[key] = max(self._cpu_used.get(key, 0.0), group.cpu_seconds())
            hits = group.pids_refused()
        else:
            if key not in self._cgroup_files:
                files = sandbox.container_cgroup_files(self._containers[key])
                if not files:
                    return  # not running yet
                self._cgroup_files[key] = files
            files = self._cgroup_files[key]
            self._cpu_used[key] = max(self._cpu_used.get(key, 0.0), sandbox.cpu_seconds_used(files.get("cpu")))
            hits = sandbox.pids_limit_hits(files.get("pids"))
        if hits > self._pids_seen.get(key, 0) and key not in self._limit_killed:
            self._pids_seen[key] = hits
            self._limit_killed.add(key)
            limit = self._limits(self._config.bot(self._bot_of.get(name, name))).pids
            self._record_fault(
                name, k, sandbox.REASON_PIDS, f"refused {hits} fork(s) at its limit of {limit} processes"
            )
            if group is not None:
                group.kill()
            else:
                sandbox.remove_containers([self._containers[key]])

    def _exit_fault(self, name: str, k: int, proc: subprocess.Popen[bytes]) -> None:
        key = (name, k)
        log_file = self._logs.get(key)
        if log_file is not None:
            log_file.flush()
        if key in self._limit_killed:  # its fault is recorded already
            self._limit_killed.discard(key)
            return
        bot = self._config.bot(self._bot_of.get(name, name))
        kind = self._sandboxes.get(bot.name, "none")
        group = self._groups.get(key)
        reason, message = sandbox.exit_reason(
            kind,
            proc.returncode,
            self._containers.get(key, ""),
            max(self._cpu_used.get(key, 0.0), group.cpu_seconds() if group else 0.0),
            self._limits(bot).cpu_seconds,
            group.oom_kills() if group else 0,
        )
        if reason == sandbox.REASON_EXIT and proc.returncode == 0:
            log.info("bot_exited", bot=bot.name, process=name, instance=k, exit_code=0)  # a clean exit is no fault
            return
        self._record_fault(name, k, reason, message)

    async def _watch_bots(self) -> None:
        while not self._closing:
            await asyncio.sleep(_RESTART_CHECK_S)
            if self._remote:
                self.presence.update(self._remote_connected())
                self.presence.write(force=False)
            for key, proc in [*self._procs.items(), *self._match_procs.items()]:
                await self._watch(key, proc)

    def _current(self, key: tuple[str, int], proc: subprocess.Popen[bytes]) -> bool:
        """Whether *proc* is still the process of *key* (a match's processes are dropped when it ends)."""
        return self._procs.get(key) is proc or self._match_procs.get(key) is proc

    async def _watch(self, key: tuple[str, int], proc: subprocess.Popen[bytes]) -> None:
        """Checks one bot process: its sandbox's limits, and an exit: a fault (not for a clean exit),
        then a restart (a pool process, or a match's process under its alias, which resumes its seat)."""
        name, k = key
        limited = key in self._containers or key in self._groups
        if limited and proc.poll() is None and not self._closing:
            await asyncio.to_thread(self._check_pids, name, k)
        if proc.poll() is None or self._closing or not self._current(key, proc):
            return
        await asyncio.to_thread(self._exit_fault, name, k, proc)
        self._exit_seen.add(proc)
        if not self._current(key, proc) or key in self._finished:
            return  # its match ended meanwhile: nothing to resume
        bot = self._config.bot(self._bot_of.get(name, name))
        if bot.name in self.failing:
            return
        now = time.monotonic()
        recent = [t for t in self._restarts.get(bot.name, []) if now - t < RESTART_WINDOW_S] + [now]
        self._restarts[bot.name] = recent
        self._exits[bot.name] = self._exits.get(bot.name, 0) + 1
        if len(recent) >= MAX_RESTARTS:
            said = self._logs[key].tail() if key in self._logs else ""
            self.failing[bot.name] = (
                f"bot {bot.name!r} exited {len(recent)} times within {RESTART_WINDOW_S:g} s "
                f"(last exit code {proc.returncode}); check its command: {' '.join(self._command(bot))}"
                + (f"; it wrote: {said}" if said else "")
            )
            log.error("bot_failed", bot=bot.name, exit_code=proc.returncode)
            return
        log.warning(
            "bot_restarted",
            bot=bot.name,
            process=name,
            exit_code=proc.returncode,
            restarts=self._exits[bot.name],
            recent=len(recent),
        )
        _kill_group(proc, signal.SIGKILL)  # whatever the dead bot left running
        if key in self._procs:
            self._spawn(bot, k)
        else:
            self._spawn(bot, k, (name, self._alias_tokens[name]), self._match_of.get(name, ""))

    def _failure(self, job: MatchJob) -> BotFailure | None:
        """The failure of a bot of *job* that keeps exiting, if any: the match cannot be played."""
        for name in job.seats:
            if name in self.failing:
                return BotFailure(name, self.failing[name])
        return None

    # --- matches -------------------------------------------------------------------------

    def _absent(self, bots: set[str]) -> tuple[list[str], bool]:
        """The remote bots of *bots* not connected now, and whether all of them are past their wait."""
        self.presence.update(self._remote_connected())
        absent = [b for b in self._remote if b in bots and not self.presence.connected[b]]
        wait = self._config.clock.connect_wait_ms / 1000.0
        now = time.monotonic()
        return absent, bool(absent) and all(now - self.presence.absent_since[b] >= wait for b in absent)

    def _absent_outcome(self, job: MatchJob, absent: list[str], started: float) -> MatchOutcome:
        sides = tuple(job.seats[self._config.ruleset.seats_of(x)[0]] for x in range(self._config.ruleset.num_sides))
        result = absent_result(job, sides, absent, self._config.clock.connect_wait_ms / 1000.0)
        for bot in absent:
            self.presence.forfeits[bot] += 1
        self.presence.write()
        log.warning("match_forfeit", match_id=job.match_id, **result["forfeit"])
        return MatchOutcome(job.match_id, result, None, time.perf_counter() - started)

    async def _wait_for_remote(self, job: MatchJob) -> list[str]:
        """Waits while a remote bot of *job* is absent but within its wait; the bots that stayed away."""
        while True:
            absent, expired = self._absent(set(job.seats))
            if not absent or expired:
                return absent
            failure = self._failure(job)
            if failure is not None:
                raise failure
            await asyncio.sleep(_POLL_S * 5)

    async def _register_aliases(
        self, job: MatchJob, metadata: Any, aliases: dict[str, str], procs: list[tuple[str, int]]
    ) -> None:
        """Per-match processes: a one-match alias (into *aliases*: alias -> configured name) and a process
        (its key (alias, seat) into *procs*) for every seat of a command bot."""
        from gaigel_api.v1 import match_service_pb2 as ms

        for seat, name in enumerate(job.seats):
            bot = self._config.bot(name)
            if bot.kind != "command":
                continue
            alias = match_alias(name)
            reply = await self._stub.RegisterBot(ms.RegisterBotRequest(bot_name=alias), metadata=metadata)
            aliases[alias] = name
            self._match_of[alias] = job.match_id
            self._spawn(bot, seat, (alias, reply.bot_token), job.match_id)
            procs.append((alias, seat))

    async def _retire_aliases(self, aliases: dict[str, str], metadata: Any) -> None:
        from gaigel_api.v1 import match_service_pb2 as ms

        for alias in aliases:
            with contextlib.suppress(Exception):  # a still-seated alias is revoked at shutdown with the server
                await self._stub.UnregisterBot(ms.UnregisterBotRequest(bot_name=alias), metadata=metadata)

    async def _stop_match_procs(self, procs: list[tuple[str, int]]) -> None:
        containers = [self._containers.pop(key) for key in procs if key in self._containers]
        groups = [g for key in procs if (g := self._groups.pop(key, None)) is not None]
        for key in procs:
            proc = self._match_procs.pop(key, None)
            if proc is not None:
                _kill_group(proc, signal.SIGKILL)  # one match only: nothing of the process may play on
            self._cgroup_files.pop(key, None)
            self._finished.discard(key)
            self._match_of.pop(key[0], None)
            botlog = self._logs.pop(key, None)
            if botlog is not None:
                botlog.close()
        if containers:
            await asyncio.to_thread(sandbox.remove_containers, containers)
        for group in groups:  # a bwrap bot's namespace dies with it; the group is emptied and removed
            group.kill()
            if not group.remove():
                self._stale_groups.append(group)

    async def _play(self, job: MatchJob, write_record: bool = True) -> tuple[MatchOutcome, dict[str, Any] | None]:
        """Plays *job*: its outcome and its record (written to ``job.record_path`` if *write_record*)."""
        failure = self._failure(job)
        if failure is not None:
            raise failure
        started = time.perf_counter()
        absent = await self._wait_for_remote(job)
        if absent:
            return self._absent_outcome(job, absent, started), None
        metadata = (("authorization", f"Bearer {self._admin}"),)
        procs: list[tuple[str, int]] = []
        aliases: dict[str, str] = {}
        try:
            if self._per_match:
                await self._register_aliases(job, metadata, aliases, procs)
            return await self._play_on_server(job, metadata, aliases, procs, started, write_record)
        finally:
            if self._per_match:
                await self._stop_match_procs(procs)
                await self._retire_aliases(aliases, metadata)

    async def _play_on_server(
        self,
        job: MatchJob,
        metadata: Any,
        aliases: dict[str, str],
        procs: list[tuple[str, int]],
        started: float,
        write_record: bool,
    ) -> tuple[MatchOutcome, dict[str, Any] | None]:
        from gaigel_api.v1 import match_service_pb2 as ms
        from gaigel_server.states import TableState

        by_name = {name: alias for alias, name in aliases.items()}
        rules = job.ruleset.to_dict()
        rules.pop("players", None)
        seat_bots = [job.seats[s] for s in range(len(job.seats))]
        if aliases:  # each seat of a local bot has its own alias, in seat order
            pending = list(aliases)
            seat_bots = [pending.pop(0) if name in by_name else name for name in job.seats]
        window_start = time.monotonic()
        created = await self._stub.CreateMatch(
            ms.CreateMatchRequest(
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
            ),
            metadata=metadata,
        )
        server_id = created.match.match_id
        table = self._server.lobby.tables.get(server_id)
        ended: asyncio.Future[None] = self._loop.create_future()
        if table is None or table.state is TableState.ENDED:
            ended.set_result(None)
        else:
            self._ended[server_id] = ended  # no await since the check: the end cannot slip in between
        try:
            while True:
                # The end arrives through the lobby's on_ended hook; the tick only looks for what
                # ends no match by itself: a failed bot, an absent remote bot, a process gone before it joined.
                await asyncio.wait({ended}, timeout=_CHECK_S)
                if ended.done():
                    break
                failure = self._failure(job)
                if failure is not None:
                    raise failure
                waiting = table is not None and table.state is TableState.WAITING
                if waiting and self._remote:
                    absent, expired = self._absent(set(job.seats))
                    if expired and self._cancel_waiting(server_id):
                        return self._absent_outcome(job, absent, started), None
                gone = [(key, p) for key in procs if (p := self._match_procs.get(key)) and p.poll() is not None]
                if gone and waiting and self._cancel_waiting(server_id):
                    (alias, seat), proc = gone[0]
                    botlog = self._logs.get((alias, seat))
                    if botlog is not None:
                        botlog.flush()
                    said = botlog.tail() if botlog is not None else ""
                    raise BotFailure(
                        aliases[alias],
                        f"bot {aliases[alias]!r} exited (code {proc.returncode}) before it joined match {job.match_id}"
                        + (f"; it wrote: {said}" if said else "; it wrote nothing"),
                    )
        finally:
            self._ended.pop(server_id, None)
            self._finished.update(procs)
        duration = time.perf_counter() - started
        reply = await self._stub.GetMatchRecord(ms.GetMatchRecordRequest(match_id=server_id), metadata=metadata)
        record = _rename(json.loads(reply.record_json), aliases)
        result = record.get("result")
        if not isinstance(result, dict) or "sides" not in result:
            raise RuntimeError(f"match {job.match_id} ended without a result (server match {server_id})")
        record["server_match_id"] = server_id  # links the record to the server's logs and the bots' view
        record["match_id"] = job.match_id
        confined = {n: self.sandbox_info[n] for n in sorted(set(job.seats)) if n in self.sandbox_info}
        if confined:  # which sandbox ran each command bot, and which limits it really had
            record["sandboxes"] = confined
        logs = {
            str(seat): self._log_name(self._logs[(alias, seat)].path)
            for alias, seat in procs
            if (alias, seat) in self._logs
        }
        if logs:
            record["bot_logs"] = logs
        result = dict(result)
        await self._await_lost_exits(record, procs)
        sandbox.annotate_record(record, self.bot_faults, window_start, time.monotonic())
        forfeit = forfeit_reason(record)
        if forfeit is not None:
            caused = [f for f in record.get("sandbox_faults", []) if f["seat"] == forfeit.get("seat")]
            if caused:
                forfeit["reason"] = caused[-1]["reason"]  # the limit that killed the bot: why it did not resume
            result["forfeit"] = forfeit
            log.warning("match_forfeit", match_id=job.match_id, **forfeit)
        if job.record_path is not None and write_record:
            write_json_atomic(record, job.record_path)
        return MatchOutcome(job.match_id, result, job.record_path, duration), record

    async def _await_lost_exits(self, record: dict[str, Any], procs: list[tuple[str, int]]) -> None:
        """Waits (at most :data:`_LOST_EXIT_WAIT_S`) until the exit of the process of every seat that
        disconnected and did not resume is in :attr:`bot_faults`.

        Such a process usually died (a sandbox limit, a crash), but the watcher sees the exit only
        at its next tick, and a container's only once podman has torn it down: on a loaded
        machine that can come after the match ended (its strikes run out meanwhile), and the
        record would miss the fault that explains the forfeit. A process still alive after the
        wait (a bot that left on purpose) is left to the match's clean-up.
        """
        gone: set[int] = set()
        for fault in record.get("faults", []):
            if isinstance(fault, dict) and fault.get("reason") == "DISCONNECT":
                gone.add(fault.get("seat", -1))
            elif isinstance(fault, dict) and fault.get("reason") == "RESUMED":
                gone.discard(fault.get("seat", -1))
        waiting = [p for key in procs if key[1] in gone and (p := self._match_procs.get(key)) is not None]
        deadline = time.monotonic() + _LOST_EXIT_WAIT_S
        while any(p not in self._exit_seen for p in waiting) and time.monotonic() < deadline and not self._closing:
            await asyncio.sleep(_POLL_S)

    def _cancel_waiting(self, server_id: str) -> bool:
        """Cancels a match still waiting for a seat's session; False if it has started meanwhile.

        Runs on the server's own loop, so the check and the cancel cannot be split by a start.
        """
        from gaigel_server.states import TableState

        table = self._server.lobby.tables.get(server_id)
        if table is None or table.state is not TableState.WAITING:
            return False
        self._server.lobby.cancel(table, MatchTermination.CANCELLED, "a remote bot stayed away")
        return True

    def ready(self, seats: tuple[str, ...]) -> bool:
        """Whether a match with *seats* can be issued now: its remote bots are connected or past their wait.

        Read from the runner's thread: a snapshot of the presence states, good enough for ordering.
        """
        if not self._remote:
            return True
        wait = self._config.clock.connect_wait_ms / 1000.0
        now = time.monotonic()
        return all(
            self.presence.connected.get(b, True) or now - self.presence.absent_since[b] >= wait for b in set(seats)
        )

    def attach_presence_log(self, path: Path) -> None:
        """Has the remote bots' connected and absent time written to *path* (kept across resumed runs)."""
        if self._remote:
            self.presence.attach(path)

    def submit(self, job: MatchJob) -> concurrent.futures.Future[MatchOutcome]:
        """Plays *job* on the server; the future raises for a void match."""
        return asyncio.run_coroutine_threadsafe(self._outcome(job), self._loop)

    async def _outcome(self, job: MatchJob) -> MatchOutcome:
        outcome, _ = await self._play(job)
        return outcome

    def wait_for_bots(self, timeout: float) -> bool:
        """Waits until every bot process started for the run has joined (a table worker reports ready
        then); False if some have not within *timeout* seconds (their matches wait for them)."""

        async def joined() -> bool:
            want: dict[str, int] = {}
            for name, _ in self._procs:
                want[name] = want.get(name, 0) + 1
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                sessions = self._server.lobby.sessions
                if all(len([x for x in sessions.get(b, ()) if x.connected]) >= n for b, n in want.items()):
                    return True
                await asyncio.sleep(_POLL_S)
            return False

        return asyncio.run_coroutine_threadsafe(joined(), self._loop).result()

    def play(self, job: MatchJob, write_record: bool = True) -> tuple[MatchOutcome, dict[str, Any] | None]:
        """Plays *job* and waits for it (a table worker's call): its outcome and its record (None for a
        match not played); the record is written to ``job.record_path`` only if *write_record*.

        :raises Exception: for a void match.
        """
        return asyncio.run_coroutine_threadsafe(self._play(job, write_record), self._loop).result()

    def shutdown(self) -> None:
        """Stops the bots, the server and the loop thread."""
        self._closing = True
        if self._remote:
            with contextlib.suppress(Exception):  # the loop may be gone already; the last periodic write stands
                asyncio.run_coroutine_threadsafe(self._note_presence(), self._loop).result(timeout=5)
        procs = [*self._procs.values(), *self._match_procs.values()]
        for proc in procs:
            _kill_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 3.0
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            _kill_group(proc, signal.SIGKILL)  # the bot if it did not stop, and what it started
            proc.wait()
        sandbox.remove_containers(sorted(set(self._containers.values())))
        for group in [*self._groups.values(), *self._stale_groups]:
            group.kill()
            for _ in range(50):  # the kernel takes a moment to empty a group of killed processes
                if group.remove():
                    break
                time.sleep(0.02)
        for botlog in self._logs.values():
            self._loop.call_soon_threadsafe(botlog.close)
        for folder in (self._socket_dir, self._podman_dir, str(self._private)):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)

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


def _rename(value: Any, aliases: dict[str, str]) -> Any:
    """*value* (a record) with every string that is a one-match alias replaced by its bot's configured name."""
    if not aliases:
        return value
    if isinstance(value, str):
        return aliases.get(value, value)
    if isinstance(value, list):
        return [_rename(v, aliases) for v in value]
    if isinstance(value, dict):
        return {k: _rename(v, aliases) for k, v in value.items()}
    return value
