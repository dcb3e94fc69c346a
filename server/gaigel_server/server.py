"""Server assembly: :func:`create_server` (tests bind port 0) and :func:`serve` (``gaigel serve``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import os
import resource
import signal
import socket
import ssl
import sys
import tempfile
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer  # grpc documents it as health.aio, which mypy --strict cannot see
from grpc_reflection.v1alpha import reflection
from prometheus_client import CollectorRegistry, start_http_server

from gaigel_api.v1 import bot_service_pb2, match_service_pb2
from gaigel_server import loops
from gaigel_server.auth import BotRegistry, new_token
from gaigel_server.clock import Clock
from gaigel_server.frontdoor import DoorLimits, FrontDoor, tls_context
from gaigel_server.lobby import Lobby
from gaigel_server.logging import get_logger
from gaigel_server.metrics import DEFAULT_MAX_BOT_SERIES, ServerMetrics
from gaigel_server.servicer import BotServicer, MatchServicer

DEFAULT_ADDRESS = "127.0.0.1:50051"
SERVICE_NAMES = (
    bot_service_pb2.DESCRIPTOR.services_by_name["BotService"].full_name,
    match_service_pb2.DESCRIPTOR.services_by_name["MatchService"].full_name,
)


@dataclasses.dataclass
class ServerConfig:
    """Everything a server needs; every field has a working default."""

    admin_token: str = ""
    """The MatchService token; generated when empty (see :attr:`GaigelServer.admin_token`)."""
    bots: dict[str, str] = dataclasses.field(default_factory=dict)
    """Registered bots: name -> token."""
    tls_cert: str | None = None
    tls_key: str | None = None
    metrics_port: int | None = None
    """Port of the Prometheus endpoint; None: off, 0: any free port."""
    metrics_address: str = "127.0.0.1"
    max_bot_series: int = DEFAULT_MAX_BOT_SERIES
    """Bots with their own metric series; the others share ``bot="_other"`` (0: all share it)."""
    records_dir: str | None = None
    max_message_bytes: int = 64 * 1024
    join_timeout: float = 1.0
    """Seconds a new stream has to send Join or Resume (a bot sends it at once)."""
    max_sessions_per_bot: int = 64
    max_streams: int = 1024
    """Bot streams past Join or Resume open at once (all bots); more Joins get RESOURCE_EXHAUSTED."""
    max_pending_streams: int = 256
    """Streams still waiting to send Join or Resume; beyond it the one waiting longest is ended."""
    max_pending_per_peer: int = 32
    """Streams of one address still waiting to send Join or Resume; beyond it that address's oldest is ended."""
    slow_reader_timeout: float = 20.0
    """Seconds a write may wait for a bot that does not read before its stream is ended (SLOW_READER)."""
    max_queued_bytes: int = 4 * 1024 * 1024
    """Bytes queued for one stream before it is ended (SLOW_READER)."""
    idle_timeout: float = 5.0
    """Seconds a connection without any call is kept open (then GOAWAY: a client reconnects when it calls again)."""
    max_connection_age: float = 3600.0
    """Seconds after which a connection takes no new calls (its open streams go on)."""
    max_connections: int = 2048
    """Connections open at once; more are closed at accept."""
    max_connections_per_peer: int = 64
    """Connections open at once from one address (IPv6: one /64); more are closed at accept."""
    front_door: bool = True
    """TCP connections come through :mod:`gaigel_server.frontdoor` (per-peer limits, rapid-reset GOAWAY);
    False: grpc listens on the address itself (only its global limits apply)."""
    max_streams_per_connection: int = 256
    """Streams open at once on one HTTP/2 connection (a client queues the rest)."""
    keep_ended: int = 5000
    """Ended matches kept in memory (about 20 KB each for 2-hand matches); the oldest beyond are forgotten."""
    clock: Clock = dataclasses.field(default_factory=Clock)
    watch_without_token: bool = False
    registry: CollectorRegistry | None = None
    """The Prometheus registry (a private new one when None)."""


class GaigelServer:
    """A running (or ready) server: the grpc.aio server plus the lobby, metrics and tokens."""

    def __init__(
        self,
        grpc_server: grpc.aio.Server,
        lobby: Lobby,
        metrics: ServerMetrics,
        config: ServerConfig,
        registry: BotRegistry,
    ) -> None:
        self.grpc = grpc_server
        self.lobby = lobby
        self.metrics = metrics
        self.config = config
        self.bots = registry
        self.admin_token = config.admin_token
        self.metrics_port: int | None = None
        self._httpd: Any = None
        self.health = HealthServicer()
        self.play: BotServicer | None = None
        self.admin: MatchServicer | None = None
        self.door: FrontDoor | None = None
        self._health_watch: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Starts serving (and the metrics endpoint, if configured, first: a taken port fails
        before anything is served).

        :raises ValueError: one line naming the metrics address that cannot be bound.
        """
        if self.config.metrics_port is not None:
            where = f"{self.config.metrics_address}:{self.config.metrics_port}"
            try:
                self._httpd, _ = start_http_server(
                    self.config.metrics_port, self.config.metrics_address, registry=self.metrics.registry
                )
            except OSError as e:
                raise ValueError(
                    f"cannot serve metrics on {where}: {e.strerror or e} "
                    "(choose another --metrics-port, or 0 to turn metrics off)"
                ) from None
            self.metrics_port = int(self._httpd.server_port)
        await self.grpc.start()
        if self.door is not None:
            await self.door.start()
        loop = asyncio.get_running_loop()
        self.metrics.event_loop_tasks.set_function(lambda: len(asyncio.all_tasks(loop)))
        await self._set_health(health_pb2.HealthCheckResponse.SERVING)
        if self.door is not None:
            self._health_watch = loop.create_task(self._watch_door(self.door))

    async def _set_health(self, status: Any) -> None:
        await set_health(self.health, status)

    async def _watch_door(self, door: FrontDoor) -> None:
        await watch_door(door, self.health)

    async def stop(self, grace: float | None = 5.0) -> None:
        """Aborts running matches (their records are written), then stops within *grace* seconds."""
        if self._health_watch is not None:
            self._health_watch.cancel()
        await self.health.enter_graceful_shutdown()
        try:
            await asyncio.wait_for(self.lobby.shutdown(), timeout=(grace or 1.0) * 0.8)
        except TimeoutError:
            get_logger().error("shutdown_timeout")
        if self.door is not None:
            self.door.stop_accepting()
        await self.grpc.stop(grace)
        if self.door is not None:
            self.door.close()
        if self.play is not None:
            self.play.close()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


async def set_health(health: HealthServicer, status: Any) -> None:
    """*status* for every service and the server as a whole ("")."""
    for name in (*SERVICE_NAMES, ""):
        await health.set(name, status)


async def watch_door(door: FrontDoor, health: HealthServicer) -> None:
    """NOT_SERVING while the front door refuses new connections at its global cap: a
    balancer or an organiser's probe then knows that new bots cannot get in."""
    serving = True
    while True:
        await asyncio.sleep(0.5)
        refusing = door.refusing()
        if refusing == serving:
            serving = not refusing
            await set_health(
                health,
                health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING,
            )
            get_logger().warning(
                "connections_refused" if refusing else "connections_admitted_again",
                refused_at_cap=door.refused_global,
            )


def add_health_and_reflection(server: grpc.aio.Server, health: HealthServicer) -> None:
    """The standard health service and server reflection of gaigel.v1's services."""
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    reflection.enable_server_reflection(
        (*SERVICE_NAMES, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME), server
    )


def read_tls(config: ServerConfig) -> tuple[bytes, bytes] | None:
    """The certificate chain and key of *config* (None without TLS).

    :raises ValueError: one of the two missing, or a file that cannot be read.
    """
    if not (config.tls_cert or config.tls_key):
        return None
    if not (config.tls_cert and config.tls_key):
        raise ValueError("TLS needs both --tls-cert and --tls-key")
    try:
        return Path(config.tls_cert).read_bytes(), Path(config.tls_key).read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read TLS file: {e}") from None


def new_door(
    sock: socket.socket | None,
    backend: tuple[str, int],
    config: ServerConfig,
    metrics: ServerMetrics,
    tls: ssl.SSLContext | None = None,
    **routing: Any,
) -> FrontDoor:
    """A front door with *config*'s connection limits, counted in *metrics* (*routing*: the
    ``route`` and ``hand_over`` of ``gaigel serve --processes``)."""
    limits = DoorLimits(
        max_connections=connection_limit(config.max_connections, per_connection=3),
        per_peer=config.max_connections_per_peer,
    )
    door = FrontDoor(
        sock, backend, limits, tls, lambda reason: metrics.connections_refused.labels(reason).inc(), **routing
    )
    metrics.connections_open.set_function(lambda: door.held)
    return door


def create_server(address: str = DEFAULT_ADDRESS, config: ServerConfig | None = None) -> tuple[GaigelServer, int]:
    """Builds a server bound to *address* (port 0 picks a free one); call ``await server.start()``.

    Must be called with a running event loop (grpc.aio). Returns the server and the bound port.

    :raises ValueError: for unreadable TLS files or an address that cannot be bound.
    """
    config = config or ServerConfig()
    if config.records_dir:
        check_writable_dir(Path(config.records_dir), "--records")
    if not config.admin_token:
        config.admin_token = new_token()
    metrics = ServerMetrics(config.registry or CollectorRegistry(), config.max_bot_series)
    registry = BotRegistry(config.bots)
    for name in config.bots:
        metrics.bot(name)
    lobby = Lobby(
        metrics,
        Path(config.records_dir) if config.records_dir else None,
        config.max_sessions_per_bot,
        config.keep_ended,
    )
    options = [
        *connection_options(config),
        ("grpc.max_receive_message_length", config.max_message_bytes),
        ("grpc.max_send_message_length", 4 * 1024 * 1024),
        ("grpc.so_reuseport", 0),
        # Calls not yet handed to the application are dropped by grpc core with a bare
        # CANCELLED beyond these backlogs (defaults 1000 and 3000); above --max-streams the
        # server itself refuses with RESOURCE_EXHAUSTED and a message, so keep them larger.
        ("grpc.server.max_pending_requests", 4 * config.max_streams + 1000),
        ("grpc.server.max_pending_requests_hard_limit", 8 * config.max_streams + 3000),
    ]
    server = grpc.aio.server(options=options)
    bots = BotServicer(
        lobby,
        registry,
        metrics,
        config.join_timeout,
        config.max_message_bytes,
        config.max_streams,
        max_pending_streams=config.max_pending_streams,
        max_pending_per_peer=config.max_pending_per_peer,
        slow_reader_timeout=config.slow_reader_timeout,
        max_queued_bytes=config.max_queued_bytes,
    )
    server.add_generic_rpc_handlers((bots.handler(),))
    matches = MatchServicer(lobby, registry, metrics, config.admin_token, config.clock, config.watch_without_token)
    server.add_generic_rpc_handlers((matches.handler(),))
    out = GaigelServer(server, lobby, metrics, config, registry)
    out.play, out.admin = bots, matches  # for tests and benchmarks that look inside
    add_health_and_reflection(server, out.health)
    tls = read_tls(config)
    if config.front_door and not address.startswith("unix"):
        sock = listen_socket(address)
        # grpc listens on a loopback port of its own; the door relays the public address to it.
        backend = server.add_insecure_port("127.0.0.1:0")
        if backend == 0:
            sock.close()
            raise ValueError("cannot bind a loopback port for grpc behind the front door")
        try:
            context = tls_context(*tls) if tls else None
        except ssl.SSLError as e:
            sock.close()
            raise ValueError(f"cannot use the TLS certificate and key: {e}") from None
        out.door = new_door(sock, ("127.0.0.1", backend), config, metrics, context)
        bots.door = matches.door = out.door
        return out, out.door.port
    if tls:
        port = server.add_secure_port(address, grpc.ssl_server_credentials([(tls[1], tls[0])]))
    else:
        port = server.add_insecure_port(address)
    if port == 0:
        raise ValueError(f"cannot bind {address}")
    return out, port


def connection_limit(wanted: int, per_connection: int = 1) -> int:
    """*wanted* connections, or fewer when the descriptor limit leaves no room for them: a
    server out of descriptors can neither accept a health check nor write a record.
    (A connection through the front door holds *per_connection* = 3 descriptors: the client's,
    the door's to grpc and grpc's own.)"""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(16, min(wanted, (soft - 64) // per_connection))


def raise_descriptor_limit() -> None:
    """Soft descriptor limit up to the hard one (as Go programs do): a connection through the front
    door holds three, and the default soft limit of 1,024 would cap the server at about 320."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 1 << 20, hard))


def _resolve(address: str, what: str) -> tuple[int, int, int, Any, str]:
    """Family, type, protocol, socket address and host of "host:port" (IPv6 hosts in brackets,
    no host: every interface).

    :raises ValueError: one line starting with *what* and *address*.
    """
    host, sep, port_text = address.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ValueError(f"{what} {address}: expected host:port")
    host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(host or None, int(port_text), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as e:
        raise ValueError(f"{what} {address}: cannot resolve {host!r}: {e}") from None
    family, kind, proto, _, where = infos[0]
    return family, kind, proto, where, host


def listen_socket(address: str) -> socket.socket:
    """A listening TCP socket on *address* ("host:port", IPv6 hosts in brackets, port 0: any).

    :raises ValueError: one line naming the address that cannot be bound.
    """
    family, kind, proto, where, host = _resolve(address, "cannot bind")
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and not host:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(where)
        sock.listen(1024)
        sock.setblocking(False)
    except OSError as e:
        sock.close()
        raise ValueError(f"cannot bind {address}: {e.strerror or e}") from None
    return sock


def connection_options(config: ServerConfig) -> list[tuple[str, int]]:
    """grpc core's limits per connection: what a client that opens connections and streams
    without using them (or resets them as fast as it can) may hold."""
    return [
        ("grpc.max_connection_idle_ms", int(config.idle_timeout * 1000)),
        # GOAWAY at that age: no new calls on the connection; no grace limit, so a bot's
        # stream in a match is never cut by it.
        ("grpc.max_connection_age_ms", int(config.max_connection_age * 1000)),
        ("grpc.max_allowed_incoming_connections", connection_limit(config.max_connections)),
        ("grpc.max_concurrent_streams", config.max_streams_per_connection),
        # A TCP (or TLS) connection that does not complete its handshake is closed after 10 s.
        ("grpc.server_handshake_timeout_ms", 10_000),
        # Pings find dead peers whose connections would otherwise stay open for hours.
        ("grpc.keepalive_time_ms", 60_000),
        ("grpc.keepalive_timeout_ms", 20_000),
        # No window growth: each stream may have at most 64 KiB in flight towards the server,
        # so a client sending faster than it is read holds that much grpc memory, not gigabytes.
        ("grpc.http2.bdp_probe", 0),
    ]


def check_bindable(address: str, flag: str) -> None:
    """Binds *address* ("host:port", IPv6 hosts in brackets) once and lets it go again, so a
    port in use is one line naming it and *flag*, not grpc core's log and a traceback.

    :raises ValueError: when the address cannot be bound.
    """
    family, kind, proto, where, _ = _resolve(address, flag)
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as grpc and http.server do
        try:
            probe.bind(where)
        except OSError as e:
            raise ValueError(f"{flag} {address}: cannot listen there: {e.strerror or e}") from None


def check_writable_dir(path: Path, flag: str) -> None:
    """Creates *path* if needed and writes a probe file into it.

    :raises ValueError: one line naming the directory and *flag*, when it cannot be written.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as e:
        raise ValueError(f"{flag} {path}: cannot write there: {e.strerror or e}") from None


YOUNG_OBJECTS = 20_000
"""Container objects allocated (net) before the collector looks for cycles among the young."""


def tune_gc() -> None:
    """Sets the garbage collector for a serving process, once it has started.

    A decision allocates a few dozen short-lived containers (messages' parts, futures, tuples),
    and nearly all are freed by reference counting; with Python's default of a young-generation
    pass every 700 net allocations those passes took 4.4 % of the server's CPU at 64 streams
    (timed with ``gc.callbacks``), 1 % with a pass every 20,000. ``gc.freeze`` moves what start-up
    made (modules, descriptors, the engine's tables) out of the full passes' way."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, middle, old)


async def serve(address: str, config: ServerConfig, grace: float = 5.0, announce: bool = True) -> int:
    """Runs a server until SIGTERM or SIGINT, then shuts down within *grace* seconds."""
    generated = not config.admin_token
    raise_descriptor_limit()
    server, port = create_server(address, config)
    try:
        await server.start()
    except ValueError:
        await server.grpc.stop(None)
        raise
    tune_gc()
    log = get_logger()
    if announce and generated:
        print(f"gaigel serve: admin token (shown once): {server.admin_token}", file=sys.stderr, flush=True)
    log.info(
        "server_started",
        address=address,
        port=port,
        metrics_port=server.metrics_port,
        tls=bool(config.tls_cert),
        pid=os.getpid(),
        loop=loops.running(),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("server_stopping", grace=grace)
    await server.stop(grace)
    log.info("server_stopped")
    return 0


__all__ = [
    "DEFAULT_ADDRESS",
    "GaigelServer",
    "ServerConfig",
    "add_health_and_reflection",
    "check_bindable",
    "check_writable_dir",
    "connection_options",
    "create_server",
    "new_door",
    "read_tls",
    "serve",
    "set_health",
    "tune_gc",
    "watch_door",
]
