"""The first call of a new HTTP/2 connection, read by the front door before it picks a process.

``gaigel serve --processes N`` pins each connection to one process; the door chooses it from
the connection's first call: a bot's ``Play`` stream by the ``bot_name`` of its Join (or the
``match_id`` of its Resume), anything else (MatchService, health, reflection) goes to the front
process. Most grpc clients send their first call only after the server's SETTINGS, so the door
sends an empty SETTINGS of its own first and drops the client's first SETTINGS ACK, the answer
to it, wherever it comes (Rust's h2 sends it after the call); every other byte reaches the
chosen process unchanged, and grpc there sends its own SETTINGS as usual.

Only the first header block is decoded (HPACK with a fresh table, as it is at a connection's
start) and only the first gRPC message of that stream is parsed. Pure: no sockets, no event loop.
"""

from __future__ import annotations

import dataclasses

import hpack
from google.protobuf.message import DecodeError

from gaigel_api.v1 import bot_service_pb2 as bs

PLAY_PATH = "/gaigel.v1.BotService/Play"
DATA, HEADERS, SETTINGS, CONTINUATION = 0x0, 0x1, 0x4, 0x9
END_HEADERS, PADDED, PRIORITY, ACK = 0x4, 0x8, 0x20, 0x1
MAX_HELD = 128 * 1024
"""Bytes the door holds before the first call is read (a Join is far smaller)."""
SERVER_SETTINGS = bytes((0, 0, 0, SETTINGS, 0, 0, 0, 0, 0))
"""An empty SETTINGS frame: the defaults, until grpc's own SETTINGS follow."""


@dataclasses.dataclass(frozen=True, slots=True)
class FirstCall:
    """Where a connection's first call wants to go."""

    path: str
    bot_name: str = ""
    """The Join's bot_name (a Play stream that starts with Join)."""
    bot_token: str = dataclasses.field(default="", repr=False)
    """The Join's bot_token: only a Join that proves its name may take a place kept for that bot."""
    match_id: str = ""
    """The Resume's match_id (a Play stream that starts with Resume)."""


class FirstCallReader:
    """Holds a connection's client bytes (after the preface) until its first call is known.

    :meth:`feed` the bytes as they come; once :attr:`call` is set and the first SETTINGS ACK has
    been dropped, :meth:`held` is what to relay. :attr:`error` says why a connection cannot be
    read (then it is closed).
    """

    def __init__(self) -> None:
        self._raw = bytearray()
        self._pos = 0  # where the next unread frame starts in _raw
        self._out: list[bytes] = []  # complete frames to relay, the dropped ACK left out
        self._acked = False
        self._stream = 0  # the first stream's id, once its HEADERS came
        self._block = b""  # its header block, while CONTINUATION frames follow
        self._path: str | None = None
        self._body = b""  # its DATA so far
        self.call: FirstCall | None = None
        self.error = ""

    @property
    def done(self) -> bool:
        return bool(self.error) or (self.call is not None and self._acked)

    def feed(self, data: bytes) -> None:
        if self.done:
            raise RuntimeError("FirstCallReader.feed after done")
        self._raw += data
        if len(self._raw) > MAX_HELD:
            self.error = f"more than {MAX_HELD} bytes before the first call"
            return
        while not self.done and len(self._raw) - self._pos >= 9:
            head = self._raw[self._pos : self._pos + 9]
            size = int.from_bytes(head[0:3], "big")
            end = self._pos + 9 + size
            if len(self._raw) < end:
                return
            frame = bytes(self._raw[self._pos : end])
            self._pos = end
            kind, flags = head[3], head[4]
            stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
            if kind == SETTINGS and flags & ACK and not self._acked:
                self._acked = True  # the answer to the door's SETTINGS: grpc never sent it
                continue
            self._out.append(frame)
            if self.call is None:
                self._read(kind, flags, stream, frame[9:])

    def held(self) -> bytes:
        """The frames to relay (complete ones, then any partial frame that followed)."""
        return b"".join(self._out) + bytes(self._raw[self._pos :])

    def _read(self, kind: int, flags: int, stream: int, payload: bytes) -> None:
        if kind == HEADERS and not self._stream:
            self._stream = stream
            self._block = _unpad(payload, flags, PRIORITY if flags & PRIORITY else 0)
            if flags & END_HEADERS:
                self._headers()
        elif kind == CONTINUATION and stream == self._stream and self._path is None:
            self._block += payload
            if flags & END_HEADERS:
                self._headers()
        elif kind == DATA and stream == self._stream and self._path == PLAY_PATH:
            self._body += _unpad(payload, flags, 0)
            self._message()

    def _headers(self) -> None:
        try:
            headers = hpack.Decoder().decode(self._block, raw=True)
        except (hpack.HPACKError, ValueError, IndexError) as e:
            self.error = f"the first header block does not decode ({e})"
            return
        path = next((v for k, v in headers if k in (b":path", ":path")), b"")
        self._path = path.decode("utf-8", "replace") if isinstance(path, bytes) else str(path)
        if self._path != PLAY_PATH:
            self.call = FirstCall(self._path)

    def _message(self) -> None:
        if len(self._body) < 5:
            return
        length = int.from_bytes(self._body[1:5], "big")
        if self._body[0] != 0:  # a compressed message: the process it reaches will say what is wrong
            self.call = FirstCall(PLAY_PATH)
            return
        if len(self._body) < 5 + length:
            return
        try:
            first = bs.PlayRequest.FromString(self._body[5 : 5 + length])
        except DecodeError:
            self.call = FirstCall(PLAY_PATH)  # refused with its message by whichever process gets it
            return
        join = first.join
        self.call = FirstCall(
            PLAY_PATH, bot_name=join.bot_name, bot_token=join.bot_token, match_id=first.resume.match_id
        )


def _unpad(payload: bytes, flags: int, priority: int) -> bytes:
    """A HEADERS or DATA payload without its padding (and HEADERS' priority fields)."""
    start, end = 0, len(payload)
    if flags & PADDED and payload:
        start, end = 1, len(payload) - payload[0]
    if priority:
        start += 5
    return payload[start : max(start, end)]


__all__ = ["PLAY_PATH", "SERVER_SETTINGS", "FirstCall", "FirstCallReader"]
