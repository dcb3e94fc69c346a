"""House bots that run in-process (and over gRPC through the Python SDK)."""

from __future__ import annotations

from collections.abc import Callable

from gaigel.bots.heuristic import HeuristicBot
from gaigel.bots.search import SearchBot
from gaigel.bots.simple import FirstBot, RandomBot
from gaigel.match import Bot

HOUSE_BOTS: dict[str, Callable[[], Bot]] = {
    "random": RandomBot,
    "first": FirstBot,
    "heuristic": HeuristicBot,
    "search": SearchBot,
}


def make_bot(name: str) -> Bot:
    """A new house bot by name.

    :raises ValueError: for an unknown name, listing the known ones.
    """
    try:
        return HOUSE_BOTS[name]()
    except KeyError:
        raise ValueError(f"unknown bot {name!r} (house bots: {', '.join(sorted(HOUSE_BOTS))})") from None


__all__ = ["HOUSE_BOTS", "FirstBot", "HeuristicBot", "RandomBot", "SearchBot", "make_bot"]
