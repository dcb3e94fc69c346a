"""The gaigel.v1 game server: bots play over one gRPC stream per session (DESIGN.md, Protocol).

Modules: :mod:`codec` (engine <-> proto), :mod:`auth` (tokens), :mod:`session` (a bot
session with its sequence numbers and resume buffer), :mod:`table` (the async match
runner with clocks and fault policies), :mod:`servicer` (BotService and MatchService),
:mod:`metrics`, :mod:`logging`, :mod:`server` (``create_server``) and :mod:`commands`
(``gaigel serve``, ``gaigel try``, ``gaigel rematch``).
"""

from __future__ import annotations

SERVER_VERSION = "0.1.0"
PROTOCOL_VERSION = 1

__all__ = ["PROTOCOL_VERSION", "SERVER_VERSION"]
