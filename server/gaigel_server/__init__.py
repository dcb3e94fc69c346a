"""The gaigel.v1 game server: bots play over one gRPC stream per session (DESIGN.md, Protocol).

Modules: :mod:`clock` (clock values and their defaults), :mod:`codec` (engine <-> proto),
:mod:`auth` (tokens), :mod:`session` (a bot session with its sequence numbers and resume
buffer), :mod:`table` (the async match runner with clocks and fault policies),
:mod:`servicer` (BotService and MatchService), :mod:`metrics`, :mod:`logging`,
:mod:`server` (``create_server``) and :mod:`commands` (``gaigel serve``). The protocol
version is :data:`gaigel_api.PROTOCOL_VERSION`.
"""

from __future__ import annotations

SERVER_VERSION = "0.1.0"
__all__ = ["SERVER_VERSION"]
