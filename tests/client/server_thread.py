"""The real match server in a thread of its own (its own event loop), for SDK tests that
need the real thing over loopback; importing it skips the test module when the server
package is not installed."""

from __future__ import annotations

import asyncio
import threading

import pytest

server_mod = pytest.importorskip("gaigel_server.server")


class ServerThread:
    """``gaigel serve`` on 127.0.0.1:``port`` with the bot tokens *bots* (name -> token)."""

    def __init__(self, bots: dict[str, str]) -> None:
        self.ready = threading.Event()
        self.stopped = threading.Event()
        self.port = 0
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main(bots)), daemon=True)
        self.thread.start()
        assert self.ready.wait(10), "server did not start"

    async def _main(self, bots: dict[str, str]) -> None:
        config = server_mod.ServerConfig(admin_token="admin-secret", bots=bots)
        server, self.port = server_mod.create_server("127.0.0.1:0", config)
        await server.start()
        self.ready.set()
        while not self.stopped.is_set():
            await asyncio.sleep(0.05)
        await server.stop(0.5)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(10)
