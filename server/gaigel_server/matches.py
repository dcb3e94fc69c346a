"""The front door for matches: one validation of a match request, for every caller.

CreateMatch, ``gaigel try``, ``check-bot`` and the arena's host all describe a match as a
``CreateMatchRequest`` and pass it through :func:`validate`, which names the first invalid
field or returns a :class:`MatchPlan`; :meth:`gaigel_server.lobby.Lobby.open` turns a plan
into a listed table and :meth:`~gaigel_server.lobby.Lobby.play` awaits its record. So a
match started in process is checked exactly as one started over gRPC.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections.abc import Container

from gaigel.bots import HOUSE_BOTS
from gaigel.botseed import check_match_key
from gaigel.deal import PLAYER_COUNTS, player_counts_text
from gaigel.match import MatchSpec
from gaigel.ruleset import PRESETS, Ruleset, RulesetError, preset
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_server import codec
from gaigel_server.auth import HOUSE_PREFIX
from gaigel_server.clock import Clock
from gaigel_server.guard import clip

MAX_REQUEST_ID = 128
"""Longest CreateMatch request_id: it is a key the server keeps."""


class InvalidMatch(ValueError):
    """A match request that cannot be played; the message names the field and what to fix."""


@dataclasses.dataclass(frozen=True)
class MatchPlan:
    """A validated match request: everything a table needs, nothing left to check."""

    spec: MatchSpec
    clock: Clock
    preset: str
    house: dict[int, str]
    """Seat -> house bot kind (``random``, ``first``, ...) for the seats played in process."""
    request_id: str = ""
    withhold_seed: bool = False
    match_key: str = ""
    """Derives the bot seeds with the seed; empty: the match id (given when the table is made)."""

    @property
    def remote_bots(self) -> list[str]:
        """The registered bots this match seats, in seat order (a bot twice for two seats)."""
        return [b for s, b in enumerate(self.spec.bots) if s not in self.house]


def validate(request: ms.CreateMatchRequest, registered: Container[str], default_clock: Clock) -> MatchPlan:
    """The plan of *request*, whose registered bots must be in *registered*.

    :raises InvalidMatch: naming the first invalid field.
    """
    if len(request.request_id) > MAX_REQUEST_ID:
        raise InvalidMatch(f"request_id has {len(request.request_id)} characters; at most {MAX_REQUEST_ID}")
    n = request.players
    if n not in PLAYER_COUNTS:
        raise InvalidMatch(f"players must be {player_counts_text()}, got {n}")
    name = request.ruleset_preset or "default"
    if name not in PRESETS:
        raise InvalidMatch(f"ruleset_preset must be one of {', '.join(PRESETS)}, got {clip(name)!r}")
    rules = _rules(request.ruleset_overrides_json, preset(name, n))
    if bool(request.seat_bots) == bool(request.side_bots):
        raise InvalidMatch("give exactly one of seat_bots (one per seat) and side_bots (one per side)")
    if request.seat_bots:
        if len(request.seat_bots) != n:
            raise InvalidMatch(f"seat_bots needs {n} names (one per seat), got {len(request.seat_bots)}")
        bots = list(request.seat_bots)
    else:
        if len(request.side_bots) != rules.num_sides:
            raise InvalidMatch(f"side_bots needs {rules.num_sides} names (one per side), got {len(request.side_bots)}")
        bots = [request.side_bots[rules.side_of(s)] for s in range(n)]
    house: dict[int, str] = {}
    for seat, bot in enumerate(bots):
        if bot.startswith(HOUSE_PREFIX):
            kind = bot[len(HOUSE_PREFIX) :]
            if kind not in HOUSE_BOTS:
                known = ", ".join(HOUSE_PREFIX + b for b in sorted(HOUSE_BOTS))
                raise InvalidMatch(f"unknown house bot {clip(bot)!r} (house bots: {known})")
            house[seat] = kind
        elif bot not in registered:
            raise InvalidMatch(
                f"bot {clip(bot)!r} is not registered (RegisterBot first, or use a house bot such as 'house:random')"
            )
    try:
        check_match_key(request.match_key)
    except ValueError as e:
        raise InvalidMatch(str(e)) from None
    if request.hands < 1:
        raise InvalidMatch(f"hands must be at least 1, got {request.hands}")
    seed = request.seed if request.HasField("seed") else secrets.randbits(64)
    # Absent: the last seat deals, so seat 0 leads hand 0 (MatchSpec's default, -1).
    first_dealer = request.first_dealer_seat if request.HasField("first_dealer_seat") else -1
    if not -1 <= first_dealer < n:
        raise InvalidMatch(f"first_dealer_seat must be a seat 0..{n - 1} (or absent), got {first_dealer}")
    spec = MatchSpec(ruleset=rules, seed=seed, hands=request.hands, bots=tuple(bots), first_dealer=first_dealer)
    try:
        clock = codec.merge_clock(default_clock, request.clock if request.HasField("clock") else None)
    except ValueError as e:
        raise InvalidMatch(str(e)) from None
    return MatchPlan(spec, clock, name, house, request.request_id, request.withhold_seed, request.match_key)


def _rules(overrides_json: str, base: Ruleset) -> Ruleset:
    try:
        overrides = json.loads(overrides_json) if overrides_json else {}
        if not isinstance(overrides, dict):
            raise InvalidMatch("ruleset_overrides_json must be a JSON object")
        overrides.pop("players", None)
        return Ruleset.from_dict(overrides, base=base)
    except json.JSONDecodeError as e:
        raise InvalidMatch(f"ruleset_overrides_json is not valid JSON: {e.msg}") from None
    except RecursionError:
        raise InvalidMatch("ruleset_overrides_json is nested too deeply (options are a flat object)") from None
    except RulesetError as e:
        raise InvalidMatch(f"ruleset_overrides_json: {e}") from None


__all__ = ["MAX_REQUEST_ID", "InvalidMatch", "MatchPlan", "validate"]
