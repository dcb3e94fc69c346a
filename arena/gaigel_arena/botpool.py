"""The bot pool: the bot processes of an arena executor, their sandboxes and limits, faults and restarts.

Enough bot processes are started once, for the whole run, to fill every seat of ``workers``
concurrent matches:

* ``command`` bots run their command with ``GAIGEL_SERVER``, ``GAIGEL_TOKEN`` and
  ``GAIGEL_BOT_NAME`` in the environment, and ``GAIGEL_MATCHES=0`` (no limit of their own);
* ``house`` bots run as ``gaigel bot NAME`` (the Python client SDK), so mixed tables work.

``[arena] bot_processes = "per_match"`` starts fresh command-bot processes for every match
instead (:meth:`BotPool.start_match`), each under a one-match alias name and token, so no
process, session or token plays two seatings of a deal.

Bot processes run in process groups of their own (so shutdown also ends what a bot command
started) and die with the arena's process even when it is killed with ``kill -9``: every one
is started through the arena's one launcher (:mod:`gaigel_arena.lifeline`).

Command bots run in the sandbox their config asks for (:mod:`gaigel_arena.sandbox`):
``podman`` containers reach the server through a unix socket in a private folder
(:attr:`BotPool.socket_dir`), ``bwrap`` bots too, ``process`` bots get rlimits. A bot process
that ends is a fault with a reason code (``SANDBOX_OOM``, ``SANDBOX_PIDS``, ``SANDBOX_CPU``,
``BOT_EXIT``) in :attr:`BotPool.bot_faults` and the log, and is restarted (a match's process
under its alias, to resume its seat); a bot whose processes keep exiting is
:attr:`~BotPool.failing`, and its matches cannot be played.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import structlog

from gaigel_arena import bwrap, cgroup, sandbox
from gaigel_arena.botlog import BotLog
from gaigel_arena.config import ArenaConfig, BotConfig
from gaigel_arena.confine import bwrap_launch
from gaigel_arena.executors import BotFailure, MatchJob
from gaigel_arena.records import match_alias
from gaigel_harness.launch import bot_environment, find_program

__all__ = ["MAX_RESTARTS", "RESTART_WINDOW_S", "BotPool", "Key"]

log = structlog.get_logger("gaigel_arena")

Key = tuple[str, int]
"""A bot process: its name (a bot's, or a one-match alias) and its instance (pool index, or seat)."""

_POLL_S = 0.02
_LOST_EXIT_WAIT_S = 5.0
"""After a match: how long its record waits for the exit of a seat's process that dropped out
for good (seen by the watcher at its next tick, a container's after podman's teardown)."""
MAX_RESTARTS = 10
"""A bot whose processes exit this many times within :data:`RESTART_WINDOW_S` stops the arena."""
CLEAN_EXITS_HINT = (
    '; it exits cleanly: under bot_processes = "per_run" one process plays all of a bot\'s matches, '
    "so a bot must play until the server ends its session (every kit does unless its code sets a "
    "limit; the arena gives its bots GAIGEL_MATCHES=0), or the arena must start a process per match "
    '(bot_processes = "per_match", the default)'
)
"""What a bot that keeps leaving after its matches is told (a one-match bot in a per-run pool)."""
RESTART_WINDOW_S = 60.0
"""A bot command that cannot start is caught within seconds; one that crashes now and then
over an overnight run is restarted every time (its matches are forfeits, not a stopped arena)."""


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Sends *sig* to the process group of *proc* (a session leader), ignoring a group that is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


class BotPool:
    """The bot processes of one match server: *tokens* has every bot's token (a remote bot's own)."""

    def __init__(self, config: ArenaConfig, tokens: dict[str, str]) -> None:
        self._config = config
        self._tokens = tokens
        self.per_match = config.bot_processes == "per_match"
        self.closing = False
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self.failing: dict[str, str] = {}
        """Bots whose processes keep exiting (:data:`MAX_RESTARTS`): why; their matches raise :class:`BotFailure`."""
        self._finished: set[Key] = set()
        """One-match processes whose match has ended (their exit is not restarted)."""
        self._match_of: dict[str, str] = {}
        """One-match alias -> the arena match id (its log folder)."""
        self._restarts: dict[str, list[float]] = {}
        """Per bot: when its processes exited, within the last :data:`RESTART_WINDOW_S`."""
        self._exits: dict[str, int] = {}
        self._sandboxes, self._images = self._prepare_sandboxes(config)
        confined = bool(self._images) or "bwrap" in self._sandboxes.values()
        self.socket_dir = tempfile.mkdtemp(prefix="gaigel-arena-sock-") if confined else ""
        """Where the server listens on a unix socket for confined bots; ``""`` without any."""
        self._private = Path(tempfile.mkdtemp(prefix="gaigel-arena-private-"))
        """Mode 0700: the seccomp program and the bots' made-up passwd files; no bot sees it."""
        self._logs_root = Path(config.run_dir) / "logs" if config.run_dir else self._private / "logs"
        self._logs: dict[Key, BotLog] = {}
        self._groups: dict[Key, cgroup.BotCgroup] = {}
        self._stale_groups: list[cgroup.BotCgroup] = []
        """Groups not yet empty when their process was stopped: removed at shutdown."""
        self._spawned = 0
        self.sandbox_info: dict[str, dict[str, Any]] = {}
        """Per command bot: the sandbox that ran it and the limits actually enforced (for records)."""
        # conmon writes an "oom" file into its working directory when a container is OOM-killed.
        self._podman_dir = tempfile.mkdtemp(prefix="gaigel-arena-podman-") if self._images else None
        self._containers: dict[Key, str] = {}
        self._cgroup_files: dict[Key, dict[str, Path]] = {}
        self._cpu_used: dict[Key, float] = {}
        self._memory_hits: dict[Key, int] = {}  # a podman container's hits of its memory limit, last seen
        self._pids_seen: dict[Key, int] = {}
        self._limit_killed: set[Key] = set()
        self._bot_of: dict[str, str] = {}
        """Process name (a bot's name, or a one-match alias) -> the configured bot."""
        self._alias_tokens: dict[str, str] = {}
        self.bot_faults: list[dict[str, Any]] = []
        """Every bot process that ended: bot, instance, reason code, message, monotonic time ``at``."""
        self._exit_seen: weakref.WeakSet[subprocess.Popen[bytes]] = weakref.WeakSet()
        """Processes whose exit is in :attr:`bot_faults` (or had its limit's fault there already)."""
        self._procs: dict[Key, subprocess.Popen[bytes]] = {}
        self._match_procs: dict[Key, subprocess.Popen[bytes]] = {}
        """One-match processes (``bot_processes = "per_match"``) by (alias, seat)."""

    def start(self, loop: asyncio.AbstractEventLoop, port: int, workers: int, skip_bots: Iterable[str] = ()) -> None:
        """Starts the pool processes for *workers* concurrent matches on the server at loopback *port*
        (whose loop *loop* writes the bots' logs); *skip_bots* are not started."""
        self._loop, self.port = loop, port
        seats_per_side = self._config.ruleset.players // self._config.ruleset.num_sides
        skip = set(skip_bots)
        for bot in self._config.bots:
            if bot.kind == "remote" or (self.per_match and bot.kind == "command") or bot.name in skip:
                continue  # house bots are the project's own code: their processes may play on
            for k in range(workers * seats_per_side):
                self._spawn(bot, k)

    # --- what others read --------------------------------------------------------------

    def processes(self) -> list[subprocess.Popen[bytes]]:
        """Every bot process running now: the pool's and the current matches' own."""
        return [*self._procs.values(), *self._match_procs.values()]

    def match_processes(self) -> list[subprocess.Popen[bytes]]:
        """The one-match processes of the matches being played (``bot_processes = "per_match"``)."""
        return list(self._match_procs.values())

    def expected_sessions(self) -> dict[str, int]:
        """How many sessions each bot's pool processes open when all have joined."""
        want: dict[str, int] = {}
        for name, _ in self._procs:
            want[name] = want.get(name, 0) + 1
        return want

    def failure(self, job: MatchJob) -> BotFailure | None:
        """The failure of a bot of *job* that keeps exiting, if any: the match cannot be played."""
        for name in job.seats:
            if name in self.failing:
                return BotFailure(name, self.failing[name])
        return None

    def log_names(self, keys: Iterable[Key]) -> dict[str, str]:
        """The log file of each seat of *keys* (a match's processes), as records name files."""
        return {
            str(seat): self._log_name(self._logs[(alias, seat)].path)
            for alias, seat in keys
            if (alias, seat) in self._logs
        }

    # --- one match's processes (on the server's loop) -----------------------------------

    def start_match(
        self, job: MatchJob, register: Callable[[str], str], aliases: dict[str, str], keys: list[Key]
    ) -> None:
        """Per-match processes: a one-match alias (registered with *register*, which returns its token;
        into *aliases*: alias -> configured name) and a process (its key into *keys*) for every seat
        of a command bot of *job*. What a failure to start leaves in both is the caller's to end
        (:meth:`end_match`)."""
        for seat, name in enumerate(job.seats):
            bot = self._config.bot(name)
            if bot.kind != "command":
                continue
            alias = match_alias(name)
            token = register(alias)
            aliases[alias] = name
            self._match_of[alias] = job.match_id
            self._spawn(bot, seat, (alias, token), job.match_id)
            keys.append((alias, seat))

    def exited_before_join(self, keys: Iterable[Key], aliases: dict[str, str], job: MatchJob) -> BotFailure | None:
        """The failure of a one-match process of *keys* that has exited (asked while its match waits)."""
        gone = [(key, p) for key in keys if (p := self._match_procs.get(key)) and p.poll() is not None]
        if not gone:
            return None
        (alias, seat), proc = gone[0]
        botlog = self._logs.get((alias, seat))
        if botlog is not None:
            botlog.flush()
        said = botlog.tail() if botlog is not None else ""
        return BotFailure(
            aliases[alias],
            f"bot {aliases[alias]!r} exited (code {proc.returncode}) before it joined match {job.match_id}"
            + (f"; it wrote: {said}" if said else "; it wrote nothing"),
        )

    def match_over(self, keys: Iterable[Key]) -> None:
        """The match of *keys* has ended: their exits are no longer restarted."""
        self._finished.update(keys)

    async def await_lost_exits(self, keys: Iterable[Key], seats: set[int]) -> None:
        """Waits (at most :data:`_LOST_EXIT_WAIT_S`) until the exit of the process of every seat of
        *seats* (that disconnected and did not resume) is in :attr:`bot_faults`.

        Such a process usually died (a sandbox limit, a crash), but the watcher sees the exit only
        at its next tick, and a container's only once podman has torn it down: on a loaded
        machine that can come after the match ended (its strikes run out meanwhile), and the
        record would miss the fault that explains the forfeit. A process still alive after the
        wait (a bot that left on purpose) is left to the match's clean-up.
        """
        waiting = [p for key in keys if key[1] in seats and (p := self._match_procs.get(key)) is not None]
        deadline = time.monotonic() + _LOST_EXIT_WAIT_S
        while any(p not in self._exit_seen for p in waiting) and time.monotonic() < deadline and not self.closing:
            await asyncio.sleep(_POLL_S)

    async def end_match(self, keys: list[Key]) -> None:
        """Stops the one-match processes of *keys* (nothing of them may play on) and their sandboxes."""
        containers = [self._containers.pop(key) for key in keys if key in self._containers]
        groups = [g for key in keys if (g := self._groups.pop(key, None)) is not None]
        for key in keys:
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

    # --- starting processes --------------------------------------------------------------

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

    def command(self, bot: BotConfig) -> list[str]:
        """The command line of *bot*'s processes (before any sandbox)."""
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
        assert self._loop is not None, "BotPool.start first"
        name, token = alias or (bot.name, self._tokens[bot.name])
        key = (name, k)
        self._bot_of[name] = bot.name
        self._spawned += 1
        # GAIGEL_MATCHES 0: the arena, not the bot, decides how many matches a process plays (it
        # ends the session); a limit in the organiser's environment must not reach its bots.
        gaigel = {"GAIGEL_TOKEN": token, "GAIGEL_BOT_NAME": name, "GAIGEL_MATCHES": "0"}
        command = self.command(bot)
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
            self._memory_hits[key] = 0
            self._pids_seen[key] = 0
            podman, env = sandbox.podman_command(
                container, self._images[bot.name], command, gaigel, self.socket_dir, limits
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
        key: Key,
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
            socket_dir=self.socket_dir,
            private=self._private,
            limits=limits,
            group_name=f"gaigel-{os.getpid()}-{self._spawned}",
        )
        if confined.group is not None:
            self._groups[key] = confined.group
        return confined.argv, confined.env, confined.pass_fds, confined.info

    # --- watching processes (on the server's loop) ---------------------------------------

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
            memory_hits = sandbox.memory_limit_hits(files.get("memory"))
            self._memory_hits[key] = max(self._memory_hits.get(key, 0), memory_hits)
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
            self._memory_hits.get(key, 0),
        )
        if reason == sandbox.REASON_EXIT and proc.returncode == 0:
            log.info("bot_exited", bot=bot.name, process=name, instance=k, exit_code=0)  # a clean exit is no fault
            return
        self._record_fault(name, k, reason, message)

    async def check(self) -> None:
        """One look at every bot process: its sandbox's limits, and an exit (a fault, then a restart)."""
        for key, proc in [*self._procs.items(), *self._match_procs.items()]:
            await self._watch(key, proc)

    def _current(self, key: Key, proc: subprocess.Popen[bytes]) -> bool:
        """Whether *proc* is still the process of *key* (a match's processes are dropped when it ends)."""
        return self._procs.get(key) is proc or self._match_procs.get(key) is proc

    async def _watch(self, key: Key, proc: subprocess.Popen[bytes]) -> None:
        """Checks one bot process: its sandbox's limits, and an exit: a fault (not for a clean exit),
        then a restart (a pool process, or a match's process under its alias, which resumes its seat)."""
        name, k = key
        limited = key in self._containers or key in self._groups
        if limited and proc.poll() is None and not self.closing:
            await asyncio.to_thread(self._check_pids, name, k)
        if proc.poll() is None or self.closing or not self._current(key, proc):
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
                f"(last exit code {proc.returncode}); check its command: {' '.join(self.command(bot))}"
                + (CLEAN_EXITS_HINT if proc.returncode == 0 and key in self._procs else "")
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

    # --- shutdown ------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stops every bot process (SIGTERM, then SIGKILL of its group), its container or group, and
        removes the pool's folders; the logs are closed on the server's loop."""
        self.closing = True
        procs = self.processes()
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
        if self._loop is not None:
            for botlog in self._logs.values():
                self._loop.call_soon_threadsafe(botlog.close)
        self.remove_folders()

    def remove_folders(self) -> None:
        """Removes the socket, podman and private folders (also when the server could not start)."""
        for folder in (self.socket_dir, self._podman_dir, str(self._private)):
            if folder:
                shutil.rmtree(folder, ignore_errors=True)
