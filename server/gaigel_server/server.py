"""Server assembly: :func:`create_server` (tests bind port 0) and :func:`serve` (``gaigel serve``)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sys
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection
from prometheus_client import CollectorRegistry, start_http_server

from gaigel_api.v1 import bot_service_pb2, match_service_pb2
from gaigel_server.auth import BotRegistry, new_token
from gaigel_server.clock import Clock
from gaigel_server.lobby import Lobby
from gaigel_server.logging import get_logger
from gaigel_server.metrics import ServerMetrics
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
    records_dir: str | None = None
    max_message_bytes: int = 64 * 1024
    join_timeout: float = 10.0
    max_sessions_per_bot: int = 64
    max_streams: int = 1024
    keep_ended: int = 5000
    """Ended matches kept in memory (about 20 KB each for 2-hand matches); the oldest beyond are forgotten."""
    """Bot streams open at once (all bots, Join pending included); more get RESOURCE_EXHAUSTED."""
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

    async def start(self) -> None:
        """Starts serving (and the metrics endpoint, if configured)."""
        await self.grpc.start()
        loop = asyncio.get_running_loop()
        self.metrics.event_loop_tasks.set_function(lambda: len(asyncio.all_tasks(loop)))
        for name in (*SERVICE_NAMES, ""):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        if self.config.metrics_port is not None:
            self._httpd, _ = start_http_server(
                self.config.metrics_port, self.config.metrics_address, registry=self.metrics.registry
            )
            self.metrics_port = int(self._httpd.server_port)

    async def stop(self, grace: float | None = 5.0) -> None:
        """Aborts running matches (their records are written), then stops within *grace* seconds."""
        await self.health.enter_graceful_shutdown()
        try:
            await asyncio.wait_for(self.lobby.shutdown(), timeout=(grace or 1.0) * 0.8)
        except TimeoutError:
            get_logger().error("shutdown_timeout")
        await self.grpc.stop(grace)
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


def create_server(address: str = DEFAULT_ADDRESS, config: ServerConfig | None = None) -> tuple[GaigelServer, int]:
    """Builds a server bound to *address* (port 0 picks a free one); call ``await server.start()``.

    Must be called with a running event loop (grpc.aio). Returns the server and the bound port.

    :raises ValueError: for unreadable TLS files or an address that cannot be bound.
    """
    config = config or ServerConfig()
    if not config.admin_token:
        config.admin_token = new_token()
    metrics = ServerMetrics(config.registry or CollectorRegistry())
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
    bots = BotServicer(lobby, registry, metrics, config.join_timeout, config.max_message_bytes, config.max_streams)
    server.add_generic_rpc_handlers((bots.handler(),))
    matches = MatchServicer(lobby, registry, metrics, config.admin_token, config.clock, config.watch_without_token)
    server.add_generic_rpc_handlers((matches.handler(),))
    out = GaigelServer(server, lobby, metrics, config, registry)
    health_pb2_grpc.add_HealthServicer_to_server(out.health, server)
    reflection.enable_server_reflection(
        (*SERVICE_NAMES, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME), server
    )
    if config.tls_cert or config.tls_key:
        if not (config.tls_cert and config.tls_key):
            raise ValueError("TLS needs both --tls-cert and --tls-key")
        try:
            cert = Path(config.tls_cert).read_bytes()
            key = Path(config.tls_key).read_bytes()
        except OSError as e:
            raise ValueError(f"cannot read TLS file: {e}") from None
        port = server.add_secure_port(address, grpc.ssl_server_credentials([(key, cert)]))
    else:
        port = server.add_insecure_port(address)
    if port == 0:
        raise ValueError(f"cannot bind {address}")
    return out, port


async def serve(address: str, config: ServerConfig, grace: float = 5.0, announce: bool = True) -> int:
    """Runs a server until SIGTERM or SIGINT, then shuts down within *grace* seconds."""
    generated = not config.admin_token
    server, port = create_server(address, config)
    await server.start()
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


__all__ = ["DEFAULT_ADDRESS", "GaigelServer", "ServerConfig", "create_server", "serve"]
