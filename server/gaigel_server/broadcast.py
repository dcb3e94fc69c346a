"""Who hears what of one match: the sessions of its seats and its spectators.

A :class:`Broadcast` sends each seat its own messages, publishes the public ones (kept for
WatchMatch from the start, queued to every current spectator), and packs the public
messages of an ended match small: the lobby keeps ended tables for a long time.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Sequence

from google.protobuf.message import Message

from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import game_pb2 as gm
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_server import codec, wire
from gaigel_server.seat import Seat

Public = tuple[str, bytes]
"""A public message: the WatchMatchResponse field name and its message, serialized."""

SpectatorQueue = asyncio.Queue[Public | None]
"""What a WatchMatch stream drains; None ends it."""


class Broadcast:
    """The seats' sessions and the spectators of one match, and what they were told."""

    def __init__(self, seats: Sequence[Seat]) -> None:
        self.seats = seats  # the table's: a seat whose session was released gets nothing more
        self.public: list[Public] = []
        self.packed = b""  # the public messages once the match has ended, see pack()
        self.hand_start_index = 0  # where the current hand begins in the public messages
        self.spectators: list[SpectatorQueue] = []

    # --- seats -------------------------------------------------------------------------

    def send(self, seat: int, **message: Message) -> None:
        """Sends *message* (``kind=message``) to the session of *seat*, if it still plays this match."""
        sess = self.seats[seat].session
        if sess is not None:
            sess.send(**message)

    def announce(self, kind: str, msg: Message) -> None:
        """Sends the same *msg* to every seat and publishes it."""
        payload = msg.SerializeToString()
        for seat in self.seats:
            sess = seat.session
            if sess is not None:
                sess.post(kind, payload)
        self.publish(kind, payload)

    def event(self, routed: codec.Routed) -> None:
        """A game event, as each seat and the public may see it."""
        for seat in self.seats:
            sess = seat.session
            if sess is not None:
                sess.post("event", routed.for_viewer(seat.index))
        self.publish("event", routed.for_viewer(None))

    def fault(self, seat: int, hand: int, own: cm.Fault, public: cm.Fault) -> None:
        """A fault of *seat*: the seat reads the detail, everybody else the public form."""
        for s in range(len(self.seats)):
            self.send(s, event=gm.Event(hand_index=hand, fault=own if s == seat else public))
        self.publish("event", gm.Event(hand_index=hand, fault=public).SerializeToString())

    # --- spectators --------------------------------------------------------------------

    def publish(self, kind: str, payload: bytes) -> None:
        """Keeps a public message (serialized) and queues it to every spectator."""
        if kind == "hand_start":
            self.hand_start_index = len(self.public)
        item = (kind, payload)
        self.public.append(item)
        for q in self.spectators:
            q.put_nowait(item)

    def watch(self, match: ms.Match, from_start: bool, ended: bool) -> SpectatorQueue:
        """A spectator queue: *match*, then the public messages (all, or of the current hand)."""
        q: SpectatorQueue = asyncio.Queue()
        q.put_nowait(("match", match.SerializeToString()))
        for item in self.messages()[0 if from_start else self.hand_start_index :]:
            q.put_nowait(item)
        if ended:
            q.put_nowait(None)
        else:
            self.spectators.append(q)
        return q

    def unwatch(self, q: SpectatorQueue) -> None:
        """Forgets a spectator whose stream has ended."""
        if q in self.spectators:
            self.spectators.remove(q)

    def end(self) -> None:
        """The match has ended: every spectator stream ends, the public messages are packed."""
        for q in self.spectators:
            q.put_nowait(None)
        self.spectators.clear()
        self.pack()

    # --- the public messages of an ended match ------------------------------------------

    def pack(self) -> None:
        """Packs the public messages: kind, length and payload of each, compressed."""
        packed = bytearray()
        for kind, payload in self.public:
            packed += _KIND_CODE[kind] + len(payload).to_bytes(4, "big") + payload
        self.packed = zlib.compress(packed)
        self.public = []

    def messages(self) -> list[Public]:
        """Every public message so far (unpacked again once the match has ended)."""
        if not self.packed:
            return self.public
        out: list[Public] = []
        data, i = zlib.decompress(self.packed), 0
        while i < len(data):
            size = int.from_bytes(data[i + 1 : i + 5], "big")
            out.append((_KINDS[data[i]], data[i + 5 : i + 5 + size]))
            i += 5 + size
        return out


_KINDS = tuple(f.name for f in ms.WatchMatchResponse.DESCRIPTOR.oneofs_by_name["message"].fields)
"""The kinds of public message, by their one-byte code in a packed match."""
_KIND_CODE = {kind: bytes((i,)) for i, kind in enumerate(_KINDS)}
_TAGS = {kind: wire.tag(ms.WatchMatchResponse, kind) for kind in _KINDS}
_SEQUENCE = wire.tag(ms.WatchMatchResponse, "sequence")


def watch_response(sequence: int, item: Public) -> ms.WatchMatchResponse:
    """The WatchMatchResponse numbered *sequence* that carries the public message *item*."""
    kind, payload = item
    return ms.WatchMatchResponse.FromString(_SEQUENCE + wire.varint(sequence) + wire.field(_TAGS[kind], payload))


__all__ = ["Broadcast", "Public", "SpectatorQueue", "watch_response"]
