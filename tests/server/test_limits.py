"""Server-wide limits: the stream cap, and backpressure on a bot that sends without reading."""

from __future__ import annotations

import asyncio
import contextlib

import grpc
import pytest
from srvkit import Admin, ScriptedBot, admin_md, run, running_server

from gaigel.replay import replay
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_server import servicer
from gaigel_server.server import GaigelServer


def test_stream_limit_refuses_with_resource_exhausted_and_frees_on_close() -> None:
    """Joined streams count (streams waiting for Join have their own budget, see
    test_hardening.py); the refusal names the limit; a closed stream frees a place."""

    async def scenario() -> None:
        async with running_server(max_streams=2) as (_server, port):
            joined = [ScriptedBot(port, "alpha"), ScriptedBot(port, "beta")]
            for bot in joined:
                await bot.open()
                welcome = await bot.call.read()
                assert welcome.WhichOneof("message") == "welcome"
            silent = ScriptedBot(port, "gamma")  # opens a stream and never sends Join: not counted
            silent.call = silent_call = _open_silent(silent)
            await asyncio.sleep(0.2)

            refused = ScriptedBot(port, "gamma")
            # The server refuses before reading the Join, so the write itself may already fail.
            with contextlib.suppress(grpc.aio.AioRpcError):
                await refused.open()
            assert await refused.call.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            details = await refused.call.details()
            assert "SERVER_FULL" in details and "--max-streams 2" in details

            joined[0].call.cancel()
            await asyncio.sleep(0.2)
            again = ScriptedBot(port, "gamma")
            await again.open()
            assert (await again.call.read()).WhichOneof("message") == "welcome"
            silent_call.cancel()
            for bot in [*joined, silent, refused, again]:
                await bot.close()

    run(scenario())


def _open_silent(bot: ScriptedBot) -> grpc.aio.StreamStreamCall[bs.PlayRequest, bs.PlayResponse]:
    from gaigel_api.v1 import bot_service_pb2_grpc as bs_grpc

    call: grpc.aio.StreamStreamCall[bs.PlayRequest, bs.PlayResponse] = bs_grpc.BotServiceStub(bot.channel).Play()
    return call


async def _flood_without_reading(server: GaigelServer, port: int, actions: int) -> tuple[int, int, int]:
    """Writes up to *actions* Actions without reading; returns (written, largest server queue, rejections read)."""
    bot = ScriptedBot(port, "alpha")
    # A hostile client keeps its receive window small (no BDP growth), so the server's
    # writes stall after a few hundred messages, as they would for a bot that never reads.
    await bot.channel.close()
    bot.channel = grpc.aio.insecure_channel(
        f"127.0.0.1:{port}", options=[("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 16 * 1024)]
    )
    await bot.open()
    largest = 0

    def sample() -> None:
        nonlocal largest
        for sessions in server.lobby.sessions.values():
            for s in sessions:
                if s.stream is not None:
                    largest = max(largest, len(s.stream.items))

    written = 0
    action = bs.PlayRequest(action=bs.Action(decision_id="no-such-decision", action_id=0))
    for _ in range(actions):
        # A write that stalls means flow control pushes back: the server stopped reading. The
        # write is left pending, not cancelled (cancelling it would cancel the whole call).
        write = asyncio.ensure_future(bot.call.write(action))
        done, _ = await asyncio.wait({write}, timeout=1.0)
        if not done:
            written += 1  # it goes out once the bot reads
            break
        written += 1
        if written % 100 == 0:
            sample()
            await asyncio.sleep(0)
    sample()
    rejections = 0
    while rejections < written:
        msg = await asyncio.wait_for(bot.call.read(), 10.0)
        if msg.WhichOneof("message") == "action_rejected":
            rejections += 1
    bot.call.cancel()
    await bot.close()
    return written, largest, rejections


def test_a_bot_that_never_reads_cannot_grow_the_servers_queue() -> None:
    """An Action flood without reading: the queue stays at the high-water mark and nothing is lost."""

    async def scenario() -> None:
        async with running_server() as (server, port):
            written, largest, rejections = await _flood_without_reading(server, port, 20_000)
            assert largest <= servicer.BACKLOG_HIGH + 1, largest
            assert rejections == written  # every Action read gets its ActionRejected, in the end
            # The server still serves: a normal session joins at once.
            bot = ScriptedBot(port, "beta")
            await bot.open()
            assert (await asyncio.wait_for(bot.call.read(), 5.0)).WhichOneof("message") == "welcome"
            await bot.close()

    run(scenario(), timeout=120)


def test_control_without_backpressure_the_queue_grows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: with the high-water mark out of reach the queue grows far past it."""
    monkeypatch.setattr(servicer, "BACKLOG_HIGH", 10**9)

    async def scenario() -> None:
        async with running_server() as (server, port):
            _written, largest, _ = await _flood_without_reading(server, port, 20_000)
            assert largest > 4 * 256, largest

    run(scenario(), timeout=120)


def test_a_flood_does_not_stall_another_table() -> None:
    """While one bot floods Actions without reading, a match on another table completes without a fault."""

    async def scenario() -> None:
        async with running_server() as (server, port):
            admin = Admin(port)
            flood = asyncio.create_task(_flood_without_reading(server, port, 40_000))
            await asyncio.sleep(1.0)
            good = ScriptedBot(port, "gamma")
            playing = asyncio.create_task(good.run())
            match = await admin.create(2, ["gamma", "house:random"], hands=2, seed=11)
            await asyncio.wait_for(playing, 30)
            assert not flood.done()  # the match was played during the flood
            end = await admin.wait_ended(match.match_id)
            assert end.termination == cm.MATCH_TERMINATION_COMPLETED
            assert not (await admin.record(match.match_id))["faults"]  # no timeout fallback: nothing stalled
            written, largest, rejections = await flood
            assert largest <= servicer.BACKLOG_HIGH + 1 and rejections == written
            await good.close()
            await admin.close()

    run(scenario(), timeout=120)


async def _watch(admin: Admin, match_id: str) -> list[ms.WatchMatchResponse]:
    out = []
    async for msg in admin.stub.WatchMatch(
        ms.WatchMatchRequest(match_id=match_id, from_start=True), metadata=admin_md()
    ):
        out.append(msg)
    return out


def test_ended_matches_are_packed_and_only_the_last_ones_kept() -> None:
    """A long-running server keeps --keep-ended ended matches; what it keeps still reads back whole."""

    async def scenario() -> None:
        async with running_server(keep_ended=3) as (server, port):
            admin = Admin(port)
            ids, live = [], []
            for seed in range(5):
                m = await admin.create(2, ["house:first", "house:random"], hands=2, seed=seed)
                live.append(asyncio.create_task(_watch(admin, m.match_id)))  # attached before the first move
                ids.append(m.match_id)
                await admin.wait_ended(m.match_id)
            listed = (await admin.stub.ListMatches(ms.ListMatchesRequest(), metadata=admin_md())).matches
            assert [m.match_id for m in listed] == ids[:1:-1]  # newest first, the two oldest forgotten
            for gone in ids[:2]:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await admin.get(gone)
                assert err.value.code() == grpc.StatusCode.NOT_FOUND
                assert "keeps the last 3 ended matches" in (err.value.details() or "")
            for match_id, watcher in zip(ids[2:], live[2:], strict=True):
                record = await admin.record(match_id)
                assert replay(record).ok and record["seed"] in range(5)
                seen_live = [m.SerializeToString() for m in await watcher]
                seen_after = [m.SerializeToString() for m in await _watch(admin, match_id)]
                assert len(seen_after) > 10 and seen_after[1:] == seen_live[1:]  # [0] is the Match, now ended
            assert server.lobby.evicted == 2 and len(server.lobby.tables) == 3
            await admin.close()

    run(scenario())
