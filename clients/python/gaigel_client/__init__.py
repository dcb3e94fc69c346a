"""The Python SDK for Gaigel bots: subclass :class:`Bot`, write ``decide``, call :func:`run`.

>>> import random
>>> from gaigel_client import Bot, run
>>> class MyBot(Bot):
...     name = "my-bot"
...     def decide(self, request):
...         return random.choice(request.legal_actions).id
>>> # run(MyBot())  # reads GAIGEL_SERVER and GAIGEL_TOKEN
"""

from __future__ import annotations

from gaigel_api import PROTOCOL_VERSION
from gaigel_client.bot import Bot
from gaigel_client.client import DEFAULT_SERVER, run
from gaigel_client.errors import ConfigError, ConnectionLostError, GaigelClientError, ServerError
from gaigel_client.view import ObservationView, legal_action_ids, observation_view

__all__ = [
    "DEFAULT_SERVER",
    "PROTOCOL_VERSION",
    "Bot",
    "ConfigError",
    "ConnectionLostError",
    "GaigelClientError",
    "ObservationView",
    "ServerError",
    "legal_action_ids",
    "observation_view",
    "run",
]
