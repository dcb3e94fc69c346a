"""The messages that describe a match as a whole: Match, each seat's MatchStart, MatchEnd.

Built from a :class:`~gaigel_server.table.Table` and nothing else; the per-hand messages
(observations, events) are :mod:`gaigel_server.codec`'s.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from google.protobuf import timestamp_pb2

from gaigel.match import MatchScore, MatchSpec, MatchTermination
from gaigel.ruleset import Ruleset
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import game_pb2 as gm
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_server import codec
from gaigel_server.clock import Clock
from gaigel_server.seat import Seat
from gaigel_server.states import TableState


class Table(Protocol):
    """What the views read of a table (a :class:`gaigel_server.table.Table` is one): a Protocol, so
    that views and table do not import each other."""

    @property
    def match_id(self) -> str: ...
    @property
    def rules(self) -> Ruleset: ...
    @property
    def spec(self) -> MatchSpec: ...
    @property
    def score(self) -> MatchScore: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def preset(self) -> str: ...
    @property
    def request_id(self) -> str: ...
    @property
    def state(self) -> TableState: ...
    @property
    def termination(self) -> MatchTermination | None: ...
    @property
    def forfeit_side(self) -> int | None: ...
    @property
    def withhold_seed(self) -> bool: ...
    @property
    def versions(self) -> Sequence[str]: ...
    @property
    def seats(self) -> Sequence[Seat]: ...
    @property
    def create_time(self) -> timestamp_pb2.Timestamp: ...
    @property
    def start_time(self) -> timestamp_pb2.Timestamp | None: ...
    @property
    def end_time(self) -> timestamp_pb2.Timestamp | None: ...

    def winner_sides(self) -> list[int]: ...

    def bot_seeds(self) -> list[int]: ...


def _json(data: Any) -> str:
    return json.dumps(data, sort_keys=True)


def match(table: Table, admin: bool) -> ms.Match:
    """The Match message. The seed reveals every hidden card: only once the match has ended,
    and with ``withhold_seed`` only to the *admin* (who may replay the same seed)."""
    rules, spec, score = table.rules, table.spec, table.score
    ended = table.state is TableState.ENDED
    out = ms.Match(
        match_id=table.match_id,
        state=table.state.proto,
        players=rules.players,
        ruleset_preset=table.preset,
        ruleset_json=_json(rules.to_dict()),
        hands=spec.hands,
        first_dealer_seat=spec.first_dealer % rules.players,
        clock=codec.clock(table.clock),
        hands_played=score.hands_played,
        request_id=table.request_id,
        create_time=table.create_time,
    )
    for x in range(rules.num_sides):
        side = out.sides.add(side=x)
        for s in rules.seats_of(x):
            side.seats.add(seat=s, bot_name=spec.bots[s], bot_version=table.versions[s])
    out.sides_standing.extend(codec.side_results(score.hands_won, score.dashes))
    if ended and (admin or not table.withhold_seed):
        out.seed = spec.seed
    if ended:
        assert table.termination is not None
        out.termination = codec.MATCH_TERMINATION[table.termination]
        out.winner_sides.extend(table.winner_sides())
    if table.start_time is not None:
        out.start_time.CopyFrom(table.start_time)
    if table.end_time is not None:
        out.end_time.CopyFrom(table.end_time)
    return out


def match_starts(table: Table) -> list[bs.MatchStart]:
    """The MatchStart of each seat, with its resume token."""
    spec, rules = table.spec, table.rules
    sides = match(table, admin=False).sides
    seeds = table.bot_seeds()
    return [
        bs.MatchStart(
            match_id=table.match_id,
            seat=seat,
            side=rules.side_of(seat),
            players=spec.players,
            sides=sides,
            ruleset_preset=table.preset,
            ruleset_json=_json(rules.to_dict()),
            hands=spec.hands,
            first_dealer_seat=spec.first_dealer % spec.players,
            clock=codec.clock(table.clock),
            resume_token=table.seats[seat].resume_token,
            bot_seed=seeds[seat],
        )
        for seat in range(spec.players)
    ]


def match_end(table: Table) -> gm.MatchEnd:
    """The MatchEnd of an ended table, without faults (see :func:`with_faults`)."""
    score = table.score
    assert table.termination is not None
    out = gm.MatchEnd(
        match_id=table.match_id,
        termination=codec.MATCH_TERMINATION[table.termination],
        winner_sides=table.winner_sides(),
        sides=codec.side_results(score.hands_won, score.dashes),
        hands_played=score.hands_played,
    )
    if table.withhold_seed:
        out.seed_withheld = True
    else:
        out.seed = table.spec.seed
    if table.termination is MatchTermination.FORFEIT and table.forfeit_side is not None:
        out.forfeiting_side = table.forfeit_side
    return out


def with_faults(end: gm.MatchEnd, faults: Iterable[cm.Fault]) -> gm.MatchEnd:
    """A copy of *end* listing *faults*."""
    out = gm.MatchEnd()
    out.CopyFrom(end)
    out.faults.extend(faults)
    return out


__all__ = ["match", "match_end", "match_starts", "with_faults"]
