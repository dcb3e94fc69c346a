"""Issue 14: one client must not exhaust the server (bounded memory per session, a budget for
streams before Join, slow readers and half-closed streams ended with a reason), refused admin
calls logged at a bounded rate, and the health check speaking TLS."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from srvkit import BOTS, Admin, ScriptedBot, run, running_server
from test_security import make_certificate

from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import bot_service_pb2_grpc as bs_grpc
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc
from gaigel_server import servicer
from gaigel_server.guard import PendingStreams, RateLimitedLog

REPO = Path(__file__).resolve().parents[2]


def _silent(port: int) -> tuple[grpc.aio.Channel, grpc.aio.StreamStreamCall[bs.PlayRequest, bs.PlayResponse]]:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    return channel, bs_grpc.BotServiceStub(channel).Play()


async def _welcomed(bot: ScriptedBot) -> bool:
    await bot.open()
    return (await asyncio.wait_for(bot.call.read(), 5.0)).WhichOneof("message") == "welcome"


def test_streams_before_join_cannot_keep_a_join_out() -> None:
    """With the budget of waiting streams full, a Join still gets in: the stream that waited
    longest is ended with SERVER_BUSY (and the limit in the message)."""

    async def scenario() -> None:
        async with running_server(max_pending_streams=3, join_timeout=30.0) as (server, port):
            silent = []
            for _ in range(3):  # one after the other: the first is the one waiting longest
                silent.append(_silent(port))
                await silent[-1][1].wait_for_connection()
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.3)
            assert server.play is not None and len(server.play.pending) == 3
            bot = ScriptedBot(port, "alpha")
            assert await _welcomed(bot)
            oldest = silent[0][1]
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                await asyncio.wait_for(oldest.read(), 5.0)
            assert ended.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "SERVER_BUSY" in (ended.value.details() or "") and "3 streams" in (ended.value.details() or "")
            assert server.metrics.pending_evicted._value.get() == 1
            for channel, call in silent:
                call.cancel()
                await channel.close()
            await bot.close()

    run(scenario())


def test_pending_streams_evicts_the_oldest_first() -> None:
    """The budget itself: admitting past the limit ends the oldest, and done() forgets a ticket."""
    ended: list[int] = []
    pending = PendingStreams(2)
    a = pending.admit(lambda: ended.append(1))
    pending.admit(lambda: ended.append(2))
    pending.done(a)
    pending.admit(lambda: ended.append(3))
    assert ended == [] and len(pending) == 2
    pending.admit(lambda: ended.append(4))
    assert ended == [2] and pending.evicted == 1


def test_a_long_decision_id_is_rejected_without_being_echoed() -> None:
    """A 60 KiB decision id gets an ActionRejected of a few dozen bytes, not its id back."""

    async def scenario() -> None:
        async with running_server() as (_server, port):
            bot = ScriptedBot(port, "alpha")
            assert await _welcomed(bot)
            await bot.act("x" * 60_000, 3)
            msg = await asyncio.wait_for(bot.call.read(), 5.0)
            rejected = msg.action_rejected
            assert msg.WhichOneof("message") == "action_rejected" and rejected.decision_id == ""
            assert "60000 characters" in rejected.message and msg.ByteSize() < 300
            await bot.act("y" * servicer.MAX_DECISION_ID, 3)  # the longest allowed is still echoed
            echoed = (await asyncio.wait_for(bot.call.read(), 5.0)).action_rejected
            assert echoed.decision_id == "y" * servicer.MAX_DECISION_ID
            await bot.close()

    run(scenario())


def test_a_bot_that_never_reads_is_ended_with_slow_reader() -> None:
    """Actions without reading: once grpc cannot write any more for the slow-reader timeout, the
    stream ends with RESOURCE_EXHAUSTED SLOW_READER, and the session is gone."""

    async def scenario() -> None:
        async with running_server(slow_reader_timeout=1.0) as (server, port):
            bot = await _small_window_bot(port)
            action = bs.PlayRequest(action=bs.Action(decision_id="z" * servicer.MAX_DECISION_ID, action_id=0))
            await _flood_until_stalled(bot, action)
            await bot.play()
            assert bot.status == grpc.StatusCode.RESOURCE_EXHAUSTED, (bot.status, bot.details)
            assert "SLOW_READER" in bot.details
            assert server.metrics.slow_readers._value.get() == 1
            await asyncio.sleep(0.2)
            assert not server.lobby.sessions.get("alpha")
            await bot.close()

    run(scenario(), timeout=120)


def test_a_bot_that_closes_its_window_mid_match_is_ended_with_slow_reader() -> None:
    """A seated bot that shrinks its receive window to nothing (SETTINGS_INITIAL_WINDOW_SIZE 0,
    RFC 9113 6.9.2: the stream's window goes negative) just before answering leaves the write of
    the request its answer brings stuck: at the slow-reader timeout the stream ends, its handler
    task with it, and the session waits for a Resume without its stream."""

    async def scenario() -> None:
        async with running_server(slow_reader_timeout=1.0) as (server, port):
            h2 = await _RawBot.open(port, "alpha")
            admin = Admin(port)
            await asyncio.sleep(0.2)  # the Join is read and the session idle
            await admin.create(2, ["alpha", "house:first"], hands=1)
            request = await h2.until_decision()
            await asyncio.sleep(0.3)  # the writer is idle again: the reader will write the next request
            h2.send(_frame(SETTINGS, 0, 0, (4).to_bytes(2, "big") + (0).to_bytes(4, "big")))
            h2.send_message(
                bs.PlayRequest(action=bs.Action(decision_id=request.decision_id, action_id=request.legal_actions[0].id))
            )
            ended = await h2.until_stream_end(timeout=20.0)
            assert ended, "the stream did not end"
            for _ in range(100):
                if server.metrics.active_sessions._value.get() == 0:
                    break
                await asyncio.sleep(0.05)
            assert server.metrics.slow_readers._value.get() == 1
            assert server.metrics.active_sessions._value.get() == 0, "the stream's handler is still running"
            # In a match the session stays for a Resume (the grace period), without its stream.
            assert [s.connected for s in server.lobby.sessions.get("alpha", ())] == [False]
            h2.close()
            await admin.close()

    run(scenario(), timeout=120)


DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0, 1, 3, 4, 6, 7


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream.to_bytes(4, "big") + payload


def _literal(name: str, value: str) -> bytes:
    """An HPACK literal field without indexing, new name, no Huffman (names and values < 127 bytes)."""
    return b"\x00" + bytes((len(name),)) + name.encode() + bytes((len(value),)) + value.encode()


class _RawBot:
    """A bot speaking HTTP/2 by hand on one Play stream, so the test decides the flow-control
    windows (a grpc client opens them as it pleases)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.buffer = b""

    @classmethod
    async def open(cls, port: int, name: str) -> _RawBot:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        bot = cls(reader, writer)
        headers = b"".join(
            _literal(k, v)
            for k, v in [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", "/gaigel.v1.BotService/Play"),
                (":authority", f"127.0.0.1:{port}"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
            ]
        )
        bot.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + _frame(SETTINGS, 0, 0, b"") + _frame(HEADERS, 4, 1, headers))
        token = BOTS[name]
        bot.send_message(
            bs.PlayRequest(join=bs.Join(bot_token=token, bot_name=name, bot_version="t1", protocol_version=1))
        )
        return bot

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    def send_message(self, message: bs.PlayRequest) -> None:
        body = message.SerializeToString()
        self.send(_frame(DATA, 0, 1, b"\x00" + len(body).to_bytes(4, "big") + body))

    async def frames(self, timeout: float) -> AsyncIterator[tuple[int, int, int, bytes]]:
        """The server's frames (SETTINGS and PING acknowledged) until the connection closes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            head = await asyncio.wait_for(self.reader.readexactly(9), max(0.01, deadline - loop.time()))
            size, kind, flags = int.from_bytes(head[:3], "big"), head[3], head[4]
            stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            payload = await self.reader.readexactly(size)
            if kind == SETTINGS and not flags & 1:
                self.send(_frame(SETTINGS, 1, 0, b""))
            elif kind == PING and not flags & 1:
                self.send(_frame(PING, 1, 0, payload))
            yield kind, flags, stream, payload

    async def until_decision(self) -> bs.DecisionRequest:
        async for kind, _flags, stream, payload in self.frames(20.0):
            if kind != DATA or stream != 1:
                continue
            self.buffer += payload
            while len(self.buffer) >= 5 and len(self.buffer) >= 5 + int.from_bytes(self.buffer[1:5], "big"):
                size = int.from_bytes(self.buffer[1:5], "big")
                message, self.buffer = bs.PlayResponse.FromString(self.buffer[5 : 5 + size]), self.buffer[5 + size :]
                if message.WhichOneof("message") == "decision_request":
                    return message.decision_request
        raise AssertionError("the connection closed before a DecisionRequest")

    async def until_stream_end(self, timeout: float) -> bool:
        """Whether stream 1 ended (trailers, RST_STREAM or GOAWAY) before *timeout*."""
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, asyncio.TimeoutError):
            async for kind, flags, stream, _payload in self.frames(timeout):
                if (
                    (kind == HEADERS and flags & 1 and stream == 1)
                    or (kind == RST_STREAM and stream == 1)
                    or kind == GOAWAY
                ):
                    return True
            return True  # the connection closed
        return False

    def close(self) -> None:
        self.writer.close()


def test_a_stream_over_its_byte_budget_is_ended_at_once() -> None:
    """With grpc's window full, what waits for a bot that does not read stops at the byte budget:
    the stream ends then (long before the slow-reader timeout) with SLOW_READER."""

    async def scenario() -> None:
        async with running_server(max_queued_bytes=20_000, slow_reader_timeout=60.0) as (_server, port):
            bot = await _small_window_bot(port)
            action = bs.PlayRequest(action=bs.Action(decision_id="z" * servicer.MAX_DECISION_ID, action_id=0))
            started = asyncio.get_running_loop().time()
            await _flood_until_stalled(bot, action)
            await bot.play()
            assert bot.status == grpc.StatusCode.RESOURCE_EXHAUSTED, (bot.status, bot.details)
            assert "more than 20000 bytes" in bot.details
            assert asyncio.get_running_loop().time() - started < 30
            await bot.close()

    run(scenario(), timeout=120)


async def _flood_until_stalled(bot: ScriptedBot, action: bs.PlayRequest) -> None:
    """Writes *action* until a write stalls for 2 s (the server stopped reading) or fails; the
    stalled write is left pending, as cancelling it would cancel the call."""
    for _ in range(20_000):
        write = asyncio.ensure_future(bot.call.write(action))
        done, _ = await asyncio.wait({write}, timeout=2.0)
        if not done:
            write.add_done_callback(lambda w: w.cancelled() or w.exception())
            return
        if write.exception() is not None:
            return


async def _small_window_bot(port: int) -> ScriptedBot:
    """A bot whose receive window stays small (no BDP growth): grpc's writes to it stall soon."""
    bot = ScriptedBot(port, "alpha")
    await bot.channel.close()
    bot.channel = grpc.aio.insecure_channel(
        f"127.0.0.1:{port}", options=[("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 16 * 1024)]
    )
    await bot.open()
    return bot


def test_a_half_closed_stream_is_ended_and_never_seated() -> None:
    """A bot that closes its side without Leave gets FAILED_PRECONDITION HALF_CLOSED and is not
    seated: a match for it stays waiting until a real session of that bot joins."""

    async def scenario() -> None:
        async with running_server() as (server, port):
            admin = Admin(port)
            half = ScriptedBot(port, "alpha")
            assert await _welcomed(half)
            await half.call.done_writing()
            await half.play()
            assert half.status == grpc.StatusCode.FAILED_PRECONDITION and "HALF_CLOSED" in half.details
            match = await admin.create(2, ["alpha", "house:random"], hands=1, seed=3)
            await asyncio.sleep(0.3)
            assert (await admin.get(match.match_id)).state == ms.MATCH_STATE_WAITING
            assert not server.lobby.sessions.get("alpha")
            good = ScriptedBot(port, "alpha")
            await asyncio.wait_for(good.run(), 30)
            assert (await admin.wait_ended(match.match_id)).state == ms.MATCH_STATE_ENDED
            for c in (half, good):
                await c.close()
            await admin.close()

    run(scenario())


def test_refused_admin_calls_are_counted_but_logged_once_per_interval() -> None:
    """200 calls with a wrong token: the metric counts 200, the log has one line."""

    class Log:
        def __init__(self) -> None:
            self.lines: list[dict[str, object]] = []

        def warning(self, event: str, **fields: object) -> None:
            self.lines.append({"event": event, **fields})

    async def scenario() -> None:
        async with running_server() as (server, port):
            log = Log()
            assert server.admin is not None
            server.admin.refusal_log, server.admin.log = RateLimitedLog(interval=60.0), log
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
                stub = ms_grpc.MatchServiceStub(ch)
                for _ in range(200):
                    with contextlib.suppress(grpc.aio.AioRpcError):
                        await stub.ListMatches(ms.ListMatchesRequest(), metadata=(("authorization", "Bearer no"),))
            assert server.metrics.admin_refused._value.get() == 200
            assert len(log.lines) == 1 and log.lines[0]["event"] == "admin_call_refused"

    run(scenario())


def test_rate_limited_log_reports_what_it_left_out() -> None:
    now = [0.0]
    lines: list[dict[str, object]] = []

    class Log:
        def warning(self, event: str, **fields: object) -> None:
            lines.append(fields)

    limited = RateLimitedLog(interval=10.0, clock=lambda: now[0])
    for t in (0.0, 1.0, 2.0, 11.0):
        now[0] = t
        limited.warning(Log(), "refused")
    assert [line["suppressed_since_last"] for line in lines] == [0, 2]


def test_healthcheck_speaks_tls_to_a_tls_server(tmp_path: Path) -> None:
    """docker/healthcheck.py: SERVING from a TLS server when told its certificate; a plaintext
    check of the same server fails (the bug: it was always plaintext)."""
    cert, key = make_certificate(tmp_path)

    async def scenario() -> None:
        async with running_server(tls_cert=str(cert), tls_key=str(key)) as (_s, port):
            base = {k: v for k, v in os.environ.items() if not k.startswith("GAIGEL_HEALTH")}
            base["GAIGEL_HEALTH_ADDRESS"] = f"0.0.0.0:{port}"
            check = [sys.executable, str(REPO / "docker" / "healthcheck.py")]
            tls = await asyncio.to_thread(
                subprocess.run,
                check,
                env={**base, "GAIGEL_HEALTH_TLS_CERT": str(cert)},
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert tls.returncode == 0 and "SERVING" in tls.stdout, tls.stderr
            plain = await asyncio.to_thread(subprocess.run, check, env=base, capture_output=True, text=True, timeout=30)
            assert plain.returncode == 1 and "unhealthy" in plain.stderr

    run(scenario())


def test_session_lines_of_one_bot_are_rate_limited() -> None:
    """A valid token opening and closing sessions as fast as it can (issue 22): every session is
    counted, but its session lines stop at 100 per event and 10 s."""

    class Log:
        def __init__(self) -> None:
            self.lines: list[dict[str, object]] = []

        def bind(self, **fields: object) -> Log:
            return self

        def info(self, event: str, **fields: object) -> None:
            self.lines.append({"event": event, **fields})

        warning = info

    async def scenario() -> None:
        async with running_server() as (server, port):
            assert server.play is not None
            log = Log()
            server.play.log = log  # type: ignore[assignment]
            for _ in range(150):
                bot = ScriptedBot(port, "alpha")
                await bot.open()
                first = await asyncio.wait_for(bot.call.read(), 5)
                assert first.WhichOneof("message") == "welcome"
                await bot.close()
            await asyncio.sleep(0.3)
            assert server.metrics.sessions.labels("accepted")._value.get() == 150
            events = [line["event"] for line in log.lines]
            assert events.count("session_joined") == 100, events.count("session_joined")
            assert 90 <= events.count("session_stream_closed") <= 100

    run(scenario(), timeout=90)
