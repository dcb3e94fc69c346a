"""A bot session: its stream, sequence numbers and the resume buffer of the current match.

A session outlives its stream: when the stream breaks during a match the session keeps
numbering and buffering messages, and a Resume attaches a new stream that first gets
every buffered message above the bot's last sequence number.

A session that joined with ``Join.compact`` holds its HandStart and Events back and folds
them into its next DecisionRequest (one message per decision); any other message first
flushes the held ones as messages of their own, so the order the bot sees is unchanged.
Only what is numbered is buffered: on Resume the bot gets the numbered messages exactly as
they were sent (folded DecisionRequests with what they carried), and what is still held
rides in the next DecisionRequest, as it would have without the break.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import secrets
import time
from typing import Protocol

import grpc
from google.protobuf.message import Message

from gaigel.match import FaultReason
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_server import wire


@dataclasses.dataclass
class Abort:
    """Ends the attached stream with a status (put into a stream's queue)."""

    code: grpc.StatusCode
    message: str


@dataclasses.dataclass(slots=True)
class Outgoing:
    """A serialized PlayResponse queued for a stream; its writer notes when the write *began*
    (``time.monotonic()``): a decision's clock starts then. A field, not a future: the table
    reads it when it needs it, so a written request does not wake the table."""

    message: bytes
    began: float | None = None


MAX_QUEUED_BYTES = 4 * 1024 * 1024
"""Bytes queued for one stream beyond which it is ended with SLOW_READER.

The reader pauses long before (see ``BACKLOG_HIGH_BYTES`` in the servicer), so only what the
table sends on its own (a bot in a match that stops reading) gets here; a whole match's
messages for one seat are far below it.
"""


Item = Outgoing | Abort | None
"""What a stream's writer takes: a message, or the stream's end (with an Abort's status, or OK)."""


class Stream:
    """One attached gRPC stream: the queue its writer drains, and its size in bytes.

    The queue is a deque and one waiting writer, not an asyncio.Queue: that one's bookkeeping
    (a getter list, an Event cleared on every put, the loop looked up per call) was 4 % of a busy
    server's loop (py-spy, 64 compact streams), and a stream has one writer and no joiner."""

    def __init__(self, max_queued_bytes: int = MAX_QUEUED_BYTES) -> None:
        self.items: collections.deque[Item] = collections.deque()  # the writer alone takes from it
        self._waiter: asyncio.Future[None] | None = None  # the writer, waiting for an item
        self.closed = False
        self.queued_bytes = 0
        self.max_queued_bytes = max_queued_bytes
        self.stalled = ""  # why the stream is being ended for not reading (SLOW_READER ...)
        self.write_since: float | None = None  # when the write in progress started
        self.writer: asyncio.Task[None] | None = None  # the task that writes (and may be stuck)
        self._drained = asyncio.Event()

    def put(self, item: Outgoing) -> None:
        """Queues *item*; past :attr:`max_queued_bytes` the stream is ended instead (the bot is
        not reading and the server will not hold its messages without bound)."""
        if self.closed:
            return
        if self.queued_bytes + len(item.message) > self.max_queued_bytes:
            self.stall(
                f"SLOW_READER: more than {self.max_queued_bytes} bytes wait to be read by this bot; "
                "the stream is closed (read your replies; Resume is possible during a match)"
            )
            return
        self.queued_bytes += len(item.message)
        self._push(item)

    def end(self, abort: Abort | None = None) -> None:
        """Queues the stream's end, with *abort*'s status or OK: the writer ends the stream when it
        gets there (what was queued before is written first)."""
        self._push(abort)

    def _push(self, item: Item) -> None:
        self.items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def next(self) -> Item:
        """The next item for the writer, once there is one."""
        while not self.items:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                if self._waiter is waiter:  # cancelled while waiting
                    self._waiter = None
        return self.items.popleft()

    def stall(self, reason: str) -> None:
        """Ends the stream for not reading: a writer stuck in a write is interrupted (grpc would
        hold it until the bot reads), one waiting for the next message gets an Abort."""
        if self.stalled:
            return
        self.stalled, self.closed = reason, True
        self.wake()
        if self.write_since is not None and self.writer is not None:
            self.writer.cancel()
        else:
            self.end(Abort(grpc.StatusCode.RESOURCE_EXHAUSTED, reason))

    def backlogged(self, high: int, high_bytes: int) -> bool:
        """Whether *high* messages or *high_bytes* bytes (or more) wait to be written."""
        return len(self.items) >= high or self.queued_bytes >= high_bytes

    async def writable(self, high: int, high_bytes: int) -> None:
        """Returns once fewer than *high* messages and *high_bytes* bytes wait to be written
        (backpressure on the reader)."""
        while self.backlogged(high, high_bytes) and not self.closed:
            self._drained.clear()
            await self._drained.wait()

    def wrote(self, item: Outgoing) -> None:
        """Called by the writer after each message: wakes a reader paused by :meth:`writable`."""
        self.queued_bytes -= len(item.message)
        if not self._drained.is_set():
            self._drained.set()

    def wake(self) -> None:
        """Wakes a paused reader (the stream is ending)."""
        self._drained.set()


# PlayResponse written by hand around an already serialized message: building a PlayResponse
# copied the whole message (a DecisionRequest with its observation) only to serialize it once.
# The bytes are protobuf's own: sequence (field 1) first, then the one message field.
_RESPONSE_TAGS = {
    f.name: wire.tag(bs.PlayResponse, f.name) for f in bs.PlayResponse.DESCRIPTOR.oneofs_by_name["message"].fields
}
_SEQUENCE_TAG = wire.tag(bs.PlayResponse, "sequence")


def envelope(sequence: int, kind: str, payload: bytes) -> bytes:
    """The serialized ``PlayResponse(sequence=sequence, <kind>=<message serialized as payload>)``."""
    head = _SEQUENCE_TAG + wire.varint(sequence) if sequence else b""  # proto3 leaves out a zero
    return head + wire.field(_RESPONSE_TAGS[kind], payload)


@dataclasses.dataclass(slots=True)
class Answer:
    """An Action received from a bot, stamped when it was read."""

    decision_id: str
    action_id: int
    received: float
    time_capped: bool = False  # the bot's safety time cap cut the decision short (recorded as TIME_CAPPED)


class BoundSeat(Protocol):
    """The seat a session plays, as its stream's reader and the lobby reach it (a
    :class:`gaigel_server.seat.Seat`, which alone sets and clears ``BotSession.seat``)."""

    @property
    def index(self) -> int: ...

    @property
    def running(self) -> bool: ...

    def act(self, answer: Answer) -> None: ...

    def stream_fault(self, reason: FaultReason, message: str) -> None: ...

    def stream_broke(self, session: BotSession) -> None: ...


class BotSession:
    """One bot session: plays the matches it is assigned, one at a time."""

    def __init__(
        self, bot_name: str, bot_version: str, compact: bool = False, peer: str = "", fold_hand_end: bool = False
    ) -> None:
        self.session_id = secrets.token_hex(8)
        self.peer = peer  # grpc's peer of the Join's stream (--processes: which connection to drain)
        self.bot_name = bot_name
        self.bot_version = bot_version
        self.sequence = 0
        self.buffer: list[tuple[int, bytes]] = []  # (sequence, serialized PlayResponse) of the current match
        self.stream: Stream | None = None
        self.seat: BoundSeat | None = None  # set and cleared by the Seat it plays, see gaigel_server.seat
        self.resume_token = ""
        self.leaving = False
        self.closed = False
        self.disconnected_at: float | None = None
        self.issued: set[str] = set()  # decision ids of the current (or last) match, kept by its SeatLedger
        self.compact = compact  # Join.compact: kept for the session's life, Resume included
        self.held_start: bytes | None = None  # compact: a serialized HandStart waiting for the next DecisionRequest
        self.held_events: list[bytes] = []  # compact: serialized Events, likewise
        self.fold_hand_end = compact and fold_hand_end  # Join.compact_hand_end: the hand's end is held too
        self.held_end: bytes | None = None  # that: a serialized HandEnd waiting for the next DecisionRequest
        self.held_end_events: list[bytes] = []  # and the Events of its hand held before it

    # --- sending ---------------------------------------------------------------------

    def send(self, **message: Message) -> None:
        """Numbers, buffers and (if a stream is attached) queues one message, given as ``kind=message``."""
        ((kind, msg),) = message.items()
        self._post(kind, msg.SerializeToString(), False)

    def post(self, kind: str, payload: bytes) -> None:
        """:meth:`send` for a message already serialized (*payload*, the PlayResponse field *kind*)."""
        self._post(kind, payload, False)

    def post_request(self, payload: bytes) -> Outgoing | None:
        """Posts a serialized DecisionRequest and returns the queued message, whose ``began`` its writer
        sets (None when no stream is attached): a decision's clock starts when its write began."""
        return self._post("decision_request", payload, True)

    def _post(self, kind: str, payload: bytes, tracked: bool) -> Outgoing | None:
        if self.compact:
            if kind == "event":
                self.held_events.append(payload)
                return None
            if kind == "hand_start":
                self._hold_start(payload)
                return None
            if kind == "hand_end" and self.fold_hand_end:
                self._hold_end(payload)
                return None
            if kind != "decision_request":
                self.flush()
            elif self.held_start is not None or self.held_events or self.held_end is not None:
                payload = self._folded(payload)
        return self._emit(kind, payload, tracked)

    def _hold_start(self, hand_start: bytes) -> None:
        # A HandStart rides before its hand's events: anything held from its hand's time goes out first.
        if self.held_start is not None or self.held_events:
            self.flush()
        self.held_start = hand_start

    def _hold_end(self, hand_end: bytes) -> None:
        # One HandEnd rides, after its hand's events; a second (the session was never asked in
        # between) or the end of a hand whose start is still held sends everything held first.
        if self.held_end is not None or self.held_start is not None:
            self.flush()
        self.held_end_events, self.held_events = self.held_events, []
        self.held_end = hand_end

    def _folded(self, request: bytes) -> bytes:
        """The serialized *request* with the held messages in it: its fields 1..5, then hand_start (6),
        events (7), hand_end (8) and ended_hand_events (9), the order protobuf itself writes."""
        parts = [request]
        field = wire.field
        if self.held_start is not None:
            parts.append(field(wire.D_HAND_START, self.held_start))
        tag = wire.D_EVENT
        parts.extend([field(tag, event) for event in self.held_events])
        if self.held_end is not None:
            parts.append(field(wire.D_HAND_END, self.held_end))
            tag = wire.D_ENDED_EVENT
            parts.extend([field(tag, event) for event in self.held_end_events])
            self.held_end, self.held_end_events = None, []
        self.held_start, self.held_events = None, []
        return b"".join(parts)

    def flush(self) -> None:
        """Sends the held messages as messages of their own, in the order they happened: the ended
        hand's Events and HandEnd, then the HandStart and Events after them."""
        if self.held_end is not None:
            end, end_events = self.held_end, self.held_end_events
            self.held_end, self.held_end_events = None, []
            for event in end_events:
                self._emit("event", event, False)
            self._emit("hand_end", end, False)
        start, events = self.held_start, self.held_events
        self.held_start, self.held_events = None, []
        if start is not None:
            self._emit("hand_start", start, False)
        for event in events:
            self._emit("event", event, False)

    def drop_held(self) -> None:
        """Forgets held messages: the match they belong to is over for this session."""
        self.held_start, self.held_events = None, []
        self.held_end, self.held_end_events = None, []

    def _emit(self, kind: str, payload: bytes, tracked: bool) -> Outgoing | None:
        """Numbers, buffers and (if a stream is attached) queues the PlayResponse whose *kind* is *payload*."""
        self.sequence += 1
        # Serialized once here: the bytes are buffered for Resume and written as they are.
        data = envelope(self.sequence, kind, payload)
        if kind == "match_start":
            self.buffer = []
        if self.seat is not None:  # Resume exists only within a match: nothing to keep between them
            self.buffer.append((self.sequence, data))
        stream = self.stream
        if stream is None or stream.closed:
            return None
        item = Outgoing(data)
        stream.put(item)
        return item if tracked else None

    def attach(self, stream: Stream, after: int | None = None) -> None:
        """Attaches *stream*; with *after* set, first resends buffered messages numbered above it."""
        self.stream = stream
        self.disconnected_at = None
        if after is not None:
            for sequence, data in self.buffer:
                if sequence > after:
                    stream.put(Outgoing(data))

    def detach(self, stream: Stream) -> None:
        """Forgets *stream* (it broke or ended)."""
        stream.closed = True
        if self.stream is stream:
            self.stream = None
            self.disconnected_at = time.monotonic()

    def close(self, abort: Abort | None = None) -> None:
        """Ends the session: the attached stream ends with OK or with *abort*."""
        self.closed = True
        if self.stream is not None:
            self.stream.end(abort)

    @property
    def connected(self) -> bool:
        """True while a stream is attached."""
        return self.stream is not None and not self.stream.closed


__all__ = ["Abort", "Answer", "BotSession", "BoundSeat", "Item", "Outgoing", "Stream"]
