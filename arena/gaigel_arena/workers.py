"""Table workers: matches with bot processes played outside the runner process.

A :class:`TableWorker` owns one match server (a :class:`~gaigel_arena.grpc_executor.GrpcExecutor`
for one match at a time) and the processes, or sandboxed containers, of its bots; it plays
:class:`~gaigel_arena.executors.MatchJob` values and hands back
:class:`~gaigel_arena.executors.MatchOutcome` values (never engine state). The runner
process keeps the schedule and the journal only.

* :class:`WorkerExecutor` (``gaigel arena run --executor grpc --workers N``) runs *N*
  table workers as processes on this machine. Each talks to the runner over a pipe: a job
  goes in, its outcome (or why it is void) comes back, and a thread of the runner per
  worker resolves the match's future when that message arrives (no polling). The worker
  writes the match record itself (the same file system). A worker that dies (``kill -9``,
  a crash) ends its bots with it (they die with their parent); its match in flight comes
  back void, so the runner replays it from its seed, and the worker is started again.
* :class:`gaigel_arena.ray_executor.RayExecutor` runs the same :class:`TableWorker` as Ray
  actors on cluster nodes and ships the records back to the runner.

A worker plays one match at a time: matches are dispatched to idle workers only, so a
worker that dies takes exactly one match with it. Remote bots (``remote = true``) connect
to the arena's published server by themselves; an arena with remote bots keeps its one
server in the runner process (:class:`~gaigel_arena.grpc_executor.GrpcExecutor`).

Before a worker starts its bots it checks that each command bot can start on its machine
(the command's program on ``PATH``, or the container image in podman): a bot that cannot
is not started, and every match with it fails as void with a message that names the
machine, the bot and what is missing.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import logging
import multiprocessing
import multiprocessing.connection
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import structlog

from gaigel_arena import sandbox
from gaigel_arena.config import ArenaConfig
from gaigel_arena.dispatch import Dispatcher
from gaigel_arena.executors import BotFailure, MatchJob, MatchOutcome, NoRemoteBots

__all__ = ["BotMissingError", "TableWorker", "WorkerDied", "WorkerExecutor", "missing_bots", "rebuild_error"]

log = structlog.get_logger("gaigel_arena")

START_TIMEOUT_S = 120.0
"""How long a worker may take to start its server and bots (podman images may be built first)."""
STOP_TIMEOUT_S = 15.0
PROFILE_ENV = "GAIGEL_WORKER_PROFILE"
"""A folder: each table worker writes a cProfile of its server's thread there (``bench/arena.py --profile``)."""


class BotMissingError(RuntimeError):
    """A match's bot cannot run where its worker is (its command or image is missing there): void."""


class WorkerDied(RuntimeError):
    """A table worker ended while it played a match: the match is void and replayed."""


def missing_bots(config: ArenaConfig, where: str) -> dict[str, str]:
    """The command bots of *config* that cannot start on this machine, with why (naming *where*)."""
    from gaigel_harness.launch import bot_environment, find_program

    env = bot_environment()
    podman = sandbox.podman_available()
    out: dict[str, str] = {}
    for bot, kind in sandbox.command_bot_sandboxes(config, podman):
        if isinstance(kind, sandbox.SandboxError):
            out[bot.name] = f"bot {bot.name!r}: {kind} (on {where})"
            continue
        if kind == "podman":
            if bot.build and not os.path.isfile(os.path.join(bot.build, "Dockerfile")):
                out[bot.name] = f"bot {bot.name!r} cannot run on {where}: no Dockerfile in {bot.build} there"
            elif bot.image and not _image_exists(bot.image):
                out[bot.name] = f"bot {bot.name!r} cannot run on {where}: podman has no image {bot.image} there"
        elif find_program(bot.command[0], env) is None:
            out[bot.name] = (
                f"bot {bot.name!r} cannot run on {where}: its command {bot.command[0]!r} is not an executable "
                "there (install the bot on every node)"
            )
    return out


def _image_exists(image: str) -> bool:
    proc = subprocess.run(
        ["podman", "image", "exists", image], env=sandbox.podman_env(), capture_output=True, check=False
    )
    return proc.returncode == 0


def rebuild_error(kind: str, message: str, bot: str = "") -> Exception:
    """The exception a worker process or Ray actor reported as (type name, message, bot)."""
    if kind == BotFailure.__name__ and bot:
        return BotFailure(bot, message)
    return (BotMissingError if kind == BotMissingError.__name__ else RuntimeError)(message)


class TableWorker:
    """One match server with its bots; plays one match at a time (in a worker process or a Ray actor).

    With *tolerant*, a server or bots that cannot start do not raise here: every match then
    fails (void) with that message, as the Ray actor must report it.
    """

    def __init__(self, config: ArenaConfig, where: str, *, tolerant: bool = False) -> None:
        from gaigel_arena.grpc_executor import GrpcExecutor

        self.where = where
        self.missing = missing_bots(config, where)
        for reason in self.missing.values():
            log.error("bot_missing", where=where, message=reason)
        self.error = ""
        self.matches = 0
        self.decisions = 0
        self._executor: GrpcExecutor | None = None
        try:
            self._executor = GrpcExecutor(config, 1, skip_bots=self.missing, warn=False)
            self._executor.wait_for_bots(START_TIMEOUT_S / 2)
        except (ValueError, OSError) as e:
            if not tolerant:
                raise
            self.error = f"{where}: {e}"
            log.error("worker_unusable", where=where, message=str(e))
        self._profile: Any = None
        folder = os.environ.get(PROFILE_ENV)
        if folder and self._executor is not None:  # the server's thread: where a worker's CPU goes
            import cProfile

            self._profile = cProfile.Profile()
            self._profile_path = Path(folder) / f"worker-{os.getpid()}.prof"
            self._executor.host.call_soon(self._profile.enable)
        self._cpu_ready = _cpu_self()  # what start-up cost is left out of the per-decision figures
        self._bots_cpu_ready = self._bots_cpu()
        self._bots_cpu_seen: dict[int, float] = {}

    def _bots_cpu(self) -> float:
        """CPU seconds the running bot processes have used so far (from /proc; 0 where it cannot be read)."""
        executor = self._executor
        if executor is None:
            return 0.0
        total = 0.0
        for proc in executor.bots.processes():
            total += _cpu_of(proc.pid)
        return total

    def play(self, job: MatchJob, write_record: bool) -> tuple[MatchOutcome, dict[str, Any] | None]:
        """Plays *job*; the record (written to ``job.record_path`` if *write_record*) names this worker.

        :raises BotMissingError: when a bot of the match cannot run here.
        :raises Exception: for any other void match.
        """
        if self._executor is None:
            raise BotMissingError(self.error)
        missing = sorted({name for name in job.seats if name in self.missing})
        if missing:
            raise BotMissingError("; ".join(self.missing[name] for name in missing))
        outcome, record = self._executor.play(job, write_record=False)
        for proc in self._executor.bots.match_processes():  # one-match processes end with their match
            self._bots_cpu_seen[proc.pid] = _cpu_of(proc.pid)
        self.matches += 1
        if record is not None:
            record["played_by"] = self.where
            self.decisions += sum(len(hand.get("actions", ())) for hand in record.get("hands", ()))
            if write_record and job.record_path is not None:
                from gaigel.record import write_json_atomic

                write_json_atomic(record, job.record_path)
        return outcome, record

    def close(self) -> dict[str, Any]:
        """Stops the server and the bots; what this worker spent: CPU seconds of the worker process
        (its server) and of its bots' processes, from when it was ready (start-up left out)."""
        bots_playing = self._bots_cpu() - self._bots_cpu_ready + sum(self._bots_cpu_seen.values())
        worker_playing = _cpu_self() - self._cpu_ready
        if self._profile is not None and self._executor is not None:
            stopped = threading.Event()
            profile = self._profile

            def stop() -> None:
                profile.disable()
                stopped.set()

            self._executor.host.call_soon(stop)
            if stopped.wait(10):
                self._profile.dump_stats(self._profile_path)
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None
        return {
            "where": self.where,
            "matches": self.matches,
            "decisions": self.decisions,
            "worker_cpu_s": round(worker_playing, 3),
            "bots_cpu_s": round(bots_playing, 3),
        }


def _cpu_self() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def _cpu_of(pid: int) -> float:
    """User + system CPU seconds of process *pid* and its waited-for children (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def runner_log_level() -> int:
    """The runner's log level for its workers: what ``--log-level`` set, INFO where logging was not
    configured (a library call: the server's per-decision debug lines would cost every decision)."""
    level = int(structlog.get_logger().bind().get_effective_level())
    return level if level > logging.NOTSET else logging.INFO


def worker_logging(level: int, **context: Any) -> None:
    """A worker's logs: JSON lines on stderr from *level* up, tagged with *context* (its server's
    ``match_end`` lines, its bots' faults and restarts, as in the runner's log before).

    Each line is one write(): the runner and its workers share stderr, and print()'s two
    writes (the text, then the newline) glued other processes' lines into these."""
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=lambda *_: structlog.WriteLogger(sys.stderr),  # one write() per line (see worker_logging)
        cache_logger_on_first_use=False,
    )
    structlog.contextvars.bind_contextvars(**context)


# --- worker processes on this machine ------------------------------------------------------


def _worker_main(
    conn: multiprocessing.connection.Connection, config: ArenaConfig, index: int, parent: int, log_level: int
) -> None:
    """A worker process: start a :class:`TableWorker`, then play the jobs that come over *conn*."""
    from gaigel_arena.executors import worker_initializer

    worker_initializer(parent)  # dies with the runner, even after kill -9; ignores Ctrl-C (the runner's)
    os.dup2(2, 1)  # nothing may print onto the runner's stdout (e.g. its --json report)
    worker_logging(log_level, worker=index)

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)  # the runner ends a busy worker: its bots and server still go cleanly
    where = f"table worker {index} (pid {os.getpid()} on {socket.gethostname()})"
    try:
        worker = TableWorker(config, where)
    except Exception as e:
        conn.send(("error", f"{where}: {e}"))
        return
    try:
        conn.send(("ready", os.getpid()))
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                return
            if message[0] != "play":
                return
            job: MatchJob = message[1]
            try:
                outcome, _ = worker.play(job, write_record=True)
            except Exception as e:
                conn.send(("void", type(e).__name__, str(e), getattr(e, "bot", "")))
            else:
                conn.send(("done", outcome))
    finally:
        stats = worker.close()
        with contextlib.suppress(OSError, ValueError):
            conn.send(("stats", stats))


@dataclasses.dataclass
class _Slot:
    """One worker process as the runner sees it."""

    index: int
    process: Any
    conn: multiprocessing.connection.Connection
    job: MatchJob | None = None
    future: concurrent.futures.Future[MatchOutcome] | None = None


class WorkerExecutor(NoRemoteBots):
    """Plays matches on *workers* table worker processes (the executor ``grpc`` picks without remote bots)."""

    def __init__(self, config: ArenaConfig, workers: int) -> None:
        self.workers = workers
        missing = missing_bots(config, "this machine")
        if missing:  # fail fast, before any worker starts
            raise ValueError("; ".join(missing.values()))
        self._config = _prebuilt(config)
        self._log_level = runner_log_level()
        self._context = multiprocessing.get_context("spawn")  # no fork of a process with gRPC threads
        self._dispatcher: Dispatcher[_Slot] = Dispatcher(self._send)
        self._lock = self._dispatcher.lock
        self._slots: list[_Slot] = []
        self._threads: list[threading.Thread] = []
        self.restarts = 0
        """Workers started again after they died."""
        self.worker_stats: list[dict[str, Any]] = []
        """What each worker spent, as it reported when it stopped (after :meth:`shutdown`)."""
        _warn_about_memory(config)
        started = [self._launch(i) for i in range(workers)]  # they start their servers and bots in parallel
        try:
            for slot in started:
                self._handshake(slot)
                self._slots.append(slot)
        except BaseException:
            for slot in started:
                _end(slot)
            raise
        for slot in self._slots:
            thread = threading.Thread(target=self._read, args=(slot,), name=f"gaigel-worker-{slot.index}", daemon=True)
            thread.start()
            self._threads.append(thread)
        self._dispatcher.idle = list(self._slots)
        log.info("table_workers_started", workers=workers, pids=[s.process.pid for s in self._slots])

    def _launch(self, index: int) -> _Slot:
        mine, theirs = self._context.Pipe()
        process = self._context.Process(
            target=_worker_main,
            args=(theirs, self._config, index, os.getpid(), self._log_level),
            name=f"gaigel-table-worker-{index}",
        )
        process.start()
        theirs.close()  # only the worker holds its end: its death is an EOF here
        return _Slot(index, process, mine)

    def _handshake(self, slot: _Slot) -> None:
        """Waits for the worker's server and bots.

        :raises ValueError: with the worker's message when it cannot start (a bot command missing, ...).
        """
        if not slot.conn.poll(START_TIMEOUT_S):
            raise ValueError(f"table worker {slot.index} did not start within {START_TIMEOUT_S:g} s")
        try:
            message = slot.conn.recv()
        except (EOFError, OSError):
            slot.process.join(5)
            raise ValueError(
                f"table worker {slot.index} ended while starting (exit code {slot.process.exitcode})"
            ) from None
        if message[0] != "ready":
            raise ValueError(message[1])

    def pids(self) -> dict[int, int]:
        """The process id of each worker, by index."""
        with self._lock:
            return {s.index: s.process.pid for s in self._slots}

    def playing(self) -> dict[str, int]:
        """The process id of the worker of each match in flight, by match id."""
        with self._lock:
            return {s.job.match_id: s.process.pid for s in self._slots if s.job is not None}

    def submit(self, job: MatchJob) -> concurrent.futures.Future[MatchOutcome]:
        """Queues *job* for the next idle worker; the future raises for a void match."""
        return self._dispatcher.submit(job)

    @staticmethod
    def _send(slot: _Slot, job: MatchJob, future: concurrent.futures.Future[MatchOutcome]) -> None:
        slot.job, slot.future = job, future
        with contextlib.suppress(OSError):  # a worker gone: its reader voids the match and restarts it
            slot.conn.send(("play", job))

    def _read(self, slot: _Slot) -> None:
        """The reader thread of one worker: resolves its matches, restarts it when it dies."""
        while True:
            try:
                message = slot.conn.recv()
            except (EOFError, OSError):
                if not self._restart(slot):
                    return
                continue
            kind = message[0]
            if kind == "stats":
                self.worker_stats.append(message[1])
                continue
            with self._lock:
                future, slot.job, slot.future = slot.future, None, None
                self._dispatcher.release(slot)
            if future is not None:
                if kind == "done":
                    future.set_result(message[1])
                else:
                    future.set_exception(rebuild_error(*message[1:]))
            self._dispatcher.dispatch()

    def _restart(self, slot: _Slot) -> bool:
        """Voids the match of a dead worker and starts it again; False when the pool is closing or failed."""
        slot.process.join(5)
        code = slot.process.exitcode
        with self._lock:
            job, future, slot.job, slot.future = slot.job, slot.future, None, None
            closing = self._dispatcher.closing
        slot.conn.close()
        if future is not None:
            where = f" in match {job.match_id}" if job is not None else ""
            future.set_exception(
                WorkerDied(
                    f"table worker {slot.index} (pid {slot.process.pid}) ended with exit code {code}{where}; "
                    "the match is void and replayed"
                )
            )
        if closing:
            return False
        log.warning("table_worker_died", worker=slot.index, pid=slot.process.pid, exit_code=code)
        fresh = self._launch(slot.index)
        try:
            self._handshake(fresh)
        except ValueError as e:
            _end(fresh)
            self._dispatcher.fail(f"table worker {slot.index} died and cannot start again: {e}")
            return False
        with self._lock:
            slot.process, slot.conn = fresh.process, fresh.conn
            self.restarts += 1
            if self._dispatcher.closing:
                return True  # shutdown() ends it through its new pipe
            self._dispatcher.release(slot)
        log.warning("table_worker_restarted", worker=slot.index, pid=slot.process.pid)
        self._dispatcher.dispatch()
        return True

    def shutdown(self) -> None:
        """Stops every worker (a busy one with SIGTERM: its match is abandoned, not counted)."""
        self._dispatcher.close()
        with self._lock:
            slots = list(self._slots)
        for slot in slots:
            if slot.job is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(slot.process.pid, signal.SIGTERM)
            else:
                with contextlib.suppress(OSError):
                    slot.conn.send(("stop",))
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        for slot in slots:
            _end(slot)


def _end(slot: _Slot) -> None:
    """Ends a worker process that has not stopped by itself."""
    slot.process.join(2.0)
    if slot.process.is_alive():
        slot.process.kill()
        slot.process.join(5)
    with contextlib.suppress(OSError):
        slot.conn.close()


def _prebuilt(config: ArenaConfig) -> ArenaConfig:
    """*config* with every ``build`` folder built once here into its image, so N workers do not
    build it N times (the config hash, taken by the runner from the original, is not changed)."""
    builds = [b for b in config.bots if b.kind == "command" and b.build]
    if not builds or not sandbox.podman_available():
        return config
    bots = []
    for bot in config.bots:
        wanted = bot.sandbox or config.sandbox.default
        if bot in builds and wanted in ("auto", "podman"):
            try:
                bot = dataclasses.replace(bot, image=sandbox.build_image(bot.name, bot.build), build="")
            except sandbox.SandboxError as e:
                raise ValueError(str(e)) from None
        bots.append(bot)
    return dataclasses.replace(config, bots=tuple(bots))


def _warn_about_memory(config: ArenaConfig) -> None:
    """The duplicate-memory warning of the gRPC executor, once per run (not once per worker)."""
    if config.bot_processes == "per_run":
        remembering = [b.name for b in config.bots if b.kind == "command"]
        if remembering:
            log.warning(
                "duplicate_memory",
                bots=remembering,
                why="these bots keep their memory between matches (bot_processes = per_run): "
                "a bot that recognises a deal knows its opponent's cards in the other seating",
            )
