"""The Ray executor: matches played on a Ray cluster; the journal stays with the runner.

``gaigel arena run CONFIG --executor ray --ray-address ADDR`` (or ``[arena] executor =
"ray"`` with ``ray_address = "ADDR"``) plays the matches on the nodes of a Ray cluster,
for arenas that outgrow one machine. *ADDR* is what :func:`ray.init` takes:

* ``HOST:PORT``: the head node of a running cluster (``ray start --head`` prints it; the
  port is 6379 by default), the usual choice;
* ``auto``: the cluster started with ``ray start`` on this machine;
* ``ray://HOST:10001``: a cluster through the Ray Client server;
* ``local``: a new single-machine cluster with ``workers`` CPUs, started for this run and
  stopped at its end (tests, trying it out).

Without an address the ``RAY_ADDRESS`` environment variable is used, else ``local``. When
Ray is already initialised in this process (a test, a notebook), that connection is used
and left open. ``HOST:PORT`` and ``ray://`` addresses are checked with one TCP connection
first (5 s), since :func:`ray.init` retries an unreachable address for minutes. Clusters
started by ``ray start`` with token authentication need ``RAY_AUTH_MODE=token`` for an
explicit address (the token comes from ``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or
``~/.ray/auth_token``); ``auto`` finds it by itself.

* **House bots only**: every match is one Ray task,
  :func:`gaigel_arena.executors.play_house_match`, the function the local executor's
  worker processes run, so a seed plays the same match on either executor. A task whose
  worker or node dies is retried by Ray (matches are pure functions of their job).
* **With command bots** (sandboxed or not): one :class:`RayTableWorker` actor per CPU of
  the cluster, each a :class:`gaigel_arena.workers.TableWorker` (the table worker of
  ``--executor grpc``: a match server and the bots' processes or containers) on its node,
  one match at a time. The bot's command (or its podman image, or its ``build`` folder)
  must exist on every node: an actor checks when it starts, and a match with a bot it
  cannot run fails as void with a message naming the node, the bot and what is missing.
  An actor that dies takes its match with it (void, replayed) and is restarted by Ray.
* **Remote bots** connect by themselves to the server the runner publishes: use
  ``--executor grpc``.

Either way the result *and the match record* come back to the scheduler, which writes the
record into its own output folder before the runner fixes the match as done, so nodes need
no shared file system. Every node needs the same ``gaigel-arena`` installed (the engine
version is checked with every match; a difference fails the match as void). A task or
match that fails comes back as a void game, which the runner replays.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import structlog

from gaigel.record import write_json_atomic
from gaigel.state import ENGINE_VERSION
from gaigel_arena.config import ArenaConfig
from gaigel_arena.dispatch import Dispatcher
from gaigel_arena.executors import MatchJob, MatchOutcome, NoRemoteBots, play_house_match

__all__ = ["INSTALL_HINT", "RayConnectError", "RayExecutor", "RayTableWorker", "play_ray_task"]

log = structlog.get_logger("gaigel_arena")

INSTALL_HINT = "pip install 'gaigel-arena[ray]'"
CONNECT_TIMEOUT_S = 5.0
"""How long the reachability check of ``HOST:PORT`` waits (ray.init itself retries for minutes)."""
AUTH_HINT = (
    " (a cluster with token authentication, the default of `ray start`, needs RAY_AUTH_MODE=token"
    " and its token in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)"
)
TASK_RETRIES = 3
"""Ray's retries of a task whose worker process or node died (not of a task that raised)."""
ACTOR_START_TIMEOUT_S = 300.0
"""How long the table-worker actors may take to start (Ray workers, servers, bot processes, image builds)."""
ACTOR_STOP_TIMEOUT_S = 20.0
RESTART_POLL_S = 0.5
"""How often an actor that died is asked whether Ray has restarted it."""


class RayConnectError(ConnectionError):
    """The Ray cluster cannot be reached or joined; the message names the address."""


def play_ray_task(job: MatchJob) -> tuple[str, MatchOutcome, dict[str, Any] | None]:
    """The Ray task: the engine version of this node, the outcome and the unwritten record."""
    outcome, record = play_house_match(job)
    return ENGINE_VERSION, outcome, record


class RayTableWorker:
    """The Ray actor of an arena with command bots: a :class:`~gaigel_arena.workers.TableWorker` on its node."""

    def __init__(self, config: ArenaConfig, log_level: int = logging.INFO) -> None:
        import ray as ray_module

        from gaigel_arena.workers import TableWorker, worker_logging

        ray: Any = ray_module  # partly typed; used through Any
        worker_logging(log_level, ray_actor=os.getpid())

        self.node = str(ray.get_runtime_context().get_node_id())
        where = f"Ray node {self.node[:12]} ({ray.util.get_node_ip_address()}, pid {os.getpid()})"
        self.worker = TableWorker(config, where, tolerant=True)  # what cannot run here voids its matches

    def node_id(self) -> str:
        """The Ray node id of this actor."""
        return self.node

    def pid(self) -> int:
        """The process id of this actor (its server and bots die with it)."""
        return os.getpid()

    def play(
        self, job: MatchJob
    ) -> tuple[str, MatchOutcome | None, dict[str, Any] | None, tuple[str, str, str] | None]:
        """The engine version here, and the outcome and unwritten record, or the void error's (type, message)."""
        try:
            outcome, record = self.worker.play(job, write_record=False)
        except Exception as e:
            return ENGINE_VERSION, None, None, (type(e).__name__, str(e), getattr(e, "bot", ""))
        return ENGINE_VERSION, outcome, record, None

    def close(self) -> dict[str, Any]:
        """Stops the server and the bots of this actor; what it spent."""
        return self.worker.close()


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``HOST:PORT`` or ``ray://HOST:PORT``; None for anything else."""
    parts = urlsplit(address if "://" in address else f"gcs://{address}")
    try:
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("gcs", "ray") or not parts.hostname or port is None:
        return None
    return parts.hostname, port


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Opens and closes one TCP connection to the address's head node.

    :raises RayConnectError: when nothing listens there within *timeout* seconds.
    """
    target = _host_port(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=timeout):
            pass
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise RayConnectError(
            f"cannot reach the Ray cluster at {address}: {reason} (is `ray start --head` running there?)"
        ) from None


def _settle(
    out: concurrent.futures.Future[MatchOutcome],
    job: MatchJob,
    result: Callable[[], tuple[str, MatchOutcome, dict[str, Any] | None]],
) -> None:
    """Resolves *out* with what a Ray task or actor returned, writing the match record here; an
    error (a dead actor, a missing bot, another engine version on a node) makes the match void."""
    try:
        version, outcome, record = result()
        if version != ENGINE_VERSION:
            raise RuntimeError(
                f"a Ray worker has engine {version}, the scheduler {ENGINE_VERSION}: "
                "install the same gaigel-arena on every node"
            )
        if record is not None and job.record_path is not None:
            write_json_atomic(record, job.record_path)
    except BaseException as e:  # void: the runner replays the match
        out.set_exception(e)
    else:
        out.set_result(outcome)


class RayExecutor(NoRemoteBots):
    """Plays matches as Ray tasks (house bots) or on table-worker actors (command bots); futures
    resolve in the scheduler process."""

    def __init__(self, config: ArenaConfig, workers: int, address: str | None = None) -> None:
        remote = [b.name for b in config.bots if b.kind == "remote"]
        if remote:
            raise ValueError(
                f"the ray executor cannot play remote bots ({', '.join(remote)}): they connect by themselves to "
                "the match server the runner publishes, so their matches stay on this machine; use --executor grpc"
            )
        self._actors_mode = any(b.kind == "command" for b in config.bots)
        try:
            import ray as ray_module
        except ImportError:
            raise NotImplementedError(f"the ray executor needs Ray, which is not installed: {INSTALL_HINT}") from None
        ray: Any = ray_module  # partly typed; used through Any
        self._ray = ray
        self._owns = False
        if ray.is_initialized():
            self.address = "(this process's Ray connection)"
        else:
            self.address = address or os.environ.get("RAY_ADDRESS") or "local"
            self._connect(workers)
        cpus = int(ray.cluster_resources().get("CPU", 0))
        self.workers = cpus if cpus > 0 else workers
        """Matches kept in flight by the runner (twice this): the cluster's CPUs."""
        self._task = ray.remote(num_cpus=1, max_retries=TASK_RETRIES)(play_ray_task)
        self._dispatcher: Dispatcher[int] = Dispatcher(self._start_on_actor)
        self._lock = self._dispatcher.lock
        self._refs: dict[concurrent.futures.Future[MatchOutcome], Any] = {}
        self._actors: list[Any] = []
        self.actor_nodes: dict[int, str] = {}
        """The node id of each table-worker actor (by its index), as it started."""
        self.actor_pids: dict[int, int] = {}
        """The process id of each table-worker actor as it started (Ray restarts a dead one elsewhere)."""
        self.worker_stats: list[dict[str, Any]] = []
        log.info("ray_connected", address=self.address, cpus=cpus, started_cluster=self._owns)
        if self._actors_mode:
            try:
                self._start_actors(config)
            except BaseException:
                self.shutdown()
                raise

    def _start_actors(self, config: ArenaConfig) -> None:
        """One table-worker actor per CPU of the cluster (each holds one CPU while the arena runs)."""
        ray = self._ray
        actor_class = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)(RayTableWorker)
        from gaigel_arena.workers import runner_log_level

        level = runner_log_level()
        self._actors = [actor_class.remote(config, level) for _ in range(self.workers)]
        started = time.monotonic()
        nodes = ray.get([a.node_id.remote() for a in self._actors], timeout=ACTOR_START_TIMEOUT_S)
        self.actor_nodes = dict(enumerate(nodes))
        self.actor_pids = dict(enumerate(ray.get([a.pid.remote() for a in self._actors], timeout=60)))
        self._dispatcher.idle = list(range(len(self._actors)))
        log.info(
            "ray_table_workers_started",
            actors=len(self._actors),
            nodes=len(set(nodes)),
            seconds=round(time.monotonic() - started, 1),
        )

    def _connect(self, workers: int) -> None:
        ray = self._ray
        quiet = {"logging_level": logging.WARNING, "include_dashboard": False}
        if self.address == "local":
            ray.init(address="local", num_cpus=workers, **quiet)
            self._owns = True
            return
        check_reachable(self.address)
        try:
            ray.init(address=self.address, **quiet)
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            hint = "" if os.environ.get("RAY_AUTH_MODE") else AUTH_HINT
            raise RayConnectError(f"cannot join the Ray cluster at {self.address}: {first}{hint}") from None
        self._owns = True  # our connection (not the cluster): ray.shutdown() disconnects

    def submit(self, job: MatchJob) -> concurrent.futures.Future[MatchOutcome]:
        """Starts *job* (a Ray task, or the next idle table-worker actor); its record is written here."""
        if self._actors_mode:
            return self._dispatcher.submit(job)
        ref = self._task.remote(job)
        out: concurrent.futures.Future[MatchOutcome] = concurrent.futures.Future()
        with self._lock:
            self._refs[out] = ref

        def finish(done: concurrent.futures.Future[Any]) -> None:
            with self._lock:
                self._refs.pop(out, None)
            if not out.set_running_or_notify_cancel():
                return  # the runner gave up on it
            _settle(out, job, done.result)

        ref.future().add_done_callback(finish)
        return out

    def _start_on_actor(self, index: int, job: MatchJob, future: concurrent.futures.Future[MatchOutcome]) -> None:
        """Gives *job* to the idle actor *index* (the dispatcher's lock is held)."""
        ref = self._actors[index].play.remote(job)
        self._refs[future] = ref
        ref.future().add_done_callback(lambda done, i=index, j=job, f=future: self._finished(i, j, f, done))

    def _finished(
        self,
        index: int,
        job: MatchJob,
        out: concurrent.futures.Future[MatchOutcome],
        done: concurrent.futures.Future[Any],
    ) -> None:
        died = done.exception() is not None  # the actor's process died: Ray is restarting it
        with self._lock:
            self._refs.pop(out, None)
            if not died:
                self._dispatcher.release(index)
        if died:
            self._when_back(index, time.monotonic() + ACTOR_START_TIMEOUT_S)

        def result() -> tuple[str, MatchOutcome, dict[str, Any] | None]:
            try:
                version, outcome, record, error = done.result()
            except Exception as e:  # the actor died (Ray restarts it): its match is void
                from gaigel_arena.workers import WorkerDied

                first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                raise WorkerDied(
                    f"table-worker actor {index} (Ray node {self.actor_nodes.get(index, '?')[:12]}) failed in match "
                    f"{job.match_id}: {type(e).__name__}: {first}; the match is void and replayed"
                ) from None
            if error is not None:
                from gaigel_arena.workers import rebuild_error

                raise rebuild_error(*error)
            assert outcome is not None
            return version, outcome, record

        _settle(out, job, result)
        self._dispatcher.dispatch()

    def _when_back(self, index: int, give_up: float) -> None:
        """Makes actor *index* idle again once Ray has restarted it: a match given to a restarting
        actor fails at once ("the actor is restarting"), which voided a second match per death."""

        def answered(done: concurrent.futures.Future[Any]) -> None:
            try:
                pid = done.result()
            except Exception:
                if time.monotonic() < give_up:
                    timer = threading.Timer(RESTART_POLL_S, self._when_back, (index, give_up))
                    timer.daemon = True
                    timer.start()
                else:  # never back: its matches go to the other actors
                    log.error("ray_actor_lost", actor=index, waited_s=ACTOR_START_TIMEOUT_S)
                return
            with self._lock:
                self.actor_pids[index] = pid
                self._dispatcher.release(index)
            self._dispatcher.dispatch()

        with self._lock:
            if self._dispatcher.closing or index >= len(self._actors):
                return
            ref = self._actors[index].pid.remote()
        ref.future().add_done_callback(answered)

    def shutdown(self) -> None:
        """Cancels the tasks still running, stops the table-worker actors and disconnects (stopping a
        cluster started for this run)."""
        idle = self._dispatcher.close()
        with self._lock:
            refs = list(self._refs.values())
            self._refs.clear()
        if self._actors:
            closing = [self._actors[i].close.remote() for i in idle]
            with contextlib.suppress(Exception):  # stats are a nicety: a dead actor must not stop the shutdown
                self.worker_stats = list(self._ray.get(closing, timeout=ACTOR_STOP_TIMEOUT_S))
            for actor in self._actors:
                with contextlib.suppress(Exception):
                    self._ray.kill(actor)  # a busy actor's bots die with its process
            self._actors = []
        for ref in refs:
            with contextlib.suppress(Exception):  # already finished, or the cluster is gone
                self._ray.cancel(ref)
        if self._owns:
            self._ray.shutdown()
            self._owns = False
