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

SERVER_VERSION = "0.1.0"
__all__ = ["SERVER_VERSION"]
