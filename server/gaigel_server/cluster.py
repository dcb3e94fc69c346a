"""``gaigel serve --processes N``: one front process and N table processes.

The front owns the public address: its front door (the same per-peer limits as one process)
reads each new connection's first call and relays the connection to one process for its whole
life (:mod:`gaigel_server.firstcall`): a bot's Join to the process that waits for that bot
(else the least loaded), a Resume to its match's process, anything else (MatchService, health,
reflection) to the front's own grpc, which forwards MatchService calls to the table processes.
Each table process (:mod:`gaigel_server.worker`) is an ordinary server on a loopback port with
its own lobby; a table plays where it was placed (:mod:`gaigel_server.placement`), and an idle
session another process needs is moved: GOAWAY on its connection (its open streams go on), then
its stream ends with UNAVAILABLE (MOVED) and the bot, as every kit does, joins again on a new
connection, which the door routes to the table's process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import heapq
import itertools
import json
import os
import signal
import socket
import ssl
import sys
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from prometheus_client import CollectorRegistry, Counter, start_http_server

from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_server import placement
from gaigel_server.auth import AuthError, BotRegistry, bearer_token, new_token, tokens_equal
from gaigel_server.firstcall import FirstCall
from gaigel_server.frontdoor import FrontDoor, tls_context
from gaigel_server.logging import get_logger
from gaigel_server.metrics import ProcessesCollector, ServerMetrics
from gaigel_server.server import (
    ServerConfig,
    add_health_and_reflection,
    connection_options,
    listen_socket,
    new_door,
    read_tls,
    set_health,
    watch_door,
)
from gaigel_server.servicer import decode_request, page_window
from gaigel_server.worker import SERVICE, config_to_json

MATCH_SERVICE = "gaigel.v1.MatchService"
EXPECT_SECONDS = 10.0
"""Seconds a process waits for a moved (or wanted) bot's Join before the plan is made again."""
MAX_OWNERS = 1_000_000
"""Match ids whose process the front remembers (the oldest beyond are asked of every process), and
as many CreateMatch request ids with their match (an older one's retry makes a new match)."""
METRICS_TIMEOUT = 2.0
"""Seconds a scrape waits for a table process's metrics (a stuck process is ``up`` 0, not a hung scrape)."""
RESTARTS = 3
"""Table process deaths within RESTART_WINDOW seconds that the front answers with a new process;
one more stops the front (exit 1): a process that keeps dying is for the operator and a
supervisor, not for a restart loop."""
RESTART_WINDOW = 60.0
STUCK_SECONDS = 30.0
"""A table process that answers no health check for this long is killed (and so replaced): its
event loop is stuck, and with it its matches and their clocks, which would otherwise wait forever."""
HEARTBEATS = 6
"""Health checks per STUCK_SECONDS: one every 5 s; each costs both processes a grpc call."""
REFRESH_SECONDS = 10.0
"""The longest the front goes without asking the table processes' status. It asks when a placement
needs it (CreateMatch, a waiting table, a replaced process, an unregistration); this only keeps
the load that routes new Joins from growing old."""
MAX_LOST = 100_000
"""Lost match ids the front remembers, to say what happened to them (the oldest beyond are forgotten)."""


@dataclasses.dataclass
class Worker:
    """One table process as the front sees it."""

    index: int
    process: asyncio.subprocess.Process
    port: int
    channel: grpc.aio.Channel
    control: socket.socket
    """Connections go to the process over this with their sockets; it says when each closes."""
    handed: set[int] = dataclasses.field(default_factory=set)
    """Connections handed to the process that it has not yet said closed (their per-peer places
    are held at the front's door; a process that dies frees them all)."""
    alive: bool = True
    status: dict[str, Any] = dataclasses.field(
        default_factory=lambda: {"idle": {}, "waiting": [], "seated": [], "tables": 0}
    )

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


class Cluster:
    """The front: door, MatchService forwarding, placement and moves."""

    def __init__(self, config: ServerConfig, processes: int, log_level: str = "info", loop: str = "asyncio") -> None:
        self.config = config
        self.processes = processes
        self.log_level = log_level
        self.loop_name = loop
        self.workers: list[Worker] = []
        self.owner: OrderedDict[str, int] = OrderedDict()  # match id -> process index, in creation order
        self.created = 0
        self.order: dict[str, int] = {}
        self.by_request: OrderedDict[str, str] = OrderedDict()  # CreateMatch request_id -> its match
        self.expected: dict[tuple[int, str], deque[float]] = {}
        self.moving: dict[str, float] = {}  # session id -> when its move began
        self.routed = [0] * processes
        self.moves = 0
        self.handed_over = 0
        self.bots = BotRegistry(config.bots)
        """The registered bots as the front knows them (config, then RegisterBot through it)."""
        self.bots_lock = asyncio.Lock()
        """Held by the admin calls that change a bot's registration or seat bots, across their calls
        to every process: an UnregisterBot between a CreateMatch's look and its call left a bot
        unregistered in one process and seated in another."""
        self.metrics = ServerMetrics(config.registry or CollectorRegistry(), config.max_bot_series)
        self.restarts = Counter(
            "gaigel_table_process_restarts_total",
            "Table processes that died and were replaced (their matches lost).",
            registry=self.metrics.registry,
        )
        self.deaths: deque[float] = deque()
        self.lost: OrderedDict[str, str] = OrderedDict()
        """Match id -> why it is gone: its table process died while holding it."""
        self.up = asyncio.Event()
        """Set while every table process runs: calls to a process being replaced wait for the new one."""
        self.up.set()
        self.health = HealthServicer()
        self.door: FrontDoor | None = None
        self.grpc: grpc.aio.Server | None = None
        self.kick = asyncio.Event()
        self.failed = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._httpd: Any = None
        self.metrics_port: int | None = None
        """The port every process's metrics are served on (None: no metrics)."""
        self.log = get_logger()

    # --- start and stop -----------------------------------------------------------------

    async def start(self, address: str) -> int:
        """Starts the table processes, the front's grpc and its door; returns the public port.

        :raises ValueError: a process that does not start, an address that cannot be bound.
        """
        if not self.config.admin_token:
            self.config.admin_token = new_token()
        sock = listen_socket(address)
        try:
            for k in range(self.processes):
                self.workers.append(await self._spawn(k))
        except BaseException:
            sock.close()
            await self.stop(0.5)
            raise
        if self.config.metrics_port is not None:
            scrape = CollectorRegistry()
            loop = asyncio.get_running_loop()
            scrape.register(ProcessesCollector(self.metrics.registry, lambda: self._table_metrics(loop)))
            self._httpd, _ = start_http_server(self.config.metrics_port, self.config.metrics_address, registry=scrape)
            self.metrics_port = int(self._httpd.server_port)
        server = grpc.aio.server(
            options=[
                *connection_options(self.config),  # the same per-connection limits as one process
                ("grpc.max_receive_message_length", self.config.max_message_bytes),
                ("grpc.so_reuseport", 0),
            ]
        )
        server.add_generic_rpc_handlers((self._match_handler(),))
        add_health_and_reflection(server, self.health)
        own = server.add_insecure_port("127.0.0.1:0")
        self.grpc = server
        tls = read_tls(self.config)
        try:
            context = tls_context(*tls) if tls else None
        except ssl.SSLError as e:
            raise ValueError(f"cannot use the TLS certificate and key: {e}") from None
        door = self.door = new_door(
            sock, ("127.0.0.1", own), self.config, self.metrics, context, route=self.route, hand_over=self.hand_over
        )
        await server.start()
        await door.start()
        await set_health(self.health, health_pb2.HealthCheckResponse.SERVING)
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._rebalance_loop()))
        self._tasks.append(loop.create_task(watch_door(door, self.health)))
        for w in self.workers:
            self._tasks.append(loop.create_task(self._watch(w)))
            self._tasks.append(loop.create_task(self._heartbeat(w)))
        return door.port

    def _table_metrics(self, loop: asyncio.AbstractEventLoop) -> list[tuple[str, str | None]]:
        """Each table process's metrics text (None: no answer within METRICS_TIMEOUT); called in
        the scrape's thread, the calls run on the front's loop."""
        future = asyncio.run_coroutine_threadsafe(self._gather_metrics(), loop)
        try:
            return future.result(METRICS_TIMEOUT + 1.0)
        except (TimeoutError, RuntimeError):
            future.cancel()
            return [(str(w.index), None) for w in self.workers]

    async def _gather_metrics(self) -> list[tuple[str, str | None]]:
        async def one(w: Worker) -> tuple[str, str | None]:
            if not w.alive:
                return str(w.index), None
            call = w.channel.unary_unary(f"/{SERVICE}/Metrics", None, None)
            try:
                raw = await call(b"{}", metadata=self._admin(), timeout=METRICS_TIMEOUT)
            except grpc.aio.AioRpcError:
                return str(w.index), None
            return str(w.index), bytes(raw).decode()

        return list(await asyncio.gather(*(one(w) for w in self.workers)))

    async def _spawn(self, k: int) -> Worker:
        control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            return await self._start_worker(k, control, theirs)
        except BaseException:
            control.close()
            raise
        finally:
            theirs.close()

    async def _start_worker(self, k: int, control: socket.socket, theirs: socket.socket) -> Worker:
        config = dataclasses.replace(
            self.config,
            bots=self.bots.tokens(),  # RegisterBot's since the start too: a replaced process knows them
            front_door=False,
            registry=None,
            metrics_port=None,  # the front serves every process's metrics
        )
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gaigel_server.worker",
            self.log_level,
            self.loop_name,
            "5",
            str(theirs.fileno()),
            pass_fds=(theirs.fileno(),),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "GAIGEL_PROCESS": str(k)},
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(config_to_json(config).encode() + b"\n")
        await proc.stdin.drain()
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
        except TimeoutError:
            line = b""
        if not line.strip().isdigit():
            proc.kill()
            raise ValueError(f"table process {k} did not start (exit code {await proc.wait()})")
        port = int(line)
        channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{port}", options=[("grpc.max_receive_message_length", 64 << 20)]
        )
        control.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        control.setblocking(False)
        worker = Worker(k, proc, port, channel, control)
        asyncio.get_running_loop().add_reader(control.fileno(), self._closed_there, worker)
        return worker

    def _closed_there(self, w: Worker) -> None:
        """A table process says which handed-over connections closed (their per-peer places free)
        and which addresses its door backed off for churn (refused here at accept for a while)."""
        try:
            message = w.control.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            message = b""
        if not message:
            asyncio.get_running_loop().remove_reader(w.control.fileno())
            return
        if self.door is not None:
            told = json.loads(message)
            if "closed" in told:
                w.handed.discard(int(told["closed"]))
                self.door.handed_closed(int(told["closed"]))
            elif "ban" in told:
                self.door.ban(str(told["ban"]))

    async def _watch(self, w: Worker) -> None:
        """A table process that dies loses its matches and is replaced, up to RESTARTS times in
        RESTART_WINDOW seconds; past that the front stops (exit 1)."""
        code = await w.process.wait()
        if self.failed.is_set():
            return  # stopping
        w.alive = False
        self.up.clear()
        now = time.monotonic()
        self.deaths.append(now)
        while self.deaths and now - self.deaths[0] > RESTART_WINDOW:
            self.deaths.popleft()
        lost = self._lose(w, code)
        self.log.error("table_process_exited", process=w.index, code=code, matches_lost=len(lost))
        if len(self.deaths) > RESTARTS:
            self.log.error("table_processes_keep_dying", deaths=len(self.deaths), window_s=RESTART_WINDOW)
            self.failed.set()
            return
        try:
            new = await self._spawn(w.index)
        except ValueError as e:
            self.log.error("table_process_restart_failed", process=w.index, error=str(e))
            self.failed.set()
            return
        self.workers[w.index] = new
        self.restarts.inc()
        self.up.set()
        self.log.warning("table_process_restarted", process=w.index, pid=new.process.pid)
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._watch(new)))
        self._tasks.append(loop.create_task(self._heartbeat(new)))
        self.kick.set()

    async def _heartbeat(self, w: Worker) -> None:
        """Asks *w*'s health service HEARTBEATS times per STUCK_SECONDS (answered in its event
        loop, like its tables); kills it when no answer came for STUCK_SECONDS."""
        check = health_pb2_grpc.HealthStub(w.channel).Check
        answered = time.monotonic()
        while w.alive and w.process.returncode is None:
            every = STUCK_SECONDS / HEARTBEATS
            try:
                await check(health_pb2.HealthCheckRequest(), timeout=min(1.0, STUCK_SECONDS / 2))
                answered = time.monotonic()
            except grpc.aio.AioRpcError:
                if time.monotonic() - answered >= STUCK_SECONDS and w.process.returncode is None:
                    self.log.error(
                        "table_process_stuck", process=w.index, silent_s=round(time.monotonic() - answered, 1)
                    )
                    w.process.kill()  # _watch replaces it
                    return
            await asyncio.sleep(every)

    def _lose(self, w: Worker, code: int) -> list[str]:
        """Forgets dead *w*: its matches become lost (their calls say why), the per-peer places of
        its connections are freed, its channel and control socket closed."""
        why = (
            f"its table process {w.index} exited with code {code} while it held the match; "
            "the match and its record are lost (a records directory keeps those that had ended)"
        )
        lost = [m for m, k in self.owner.items() if k == w.index]
        for m in lost:
            del self.owner[m]
            self.order.pop(m, None)
            self.lost[m] = why
        while len(self.lost) > MAX_LOST:
            self.lost.popitem(last=False)
        if self.door is not None:
            for ident in w.handed:
                self.door.handed_closed(ident)
        w.handed.clear()
        with contextlib.suppress(ValueError, OSError):
            asyncio.get_running_loop().remove_reader(w.control.fileno())
        w.control.close()
        self._tasks.append(
            asyncio.get_running_loop().create_task(w.channel.close(None))
        )  # held: the loop keeps weak refs
        return lost

    async def _live(self, w: Worker) -> Worker:
        """*w*, or the process that replaced it once it runs."""
        if not w.alive:
            await self.up.wait()
        return self.workers[w.index]

    async def stop(self, grace: float = 5.0) -> None:
        """Stops the door, then each table process (its matches aborted, records written)."""
        self.failed.set()  # the processes ending now is expected
        for t in self._tasks:
            t.cancel()
        await self.health.enter_graceful_shutdown()
        if self.door is not None:
            self.door.stop_accepting()
        for w in self.workers:
            if w.process.returncode is None:
                w.process.send_signal(signal.SIGTERM)
        for w in self.workers:
            try:
                await asyncio.wait_for(w.process.wait(), grace + 2)
            except TimeoutError:
                w.process.kill()
                await w.process.wait()
            if not w.alive:
                continue  # a dead one's channel and socket are closed
            await w.channel.close(None)
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(w.control.fileno())
            w.control.close()
        if self.grpc is not None:
            await self.grpc.stop(0.5)
        if self.door is not None:
            self.door.close()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    # --- routing (the door asks, synchronously, for each new connection) ----------------

    def route(self, call: FirstCall) -> tuple[str, int]:
        """Where a connection is relayed to, by its first call: a table process, or the front's grpc."""
        assert self.door is not None
        k = self._target(call)
        return self.door.backend if k is None else self.workers[k].address

    def hand_over(self, target: tuple[str, int], fd: int, data: bytes, link: Any) -> bool:
        """Gives a connection routed to a table process to it with its socket (the front then
        carries none of its bytes); False: relayed here (the front's own calls, a hand-over that failed)."""
        k = next((w.index for w in self.workers if w.address == target and w.alive), None)
        if k is None:
            return False
        head = json.dumps({"id": link.ident, "peer": link.peer, "key": link.key}).encode()
        try:
            socket.send_fds(self.workers[k].control, [head + b"\n" + data], [fd])
        except OSError as e:
            self.log.warning("hand_over_failed", process=k, error=str(e))
            return False
        self.workers[k].handed.add(link.ident)
        self.handed_over += 1
        return True

    def _target(self, call: FirstCall) -> int | None:
        """The table process for a connection's first call; None for the front's own grpc."""
        if call.bot_name:
            # A place kept for a bot goes only to a Join with its token: anyone can name a bot.
            k = self._take_expected(call.bot_name) if self._proves(call) else None
            if k is None:
                k = min(
                    range(len(self.workers)),
                    key=lambda j: (not self.workers[j].alive, self._load(j) + self.routed[j], j),
                )
            self.routed[k] += 1
            return k
        if call.match_id:
            return self.owner.get(call.match_id, 0)  # a lost match's Resume: refused there (no such match)
        if call.path.startswith("/gaigel.v1.BotService/"):
            return 0  # a Play without Join or Resume: refused there, with its message
        return None  # MatchService, health, reflection: the front itself

    def _load(self, k: int) -> int:
        """Tables not yet ended and idle sessions of process *k* at its last status."""
        status = self.workers[k].status
        return int(status["tables"]) + sum(len(v) for v in status["idle"].values())

    def _proves(self, call: FirstCall) -> bool:
        try:
            self.bots.verify(call.bot_name, call.bot_token)
        except AuthError:
            return False
        return True

    def _take_expected(self, bot: str) -> int | None:
        now = time.monotonic()
        best: tuple[float, int] | None = None
        for (k, b), deadlines in self.expected.items():
            while deadlines and deadlines[0] < now:
                deadlines.popleft()
            if b == bot and deadlines and (best is None or deadlines[0] < best[0]):
                best = (deadlines[0], k)
        if best is None:
            return None
        self.expected[best[1], bot].popleft()
        return best[1]

    # --- placement and moves ---------------------------------------------------------------

    async def _call(self, w: Worker, method: str, body: dict[str, Any]) -> Any:
        w = await self._live(w)
        call = w.channel.unary_unary(f"/{SERVICE}/{method}", None, None)
        raw = await call(json.dumps(body).encode(), metadata=self._admin(), timeout=10)
        return json.loads(raw)

    def _admin(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.config.admin_token}"),)

    async def refresh(self) -> None:
        statuses = await asyncio.gather(*(self._call(w, "Status", {}) for w in self.workers))
        for w, st in zip(self.workers, statuses, strict=True):
            w.status = st
        self.routed = [0] * len(self.workers)

    async def rebalance(self) -> int:
        """One round: fresh statuses, then the moves and wanted Joins of :func:`placement.plan`."""
        await self.refresh()
        now = time.monotonic()
        self.moving = {s: t for s, t in self.moving.items() if now - t < EXPECT_SECONDS}
        expected = {key: sum(1 for d in q if d >= now) for key, q in self.expected.items()}
        moves, wanted = placement.plan([w.status for w in self.workers], self.order, expected, set(self.moving))
        for k, bot in wanted:
            self.expected.setdefault((k, bot), deque()).append(now + EXPECT_SECONDS)
        by_source: dict[int, list[str]] = {}
        for m in moves:
            self.moving[m.session_id] = now
            self.expected.setdefault((m.target, m.bot), deque()).append(now + EXPECT_SECONDS)
            assert self.door is not None
            self.door.drain(self.workers[m.source].port, m.peer)  # GOAWAY first: the Join again takes a new connection
            by_source.setdefault(m.source, []).append(m.session_id)
        for j, sessions in by_source.items():
            await self._call(self.workers[j], "Release", {"sessions": sessions})
        self.moves += len(moves)
        if moves:
            self.log.info("sessions_moved", moves=[(m.bot, m.source, m.target) for m in moves])
        return len(moves)

    async def _rebalance_loop(self) -> None:
        """A round whenever something may need a placement (kick), every 0.2 s while a table waits
        for sessions, else every REFRESH_SECONDS: polling idle processes cost each a grpc call a
        second."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.kick.wait(), REFRESH_SECONDS)
            self.kick.clear()
            try:
                await self.rebalance()
            except grpc.aio.AioRpcError as e:
                self.log.warning("rebalance_failed", code=e.code().name, detail=e.details())
            if any(w.status["waiting"] for w in self.workers):
                await asyncio.sleep(0.2)
                self.kick.set()

    # --- MatchService, forwarded --------------------------------------------------------

    def _match_handler(self) -> grpc.GenericRpcHandler[Any, Any]:
        unary = {
            "CreateMatch": self.CreateMatch,
            "GetMatch": self._by_match,
            "CancelMatch": self._by_match,
            "GetMatchRecord": self._by_match,
            "ListMatches": self.ListMatches,
            "RegisterBot": self.RegisterBot,
            "UnregisterBot": self.UnregisterBot,
        }
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            name: grpc.unary_unary_rpc_method_handler(self._unary(name, impl)) for name, impl in unary.items()
        }
        handlers["WatchMatch"] = grpc.unary_stream_rpc_method_handler(self.WatchMatch)
        return grpc.method_handlers_generic_handler(MATCH_SERVICE, handlers)

    def _unary(self, name: str, impl: Any) -> Any:
        async def call(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
            await self._auth(context)
            try:
                return bytes(await impl(name, raw, context))
            except grpc.aio.AioRpcError as e:
                await context.abort(e.code(), e.details() or "")
                raise

        return call

    async def _auth(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        token = bearer_token(context.invocation_metadata())
        if not token or not tokens_equal(token, self.config.admin_token):
            self.metrics.admin_refused.inc()
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "MatchService needs the admin token as metadata 'authorization: Bearer <admin token>'"
                + (" (the token given is wrong)" if token else ""),
            )

    async def _forward(self, w: Worker, name: str, raw: bytes) -> bytes:
        w = await self._live(w)
        call = w.channel.unary_unary(f"/{MATCH_SERVICE}/{name}", None, None)
        return bytes(await call(raw, metadata=self._admin(), timeout=60))

    def _own(self, match_id: str, k: int) -> None:
        if match_id not in self.owner:
            self.created += 1
            self.order[match_id] = self.created
        self.owner[match_id] = k
        while len(self.owner) > MAX_OWNERS:
            gone, _ = self.owner.popitem(last=False)
            self.order.pop(gone, None)

    async def CreateMatch(self, name: str, raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        try:
            request = ms.CreateMatchRequest.FromString(raw)
        except Exception:  # the table process answers a malformed request with its message
            request = ms.CreateMatchRequest()
        async with self.bots_lock:
            earlier = self.by_request.get(request.request_id) if request.request_id else None
            if earlier is not None and earlier in self.lost:  # a retry must not play the match twice
                await context.abort(
                    grpc.StatusCode.DATA_LOSS,
                    f"request_id {request.request_id[:64]!r} created match {earlier!r}, which is lost: "
                    f"{self.lost[earlier]}; send a new request_id to create another match",
                )
            k = self.owner.get(earlier) if earlier is not None else None  # a retry: the process that has it
            if k is None:
                await self.refresh()
                bots = [b for b in (*request.seat_bots, *request.side_bots) if not b.startswith("house:")]
                k = placement.place([w.status for w in self.workers], bots, self.routed)
            out = await self._forward(self.workers[k], name, raw)
        match_id = ms.CreateMatchResponse.FromString(out).match.match_id
        self._own(match_id, k)
        if request.request_id:
            self.by_request[request.request_id] = match_id
            while len(self.by_request) > MAX_OWNERS:
                self.by_request.popitem(last=False)
        self.workers[k].status["tables"] += 1
        self.kick.set()
        return out

    async def _refuse_lost(self, match_id: str, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        """Ends the call with DATA_LOSS and why, if *match_id* was lost with its table process."""
        if match_id in self.lost:
            await context.abort(grpc.StatusCode.DATA_LOSS, f"match {match_id!r} is lost: {self.lost[match_id]}")

    def _owners_of(self, match_id: str) -> list[Worker]:
        k = self.owner.get(match_id)
        return [self.workers[k]] if k is not None else list(self.workers)

    async def _by_match(self, name: str, raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        try:
            match_id = ms.GetMatchRequest.FromString(raw).match_id  # match_id is field 1 of all three
        except Exception:
            match_id = ""
        await self._refuse_lost(match_id, context)
        candidates = self._owners_of(match_id)
        for w in candidates:
            try:
                return await self._forward(w, name, raw)
            except grpc.aio.AioRpcError as e:
                if e.code() != grpc.StatusCode.NOT_FOUND or w is candidates[-1]:
                    raise
        raise AssertionError("unreachable")

    async def ListMatches(self, name: str, raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        """One page of every process's matches, newest first, of the requested size: each process
        gives a page from its own cursor, the pages are merged by creation time and each cursor
        moves on by what its process gave to this page ("-": that process has no more)."""
        request: ms.ListMatchesRequest = await decode_request(raw, ms.ListMatchesRequest, context)
        n = len(self.workers)
        cursors = request.page_token.split("|") if request.page_token else [""] * n
        try:
            _, size = page_window(request.page_size, "")
            if len(cursors) != n:
                raise ValueError("page_token is not one this server issued")
            offsets = [None if c == "-" else page_window(0, c)[0] for c in cursors]
        except ValueError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            raise
        request.page_size = size
        pages: list[list[ms.Match]] = []
        ends: list[bool] = []  # the process's page is its last
        for w, offset in zip(self.workers, offsets, strict=True):
            if offset is None:
                pages.append([])
                ends.append(True)
                continue
            request.page_token = str(offset) if offset else ""
            page = ms.ListMatchesResponse.FromString(await self._forward(w, name, request.SerializeToString()))
            pages.append(list(page.matches))
            ends.append(not page.next_page_token)
        # Each page is newest first: the merge takes a prefix of each, so a cursor is its offset
        # plus what its process gave to this page.
        merged = heapq.merge(*[[(k, m) for m in page] for k, page in enumerate(pages)], key=_newest_first)
        out = ms.ListMatchesResponse()
        taken = [0] * n
        for k, match in itertools.islice(merged, size):
            out.matches.append(match)
            taken[k] += 1
        following = [
            "-" if offset is None or (ends[k] and taken[k] == len(pages[k])) else str(offset + taken[k])
            for k, offset in enumerate(offsets)
        ]
        out.next_page_token = "" if all(t == "-" for t in following) else "|".join(following)
        return out.SerializeToString()

    async def RegisterBot(self, name: str, raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        async with self.bots_lock:  # two token rotations must reach every process in one order
            out = await self._forward(self.workers[0], name, raw)
            reply = ms.RegisterBotResponse.FromString(out)
            self.bots.set(reply.bot_name, reply.bot_token)
            for w in self.workers[1:]:
                await self._call(w, "SetBot", {"name": reply.bot_name, "token": reply.bot_token})
            return out

    async def UnregisterBot(self, name: str, raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        request = ms.UnregisterBotRequest.FromString(raw)
        async with self.bots_lock:
            await self.refresh()
            if any(request.bot_name in w.status["seated"] for w in self.workers):
                await context.abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"bot {request.bot_name[:64]!r} is seated in a match not yet ended: cancel it or wait for its end",
                )
            ended = 0
            for w in self.workers:
                ended += ms.UnregisterBotResponse.FromString(await self._forward(w, name, raw)).sessions_ended
            self.bots.unregister(request.bot_name)
        return ms.UnregisterBotResponse(bot_name=request.bot_name, sessions_ended=ended).SerializeToString()

    async def WatchMatch(self, raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[bytes]:
        if not self.config.watch_without_token:
            await self._auth(context)
        match_id = ms.WatchMatchRequest.FromString(raw).match_id
        await self._refuse_lost(match_id, context)
        for w in self._owners_of(match_id):
            w = await self._live(w)
            call = w.channel.unary_stream(f"/{MATCH_SERVICE}/WatchMatch", None, None)(raw, metadata=self._admin())
            try:
                async for item in call:
                    yield bytes(item)
                return
            except grpc.aio.AioRpcError as e:
                await self._refuse_lost(match_id, context)  # its process died while it was watched
                if e.code() != grpc.StatusCode.NOT_FOUND or w.index == self._owners_of(match_id)[-1].index:
                    await context.abort(e.code(), e.details() or "")
                    return


async def serve_processes(address: str, config: ServerConfig, processes: int, grace: float = 5.0, **kw: Any) -> int:
    """``gaigel serve --processes N``: runs until SIGTERM or SIGINT (or a table process dies)."""
    generated = not config.admin_token
    cluster = Cluster(config, processes, **kw)
    port = await cluster.start(address)
    log = get_logger()
    if generated:
        print(f"gaigel serve: admin token (shown once): {config.admin_token}", file=sys.stderr, flush=True)
    log.info(
        "server_started",
        address=address,
        port=port,
        metrics_port=cluster.metrics_port,
        processes=processes,
        pid=os.getpid(),
    )
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    waits = {loop.create_task(stop.wait()), loop.create_task(cluster.failed.wait())}
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    failed = not stop.is_set()
    for t in waits:
        t.cancel()
    log.info("server_stopping", grace=grace)
    await cluster.stop(grace)
    log.info("server_stopped")
    return 1 if failed else 0


def _newest_first(entry: tuple[int, ms.Match]) -> int:
    created = entry[1].create_time
    return -(created.seconds * 1_000_000_000 + created.nanos)


__all__ = ["Cluster", "serve_processes"]
