"""Why a bot command did not start playing, in one note: ``gaigel try`` and ``gaigel check-bot``
name the cause of a failed start (never connected, refused by the server, exited before
joining) within seconds of it, instead of waiting for a time limit.

Kept here: the last lines of a bot's stderr (passed through to ours as they come) and the
wording of each cause.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Sequence
from typing import Any

STARTUP_TIMEOUT = 60.0
"""Default seconds a bot command has to join (``--startup-timeout``): room for a kit that builds first
(``npm start`` runs ``tsc``, ``go run`` compiles) on a loaded machine."""
REFUSAL_GRACE = 2.0
"""Seconds after the server refused a bot's stream for the bot to join on another one, before the refusal is
reported as the cause (a bot may retry, but one that was refused and waits would wait forever)."""
TAIL_LINES = 8
TAIL_BYTES = 16 * 1024


class StderrTail:
    """Copies a bot process's stderr to ours as it comes and keeps its last lines for the note."""

    def __init__(self, stream: asyncio.StreamReader | None, echo: bool = True) -> None:
        self._kept = b""
        self._echo = echo
        self._task = asyncio.get_running_loop().create_task(self._pump(stream)) if stream is not None else None

    async def _pump(self, stream: asyncio.StreamReader) -> None:
        out: Any = getattr(sys.stderr, "buffer", None)
        while chunk := await stream.read(65536):
            self._kept = (self._kept + chunk)[-TAIL_BYTES:]
            if self._echo:
                if out is not None:
                    out.write(chunk)
                else:
                    sys.stderr.write(chunk.decode(errors="replace"))
                sys.stderr.flush()

    async def lines(self, wait: float = 1.0) -> list[str]:
        """The last lines written, once the process closed its stderr (waiting at most *wait* seconds for it)."""
        if self._task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), wait)
        return tail_lines(self._kept)


def tail_lines(data: bytes, lines: int = TAIL_LINES) -> list[str]:
    """The last non-empty *lines* of *data*, decoded."""
    text = data.decode(errors="replace").splitlines()
    return [line for line in text if line.strip()][-lines:]


def quoted(lines: Sequence[str]) -> str:
    """*lines* as an indented block under a note (empty when there are none)."""
    return "".join(f"\n    | {line}" for line in lines)


def exited(name: str, code: int, address: str, lines: Sequence[str]) -> str:
    """The note for a bot process that ended before it joined."""
    last = f"; its last stderr lines:{quoted(lines)}" if lines else "; it wrote nothing to stderr"
    return f"bot {name} exited with code {code} before joining the match on {address} (its GAIGEL_SERVER){last}"


def refused(name: str, address: str, code: str, message: str) -> str:
    """The note for a bot whose stream the server ended before its session began."""
    return f"bot {name} was refused by the server at {address}: {code}: {message}"


def never_joined(name: str, address: str, seconds: float, stream_seen: bool | None) -> str:
    """The note for a bot still running without having joined after the start-up allowance; *stream_seen*
    is whether the server saw a stream from it (None: not known, the server is elsewhere)."""
    how = {
        False: f"it opened no stream to {address} (its GAIGEL_SERVER)",
        True: f"it opened a stream to {address} but did not join",
        None: f"it did not join on {address} (its GAIGEL_SERVER)",
    }[stream_seen]
    return f"bot {name} did not join within {seconds:g} s (--startup-timeout): {how}"


__all__ = [
    "REFUSAL_GRACE",
    "STARTUP_TIMEOUT",
    "StderrTail",
    "exited",
    "never_joined",
    "quoted",
    "refused",
    "tail_lines",
]
