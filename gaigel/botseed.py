"""Bot seeds: each seat's own random seed, derived one-way from the match seed.

A stochastic bot seeded from its seat's bot seed (and nothing else) plays a match the
same way every time the match is played again with the same seed and match key. The
derivation (docs/bot-guide.md, Bot seeds) is an HMAC-SHA256 keyed with the secret match
seed, so a bot seed reveals nothing about the seed and so nothing about the deals::

    bot_seed = first 8 bytes, big-endian, of
               HMAC-SHA256(key = seed as 8 bytes big-endian,
                           msg = UTF-8 of "gaigel-bot-seed-v1:<seat>:<match key>")
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
from typing import TYPE_CHECKING

from gaigel.deal import check_seed

if TYPE_CHECKING:
    from gaigel.match import MatchSpec

LOCAL_MATCH_KEY = "local"
"""The match key of a match run in-process without a match id (``gaigel play``): records keep it."""

MAX_MATCH_KEY = 512
"""The longest match key accepted, in characters."""


def bot_seed(seed: int, seat: int, match_key: str) -> int:
    """The 64-bit bot seed of *seat* in the match with *seed* and *match_key*.

    :raises ValueError: for a seed outside 0..2^64-1 or a negative seat.
    """
    check_seed(seed)
    if seat < 0:
        raise ValueError(f"seat must be 0 or more, got {seat}")
    message = f"gaigel-bot-seed-v1:{seat}:{match_key}".encode()
    digest = hmac.new(seed.to_bytes(8, "big"), message, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big")


def bot_seeds(seed: int, players: int, match_key: str) -> list[int]:
    """The bot seed of every seat, in seat order."""
    return [bot_seed(seed, seat, match_key) for seat in range(players)]


def check_match_key(match_key: str) -> None:
    """:raises ValueError: for a key over :data:`MAX_MATCH_KEY` characters."""
    if len(match_key) > MAX_MATCH_KEY:
        raise ValueError(f"match_key has {len(match_key)} characters, at most {MAX_MATCH_KEY} are allowed")


def spec_for_bot(spec: MatchSpec, seat_seed: int) -> MatchSpec:
    """*spec* with its seed replaced by a seat's bot seed: what a house bot may see.

    House bots seed their randomness from ``spec.seed`` in ``start_match``; given this spec
    they play the same in-process, on the server and as gRPC clients.
    """
    return dataclasses.replace(spec, seed=seat_seed)
