"""Fixtures of the SDK tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import fake_server as fs
import grpc
import pytest


@pytest.fixture
def serve() -> Iterator[Any]:
    """Starts scripted fake servers (``serve(*scripts) -> (address, service)``), stopped at the end."""
    servers: list[grpc.Server] = []

    def start(*scripts: fs.Script) -> tuple[str, fs.FakeBotService]:
        server, port, service = fs.start(scripts)
        servers.append(server)
        return f"127.0.0.1:{port}", service

    yield start
    for s in servers:
        s.stop(0)
