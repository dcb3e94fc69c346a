"""``gaigel serve --processes``: the front door's reading of a connection's first call
(:mod:`gaigel_server.firstcall`), against the bytes a real grpc client sends and against
synthetic connections in every split, with the orders and encodings other kits use."""

from __future__ import annotations

import asyncio
import contextlib
import itertools

import grpc
import hpack
from hypothesis import given, settings
from hypothesis import strategies as st

from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_server.firstcall import MAX_HELD, PLAY_PATH, SERVER_SETTINGS, FirstCall, FirstCallReader
from gaigel_server.frontdoor import PREFACE

ACK = bytes((0, 0, 0, 4, 1, 0, 0, 0, 0))
CLIENT_SETTINGS = bytes((0, 0, 6, 4, 0, 0, 0, 0, 0)) + b"\x00\x04\x00\x01\x00\x00"
WINDOW = bytes((0, 0, 4, 8, 0, 0, 0, 0, 0)) + (1 << 20).to_bytes(4, "big")


def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes((kind, flags)) + stream.to_bytes(4, "big") + payload


def headers(path: str, huffman: bool) -> bytes:
    return hpack.Encoder().encode(
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", path),
            (":authority", "127.0.0.1:50051"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ],
        huffman=huffman,
    )


def grpc_message(message: bytes) -> bytes:
    return b"\x00" + len(message).to_bytes(4, "big") + message


TOKEN = "t" * 20
JOIN = bs.PlayRequest(join=bs.Join(bot_name="alpha", bot_token=TOKEN, protocol_version=1)).SerializeToString()


def connection(
    *, ack_after: bool, huffman: bool, stream: int, padded: bool, continuation: bool, body: bytes = JOIN
) -> bytes:
    """A client's bytes after the preface: SETTINGS, the ACK of the door's SETTINGS before or
    after the call (Rust's h2 sends it after), HEADERS (maybe padded, maybe split into
    CONTINUATION), the first message in two DATA frames."""
    block = headers(PLAY_PATH, huffman)
    if continuation:
        first = frame(1, 0x8 if padded else 0, stream, (b"\x03" + block[:5] + b"pad") if padded else block[:5])
        head = first + frame(9, 0x4, stream, block[5:])
    else:
        head = frame(1, 0x4 | (0x8 if padded else 0), stream, (b"\x02" + block + b"xx") if padded else block)
    msg = grpc_message(body)
    data = frame(0, 0, stream, msg[:3]) + frame(0, 0, stream, msg[3:])
    out = CLIENT_SETTINGS + WINDOW
    return out + head + data + ACK if ack_after else out + ACK + head + data


def read_in(chunks: list[bytes]) -> FirstCallReader:
    reader = FirstCallReader()
    for chunk in chunks:
        if reader.done:
            break
        reader.feed(chunk)
    return reader


@settings(max_examples=200, deadline=None)
@given(
    ack_after=st.booleans(),
    huffman=st.booleans(),
    stream=st.sampled_from([1, 3, 5]),
    padded=st.booleans(),
    continuation=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_the_join_is_read_in_any_split_and_only_the_ack_is_held_back(
    ack_after: bool, huffman: bool, stream: int, padded: bool, continuation: bool, cuts: list[int]
) -> None:
    data = connection(ack_after=ack_after, huffman=huffman, stream=stream, padded=padded, continuation=continuation)
    points = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    reader = read_in([data[a:b] for a, b in itertools.pairwise(points)])
    assert reader.done and not reader.error
    assert reader.call == FirstCall(PLAY_PATH, bot_name="alpha", bot_token=TOKEN)
    assert reader.held() == data.replace(ACK, b"", 1)  # every other byte reaches grpc unchanged


def test_not_done_until_the_ack_of_the_doors_settings_came() -> None:
    data = connection(ack_after=True, huffman=True, stream=1, padded=False, continuation=False)
    reader = read_in([data[: -len(ACK)]])
    assert reader.call == FirstCall(PLAY_PATH, bot_name="alpha", bot_token=TOKEN) and not reader.done
    reader.feed(ACK)
    assert reader.done
    assert TOKEN not in repr(reader.call)  # a call that is logged does not show the bot's token


def test_resume_and_other_calls_and_bad_input() -> None:
    resume = bs.PlayRequest(resume=bs.Resume(match_id="m1", seat=1, resume_token="r")).SerializeToString()
    data = connection(ack_after=False, huffman=True, stream=1, padded=False, continuation=False, body=resume)
    assert read_in([data]).call == FirstCall(PLAY_PATH, match_id="m1")
    # a call that is not Play is known by its path alone
    other = CLIENT_SETTINGS + ACK + frame(1, 0x4, 1, headers("/gaigel.v1.MatchService/GetMatch", True))
    assert read_in([other]).call == FirstCall("/gaigel.v1.MatchService/GetMatch")
    # a body that is not a PlayRequest goes on (the process that gets it refuses it with a message)
    junk = connection(ack_after=False, huffman=False, stream=1, padded=False, continuation=False, body=b"\xff\xff")
    assert read_in([junk]).call == FirstCall(PLAY_PATH)
    # a header block that does not decode, and a client that sends without end
    broken = CLIENT_SETTINGS + ACK + frame(1, 0x4, 1, b"\xff\xff\xff\xff\xff")
    assert "does not decode" in read_in([broken]).error
    flood = FirstCallReader()
    flood.feed(CLIENT_SETTINGS + frame(8, 0, 0, b"\x00\x00\x00\x01") * (MAX_HELD // 13 + 1))
    assert flood.done and "bytes before the first call" in flood.error


async def _capture(call: str) -> bytes:
    """What grpc's Python client (grpc core) sends on a new connection after an empty SETTINGS."""
    got = bytearray()
    done = asyncio.Event()

    async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(SERVER_SETTINGS)
        reader = FirstCallReader()
        with contextlib.suppress(Exception):
            while not reader.done:
                chunk = await asyncio.wait_for(r.read(65536), 5)
                if not chunk:
                    break
                got.extend(chunk)
                if len(got) > len(PREFACE):
                    reader = FirstCallReader()
                    reader.feed(bytes(got[len(PREFACE) :]))
        done.set()
        w.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        if call == "play":
            stream = channel.stream_stream("/gaigel.v1.BotService/Play", None, None)()
            await stream.write(JOIN)
        else:
            unary = channel.unary_unary("/gaigel.v1.MatchService/GetMatch", None, None)
            task = asyncio.ensure_future(unary(ms.GetMatchRequest(match_id="x").SerializeToString()))
        await asyncio.wait_for(done.wait(), 10)
        if call == "play":
            stream.cancel()
        else:
            task.cancel()
    server.close()
    return bytes(got)


def test_grpc_cores_first_calls_are_read() -> None:
    loop = asyncio.new_event_loop()
    try:
        play = loop.run_until_complete(_capture("play"))
        get = loop.run_until_complete(_capture("get"))
    finally:
        loop.close()
    assert play.startswith(PREFACE) and get.startswith(PREFACE)
    reader = read_in([play[len(PREFACE) :]])
    assert reader.call == FirstCall(PLAY_PATH, bot_name="alpha", bot_token=TOKEN) and reader.done
    assert read_in([get[len(PREFACE) :]]).call == FirstCall("/gaigel.v1.MatchService/GetMatch")
