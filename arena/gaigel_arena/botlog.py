"""What a bot process writes, kept per bot and match with a size cap, never in the runner's log.

A bot's stdout and stderr go to one pipe; the executor's event loop drains it into a file
(``OUT/logs/MATCH/SEAT-BOT.log`` for a one-match process, ``OUT/logs/processes/...`` for
one that plays the whole run). Past the cap the rest is read and dropped, so a bot that
floods its output neither blocks on a full pipe nor fills the disk; the file ends with a
marker that says how much was dropped. The last lines are what an error names when a bot
exits before it joined.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

__all__ = ["DEFAULT_CAP", "BotLog"]

DEFAULT_CAP = 2**20
"""Bytes kept per bot process (``[sandbox] log_bytes``)."""
_CHUNK = 65536
TRUNCATED = "\n[gaigel: output truncated after {kept} bytes; {dropped} more bytes dropped]\n"


class BotLog:
    """The capture of one bot process's output: a pipe's read end drained into *path*."""

    def __init__(self, path: Path, cap: int = DEFAULT_CAP) -> None:
        self.path = path
        self.cap = cap
        self.kept = 0
        self.dropped = 0
        self._tail = b""
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("wb")
        self._read_fd, self.write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Starts draining on *loop* (call after the child got :attr:`write_fd`, then close it here)."""
        self._loop = loop
        os.close(self.write_fd)
        self.write_fd = -1
        loop.call_soon_threadsafe(loop.add_reader, self._read_fd, self._drain)

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self._read_fd, _CHUNK)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:  # every writer has closed it: the process and its children are gone
                self._finish()
                return
            room = self.cap - self.kept
            if room > 0:
                self._file.write(data[:room])
                self.kept += min(room, len(data))
            self.dropped += max(0, len(data) - max(room, 0))
            self._tail = (self._tail + data)[-4096:]

    def _finish(self) -> None:
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._read_fd)
        with contextlib.suppress(OSError):
            os.close(self._read_fd)
        self._read_fd = -1
        if self.dropped:
            self._file.write(TRUNCATED.format(kept=self.kept, dropped=self.dropped).encode())
        self._file.close()

    def flush(self) -> None:
        """Drains what is in the pipe now (the loop's thread) and writes it out."""
        if self._read_fd >= 0:
            self._drain()
        if not self._file.closed:
            self._file.flush()

    def close(self) -> None:
        """Stops the capture (on the loop's thread): what is in the pipe is kept, the rest is gone."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1
        if self._read_fd >= 0:
            self._drain()
        if self._read_fd >= 0:
            self._finish()

    def tail(self, lines: int = 5) -> str:
        """The last *lines* lines the process wrote (for an error message), on one line."""
        text = self._tail.decode(errors="replace").strip().splitlines()[-lines:]
        return " | ".join(line.strip() for line in text if line.strip())
