"""The HTTP/2 probe of tests/tools/h2probe.py against a real gRPC client (the Python kit's).

It pins a fact a routing front door would rely on (docs/architecture.md, --processes): grpc
core's client sends nothing but its SETTINGS until the server's SETTINGS arrive, then
acknowledges them and sends its first request (HEADERS, then the Join in DATA) at once.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tests.tools import h2probe

BOT = [sys.executable, str(Path(__file__).resolve().parents[1] / "clients/python/examples/random_bot.py")]


def test_grpc_core_client_waits_for_the_servers_settings_then_sends_its_join() -> None:
    silent = asyncio.run(h2probe.probe(BOT, settings=False, seconds=2.0))
    assert "HEADERS" not in silent and "DATA" not in silent and silent.startswith("SETTINGS"), silent
    answered = asyncio.run(h2probe.probe(BOT, settings=True, seconds=2.0))
    ack, headers, data = (
        answered.find("SETTINGS+ACK"),
        answered.find("HEADERS(stream 1"),
        answered.find("DATA(stream 1"),
    )
    assert 0 < ack < headers < data, answered
    assert answered.endswith(":path Huffman-coded: False; first message: join"), answered


def test_path_coding_is_read_from_static_and_new_names() -> None:
    # grpc core: a new name ":path" spelled out; grpc-go: the static name 5 with a Huffman value.
    core = bytes.fromhex("4005") + b":path" + bytes([26]) + b"/gaigel.v1.BotService/Play"
    go = bytes.fromhex("8386") + bytes([0x45, 0x80 | 3]) + b"\x62\x63\x64"
    assert h2probe._path_huffman(core) is False
    assert h2probe._path_huffman(go) is True
    assert h2probe._path_huffman(bytes.fromhex("8386")) is None
