"""The SDK against the real server (gaigel_server), through a TCP proxy that cuts connections.

Uses only the documented contracts: ``create_server`` and MatchService.CreateMatch with the
admin token. Skipped when the server package is not installed.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from typing import Any

import grpc
from server_thread import ServerThread

from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_api.v1 import common_pb2, game_pb2
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc
from gaigel_client import Bot, run


class Proxy:
    """Forwards TCP to *target*; :meth:`cut` closes every open connection."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.socks: list[socket.socket] = []
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            with self.lock:
                self.socks += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self.lock:
            for s in self.socks:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()
                except OSError:
                    pass
            self.socks = []

    def close(self) -> None:
        self.listener.close()
        self.cut()


class Steady(Bot):
    name = "steady"

    def decide(self, request: pb.DecisionRequest) -> int:
        return request.legal_actions[-1].id


class Dropper(Bot):
    name = "dropper"

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self.decisions = 0
        self.rejections: list[pb.ActionRejected] = []
        self.end: game_pb2.MatchEnd | None = None

    def decide(self, request: pb.DecisionRequest) -> int:
        self.decisions += 1
        if self.decisions in (3, 9):
            self.proxy.cut()  # the answer below goes into a dead connection
        return request.legal_actions[0].id

    def on_rejected(self, msg: pb.ActionRejected) -> None:
        self.rejections.append(msg)

    def on_match_end(self, msg: game_pb2.MatchEnd) -> None:
        self.end = msg


def test_resume_after_cut_connections_against_real_server() -> None:
    server = ServerThread({"dropper": "tok-d", "steady": "tok-s"})
    proxy = Proxy(server.port)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = ms_grpc.MatchServiceStub(channel)
            clock = common_pb2.ClockSettings(strikes_limit=3)
            clock.decision_time.FromSeconds(5)
            clock.resume_grace.FromSeconds(10)
            stub.CreateMatch(
                ms.CreateMatchRequest(players=2, seat_bots=["dropper", "steady"], hands=2, seed=3, clock=clock),
                metadata=(("authorization", "Bearer admin-secret"),),
                timeout=10,
            )
        results: dict[str, Any] = {}
        steady = threading.Thread(
            target=lambda: results.update(steady=run(Steady(), f"127.0.0.1:{server.port}", "tok-s", matches=1)),
            daemon=True,
        )
        steady.start()
        bot = Dropper(proxy)
        assert run(bot, f"127.0.0.1:{proxy.port}", "tok-d", matches=1, initial_backoff=0.05) == 1
        steady.join(20)
        assert results.get("steady") == 1
        assert bot.decisions > 9
        assert bot.rejections == []
        assert bot.end is not None and bot.end.termination == common_pb2.MATCH_TERMINATION_COMPLETED
        reasons = [f.reason for f in bot.end.faults]
        assert reasons.count(common_pb2.FAULT_REASON_RESUMED) == 2
        assert not any(f.strike for f in bot.end.faults)
    finally:
        proxy.close()
        server.stop()


class Capper(Bot):
    """Keeps the bot seed it was given and says its first decision was time-capped."""

    name = "capper"

    def __init__(self) -> None:
        self.seeds: list[tuple[int, int]] = []
        self.decisions = 0

    def on_match_start(self, msg: pb.MatchStart) -> None:
        self.seeds.append((self.bot_seed, msg.bot_seed))

    def decide(self, request: pb.DecisionRequest) -> int:
        self.decisions += 1
        self.time_capped = self.decisions == 1
        return request.legal_actions[0].id


def test_sdk_gives_the_bot_seed_and_sends_time_capped() -> None:
    """bot.bot_seed is the seat's MatchStart.bot_seed before on_match_start; a decide that sets
    time_capped is recorded TIME_CAPPED, and the SDK resets it so later ones are not."""
    from gaigel.botseed import bot_seed

    server = ServerThread({"capper": "tok-c"})
    try:
        metadata = (("authorization", "Bearer admin-secret"),)
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = ms_grpc.MatchServiceStub(channel)
            request = ms.CreateMatchRequest(
                players=2, seat_bots=["house:first", "capper"], hands=1, seed=21, match_key="sdk-key"
            )
            match_id = stub.CreateMatch(request, metadata=metadata, timeout=10).match.match_id
            bot = Capper()
            assert run(bot, f"127.0.0.1:{server.port}", "tok-c", matches=1) == 1
            record = json.loads(
                stub.GetMatchRecord(ms.GetMatchRecordRequest(match_id=match_id), metadata=metadata).record_json
            )
        assert bot.seeds == [(bot_seed(21, 1, "sdk-key"), bot_seed(21, 1, "sdk-key"))]
        flags = [a.get("flags", []) for h in record["hands"] for a in h["actions"] if a["seat"] == 1]
        assert len(flags) == bot.decisions > 1
        assert flags[0] == ["TIME_CAPPED"] and all(f == [] for f in flags[1:])
    finally:
        server.stop()
