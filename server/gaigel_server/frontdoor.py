"""The front door: every TCP connection of ``gaigel serve`` comes through here before grpc sees it.

grpc core knows connections only as a global count (``grpc.max_allowed_incoming_connections``),
so one client holding preface-only connections filled that count and locked every seated bot
out of Resume. The front door accepts each connection itself, in the server's event loop, and
then relays its bytes unchanged to grpc listening on a private loopback port. That gives it
what grpc does not offer:

* **Per-peer limits**: at most ``per_peer`` connections from one address (IPv6: one /64),
  refused at accept, so one client cannot take the capacity that others need.
* **A preface deadline**: a connection that has not sent the HTTP/2 preface within
  ``preface_timeout`` seconds is closed (slowloris before HTTP/2).
* **Churn**: the streams of one address that grpc ended before either side sent a message on
  them (evicted or timed out before Join, REFUSED_STREAM, a connection error), told apart by the frame headers of both directions, in a token bucket,
  past which the connection gets GOAWAY and the address is backed off (its new connections
  closed at accept for a doubling interval); the new connections of one address are in another
  bucket: a client cannot answer GOAWAY by reconnecting.
* **Rapid reset**: the client's RST_STREAM frames are counted per connection in a token
  bucket; past it the client gets GOAWAY (ENHANCE_YOUR_CALM) and the connection is closed.
* **Ending one connection**: the servicer can end the connection a call came on
  (:meth:`FrontDoor.end`), with GOAWAY, e.g. for a token that keeps hitting its session limit.
* **The caller's address**: grpc sees the door's loopback socket; :meth:`FrontDoor.peer`
  maps it back to the client's address for limits and logs.

grpc's own port is on loopback: local processes can reach it (as they can the arena's loopback
port for its own bots), so the door's limits are against clients on the network.

Only frame headers (9 bytes) are read, in both directions, so the relay knows frame boundaries
(GOAWAY may only go between frames); payloads are never parsed or copied apart, but for the
first call of a connection when the door routes (``gaigel serve --processes``, see
:mod:`gaigel_server.firstcall`): then each connection goes to the process its first call
names, and :meth:`FrontDoor.drain` tells a client to take its next calls to a new connection. With TLS the
door terminates it (ALPN ``h2``) and relays plaintext to grpc. ``unix:`` listeners bypass the
door: only processes that can open the socket file reach them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import socket
import ssl
import struct
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, cast

from gaigel_server.firstcall import SERVER_SETTINGS, FirstCall, FirstCallReader
from gaigel_server.guard import Backoff, TokenBucket

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
RST_STREAM = 0x3
GOAWAY = 0x7
HEADERS = 0x1
DATA = 0x0
END_STREAM = 0x1
SPOKEN = 1
"""A stream the client has sent a message on or half-closed (a Join, a unary call's request)."""
ANSWERED = 2
"""A stream the server has sent a message on (a Welcome, a response)."""
MAX_STREAM_STATES = 2048
"""Streams the door follows on one connection; grpc allows 256 open, so more is a client
opening streams grpc never answered: the connection is ended."""
ENHANCE_YOUR_CALM = 0xB
REFUSED_STREAM = 0x7
NO_ERROR = 0x0
MAX_TRACKED_PEERS = 65536
"""Addresses whose connection budget is remembered (the least recently seen beyond are forgotten)."""
_RESET = struct.pack("ii", 1, 0)
"""SO_LINGER on, 0 s: close() sends RST, so a refused connection leaves no TIME_WAIT behind."""
HIGH_WATER = 256 * 1024
"""Bytes buffered towards one side before the other side's reading pauses (flow control)."""


@dataclasses.dataclass(frozen=True)
class DoorLimits:
    """What one client may hold at the front door; every field has a working default."""

    max_connections: int = 2048
    """Connections open at once, all peers; beyond it new ones are closed at accept."""
    per_peer: int = 64
    """Connections open at once from one address (IPv6: one /64)."""
    preface_timeout: float = 2.0
    """Seconds a new connection has to send the HTTP/2 preface (grpc clients send it at once)."""
    resets_per_s: float = 100.0
    reset_burst: float = 500.0
    """Client RST_STREAM frames one connection may send: a burst, then this rate; beyond: GOAWAY."""
    churn_per_s: float = 50.0
    churn_burst: float = 500.0
    """Streams of one address that grpc ended before either side sent a message on them: evicted
    or timed out before Join, refused past ``grpc.max_concurrent_streams`` (which a conforming
    client never is) or failed by a connection error. A burst, then this rate; beyond it the
    connection that struck gets GOAWAY and the address is backed off. Sessions, refused Joins
    and unary calls cost nothing here, so a client polling GetMatch is never cut."""
    churn_backoff: float = 1.0
    churn_backoff_longest: float = 30.0
    """Seconds an address past its churn budget has its new connections closed at accept: the
    first time, then doubling with each further strike up to the longest (forgiven after 60 s quiet)."""
    connects_per_s: float = 200.0
    connect_burst: float = 1000.0
    """New connections one address may open: a burst, then this rate; beyond, closed at accept
    (open connections are not touched), so GOAWAY cannot be answered by reconnecting at once."""
    refusing_for: float = 5.0
    """Seconds :meth:`FrontDoor.refusing` stays true after the last connection refused at the global cap."""
    first_call_timeout: float = 5.0
    """With routing (``gaigel serve --processes``): seconds a connection may stay without its
    first call before it gets GOAWAY (as grpc's own idle timeout would)."""


def peer_key(host: str) -> str:
    """The address a per-peer limit counts: the IP itself, or its /64 for IPv6 (one host's share)."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
    return str(ip)


def _grpc_peer(address: Any) -> str:
    """grpc's spelling of a socket address ("ipv4:1.2.3.4:5" or "ipv6:[::1]:5")."""
    host, port = address[0], address[1]
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


class _Scanner:
    """Walks the frame headers of one direction of an HTTP/2 connection, payloads skipped but
    for the 4-byte error code of RST_STREAM, which *on_frame* gets as its last argument (else 0).

    With *marks* (a link's stream states and this direction's bit) a DATA frame sets the bit of
    its stream in place and only HEADERS and RST_STREAM reach *on_frame*: DATA and the
    connection's housekeeping frames (WINDOW_UPDATE, PING, SETTINGS) are most frames, and a
    call per frame was most of the relay's Python."""

    __slots__ = ("_code", "_frame", "_head", "_marks", "_on_frame", "_skip")

    def __init__(
        self, on_frame: Callable[[int, int, int, int], None] | None, marks: tuple[dict[int, int], int] | None = None
    ) -> None:
        self._head = b""
        self._skip = 0
        self._code: bytes | None = None  # the RST_STREAM payload read so far
        self._frame = (0, 0, 0)
        self._on_frame = on_frame
        self._marks = marks

    @property
    def at_boundary(self) -> bool:
        return self._skip == 0 and not self._head

    def to_boundary(self, data: bytes) -> int:
        """How many bytes of *data* complete the frame the scanner is inside (0 at a boundary)."""
        if self._skip:
            return min(self._skip, len(data))
        if not self._head:
            return 0
        need = 9 - len(self._head)
        if len(data) < need:
            return len(data)
        return min(len(data), need + int.from_bytes((self._head + data[:need])[0:3], "big"))

    def feed(self, data: bytes) -> None:
        i, n = 0, len(data)
        marks = self._marks
        while i < n:
            if self._skip:
                step = min(self._skip, n - i)
                if self._code is not None:
                    self._code += data[i : i + step]
                self._skip -= step
                i += step
                if not self._skip and self._code is not None:
                    self._report(int.from_bytes(self._code, "big"))
                continue
            need = 9 - len(self._head)
            if n - i < need:
                self._head += data[i:]
                return
            head = self._head + data[i : i + need] if self._head else data[i : i + 9]
            self._head = b""
            i += need
            size = int.from_bytes(head[0:3], "big")
            kind = head[3]
            self._skip = size
            if marks is not None and kind != HEADERS and kind != RST_STREAM:
                if kind == DATA:
                    states, bit = marks
                    stream = int.from_bytes(head[5:9], "big") & 0x7FFFFFFF
                    state = states.get(stream)
                    if state is not None and not state & bit:
                        states[stream] = state | bit
                continue
            self._frame = (kind, head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF)
            if kind == RST_STREAM and size == 4:
                self._code = b""  # reported once its payload is in
            else:
                self._report(0)

    def _report(self, code: int) -> None:
        self._code = None
        if self._on_frame is not None:
            kind, flags, stream = self._frame
            self._on_frame(kind, flags, stream, code)


def _take(buckets: OrderedDict[str, TokenBucket], key: str, rate: float, burst: float) -> bool:
    """Takes one from *key*'s bucket in *buckets* (made full when new); False when it is spent.
    Only the MAX_TRACKED_PEERS most recently seen keys are remembered."""
    bucket = buckets.pop(key, None) or TokenBucket(rate, burst)
    buckets[key] = bucket  # most recently seen last
    while len(buckets) > MAX_TRACKED_PEERS:
        buckets.popitem(last=False)
    return bucket.take()


def goaway(last_stream: int, code: int) -> bytes:
    """A GOAWAY frame on stream 0."""
    payload = struct.pack(">II", last_stream & 0x7FFFFFFF, code)
    return len(payload).to_bytes(3, "big") + bytes((GOAWAY, 0)) + (0).to_bytes(4, "big") + payload


DRAIN = goaway(0x7FFFFFFF, NO_ERROR)
"""The first GOAWAY of a graceful shutdown (RFC 9113, 6.8): every stream opened so far goes on."""


class _Backend(asyncio.Protocol):
    """The door's connection to grpc: bytes from grpc go to the client."""

    def __init__(self, link: _Link) -> None:
        self.link = link
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream transport (uvloop's are not subclasses)
        self.link.attached(self)

    def data_received(self, data: bytes) -> None:
        self.link.from_backend(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.link.close()

    def pause_writing(self) -> None:
        self.link.pause_client()

    def resume_writing(self) -> None:
        self.link.resume_client()


class _Link(asyncio.Protocol):
    """One client connection and its relay to grpc."""

    def __init__(self, door: FrontDoor, key: str, peer: str) -> None:
        self.door = door
        self.transport: asyncio.Transport | None = None
        self.backend: _Backend | None = None
        self.first = FirstCallReader() if door.route is not None else None
        """The first call, while the door reads it to choose a process (routing only)."""
        self.target = door.backend
        self.draining = False
        door.links_made += 1
        self.ident = door.links_made
        self.handed = False  # given to another process with its socket (see FrontDoor.hand_over)
        self.on_close: Callable[[], None] | None = None  # an adopted link tells its front it closed
        self.drain_pending = False  # GOAWAY to be sent at the next frame boundary towards the client
        self.key = key
        self.peer = peer
        self.backend_port = 0
        self.early: list[bytes] = []  # client bytes before grpc's side is connected
        self.preface = b""
        self.preface_done = False
        self.opened = time.monotonic()
        self.last_stream = 0
        self.streams: dict[int, int] = {}  # stream id -> SPOKEN | ANSWERED, while open
        self.resets = TokenBucket(door.limits.resets_per_s, door.limits.reset_burst)
        self.ending = False
        self.code = NO_ERROR
        self.closed = False
        self.up = _Scanner(self._client_frame, (self.streams, SPOKEN))
        self.down = _Scanner(self._server_frame, (self.streams, ANSWERED))

    # --- client side ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream transport (uvloop's are not subclasses)
        self.door.links.add(self)
        self.transport.set_write_buffer_limits(HIGH_WATER)
        if self.first is None:
            self.door.connect(self)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        if not self.preface_done:
            self.preface += data
            if len(self.preface) < len(PREFACE):
                if not PREFACE.startswith(self.preface):
                    self.close()
                return
            if not self.preface.startswith(PREFACE):
                self.close()
                return
            self.preface_done = True
            data, rest = self.preface, self.preface[len(PREFACE) :]
            self.preface = b""
            if self.first is not None:
                assert self.transport is not None
                self.transport.write(SERVER_SETTINGS)
                self._read_first(rest)
                return
            self.up.feed(rest)
        elif self.first is not None:
            self._read_first(data)
            return
        else:
            self.up.feed(data)
        if self.ending:
            return
        backend = self.backend
        if backend is None or backend.transport is None:
            self.early.append(data)
        else:
            backend.transport.write(data)

    def _read_first(self, data: bytes) -> None:
        """Routing: holds the client's bytes until the first call says which process gets them."""
        first = self.first
        assert first is not None
        first.feed(data)
        if first.error:
            self.door.count("unreadable_first_call")
            self.close()
            return
        if not first.done:
            return
        self.first = None
        held = first.held()
        assert first.call is not None and self.transport is not None and self.door.route is not None
        self.target = self.door.route(first.call)
        hand_over = self.door.hand_over
        sock = self.transport.get_extra_info("socket")
        if hand_over is not None and sock is not None and hand_over(self.target, sock.fileno(), PREFACE + held, self):
            # The socket now lives on in the other process; this one's copy goes without a word.
            self.handed = True
            self.transport.abort()
            return
        self.up.feed(held)
        self.early.append(PREFACE + held)
        self.door.connect(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.close()

    def pause_writing(self) -> None:
        if self.backend is not None and self.backend.transport is not None:
            self.backend.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.backend is not None and self.backend.transport is not None:
            self.backend.transport.resume_reading()

    def pause_client(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.pause_reading()

    def resume_client(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    def _client_frame(self, kind: int, flags: int, stream: int, code: int) -> None:
        # DATA frames are marked SPOKEN by the scanner itself (see _Scanner's marks).
        if kind == HEADERS:
            if stream > self.last_stream:
                self.last_stream = stream
                self.streams[stream] = SPOKEN if flags & END_STREAM else 0
                if len(self.streams) > MAX_STREAM_STATES:
                    self.door.churned(self, force=True)
            elif stream in self.streams:
                self.streams[stream] |= SPOKEN  # the client's trailers
        elif kind == RST_STREAM:
            self.streams.pop(stream, None)
            if not self.resets.take() and not self.ending:
                self.door.resets_refused += 1
                self.door.count("rapid_reset")
                self.end(ENHANCE_YOUR_CALM)

    # --- grpc side -----------------------------------------------------------------------

    def _server_frame(self, kind: int, flags: int, stream: int, code: int) -> None:
        # Churn is a stream grpc ended before either side sent a message on it: evicted or timed
        # out before Join, past the concurrency limit (REFUSED_STREAM), or failed by a connection
        # error. A session that got its Welcome, a unary call, a Join refused (its client spoke:
        # that is the refusal log's and the token back-off's business), a stream the client
        # reset: never churn. So a refused bot on a shared address never locks out its neighbours.
        # DATA frames are marked ANSWERED by the scanner itself (see _Scanner's marks).
        if kind == HEADERS:
            if flags & END_STREAM and self.streams.pop(stream, ANSWERED) == 0:
                self.door.churned(self)
        elif kind == RST_STREAM and (self.streams.pop(stream, ANSWERED) == 0 or code == REFUSED_STREAM):
            self.door.churned(self)

    def attached(self, backend: _Backend) -> None:
        """grpc's side is connected: flush what the client sent meanwhile."""
        self.backend = backend
        assert backend.transport is not None
        backend.transport.set_write_buffer_limits(HIGH_WATER)
        if self.closed:
            backend.transport.abort()
            return
        sock = backend.transport.get_extra_info("socket")
        self.backend_port = sock.getsockname()[1] if sock is not None else 0
        self.door.by_port[self.target[1], self.backend_port] = self
        for chunk in self.early:
            backend.transport.write(chunk)
        self.early.clear()

    def from_backend(self, data: bytes) -> None:
        if self.closed or self.transport is None:
            return
        if self.ending:
            # GOAWAY is pending: let the frame in flight finish, then send it and close.
            cut = self.down.to_boundary(data)
            self.transport.write(data[:cut])
            self.down.feed(data[:cut])
            if self.down.at_boundary:
                self._finish()
            return
        if self.drain_pending:
            cut = self.down.to_boundary(data)
            self.transport.write(data[:cut])
            self.down.feed(data[:cut])
            if not self.down.at_boundary:
                return
            self.drain_pending = False
            self.transport.write(DRAIN)
            data = data[cut:]
        self.down.feed(data)
        self.transport.write(data)

    def drain(self) -> None:
        """GOAWAY (all streams kept) to the client at the next frame boundary: its open streams
        go on, its next calls open a new connection, which the door routes afresh."""
        if self.draining or self.ending or self.closed or self.transport is None:
            return
        self.draining = True
        if self.down.at_boundary:
            self.transport.write(DRAIN)
        else:
            self.drain_pending = True

    # --- ending --------------------------------------------------------------------------

    def end(self, code: int = NO_ERROR) -> None:
        """GOAWAY to the client (at the next frame boundary), then the connection is closed."""
        if self.ending or self.closed:
            return
        self.ending = True
        self.code = code
        if self.backend is not None and self.backend.transport is not None:
            self.backend.transport.pause_reading()
        if self.down.at_boundary:
            self._finish()
        else:
            asyncio.get_running_loop().call_later(0.5, self._finish)  # the frame never finished

    def _finish(self) -> None:
        if self.closed or self.transport is None:
            return
        if self.preface_done:
            self.transport.write(goaway(self.last_stream, self.code))
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.transport is not None:
            self.transport.close()  # what is buffered (a GOAWAY) is still sent
        if self.backend is not None and self.backend.transport is not None:
            self.backend.transport.close()
        self.early.clear()
        self.door.forget(self)


class FrontDoor:
    """Accepts the server's TCP connections and relays them to grpc on *backend* (host, port).

    With *route*, each connection goes where *route* sends its first call instead
    (``gaigel serve --processes``)."""

    def __init__(
        self,
        sock: socket.socket | None,
        backend: tuple[str, int],
        limits: DoorLimits | None = None,
        tls: ssl.SSLContext | None = None,
        count: Callable[[str], None] = lambda reason: None,
        route: Callable[[FirstCall], tuple[str, int]] | None = None,
        hand_over: Callable[[tuple[str, int], int, bytes, _Link], bool] | None = None,
    ) -> None:
        self.route = route
        self.hand_over = hand_over if tls is None else None
        """With it (and *route*), a connection is offered with its socket to where *route* sent it
        (the target, the fd, the bytes read so far and the link); if taken, it is given away: ``gaigel serve --processes`` hands a bot's
        connection to its table process, whose own door then relays it (TLS: relayed here)."""
        self.on_ban: Callable[[str], None] | None = None
        """Told of each address this door backs off (a table process tells its front, which accepts)."""
        self.links_made = 0
        self.handed: dict[int, str] = {}
        """Connections handed over and still open there: their per-peer places are still held here."""
        self.count = count
        """Called with the reason of each connection refused or ended (for a metric)."""
        self.sock = sock  # None: a door that only adopts connections handed to it (a table process)
        self.backend = backend
        self.limits = limits or DoorLimits()
        self.tls = tls
        self.links: set[_Link] = set()
        self.per_peer: dict[str, int] = {}
        self.by_port: dict[tuple[int, int], _Link] = {}
        """Links by (grpc's port, the door's port towards it): what grpc sees as the peer."""
        self.held = 0
        """Connections admitted and not yet closed (a TLS handshake in progress included)."""
        self.refused_global = 0
        self.refused_peer = 0
        self.resets_refused = 0
        self.preface_timeouts = 0
        self.churn_strikes = 0
        self.ended = 0
        self._refused_at = -1e9
        self._connects: OrderedDict[str, TokenBucket] = OrderedDict()
        self._churn: OrderedDict[str, TokenBucket] = OrderedDict()
        self._banned = Backoff(self.limits.churn_backoff, self.limits.churn_backoff_longest, limit=MAX_TRACKED_PEERS)
        self._accepting = False
        self._sweeper: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = int(sock.getsockname()[1]) if sock is not None else 0

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self.sock is not None:
            self.sock.setblocking(False)
            loop.add_reader(self.sock.fileno(), self._accept)
            self._accepting = True
        self._sweeper = loop.create_task(self._sweep())

    def adopt(self, conn: socket.socket, data: bytes, peer: str, key: str, on_close: Callable[[], None]) -> None:
        """Takes over a connection another process's door accepted and read *data* of (the
        preface and first call): relayed to grpc here from now on; *on_close* when it closes."""
        self.held += 1
        self.per_peer[key] = self.per_peer.get(key, 0) + 1
        link = _Link(self, key, peer)
        link.first = None
        link.on_close = on_close
        task = asyncio.get_running_loop().create_task(self._adopt(link, conn, data))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _adopt(self, link: _Link, conn: socket.socket, data: bytes) -> None:
        try:
            await asyncio.get_running_loop().connect_accepted_socket(lambda: link, conn)
        except (OSError, ConnectionError):
            conn.close()
            if link not in self.links:
                self._release(link.key)
                if link.on_close is not None:
                    link.on_close()
            return
        link.data_received(data)

    def handed_closed(self, ident: int) -> None:
        """A connection handed over (:attr:`hand_over`) has closed in the other process."""
        key = self.handed.pop(ident, None)
        if key is not None:
            self._release(key)

    def _accept(self) -> None:
        """Accepts what is waiting. A refused connection is closed here with a reset, before any
        transport or protocol object exists: refusing must cost far less than serving, or a
        client reconnecting as fast as it can would still take the event loop."""
        loop = asyncio.get_running_loop()
        sock = self.sock
        assert sock is not None
        for _ in range(256):
            try:
                conn, address = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors or buffers: pause accepting, as asyncio's servers do
                self._refused_at = time.monotonic()
                self.count("global_cap")
                loop.remove_reader(sock.fileno())
                loop.call_later(0.25, self._resume_accepting)
                return
            key = peer_key(address[0]) if isinstance(address, tuple) else str(address)
            if not self._admit(key):
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
                conn.close()
                continue
            conn.setblocking(False)
            peer = _grpc_peer(address) if isinstance(address, tuple) else str(address)
            task = loop.create_task(self._serve(conn, key, peer))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _resume_accepting(self) -> None:
        if self._accepting and self.sock is not None:
            asyncio.get_running_loop().add_reader(self.sock.fileno(), self._accept)

    async def _serve(self, conn: socket.socket, key: str, peer: str) -> None:
        link = _Link(self, key, peer)
        try:
            await asyncio.get_running_loop().connect_accepted_socket(
                lambda: link, conn, ssl=self.tls, ssl_handshake_timeout=10.0 if self.tls else None
            )
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError):
            conn.close()
            if link not in self.links:  # the TLS handshake failed: never a link, free its place here
                self._release(key)

    def stop_accepting(self) -> None:
        """No new connections; open ones are still relayed (a stopping grpc sends its last messages)."""
        if self._accepting and self.sock is not None:
            self._accepting = False
            asyncio.get_running_loop().remove_reader(self.sock.fileno())
            self.sock.close()

    def close(self) -> None:
        """Closes every connection (after grpc has stopped)."""
        self.stop_accepting()
        if self._sweeper is not None:
            self._sweeper.cancel()
        for link in list(self.links):
            link.close()

    def refusing(self) -> bool:
        """True while new connections are being refused at the global cap (for health)."""
        return time.monotonic() - self._refused_at < self.limits.refusing_for

    def _admit(self, key: str) -> bool:
        """Whether a new connection from *key* may in; if so it holds its place until released."""
        if self.held >= self.limits.max_connections:
            self.refused_global += 1
            self._refused_at = time.monotonic()
            self.count("global_cap")
            return False
        if self._banned.waiting(key) > 0:
            self.count("churn")
            return False
        if not _take(self._connects, key, self.limits.connects_per_s, self.limits.connect_burst):
            self.count("connect_rate")
            return False
        held = self.per_peer.get(key, 0)
        if held >= self.limits.per_peer:
            self.refused_peer += 1
            self.count("peer_cap")
            return False
        self.per_peer[key] = held + 1
        self.held += 1
        return True

    def _release(self, key: str) -> None:
        self.held -= 1
        left = self.per_peer.get(key, 1) - 1
        if left > 0:
            self.per_peer[key] = left
        else:
            self.per_peer.pop(key, None)

    def connect(self, link: _Link) -> None:
        """Connects *link* to grpc at its target: the door's own backend, or where :attr:`route` sent it."""
        asyncio.get_running_loop().create_task(self._connect(link))

    async def _connect(self, link: _Link) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.create_connection(lambda: _Backend(link), *link.target)
        except OSError:
            link.close()
            return
        # create_connection returns after connection_made: the protocol has its transport.

    def forget(self, link: _Link) -> None:
        if link in self.links:
            self.links.discard(link)
            if link.handed:
                self.handed[link.ident] = link.key  # released when the other process says it closed
            else:
                self._release(link.key)
            if link.on_close is not None:
                link.on_close()
        key = (link.target[1], link.backend_port)
        if self.by_port.get(key) is link:
            del self.by_port[key]

    def _link_of(self, grpc_peer: str, backend_port: int | None = None) -> _Link | None:
        _, _, port = grpc_peer.rpartition(":")
        key = (self.backend[1] if backend_port is None else backend_port, int(port) if port.isdigit() else -1)
        return self.by_port.get(key)

    def drain(self, backend_port: int, grpc_peer: str) -> bool:
        """Sends the client behind *grpc_peer* of grpc on *backend_port* a GOAWAY that keeps its
        open streams (:meth:`_Link.drain`); False if unknown."""
        link = self._link_of(grpc_peer, backend_port)
        if link is None:
            return False
        link.drain()
        return True

    def peer(self, grpc_peer: str) -> str:
        """The client address behind grpc's *grpc_peer*; *grpc_peer* itself if it did not come through the door."""
        link = self._link_of(grpc_peer)
        return link.peer if link is not None else grpc_peer

    def peer_key(self, grpc_peer: str) -> str:
        """The per-peer limit key of the client behind *grpc_peer*."""
        link = self._link_of(grpc_peer)
        return link.key if link is not None else grpc_peer

    def churned(self, link: _Link, force: bool = False) -> None:
        """grpc ended a stream of *link* unanswered (see :meth:`_Link._server_frame`): past its
        address's budget (or at once if *force*), GOAWAY to *link* and its address backed off."""
        if link.ending or link.closed:
            return
        self.churn_strikes += 1
        if force or not _take(self._churn, link.key, self.limits.churn_per_s, self.limits.churn_burst):
            self.count("churn")
            if self._banned.waiting(link.key) == 0:  # the back-off doubles once per ban, not per connection
                self._banned.refused(link.key)
                if self.on_ban is not None:
                    self.on_ban(link.key)
            link.end(ENHANCE_YOUR_CALM)

    def ban(self, key: str) -> None:
        """Backs *key* off as a churn strike here would (a table process's door struck it)."""
        if self._banned.waiting(key) == 0:
            self._banned.refused(key)

    def end(self, grpc_peer: str) -> bool:
        """Ends (GOAWAY, then close) the client connection behind *grpc_peer*; False if unknown."""
        link = self._link_of(grpc_peer)
        if link is None:
            return False
        self.ended += 1
        self.count("ended")
        link.end(ENHANCE_YOUR_CALM)
        return True

    async def _sweep(self) -> None:
        """Closes connections that have not sent the preface in time (slowloris before HTTP/2)."""
        while True:
            await asyncio.sleep(min(0.5, self.limits.preface_timeout / 2))
            now = time.monotonic()
            limit = now - self.limits.preface_timeout
            for link in [k for k in self.links if not k.preface_done and k.opened < limit]:
                self.preface_timeouts += 1
                self.count("preface_timeout")
                link.close()
            if self.route is not None:
                limit = now - self.limits.first_call_timeout
                for link in [k for k in self.links if k.preface_done and k.first is not None and k.opened < limit]:
                    self.count("no_first_call")
                    link.end(NO_ERROR)


def tls_context(cert: bytes, key: bytes) -> ssl.SSLContext:
    """A server TLS context for grpc clients (ALPN h2, TLS 1.2+)."""
    import os
    import tempfile

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["h2"])
    with tempfile.TemporaryDirectory() as d:
        c, k = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        with open(c, "wb") as f:
            f.write(cert)
        with open(k, "wb") as f:
            f.write(key)
        ctx.load_cert_chain(c, k)
    return ctx


__all__ = ["DoorLimits", "FrontDoor", "peer_key", "tls_context"]
