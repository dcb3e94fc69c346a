"""BotService and MatchService: authentication, framing and status codes, nothing else.

The Play stream is registered with a bytes deserializer so that a message that is not
valid protobuf ends the stream with INVALID_ARGUMENT (not a generic INTERNAL).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from gaigel.match import FaultReason, MatchTermination
from gaigel_api import PROTOCOL_VERSION
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc
from gaigel_server import SERVER_VERSION, codec, matches
from gaigel_server.auth import AuthError, BotRegistry, bearer_token, tokens_equal
from gaigel_server.broadcast import watch_response
from gaigel_server.clock import Clock
from gaigel_server.frontdoor import FrontDoor
from gaigel_server.guard import Backoff, ByteBudget, PendingStreams, RateLimitedLog, clip
from gaigel_server.lobby import Lobby, ServiceError
from gaigel_server.logging import get_logger
from gaigel_server.metrics import ServerMetrics
from gaigel_server.session import MAX_QUEUED_BYTES, Abort, Answer, BotSession, Outgoing, Stream
from gaigel_server.states import TableState
from gaigel_server.table import Table

_STATES = {s.proto: s for s in TableState}
MAX_PAGE = 1000
DEFAULT_PAGE = 50


def page_window(page_size: int, page_token: str) -> tuple[int, int]:
    """(offset, size) of a ListMatches page in the newest-first list: the page token is the
    offset. ValueError with the reason for a negative size or a token this server did not issue."""
    if page_size < 0:
        raise ValueError(f"page_size must not be negative, got {page_size}")
    if page_token and not (page_token.isascii() and page_token.isdigit()):
        raise ValueError("page_token is not one this server issued")
    return (int(page_token) if page_token else 0), min(page_size or DEFAULT_PAGE, MAX_PAGE)


BACKLOG_HIGH = 256
"""Messages queued for a stream above which the server stops reading that stream's requests.

A bot that sends without reading (an Action flood earns one ActionRejected each) would
otherwise make its queue grow without bound; pausing the reader lets HTTP/2 flow control
push back on the bot instead.
"""
BACKLOG_HIGH_BYTES = 256 * 1024
"""The same pause, counted in bytes: 256 rejections of 64 KiB ids were 32 MiB per stream."""
INBOUND_BYTES_PER_S = 64 * 1024
INBOUND_BURST_BYTES = 256 * 1024
"""What one session may send: 64 KiB/s after a burst of 256 KiB, a thousand times what a bot
answering every decision at once sends (see :class:`gaigel_server.guard.ByteBudget`)."""
MAX_VERSION = 64
"""Characters of a bot_version kept (in the session, its logs and records); longer ones are clipped."""
SESSION_STRIKES = 8
"""Session-limit refusals of one token in a row after which the connection they came on is ended."""
MAX_DECISION_ID = 64
"""Longest decision id accepted in an Action; the server issues 22 characters. Longer ones are
rejected without being echoed back (an echo doubled what a flood cost the server)."""


@dataclasses.dataclass(frozen=True)
class Refusal:
    """A Play stream the server ended before its session began: when, the status and its message."""

    at: float  # time.monotonic()
    code: grpc.StatusCode
    message: str


RECENT_REFUSALS = 16
"""Refusals kept by :class:`BotServicer` (``gaigel try`` and ``check-bot`` name the last one as the cause
of a bot that never joined); bounded, since a hostile client can cause any number."""


class BotServicer:
    """BotService.Play: Join or Resume, then Actions in and game messages out."""

    def __init__(
        self,
        lobby: Lobby,
        registry: BotRegistry,
        metrics: ServerMetrics,
        join_timeout: float,
        max_message_bytes: int,
        max_streams: int = 1024,
        max_pending_streams: int = 256,
        slow_reader_timeout: float = 30.0,
        max_queued_bytes: int = MAX_QUEUED_BYTES,
        max_pending_per_peer: int | None = None,
    ) -> None:
        self.lobby = lobby
        self.max_streams = max_streams
        self.open_streams = 0  # streams past Join or Resume
        self.pending = PendingStreams(max_pending_streams, max_pending_per_peer)
        self.door: FrontDoor | None = None
        self.refusal_log = RateLimitedLog(burst=20)
        self.session_log = RateLimitedLog(burst=100)
        """Session lines per bot and event: 100 per 10 s (a bot's session spans many matches, so
        only a token churning sessions comes near it, and it must not write the disk full)."""
        self.backoff = Backoff()
        self.slow_reader_timeout = slow_reader_timeout
        self.max_queued_bytes = max_queued_bytes
        self.streams: set[Stream] = set()  # attached streams, for the watchdog
        self._watchdog: asyncio.Task[None] | None = None
        self.registry = registry
        self.metrics = metrics
        self.join_timeout = join_timeout
        self.max_message_bytes = max_message_bytes
        self.log = get_logger()
        self.refusals: collections.deque[Refusal] = collections.deque(maxlen=RECENT_REFUSALS)

    def handler(self) -> grpc.GenericRpcHandler[Any, Any]:
        """The generic handler of gaigel.v1.BotService (raw bytes both ways: sessions serialize once)."""
        play = grpc.stream_stream_rpc_method_handler(
            self.Play,
            request_deserializer=None,
            response_serializer=None,
        )
        return grpc.method_handlers_generic_handler("gaigel.v1.BotService", {"Play": play})

    def peer(self, context: grpc.aio.ServicerContext[Any, Any]) -> str:
        """The client's address (behind the front door, the address it connected from)."""
        peer = context.peer() or ""
        return self.door.peer(peer) if self.door is not None else peer

    async def _reject(self, context: grpc.aio.ServicerContext[Any, Any], code: grpc.StatusCode, message: str) -> None:
        """Ends a stream before its session began. *message* holds only clipped client text.
        Logged at most 20 times per 10 s and status code (gaigel_play_refused_total counts all)."""
        self.metrics.sessions.labels("rejected").inc()
        self.metrics.play_refused.labels(code.name).inc()
        self.refusals.append(Refusal(time.monotonic(), code, message))
        self.refusal_log.info(
            self.log, "session_rejected", key=code.name, code=code.name, detail=message, peer=self.peer(context)
        )
        await context.abort(code, message)

    async def Play(self, request_iterator: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]) -> None:
        """One session stream: its first message within the Join timeout (in the budget of
        waiting streams), then counted against the server-wide stream limit."""
        it = request_iterator.__aiter__()
        raw = await self._first_message(it, context)
        if raw is None:
            return
        self.open_streams += 1
        try:
            await self._play(raw, it, context)
        finally:
            self.open_streams -= 1

    async def _first_message(
        self, it: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]
    ) -> bytes | None:
        """The first message, or None once the stream has been ended (timeout, pushed out, closed)."""
        loop = asyncio.get_running_loop()
        evicted: asyncio.Future[None] = loop.create_future()
        ticket = self.pending.admit(lambda: _settle(evicted), self._peer_key(context))
        first: asyncio.Task[bytes] = loop.create_task(_next(it))
        waiters: set[asyncio.Future[Any]] = {first, evicted}
        try:
            done, _ = await asyncio.wait(waiters, timeout=self.join_timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.pending.done(ticket)
            if not first.done():
                first.cancel()
            # Retrieved in every case: a read that failed as this call was cancelled (a reset
            # stream) is the client's doing, not a "Task exception was never retrieved" traceback.
            first.add_done_callback(_consume)
        if first in done:
            try:
                return first.result()
            except Exception:  # whatever a reset read raises is the client's doing, not ours
                return None  # the client half-closed, reset or cancelled before its first message
            except asyncio.CancelledError:
                return None
        if evicted in done:
            self.metrics.pending_evicted.inc()
            await self._reject(
                context,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"SERVER_BUSY: {self.pending.limit} streams in all (or {self.pending.per_peer} of one address) were "
                "waiting to send Join or Resume and this one had waited longest; send Join or Resume as the first "
                "message at once",
            )
        else:
            await self._reject(
                context,
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"no Join or Resume within the Join timeout of {self.join_timeout:g} s",
            )
        return None

    async def _play(self, raw: bytes, it: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]) -> None:
        try:
            first = bs.PlayRequest.FromString(raw)
        except DecodeError as e:
            await self._reject(
                context,
                grpc.StatusCode.INVALID_ARGUMENT,
                f"MALFORMED_MESSAGE: the first message is not a valid PlayRequest ({e})",
            )
            return
        kind = first.WhichOneof("message")
        stream = Stream(self.max_queued_bytes)
        try:
            if kind == "join":
                if self.open_streams > self.max_streams:  # this stream is counted already
                    raise ServiceError(
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                        f"SERVER_FULL: {self.max_streams} bot streams are open, the limit of this server "
                        f"(gaigel serve --max-streams {self.max_streams}); retry later",
                    )
                session = await self._join(first.join, context)
                session.attach(stream)
                resumed = False
            elif kind == "resume":
                r = first.resume
                if not r.match_id or not r.resume_token:
                    raise ServiceError(
                        grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED_MESSAGE: Resume needs match_id and resume_token"
                    )
                table, session = self.lobby.resume(r.match_id, r.seat, r.resume_token)
                if r.bot_version:
                    session.bot_version = clip(r.bot_version, MAX_VERSION)
                resumed = True
            elif kind is None:
                raise ServiceError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "MALFORMED_MESSAGE: PlayRequest has no message set (expected join)",
                )
            else:
                raise ServiceError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"MISSING_JOIN: the first message must be Join or Resume, got {kind}",
                )
        except ServiceError as e:
            await self._reject(context, e.code, e.message)
            return
        self.metrics.sessions.labels("accepted").inc()
        self.metrics.active_sessions.inc()
        log = self.log.bind(session_id=session.session_id, bot=session.bot_name)
        event = "session_resumed" if resumed else "session_joined"
        self.session_log.info(log, event, key=f"{event}:{session.bot_name}", version=session.bot_version)
        reader: asyncio.Task[None] | None = None
        stream.writer = asyncio.current_task()
        self.streams.add(stream)
        if self._watchdog is None or self._watchdog.done():
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())
        try:
            await context.write(
                bs.PlayResponse(
                    sequence=0,
                    welcome=bs.Welcome(
                        session_id=session.session_id,
                        bot_name=session.bot_name,
                        protocol_version=PROTOCOL_VERSION,
                        server_version=SERVER_VERSION,
                        resumed=resumed,
                        max_message_bytes=self.max_message_bytes,
                    ),
                ).SerializeToString()
            )
            if resumed:
                session.attach(stream, after=first.resume.last_sequence)
                table.on_resume(first.resume.seat, first.resume.last_sequence)
            else:
                self.lobby.make_idle(session)
            reader = asyncio.get_running_loop().create_task(self._read(it, session, stream))
            while True:
                item = await stream.next()
                if item is None:
                    break
                if isinstance(item, Abort):
                    self.session_log.info(
                        log,
                        "session_aborted",
                        key=f"aborted:{session.bot_name}",
                        code=item.code.name,
                        detail=item.message,
                    )
                    if item.message.startswith("SLOW_READER"):
                        self.metrics.slow_readers.inc()
                    await context.abort(item.code, item.message)
                await self._write(context, stream, item)
        finally:
            self.streams.discard(stream)
            if reader is not None:
                reader.cancel()
            self.metrics.active_sessions.dec()
            if session.stream is stream:
                session.detach(stream)
                self.lobby.stream_closed(session)
            self.session_log.info(log, "session_stream_closed", key=f"closed:{session.bot_name}")

    async def _write(self, context: grpc.aio.ServicerContext[Any, Any], stream: Stream, item: Outgoing) -> None:
        """Writes one message. The watchdog (:meth:`_watch`) interrupts a write the bot does not
        read within the slow-reader timeout, as does more than the byte budget waiting meanwhile:
        grpc holds a stalled stream's bytes, and a bot that never reads must not hold them, or its
        place, forever. (A watchdog, not a timeout per write: that cost every message a timer.)"""
        # The send is when the write began: a fast bot's answer can be read before this write's
        # completion resumes us, and its time would then come out as 0.
        item.began = stream.write_since = time.monotonic()
        try:
            await context.write(item.message)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if not stream.stalled or task is None:
                raise
            task.uncancel()  # our own interruption, not the call's cancellation
            self.metrics.slow_readers.inc()
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, stream.stalled)
        finally:
            stream.write_since = None
        stream.wrote(item)

    def close(self) -> None:
        """Stops the watchdog (the server is stopping)."""
        if self._watchdog is not None:
            self._watchdog.cancel()

    async def _watch(self) -> None:
        """Ends the streams whose write has waited longer than the slow-reader timeout."""
        period = min(1.0, self.slow_reader_timeout / 4)
        while True:
            await asyncio.sleep(period)
            limit = time.monotonic() - self.slow_reader_timeout
            for stream in list(self.streams):
                if stream.write_since is not None and stream.write_since < limit:
                    stream.stall(self._slow_reader_message())

    def _slow_reader_message(self) -> str:
        return (
            f"SLOW_READER: this bot read nothing for {self.slow_reader_timeout:g} s while the server had "
            "messages for it; the stream is closed (Resume is possible during a match)"
        )

    async def _join(self, join: bs.Join, context: grpc.aio.ServicerContext[Any, Any]) -> BotSession:
        if not join.bot_name or not join.bot_token:
            raise ServiceError(grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED_MESSAGE: Join needs bot_name and bot_token")
        if join.protocol_version != PROTOCOL_VERSION:
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"unsupported protocol_version {join.protocol_version}: this server speaks {PROTOCOL_VERSION} (gaigel.v1)",
            )
        try:
            self.registry.verify(join.bot_name, join.bot_token)
        except AuthError as e:
            raise ServiceError(grpc.StatusCode.UNAUTHENTICATED, str(e)) from None
        # A valid token that keeps hitting its session limit waits a doubling interval, refused at
        # once; past SESSION_STRIKES its connection is ended. Keyed by the verified name only, so
        # nobody without the token can back a bot off.
        name = join.bot_name
        wait = self.backoff.waiting(name)
        if wait > 0:
            self._strike(self.backoff.strike(name), context)
            raise ServiceError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"SESSION_LIMIT: bot {name!r} keeps opening sessions past its limit of "
                f"{self.lobby.max_sessions_per_bot}; new ones are refused for {wait:.1f} s more",
            )
        session = BotSession(
            name,
            clip(join.bot_version, MAX_VERSION),
            compact=join.compact,
            peer=context.peer() or "",
            fold_hand_end=join.compact_hand_end,
        )
        try:
            self.lobby.add_session(session)
        except ServiceError:
            self._strike(self.backoff.refused(name)[1], context)
            raise
        if self.backoff.strike_count(name) < SESSION_STRIKES:
            self.backoff.forgive(name)  # a token that was cut off is forgiven only by quiet time
        return session

    def _strike(self, strikes: int, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        """Past SESSION_STRIKES refusals in a row, the connection they come on is ended (GOAWAY)."""
        if strikes >= SESSION_STRIKES and self.door is not None:
            self.door.end(context.peer() or "")

    def _peer_key(self, context: grpc.aio.ServicerContext[Any, Any]) -> str:
        peer = context.peer() or ""
        if self.door is not None:
            return self.door.peer_key(peer)
        host, _, _ = peer.rpartition(":")
        return host

    async def _read(self, it: AsyncIterator[bytes], session: BotSession, stream: Stream) -> None:
        def fail(code: grpc.StatusCode, reason: FaultReason, message: str) -> None:
            seat = session.seat
            if seat is not None and seat.running:
                seat.stream_fault(reason, message)
            stream.end(Abort(code, f"{reason}: {message}"))

        budget = ByteBudget(INBOUND_BYTES_PER_S, INBOUND_BURST_BYTES)
        with contextlib.suppress(grpc.RpcError, asyncio.CancelledError):
            async for raw in it:
                if stream.closed:
                    return
                if stream.backlogged(BACKLOG_HIGH, BACKLOG_HIGH_BYTES):
                    await stream.writable(BACKLOG_HIGH, BACKLOG_HIGH_BYTES)
                pause = budget.delay(len(raw))
                if pause:
                    await asyncio.sleep(pause)
                try:
                    req = bs.PlayRequest.FromString(raw)
                except DecodeError as e:
                    fail(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        FaultReason.MALFORMED_MESSAGE,
                        f"a message is not a valid PlayRequest ({e})",
                    )
                    return
                kind = req.WhichOneof("message")
                if kind == "action":
                    action = req.action
                    did = action.decision_id
                    if not did:
                        fail(
                            grpc.StatusCode.INVALID_ARGUMENT,
                            FaultReason.MALFORMED_MESSAGE,
                            "Action.decision_id is required",
                        )
                        return
                    if len(did) > MAX_DECISION_ID:
                        _reject_long_id(session, action)
                        continue
                    answer = Answer(did, action.action_id, time.monotonic(), action.time_capped)
                    seat = session.seat
                    if seat is not None and seat.running:
                        seat.act(answer)
                    else:
                        session.send(
                            action_rejected=codec.rejection(
                                answer.decision_id,
                                answer.action_id,
                                bs.REJECT_REASON_NOT_YOUR_TURN,
                                "no match is running for this session",
                            )
                        )
                elif kind == "leave":
                    self.lobby.leave(session)
                elif kind in ("join", "resume"):
                    fail(
                        grpc.StatusCode.FAILED_PRECONDITION,
                        FaultReason.MISSING_JOIN,
                        f"{kind} is valid only as the first message of a stream",
                    )
                    return
                else:
                    fail(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        FaultReason.MALFORMED_MESSAGE,
                        "PlayRequest has no message set",
                    )
                    return
            if not stream.closed and not session.leaving:
                # The bot closed its sending side without Leave: it can answer nothing more, so it
                # must not be seated (it would forfeit); in a match the disconnect policy applies.
                stream.closed = True
                stream.end(
                    Abort(
                        grpc.StatusCode.FAILED_PRECONDITION,
                        "HALF_CLOSED: the bot closed its side of the stream without Leave; the session is "
                        "ended (send Leave to end a session, or Resume within the grace period during a match)",
                    )
                )


async def _next(it: AsyncIterator[bytes]) -> bytes:
    return await it.__anext__()


def _consume(task: asyncio.Task[bytes]) -> None:
    if not task.cancelled():
        task.exception()


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _reject_long_id(session: BotSession, action: bs.Action) -> None:
    """ActionRejected for a decision id longer than any the server issues, without the id."""
    session.send(
        action_rejected=codec.rejection(
            "",
            action.action_id,
            bs.REJECT_REASON_UNKNOWN_DECISION,
            f"decision_id of {len(action.decision_id)} characters was never issued "
            f"(this server issues ids of at most {MAX_DECISION_ID}); not echoed",
        )
    )


def _serialize(message: Any) -> bytes:
    return message.SerializeToString()  # type: ignore[no-any-return]


async def decode_request(raw: bytes, request_type: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
    """*raw* parsed as *request_type*; INVALID_ARGUMENT MALFORMED_MESSAGE when it is not one."""
    try:
        return request_type.FromString(raw)
    except DecodeError as e:
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"MALFORMED_MESSAGE: the request is not a valid {request_type.DESCRIPTOR.full_name} ({e})",
        )


def _decoding_unary(impl: Any, request_type: Any) -> Any:
    async def call(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        return await impl(await decode_request(raw, request_type, context), context)

    return call


def _decoding_stream(impl: Any, request_type: Any) -> Any:
    async def call(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> AsyncIterator[Any]:
        async for item in impl(await decode_request(raw, request_type, context), context):
            yield item

    return call


class MatchServicer(ms_grpc.MatchServiceServicer):
    """MatchService: admin-token checks and translation of requests to the lobby."""

    def __init__(
        self,
        lobby: Lobby,
        registry: BotRegistry,
        metrics: ServerMetrics,
        admin_token: str,
        default_clock: Clock,
        watch_without_token: bool = False,
    ) -> None:
        self.lobby = lobby
        self.registry = registry
        self.metrics = metrics
        self.admin_token = admin_token
        self.default_clock = default_clock
        self.watch_without_token = watch_without_token
        self.log = get_logger()
        self.refusal_log = RateLimitedLog()
        self.door: FrontDoor | None = None

    def handler(self) -> grpc.GenericRpcHandler[Any, Any]:
        """The handler of gaigel.v1.MatchService, decoding requests itself (raw bytes in).

        grpc's own deserializer turns a body that is not the request message into UNKNOWN;
        here it is INVALID_ARGUMENT with a message, like a malformed Play message.
        """
        service = ms.DESCRIPTOR.services_by_name["MatchService"]
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
        for method in service.methods:
            request_type = getattr(ms, method.input_type.name)
            impl = getattr(self, method.name)
            if method.server_streaming:
                handlers[method.name] = grpc.unary_stream_rpc_method_handler(
                    _decoding_stream(impl, request_type), response_serializer=_serialize
                )
            else:
                handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                    _decoding_unary(impl, request_type), response_serializer=_serialize
                )
        return grpc.method_handlers_generic_handler(service.full_name, handlers)

    async def _auth(self, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        token = bearer_token(context.invocation_metadata())
        if not token or not tokens_equal(token, self.admin_token):
            self.metrics.admin_refused.inc()
            # One line per 10 s at most (with the number left out); gaigel_admin_refused_total counts all.
            peer = context.peer() or ""
            peer = self.door.peer(peer) if self.door is not None else peer
            self.refusal_log.warning(self.log, "admin_call_refused", peer=peer, token_given=bool(token))
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "MatchService needs the admin token as metadata 'authorization: Bearer <admin token>'"
                + (" (the token given is wrong)" if token else ""),
            )

    async def _table(self, match_id: str, context: grpc.aio.ServicerContext[Any, Any]) -> Table:
        table = self.lobby.tables.get(match_id)
        if table is None:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no match {clip(match_id)!r} on this server (it keeps the last {self.lobby.keep_ended} ended matches; "
                "records of older ones are in its --records directory)",
            )
        assert table is not None
        return table

    async def CreateMatch(
        self, request: ms.CreateMatchRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ms.CreateMatchResponse:
        await self._auth(context)
        table = self.lobby.requested(request.request_id)
        try:
            if table is None:  # a retried request gets its match, whatever changed since
                table = self.lobby.open(matches.validate(request, self.registry, self.default_clock))
        except matches.InvalidMatch as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            raise
        except ServiceError as e:
            await context.abort(e.code, e.message)
            raise
        return ms.CreateMatchResponse(match=table.to_proto(admin=True))

    async def GetMatch(
        self, request: ms.GetMatchRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ms.GetMatchResponse:
        await self._auth(context)
        return ms.GetMatchResponse(match=(await self._table(request.match_id, context)).to_proto(admin=True))

    async def ListMatches(
        self, request: ms.ListMatchesRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ms.ListMatchesResponse:
        await self._auth(context)
        try:
            offset, size = page_window(request.page_size, request.page_token)
        except ValueError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            raise
        wanted = _STATES.get(request.state)
        tables = list(reversed(self.lobby.tables.values()))
        tables = [
            t
            for t in tables
            if (wanted is None or t.state == wanted) and (not request.bot_name or request.bot_name in t.spec.bots)
        ]
        page = tables[offset : offset + size]
        token = str(offset + size) if offset + size < len(tables) else ""
        return ms.ListMatchesResponse(matches=[t.to_proto(admin=True) for t in page], next_page_token=token)

    async def CancelMatch(
        self, request: ms.CancelMatchRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ms.CancelMatchResponse:
        await self._auth(context)
        table = await self._table(request.match_id, context)
        if table.state is TableState.ENDED:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, f"match {table.match_id} has already ended ({table.termination})"
            )
        self.lobby.cancel(
            table, MatchTermination.CANCELLED, clip(request.reason, 200) or "cancelled by an administrator"
        )
        return ms.CancelMatchResponse(match=table.to_proto(admin=True))

    async def GetMatchRecord(
        self, request: ms.GetMatchRecordRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ms.GetMatchRecordResponse:
        await self._auth(context)
        table = await self._table(request.match_id, context)
        if table.state is not TableState.ENDED or table.record_json is None:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"match {table.match_id} is {table.state}: its record (with the seed) is available once it has ended",
            )
        return ms.GetMatchRecordResponse(match_id=table.match_id, record_json=table.record_json)

    async def RegisterBot(
        self, request: ms.RegisterBotRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ms.RegisterBotResponse:
        await self._auth(context)
        try:
            token = self.registry.register(request.bot_name, rotate=request.rotate_token)
        except ValueError as e:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            raise
        except KeyError:
            await context.abort(
                grpc.StatusCode.ALREADY_EXISTS,
                f"bot {clip(request.bot_name)!r} is already registered (set rotate_token to issue a new token)",
            )
            raise
        self.metrics.bot(request.bot_name)
        self.log.info("bot_registered", bot=request.bot_name, rotated=request.rotate_token)
        return ms.RegisterBotResponse(bot_name=request.bot_name, bot_token=token)

    async def UnregisterBot(
        self, request: ms.UnregisterBotRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> ms.UnregisterBotResponse:
        await self._auth(context)
        name = request.bot_name
        if name not in self.registry:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"bot {clip(name)!r} is not registered")
        try:
            ended = self.lobby.retire(name)
        except ServiceError as e:
            await context.abort(e.code, e.message)
            raise
        self.registry.unregister(name)
        self.metrics.forget_bot(name)
        self.log.info("bot_unregistered", bot=name, sessions_ended=ended)
        return ms.UnregisterBotResponse(bot_name=name, sessions_ended=ended)

    async def WatchMatch(
        self, request: ms.WatchMatchRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[ms.WatchMatchResponse]:
        if not self.watch_without_token:
            await self._auth(context)
        table = await self._table(request.match_id, context)
        q = table.watch(request.from_start)
        seq = 0
        try:
            while True:
                item = await q.get()
                if item is None:
                    return
                seq += 1
                yield watch_response(seq, item)
        finally:
            table.unwatch(q)


__all__ = ["BotServicer", "MatchServicer", "decode_request", "page_window"]
