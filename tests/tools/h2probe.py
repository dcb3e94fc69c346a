"""What a bot's gRPC client sends on a new connection, before and after the server's SETTINGS.

A design probe for ``gaigel serve --processes N`` (docs/architecture.md): a front door that
routes a connection by its first request must know whether clients send that request before
the server has said anything. This listens on a loopback port, starts the bot command with
``GAIGEL_SERVER`` pointing at it, and prints the client's HTTP/2 frames, twice: once never
answering (``silent``), once sending an empty SETTINGS frame right after the client's preface
(``settings``), as such a door would. For the first HEADERS it prints whether ``:path`` is
Huffman-coded (HPACK), and the first message on that stream decoded as a ``PlayRequest``.

Run from the repository root (any kit's bot; nothing else is contacted)::

    python -m tests.tools.h2probe -- .venv/bin/python clients/python/examples/random_bot.py
    python -m tests.tools.h2probe -- java -jar clients/java/target/gaigel-bot.jar
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys

from gaigel_api.v1 import bot_service_pb2 as bs

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EMPTY_SETTINGS = bytes.fromhex("000000040000000000")
FRAME_NAMES = {0: "DATA", 1: "HEADERS", 3: "RST_STREAM", 4: "SETTINGS", 6: "PING", 7: "GOAWAY", 8: "WINDOW_UPDATE"}


def _path_huffman(block: bytes) -> bool | None:
    """Whether the :path of a connection's first header block is Huffman-coded; None when it is
    not where a first request puts it (indexed fields and literals with static-table names)."""
    i = 0
    while i < len(block):
        b = block[i]
        if b & 0x80:  # indexed field (a one-byte index in a first request)
            i += 1
            continue
        if b & 0x40:
            name = b & 0x3F  # literal with incremental indexing
        elif b & 0x20:
            i += 1  # dynamic table size update
            continue
        else:
            name = b & 0x0F  # literal without indexing / never indexed
        i += 1
        is_path = name in (4, 5)  # the static table's ":path" names ("/" and "/index.html")
        if name == 0:  # a new name, spelled out (grpc core's way)
            if i >= len(block) or (block[i] & 0x7F) == 0x7F:
                return None
            size = block[i] & 0x7F
            is_path = not block[i] & 0x80 and block[i + 1 : i + 1 + size] == b":path"
            i += 1 + size
        if i >= len(block) or (block[i] & 0x7F) == 0x7F:
            return None  # a long value: not a first request's :path
        huffman, size = bool(block[i] & 0x80), block[i] & 0x7F
        if is_path:
            return huffman
        i += 1 + size
    return None


def describe(data: bytes) -> str:
    """The client's frames after the preface, :path's coding and the first message of the first stream."""
    frames: list[str] = []
    huffman: bool | None = None
    first: str | None = None
    first_stream = 0
    i = len(PREFACE)
    while i + 9 <= len(data):
        size = int.from_bytes(data[i : i + 3], "big")
        kind, flags, stream = data[i + 3], data[i + 4], int.from_bytes(data[i + 5 : i + 9], "big") & 0x7FFFFFFF
        payload = data[i + 9 : i + 9 + size]
        ack = "+ACK" if kind == 4 and flags & 1 else ""
        frames.append(f"{FRAME_NAMES.get(kind, str(kind))}{ack}(stream {stream}, {size} B)")
        if kind == 1 and not first_stream:
            first_stream = stream
            huffman = _path_huffman(payload)
        if kind == 0 and stream == first_stream and first is None and len(payload) >= 5:
            with contextlib.suppress(Exception):
                first = bs.PlayRequest.FromString(payload[5:]).WhichOneof("message")
        i += 9 + size
    return (
        f"{' '.join(frames) or '(nothing after the preface)'}; :path Huffman-coded: {huffman}; first message: {first}"
    )


async def probe(command: list[str], settings: bool, seconds: float) -> str:
    """Runs *command* against a listener that answers with SETTINGS or not at all; what it sent."""
    got: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data, sent = b"", False
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        with contextlib.suppress(TimeoutError, ConnectionError):
            while (left := end - loop.time()) > 0:
                chunk = await asyncio.wait_for(reader.read(65536), left)
                if not chunk:
                    break
                data += chunk
                if settings and not sent and len(data) >= len(PREFACE):
                    writer.write(EMPTY_SETTINGS)
                    sent = True
        writer.close()
        if not got.done():
            got.set_result(data)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    env = {**os.environ, "GAIGEL_SERVER": f"127.0.0.1:{port}", "GAIGEL_TOKEN": "probe", "GAIGEL_BOT_NAME": "probe"}
    bot = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        data = await asyncio.wait_for(got, seconds + 30)
    finally:
        bot.kill()
        bot.wait()
        server.close()
    return describe(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=3.0, help="how long to listen (default %(default)s)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the bot command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the bot command after --")
    for settings in (False, True):
        said = asyncio.run(probe(command, settings, args.seconds))
        print(f"{'server sends SETTINGS' if settings else 'server silent':22}: {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
