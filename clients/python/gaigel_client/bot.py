"""The class a bot author subclasses."""

from __future__ import annotations

from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_api.v1 import game_pb2


class Bot:
    """A Gaigel bot: subclass it and override :meth:`decide`; everything else is optional.

    ``name`` is the registered bot name sent in ``Join`` (the environment variable
    ``GAIGEL_BOT_NAME`` overrides it); ``version`` is recorded in match records.
    The ``on_*`` hooks are called with the server's messages in the order they arrive;
    the default implementations do nothing.
    """

    name: str = "bot"
    version: str = ""
    bot_seed: int = 0
    """This seat's seed for the current match (``MatchStart.bot_seed``), set before
    :meth:`on_match_start`. Seed all randomness from it, e.g. ``random.Random(self.bot_seed)``
    in ``on_match_start``, and a rematch with the same seed and match key plays the same."""
    time_capped: bool = False
    """Set it to True in :meth:`decide` when a wall-clock cap cut the decision short (so the
    choice depends on the machine); the SDK sends it with the answer and the match record
    flags the action ``TIME_CAPPED``. Reset to False before every ``decide``."""

    def decide(self, request: pb.DecisionRequest) -> int | None:
        """Returns the id of one of ``request.legal_actions`` (``request.legal_actions[i].id``).

        ``request.observation`` holds everything this seat may know now;
        ``request.time_left`` the time before the bank is drawn on.

        Returning None sends no answer: the server's timeout fallback (the first legal
        action, one strike) plays once the decision's time and bank have run out. Use it
        when it is too late to answer: a late answer would be rejected as stale, a second
        strike.

        After an ``ActionRejected`` with the decision still open, ``decide`` is called once
        more for the same request. If it repeats a rejected id (or returns an illegal one),
        the SDK sends the first legal action not tried yet for this decision instead; after
        any further rejection, the next untried one (each rejection is one strike).
        """
        raise NotImplementedError(f"{type(self).__name__} must override decide(request) -> int")

    def on_welcome(self, msg: pb.Welcome) -> None:
        """The server accepted the session (also after a Resume, with ``msg.resumed`` set)."""

    def on_match_start(self, msg: pb.MatchStart) -> None:
        """A match begins: seat, sides, ruleset (``msg.ruleset_json``), hands, clocks, ``msg.bot_seed``."""

    def on_hand_start(self, msg: game_pb2.HandStart) -> None:
        """A hand begins: dealer, forehand, own cards, trump card."""

    def on_event(self, msg: game_pb2.Event) -> None:
        """Something public happened (a card played, a trick won, a meld, a draw, ...)."""

    def on_hand_end(self, msg: game_pb2.HandEnd) -> None:
        """A hand ended."""

    def on_match_end(self, msg: game_pb2.MatchEnd) -> None:
        """The match ended (the seed is revealed here)."""

    def on_rejected(self, msg: pb.ActionRejected) -> None:
        """The server rejected an answer (one strike); the SDK retries as documented in :meth:`decide`."""
