"""Helpers of the server tests: a real grpc.aio server on 127.0.0.1:0 and scripted bots.

pytest-asyncio is not used: each test runs its own scenario with :func:`run`, and
:func:`running_server` starts and stops a server inside that event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

import grpc
from prometheus_client import CollectorRegistry

from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import bot_service_pb2_grpc as bs_grpc
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc
from gaigel_server import codec
from gaigel_server.clock import Clock
from gaigel_server.server import GaigelServer, ServerConfig, create_server
from gaigel_server.session import Outgoing, Stream

ADMIN = "admin-token-for-tests"
BOTS = {"alpha": "alpha-token-123", "beta": "beta-token-4567", "gamma": "gamma-token-890"}
FAST = Clock(decision_time=2.0, bank=5.0, strikes_limit=3, resume_grace=5.0)


def run(coro: Coroutine[Any, Any, Any], timeout: float = 60.0) -> Any:
    """Runs one test scenario in a fresh event loop."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


@contextlib.asynccontextmanager
async def running_server(**overrides: Any) -> AsyncIterator[tuple[GaigelServer, int]]:
    """A started server on a free loopback port, with the test bots and admin token."""
    options: dict[str, Any] = {"admin_token": ADMIN, "bots": dict(BOTS), "clock": FAST, "registry": CollectorRegistry()}
    options.update(overrides)
    server, port = create_server("127.0.0.1:0", ServerConfig(**options))
    await server.start()
    try:
        yield server, port
    finally:
        await server.stop(1.0)


def admin_md(token: str = ADMIN) -> tuple[tuple[str, str], ...]:
    """Admin metadata."""
    return (("authorization", f"Bearer {token}"),)


class Admin:
    """A MatchService client with the admin token."""

    def __init__(self, port: int) -> None:
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.stub = ms_grpc.MatchServiceStub(self.channel)

    async def create(
        self, players: int, seat_bots: list[str], hands: int = 1, seed: int = 1, clock: Clock | None = None, **kw: Any
    ) -> ms.Match:
        req = ms.CreateMatchRequest(players=players, seat_bots=seat_bots, hands=hands, seed=seed, **kw)
        if clock is not None:
            req.clock.CopyFrom(codec.clock(clock))
        return (await self.stub.CreateMatch(req, metadata=admin_md())).match

    async def get(self, match_id: str) -> ms.Match:
        return (await self.stub.GetMatch(ms.GetMatchRequest(match_id=match_id), metadata=admin_md())).match

    async def wait_ended(self, match_id: str, timeout: float = 30.0) -> ms.Match:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            m = await self.get(match_id)
            if m.state == ms.MATCH_STATE_ENDED:
                return m
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"match {match_id} did not end in {timeout} s (state {m.state})")
            await asyncio.sleep(0.02)

    async def record(self, match_id: str) -> dict[str, Any]:
        import json

        resp = await self.stub.GetMatchRecord(ms.GetMatchRecordRequest(match_id=match_id), metadata=admin_md())
        return json.loads(resp.record_json)  # type: ignore[no-any-return]

    async def close(self) -> None:
        await self.channel.close()


Policy = Callable[["ScriptedBot", bs.DecisionRequest], Awaitable[None]]


async def answer_random(bot: ScriptedBot, req: bs.DecisionRequest) -> None:
    """Answers a random legal action id."""
    await bot.act(req.decision_id, bot.rng.choice(req.legal_actions).id)


class ScriptedBot:
    """A small async bot over a real channel: records every message it receives, answers by *policy*."""

    def __init__(
        self,
        port: int,
        name: str = "alpha",
        token: str | None = None,
        policy: Policy = answer_random,
        seed: int = 0,
        matches: int = 1,
        compact: bool = False,
        fold_hand_end: bool = False,
    ) -> None:
        self.port = port
        self.compact = compact
        self.fold_hand_end = fold_hand_end  # Join.compact_hand_end
        self.name = name
        self.token = BOTS.get(name, "") if token is None else token
        self.policy = policy
        self.rng = random.Random(seed)
        self.matches = matches
        self.received: list[bs.PlayResponse] = []
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.call: Any = None
        self.status: grpc.StatusCode | None = None
        self.details = ""
        self.match_start: bs.MatchStart | None = None
        self.decisions = 0

    async def act(self, decision_id: str, action_id: int) -> None:
        await self.call.write(bs.PlayRequest(action=bs.Action(decision_id=decision_id, action_id=action_id)))

    async def open(self, first: bs.PlayRequest | None = None) -> None:
        self.call = bs_grpc.BotServiceStub(self.channel).Play()
        if first is None:
            first = bs.PlayRequest(
                join=bs.Join(
                    bot_token=self.token,
                    bot_name=self.name,
                    bot_version="t1",
                    protocol_version=1,
                    compact=self.compact,
                    compact_hand_end=self.fold_hand_end,
                )
            )
        await self.call.write(first)

    async def play(self, stop_after: Callable[[bs.PlayResponse], bool] | None = None) -> None:
        """Reads until *matches* MatchEnds (then Leave), the stream ends, or *stop_after* is true."""
        ended = 0
        try:
            while True:
                msg = await self.call.read()
                if msg is grpc.aio.EOF:
                    break
                self.received.append(msg)
                if stop_after is not None and stop_after(msg):
                    return
                kind = msg.WhichOneof("message")
                if kind == "match_start":
                    self.match_start = msg.match_start
                elif kind == "decision_request":
                    self.decisions += 1
                    await self.policy(self, msg.decision_request)
                elif kind == "match_end":
                    ended += 1
                    if ended >= self.matches:
                        await self.call.write(bs.PlayRequest(leave=bs.Leave()))
            self.status = await self.call.code()
        except grpc.aio.AioRpcError as e:
            self.status, self.details = e.code(), e.details() or ""
            return
        self.details = await self.call.details() or ""

    async def run(self) -> ScriptedBot:
        await self.open()
        await self.play()
        return self

    async def close(self) -> None:
        await self.channel.close()

    def kinds(self) -> list[str]:
        return [m.WhichOneof("message") or "" for m in self.received]


def queued(stream: Stream) -> list[bs.PlayResponse]:
    """Takes the messages queued on *stream* (what its writer would write), parsed."""
    out = []
    while stream.items:
        item = stream.items.popleft()
        assert isinstance(item, Outgoing)
        out.append(bs.PlayResponse.FromString(item.message))
    return out
