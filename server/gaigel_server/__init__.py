"""The gaigel.v1 game server: bots play over one gRPC stream per session (DESIGN.md, Protocol).

Modules: :mod:`clock` (clock values, their defaults and each seat's time), :mod:`codec` (engine <-> proto),
:mod:`auth` (tokens), :mod:`session` (a bot session with its sequence numbers and resume
buffer), :mod:`table` (the async match runner with the fault policies), :mod:`ledger`
(judges each seat's answers), :mod:`broadcast` (tells seats and spectators), :mod:`lobby`
(tables and idle sessions), :mod:`servicer` (BotService and MatchService), :mod:`metrics`, :mod:`logging`,
:mod:`server` (``create_server``) and :mod:`commands` (``gaigel serve``). The protocol
version is :data:`gaigel_api.PROTOCOL_VERSION`.
"""

from __future__ import annotations

from pathlib import Path

from gaigel._build import CompiledModules

SERVER_VERSION = "0.1.0"

CODEC = CompiledModules(__name__, Path(__file__).resolve().parent, ("wire",), "gaigel_codec__mypyc")
"""The server's modules that setup.py compiles with mypyc: the codec's hot path, the protobuf
bytes of every decision (about 6 µs of the server's 44 per compact decision less,
``bench/server_work.py``). Stale builds and ``GAIGEL_PURE`` as for the engine."""
CODEC.choose("codec")

__all__ = ["CODEC", "SERVER_VERSION"]
