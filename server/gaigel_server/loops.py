"""The event loop ``gaigel serve`` runs on: asyncio's own, or uvloop (``--loop uvloop``).

uvloop does the loop's turns and the front door's transports in C (libuv); grpc.aio runs
on either. Measured with ``python bench/server.py --compact --loop ...`` and
``bench/attacks.py --loop ...`` (docs/architecture.md, where a decision's CPU goes), it saved
CPU per decision in some runs and not in others, and the attack bench's legit clients were
slower on it: so it is offered, not the default, and not a dependency (the ``uvloop`` extra:
``pip install -e '.[uvloop]'``).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable


class EventLoop(enum.StrEnum):
    """``--loop``: which event loop to run on."""

    ASYNCIO = "asyncio"
    UVLOOP = "uvloop"


class LoopUnavailable(Exception):
    """``--loop uvloop`` where uvloop cannot be imported."""


def factory(kind: EventLoop) -> Callable[[], asyncio.AbstractEventLoop]:
    """A new-loop function for *kind*, for ``asyncio.Runner(loop_factory=...)``.

    :raises LoopUnavailable: for UVLOOP when uvloop cannot be imported.
    """
    if kind is EventLoop.ASYNCIO:
        return asyncio.new_event_loop
    try:
        import uvloop
    except ImportError:
        raise LoopUnavailable(
            "--loop uvloop: uvloop is not installed (pip install uvloop), or use --loop asyncio"
        ) from None
    return uvloop.new_event_loop


def running() -> str:
    """The kind of the running loop, for the start-up log line ("uvloop" or "asyncio")."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"


__all__ = ["EventLoop", "LoopUnavailable", "factory", "running"]
