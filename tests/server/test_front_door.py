"""Issue 22: the front door in front of grpc. Per-address connection caps (an attacker on
127.0.0.2 does not lock out a bot on 127.0.0.1), a preface deadline, GOAWAY for rapid reset,
no traceback from reset streams, health
NOT_SERVING while the global cap refuses connections, back-off for a token that keeps hitting
its session limit. Real server, real sockets on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from srvkit import BOTS, Admin, ScriptedBot, run, running_server

from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import bot_service_pb2_grpc as bs_grpc
from gaigel_api.v1 import common_pb2 as common
from gaigel_server.frontdoor import GOAWAY, PREFACE, _Scanner, peer_key
from gaigel_server.servicer import SESSION_STRIKES

ATTACKER = "127.0.0.2"


def _frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream.to_bytes(4, "big") + payload


def _literal(name: str, value: str) -> bytes:
    n, v = name.encode(), value.encode()
    return b"\x00" + bytes((len(n),)) + n + bytes((len(v),)) + v  # literal without indexing, short strings


PLAY_HEADERS = b"".join(
    _literal(n, v)
    for n, v in (
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/gaigel.v1.BotService/Play"),
        (":authority", "127.0.0.1"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    )
)


class _Closed:
    """The writer of a connection refused before it was made."""

    def close(self) -> None:
        pass

    def write(self, data: bytes) -> None:
        pass

    async def drain(self) -> None:
        pass


async def _raw(port: int, source: str = ATTACKER, preface: bool = True) -> tuple[asyncio.StreamReader, Any]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    except ConnectionResetError:  # refused at accept: the door resets at once, even before connect returns
        sock.close()
        refused = asyncio.StreamReader()
        refused.feed_eof()
        return refused, _Closed()
    reader, writer = await asyncio.open_connection(sock=sock)
    if preface:
        writer.write(PREFACE + _frame(0x4, 0, 0))  # preface and an empty SETTINGS
        with contextlib.suppress(ConnectionError):  # a refused connection is reset at once
            await writer.drain()
    return reader, writer


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    """True when the server closes the connection within *seconds* (what it sends is read and dropped)."""
    end = time.monotonic() + seconds
    with contextlib.suppress(ConnectionError):
        while (left := end - time.monotonic()) > 0:
            try:
                if not await asyncio.wait_for(reader.read(65536), left):
                    return True
            except TimeoutError:
                return False
        return False
    return True


def test_peer_key_groups_ipv6_by_64_and_maps_ipv4_in_ipv6() -> None:
    assert peer_key("2001:db8:1:2:3:4:5:6") == peer_key("2001:db8:1:2:ffff::1") == "2001:db8:1:2::/64"
    assert peer_key("2001:db8:1:3::1") != peer_key("2001:db8:1:2::1")
    assert peer_key("::ffff:10.0.0.7") == "10.0.0.7" and peer_key("10.0.0.7") == "10.0.0.7"


def test_scanner_finds_frame_boundaries_in_any_split() -> None:
    frames = _frame(0x1, 0x4, 1, b"abc") + _frame(0x3, 0, 1, b"\x00\x00\x00\x08") + _frame(0x0, 0x1, 3, b"x" * 70)
    for cut in range(1, len(frames)):
        seen: list[tuple[int, int, int, int]] = []
        scanner = _Scanner(lambda k, f, s, c: seen.append((k, f, s, c)))  # noqa: B023
        scanner.feed(frames[:cut])
        scanner.feed(frames[cut:])
        assert seen == [(0x1, 0x4, 1, 0), (0x3, 0, 1, 8), (0x0, 0x1, 3, 0)], cut
        assert scanner.at_boundary


def test_one_address_at_its_cap_does_not_keep_another_out() -> None:
    async def scenario() -> None:
        async with running_server(max_connections_per_peer=4) as (server, port):
            held = [await _raw(port) for _ in range(10)]
            closed = [await _closed_within(r, 1.0) for r, _ in held]
            assert closed.count(True) == 6 and not any(closed[:4]), closed
            assert server.door is not None and server.door.refused_peer == 6
            bot = ScriptedBot(port, "alpha")  # from 127.0.0.1: its own share
            await bot.open()
            first = await asyncio.wait_for(bot.call.read(), 5)
            assert first.WhichOneof("message") == "welcome"
            await bot.channel.close()
            for _, w in held:
                w.close()

    run(scenario())


def test_a_connection_without_the_preface_is_closed_within_seconds() -> None:
    async def scenario() -> None:
        async with running_server() as (server, port):
            reader, writer = await _raw(port, preface=False)
            began = time.monotonic()
            assert await _closed_within(reader, 6.0)
            assert time.monotonic() - began < 6.0
            assert server.door is not None and server.door.preface_timeouts == 1
            writer.close()

    run(scenario())


def _goaway_code(data: bytes) -> int | None:
    codes: list[int] = []
    i = 0
    while i + 9 <= len(data):
        size = int.from_bytes(data[i : i + 3], "big")
        if data[i + 3] == GOAWAY and i + 9 + 8 <= len(data):
            codes.append(struct.unpack(">II", data[i + 9 : i + 17])[1])
        i += 9 + size
    return codes[-1] if codes else None


def test_rapid_reset_gets_goaway_and_leaves_no_traceback() -> None:
    """Streams opened and reset at once: GOAWAY (ENHANCE_YOUR_CALM) past the connection's reset
    budget, the connection closed; no 'exception was never retrieved' on the server's loop, and a bot plays on."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        errors: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
        async with running_server() as (server, port):
            codes = []
            for _ in range(2):
                reader, writer = await _raw(port)
                burst = b"".join(
                    _frame(0x1, 0x4, s, PLAY_HEADERS) + _frame(0x3, 0, s, (8).to_bytes(4, "big"))
                    for s in range(1, 4000, 2)
                )
                with contextlib.suppress(ConnectionError):
                    writer.write(burst)
                    await writer.drain()
                got = b""
                with contextlib.suppress(ConnectionError, TimeoutError):
                    while chunk := await asyncio.wait_for(reader.read(65536), 5):
                        got += chunk
                codes.append(_goaway_code(got))
                writer.close()
            assert codes == [0xB, 0xB], codes
            assert server.door is not None and server.door.resets_refused == 2
            assert server.metrics.connections_refused.labels("rapid_reset")._value.get() == 2
            bot = ScriptedBot(port, "alpha")
            task = asyncio.create_task(bot.run())
            admin = Admin(port)
            m = await admin.create(2, ["alpha", "house:random"], hands=1)
            assert (await admin.wait_ended(m.match_id)).termination == common.MATCH_TERMINATION_COMPLETED
            await asyncio.wait_for(task, 10)
            await admin.close()
            await asyncio.sleep(0.2)
        assert [e for e in errors if "never retrieved" in str(e.get("message"))] == []

    run(scenario())


async def _read_until_closed(reader: asyncio.StreamReader, seconds: float) -> bytes:
    got = b""
    with contextlib.suppress(ConnectionError, TimeoutError):
        while chunk := await asyncio.wait_for(reader.read(65536), seconds):
            got += chunk
    return got


def test_pre_join_churn_gets_goaway_and_its_address_backed_off_while_a_resume_succeeds() -> None:
    """A client opening streams that never Join, far more than are let wait (and past grpc's
    concurrency limit): past its address's churn budget GOAWAY, its new connections closed at
    accept for a while, evictions logged rate-limited; a seated bot on another address drops
    its stream during the attack and its Resume succeeds."""

    async def scenario() -> None:
        async with running_server(join_timeout=30.0) as (server, port):
            assert server.door is not None
            admin = Admin(port)
            bot = ScriptedBot(port, "alpha")
            await bot.open()
            m = await admin.create(2, ["alpha", "house:random"], hands=2, seed=9)
            seen = {"decisions": 0}

            def stop(msg: bs.PlayResponse) -> bool:
                seen["decisions"] += msg.WhichOneof("message") == "decision_request"
                return seen["decisions"] == 2

            await bot.play(stop_after=stop)
            bot.call.cancel()  # the seated bot's stream breaks; the attack starts
            reader, writer = await _raw(port)
            # 1,200 streams at once: 256 fit grpc's limit (32 of them may wait for Join, the rest
            # are evicted), the others are refused with REFUSED_STREAM; both are churn.
            with contextlib.suppress(ConnectionError):
                writer.write(b"".join(_frame(0x1, 0x4, s, PLAY_HEADERS) for s in range(1, 2400, 2)))
                await writer.drain()
            assert _goaway_code(await _read_until_closed(reader, 10)) == 0xB
            writer.close()
            assert server.metrics.connections_refused.labels("churn")._value.get() == 1
            again, _ = await _raw(port)
            assert await _closed_within(again, 1.0), "a backed-off address was let in again at once"
            assert server.metrics.connections_refused.labels("churn")._value.get() == 2
            assert bot.match_start is not None
            back = ScriptedBot(port, "alpha")
            await back.open(
                bs.PlayRequest(
                    resume=bs.Resume(
                        match_id=m.match_id, seat=bot.match_start.seat, resume_token=bot.match_start.resume_token
                    )
                )
            )
            await back.play()
            assert back.received[0].welcome.resumed, back.received[:1]
            ended = await admin.wait_ended(m.match_id)
            assert ended.termination == common.MATCH_TERMINATION_COMPLETED
            assert server.door.churn_strikes > 500, server.door.churn_strikes
            for b in (bot, back):
                await b.close()
            await admin.close()

    run(scenario(), timeout=60)


def test_refused_joins_and_unary_calls_are_not_churn() -> None:
    """600 Joins refused for a wrong token and 600 health checks on one connection: no GOAWAY,
    and the address still gets in (a misconfigured bot must not lock out its neighbours)."""

    async def scenario() -> None:
        async with running_server() as (server, port), grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = bs_grpc.BotServiceStub(ch)
            health = health_pb2_grpc.HealthStub(ch)
            for _ in range(600):
                call = stub.Play()
                await call.write(bs.PlayRequest(join=bs.Join(bot_name="alpha", bot_token="wrong", protocol_version=1)))
                with contextlib.suppress(grpc.aio.AioRpcError):
                    await call.read()
                assert await call.code() == grpc.StatusCode.UNAUTHENTICATED
                await health.Check(health_pb2.HealthCheckRequest(), timeout=5)
            assert server.metrics.connections_refused.labels("churn")._value.get() == 0
            assert server.door is not None and server.door.churn_strikes == 0
            bot = ScriptedBot(port, "alpha")
            await bot.open()
            first = await asyncio.wait_for(bot.call.read(), 5)
            assert first.WhichOneof("message") == "welcome"
            await bot.channel.close()

    run(scenario(), timeout=90)


def test_health_says_not_serving_while_the_cap_refuses_connections() -> None:
    async def scenario() -> None:
        async with (
            running_server(max_connections=16) as (server, port),
            grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch,
        ):
            watch = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service=""))
            seen = [(await watch.read()).status]
            held = [await _raw(port) for _ in range(20)]  # 15 fit beside the watcher
            statuses = asyncio.create_task(_statuses(watch, seen, 2))
            await asyncio.wait_for(statuses, 8)
            assert seen == [
                health_pb2.HealthCheckResponse.SERVING,
                health_pb2.HealthCheckResponse.NOT_SERVING,
                health_pb2.HealthCheckResponse.SERVING,
            ] or seen[:2] == [health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING]
            assert server.door is not None and server.door.refused_global >= 5
            for _, w in held:
                w.close()
            if len(seen) < 3:
                seen.append((await asyncio.wait_for(watch.read(), 10)).status)
            assert seen[2] == health_pb2.HealthCheckResponse.SERVING
            watch.cancel()

    run(scenario(), timeout=40)


async def _statuses(watch: Any, seen: list[Any], count: int) -> None:
    for _ in range(count):
        seen.append((await watch.read()).status)
        if seen[-1] == health_pb2.HealthCheckResponse.NOT_SERVING:
            return


def test_a_token_past_its_session_limit_is_backed_off_then_its_connection_ended() -> None:
    async def scenario() -> None:
        async with running_server(max_sessions_per_bot=2) as (server, port):
            keep = [ScriptedBot(port, "beta") for _ in range(2)]
            for bot in keep:
                await bot.open()
                assert (await asyncio.wait_for(bot.call.read(), 5)).WhichOneof("message") == "welcome"
            details: list[str] = []
            channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
            for _ in range(SESSION_STRIKES + 4):
                call: Any = bs_grpc.BotServiceStub(channel).Play()
                with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                    await call.write(
                        bs.PlayRequest(
                            join=bs.Join(bot_name="beta", bot_token=BOTS["beta"], protocol_version=1, bot_version="x")
                        )
                    )
                try:
                    await asyncio.wait_for(call.read(), 5)
                except grpc.aio.AioRpcError as e:
                    details.append(f"{e.code().name}: {e.details()}")
                await asyncio.sleep(0.01)
            assert details[0].startswith("RESOURCE_EXHAUSTED: too many sessions for bot 'beta'"), details
            assert any("SESSION_LIMIT: bot 'beta' keeps opening sessions" in d for d in details), details
            assert server.door is not None and server.door.ended >= 1
            # The bot's own sessions and other bots are untouched.
            other = ScriptedBot(port, "alpha")
            await other.open()
            assert (await asyncio.wait_for(other.call.read(), 5)).WhichOneof("message") == "welcome"
            for bot in (*keep, other):
                await bot.channel.close()
            await channel.close()

    run(scenario())


def test_a_60_kb_name_is_refused_as_unauthenticated_with_a_short_message() -> None:
    async def scenario() -> None:
        async with running_server() as (_server, port), grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            call: Any = bs_grpc.BotServiceStub(ch).Play()
            await call.write(bs.PlayRequest(join=bs.Join(bot_name="n" * 60_000, bot_token="wrong", protocol_version=1)))
            try:
                await call.read()
                raise AssertionError("served")
            except grpc.aio.AioRpcError as e:
                assert e.code() == grpc.StatusCode.UNAUTHENTICATED, e
                assert len(e.details() or "") < 300 and "(60000 characters)" in (e.details() or "")

    run(scenario())


def test_scanner_with_marks_sets_data_bits_in_place_and_reports_only_headers_and_resets() -> None:
    # The relay's fast path: DATA marks its stream (if followed) without a call; WINDOW_UPDATE,
    # PING and SETTINGS are skipped; HEADERS and RST_STREAM still reach the link.
    frames = (
        _frame(0x1, 0x4, 1, b"abc")
        + _frame(0x0, 0x0, 1, b"x" * 40)
        + _frame(0x8, 0, 0, b"\x00\x00\x10\x00")
        + _frame(0x6, 0, 0, b"p" * 8)
        + _frame(0x0, 0x0, 5, b"y")  # a stream the link does not follow: left alone
        + _frame(0x3, 0, 3, b"\x00\x00\x00\x08")
    )
    for cut in range(1, len(frames)):
        seen: list[tuple[int, int, int, int]] = []
        states = {1: 0, 3: 0}
        scanner = _Scanner(lambda k, f, s, c: seen.append((k, f, s, c)), (states, 2))  # noqa: B023
        scanner.feed(frames[:cut])
        scanner.feed(frames[cut:])
        assert seen == [(0x1, 0x4, 1, 0), (0x3, 0, 3, 8)], cut
        assert states == {1: 2, 3: 0} and scanner.at_boundary, cut


def test_relayed_sockets_send_at_once_both_sides_of_the_door() -> None:
    """TCP_NODELAY on the client's socket and on grpc's (no Nagle wait for a relayed reply).
    asyncio sets it only on sockets whose proto is IPPROTO_TCP: an accepted socket has its
    listener's, so this holds while the listener is made from getaddrinfo's answer."""

    async def scenario() -> None:
        async with running_server() as (server, port):
            bot = ScriptedBot(port, "alpha")
            await bot.open()
            first = await asyncio.wait_for(bot.call.read(), 5)
            assert first.WhichOneof("message") == "welcome"
            assert server.door is not None and server.door.links
            for link in server.door.links:
                assert link.transport is not None and link.backend is not None
                assert link.backend.transport is not None
                for transport in (link.transport, link.backend.transport):
                    sock = transport.get_extra_info("socket")
                    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0, transport
            await bot.channel.close()

    run(scenario())
