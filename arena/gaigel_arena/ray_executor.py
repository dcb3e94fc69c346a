"""The Ray executor: house-bot matches played as Ray tasks on a Ray cluster.

``gaigel arena run CONFIG --executor ray --ray-address ADDR`` (or ``[arena] executor =
"ray"`` with ``ray_address = "ADDR"``) plays every match as one Ray task, for arenas that
outgrow one machine. *ADDR* is what :func:`ray.init` takes:

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
started by ``ray start`` (Ray 2.5x) use token authentication: with an explicit address Ray
only sends the token when ``RAY_AUTH_MODE=token`` is set (the token comes from
``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or ``~/.ray/auth_token``); ``auto`` finds it
by itself.

The task is :func:`gaigel_arena.executors.play_house_match`, the same function the local
executor's worker processes run, so a seed plays the same match on either executor. The
journal stays with the scheduler: only the runner process reads or writes it. The task
returns the result *and the match record* to the scheduler, which writes the record into
its own output folder before the runner fixes the match as done, so cluster nodes need
no shared file system. Every node needs the same ``gaigel-arena`` installed (the task
checks the engine version and fails the match as void when it differs).

A task whose worker or node dies is retried by Ray (matches are pure functions of their
job); a task that raises comes back as a void game, which the runner replays.

Only house bots: ``command`` and ``remote`` bots play over gRPC through the match server
that the scheduler runs, so a match with them is bound to the machine of that server and
its bot processes (use ``--executor grpc``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

import structlog

from gaigel.record import write_json_atomic
from gaigel.state import ENGINE_VERSION
from gaigel_arena.config import ArenaConfig
from gaigel_arena.executors import MatchJob, MatchOutcome, play_house_match

__all__ = ["INSTALL_HINT", "RayConnectError", "RayExecutor", "play_ray_task"]

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


class RayConnectError(ConnectionError):
    """The Ray cluster cannot be reached or joined; the message names the address."""


def play_ray_task(job: MatchJob) -> tuple[str, MatchOutcome, dict[str, Any] | None]:
    """The Ray task: the engine version of this node, the outcome and the unwritten record."""
    outcome, record = play_house_match(job)
    return ENGINE_VERSION, outcome, record


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


class RayExecutor:
    """Plays house-bot matches as Ray tasks; futures resolve in the scheduler process."""

    def __init__(self, config: ArenaConfig, workers: int, address: str | None = None) -> None:
        others = [f"{b.name} ({b.kind})" for b in config.bots if b.kind != "house"]
        if others:
            raise ValueError(
                f"the ray executor plays house bots only, not {', '.join(others)}: command and remote bots play "
                "over gRPC through the match server in the scheduler process, so their matches cannot move to "
                "other machines; use --executor grpc"
            )
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
        self._lock = threading.Lock()
        self._refs: dict[concurrent.futures.Future[MatchOutcome], Any] = {}
        log.info("ray_connected", address=self.address, cpus=cpus, started_cluster=self._owns)

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
        """Starts *job* as a Ray task; its record is written here when the task is done."""
        ref = self._task.remote(job)
        out: concurrent.futures.Future[MatchOutcome] = concurrent.futures.Future()
        with self._lock:
            self._refs[out] = ref

        def finish(done: concurrent.futures.Future[Any]) -> None:
            with self._lock:
                self._refs.pop(out, None)
            if not out.set_running_or_notify_cancel():
                return  # the runner gave up on it
            try:
                version, outcome, record = done.result()
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

        ref.future().add_done_callback(finish)
        return out

    def shutdown(self) -> None:
        """Cancels the tasks still running and disconnects (stopping a cluster started for this run)."""
        with self._lock:
            refs = list(self._refs.values())
            self._refs.clear()
        for ref in refs:
            with contextlib.suppress(Exception):  # already finished, or the cluster is gone
                self._ray.cancel(ref)
        if self._owns:
            self._ray.shutdown()
            self._owns = False
