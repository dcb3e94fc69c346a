"""A table process of ``gaigel serve --processes N``: an ordinary server on a loopback port, plus
the internal calls its front uses to place tables and move idle sessions.

Started by :mod:`gaigel_server.cluster` as ``python -m gaigel_server.worker``: the config comes
as one JSON line on stdin, the bound port goes out as one line on stdout, and the process stops
when stdin closes (its front is gone, however it ended) or on SIGTERM.

The internal calls (``/gaigel.internal.v1.Worker/...``, JSON bodies, the admin token as for
MatchService) are not part of gaigel.v1: only the front calls them.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import socket
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

import grpc
import structlog
from prometheus_client import generate_latest

from gaigel_server import loops
from gaigel_server.auth import bearer_token, tokens_equal
from gaigel_server.clock import Clock
from gaigel_server.lobby import Lobby
from gaigel_server.logging import configure_logging, get_logger
from gaigel_server.server import GaigelServer, ServerConfig, create_server, new_door, tune_gc
from gaigel_server.session import Abort
from gaigel_server.states import TableState

SERVICE = "gaigel.internal.v1.Worker"
MOVED = (
    "MOVED: this idle session is needed by a match in another process of the server; "
    "join again (a new connection reaches it)"
)


def status(lobby: Lobby) -> dict[str, Any]:
    """What the front places tables and plans moves by: idle sessions per bot, waiting tables
    (oldest first) with the sessions each needs, the bots seated in matches not yet ended."""
    idle = {
        bot: [[s.session_id, s.peer] for s in pool if s.connected and not s.closed]
        for bot, pool in lobby.idle.items()
        if pool
    }
    waiting = []
    for table in lobby.waiting.values():
        if table.state is TableState.WAITING:
            need = Counter(table.seat_bot(s) for s in range(table.spec.players) if s not in table.house)
            waiting.append([table.match_id, dict(need)])
    seated = sorted({b for t in lobby.tables.values() if t.state is not TableState.ENDED for b in t.spec.bots})
    live = sum(1 for t in lobby.tables.values() if t.state is not TableState.ENDED)
    return {"idle": idle, "waiting": waiting, "seated": seated, "tables": live}


def release(lobby: Lobby, session_ids: list[str], drain: Callable[[str], object] = lambda peer: None) -> int:
    """Ends the idle sessions among *session_ids* with UNAVAILABLE (MOVED), each after *drain*
    of its peer (GOAWAY first, so that the Join again takes a new connection); returns how many."""
    wanted = set(session_ids)
    released = 0
    for pool in list(lobby.idle.values()):
        for session in [s for s in pool if s.session_id in wanted]:
            drain(session.peer)
            lobby.drop(session)
            session.close(Abort(grpc.StatusCode.UNAVAILABLE, MOVED))
            released += 1
    return released


class WorkerService:
    """The internal calls of one table process."""

    def __init__(self, server: GaigelServer, port: int) -> None:
        self.server = server
        self.port = port

    def handler(self) -> grpc.GenericRpcHandler[Any, Any]:
        def method(impl: Any) -> grpc.RpcMethodHandler[Any, Any]:
            return grpc.unary_unary_rpc_method_handler(impl, request_deserializer=None, response_serializer=None)

        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "Status": method(self.Status),
                "Release": method(self.Release),
                "SetBot": method(self.SetBot),
                "Metrics": method(self.Metrics),
            },
        )

    async def _body(self, raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if not tokens_equal(bearer_token(context.invocation_metadata()), self.server.admin_token):
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "internal calls need the admin token")
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "the body is not JSON")

    async def Status(self, raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        await self._body(raw, context)
        return json.dumps(status(self.server.lobby)).encode()

    async def Release(self, raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        body = await self._body(raw, context)
        door = self.server.door
        sessions = [str(x) for x in body.get("sessions", [])]
        drain = (lambda peer: door.drain(self.port, peer)) if door is not None else (lambda peer: None)
        return json.dumps({"released": release(self.server.lobby, sessions, drain)}).encode()

    async def SetBot(self, raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        body = await self._body(raw, context)
        try:
            self.server.bots.set(str(body["name"]), str(body["token"]))
        except (KeyError, ValueError) as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"SetBot: {e}")
        self.server.metrics.bot(str(body["name"]))
        return b"{}"

    async def Metrics(self, raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> bytes:
        """This process's metrics in Prometheus's text format: the front serves them all in one scrape."""
        await self._body(raw, context)
        return generate_latest(self.server.metrics.registry)


def config_to_json(config: ServerConfig) -> str:
    """The fields of *config* a worker needs, as one JSON line (not the Prometheus registry)."""
    out = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.name not in ("clock", "registry")}
    out["clock"] = dataclasses.asdict(config.clock)
    return json.dumps(out)


def config_from_json(line: str) -> ServerConfig:
    data = json.loads(line)
    data["clock"] = Clock(**data["clock"])
    return ServerConfig(**data)


MAX_HANDOVER = 256 * 1024
"""The largest hand-over message: a header line and the bytes the front read (at most 128 KiB)."""


def adopt_connections(server: GaigelServer, port: int, control: socket.socket, stop: asyncio.Event) -> None:
    """Relays the connections the front hands over on *control* (their sockets come with the
    message) to this process's grpc through a door of its own, and tells the front when each
    closes (it holds their per-peer places) and which addresses churn backed off (it accepts);
    the control socket's end is the front's end."""
    door = new_door(None, ("127.0.0.1", port), server.config, server.metrics)
    server.door = door
    assert server.play is not None and server.admin is not None
    server.play.door = server.admin.door = door
    loop = asyncio.get_running_loop()
    control.setblocking(False)

    def tell(message: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            control.send(json.dumps(message).encode())

    def closed(ident: int) -> None:
        tell({"closed": ident})

    door.on_ban = lambda key: tell({"ban": key})  # the front accepts: the back-off must be there

    def receive() -> None:
        try:
            message, fds, _, _ = socket.recv_fds(control, MAX_HANDOVER, 4)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            message, fds = b"", []
        if not message:
            loop.remove_reader(control.fileno())
            stop.set()
            return
        head, _, data = message.partition(b"\n")
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            return
        h = json.loads(head)
        ident = int(h["id"])
        door.adopt(socket.socket(fileno=fds[0]), data, str(h["peer"]), str(h["key"]), lambda: closed(ident))

    loop.add_reader(control.fileno(), receive)


async def run(config: ServerConfig, grace: float = 5.0, control_fd: int = -1) -> int:
    server, port = create_server("127.0.0.1:0", config)
    server.grpc.add_generic_rpc_handlers((WorkerService(server, port).handler(),))
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    if control_fd >= 0:
        adopt_connections(server, port, socket.socket(fileno=control_fd), stop)
    await server.start()
    tune_gc()
    print(port, flush=True)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # The front holds our stdin: its end (however the front ended) is ours.
    fd = sys.stdin.fileno()

    def readable() -> None:
        if not os.read(fd, 4096):
            loop.remove_reader(fd)
            stop.set()

    loop.add_reader(fd, readable)
    await stop.wait()
    get_logger().info("worker_stopping", port=port)
    await server.stop(grace)
    return 0


def main() -> int:
    line = sys.stdin.readline()
    config = config_from_json(line)
    level, loop_name, grace, control = (sys.argv[1:] + ["info", "asyncio", "5", "-1"][len(sys.argv) - 1 :])[:4]
    configure_logging(level)
    # Every line this process logs says which table process it is (the front's lines have no such key).
    structlog.contextvars.bind_contextvars(process=int(os.environ.get("GAIGEL_PROCESS", "0")))
    with asyncio.Runner(loop_factory=loops.factory(loops.EventLoop(loop_name))) as runner:
        return runner.run(run(config, float(grace), int(control)))


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["MOVED", "SERVICE", "WorkerService", "config_from_json", "config_to_json", "release", "status"]
