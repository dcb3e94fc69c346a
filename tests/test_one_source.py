"""One definition per constant: every layer derives match terminations, player counts and the
atomic JSON write from the engine's, so they cannot drift apart again."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from gaigel.cli import players_arg
from gaigel.deal import PLAYER_COUNTS, STANDARD_PLAYER_COUNTS, deal
from gaigel.match import MATCH_TERMINATIONS, MatchTermination
from gaigel.record import dump_record, write_json_atomic
from gaigel.ruleset import Ruleset
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import match_service_pb2 as ms


def test_terminations_everywhere_are_the_engines() -> None:
    """Server metrics, the protocol mapping, arena outcomes and the runner's known set follow the engine."""
    from gaigel_arena import runner
    from gaigel_arena.metrics import OUTCOMES
    from gaigel_server import codec
    from gaigel_server.metrics import TERMINATIONS, ServerMetrics

    assert tuple(t.value for t in MatchTermination) == MATCH_TERMINATIONS
    assert TERMINATIONS == MATCH_TERMINATIONS
    assert (*MATCH_TERMINATIONS, "void") == OUTCOMES
    assert frozenset(MATCH_TERMINATIONS) == runner._KNOWN
    assert tuple(t.value for t in codec.MATCH_TERMINATION) == MATCH_TERMINATIONS
    proto_values = {v.number for v in cm.MatchTermination.DESCRIPTOR.values if v.number}
    assert set(codec.MATCH_TERMINATION.values()) == proto_values  # every proto value has an engine name
    metrics = ServerMetrics(CollectorRegistry())
    for t in MATCH_TERMINATIONS:
        assert metrics.registry.get_sample_value("gaigel_matches_total", {"termination": t}) == 0


@pytest.mark.parametrize("n", range(10))
def test_player_counts_everywhere_are_the_engines(n: int) -> None:
    """The CLI, the ruleset, the deal, the server and the arena accept exactly the engine's counts."""
    from gaigel_arena.config import ConfigError, parse_config
    from gaigel_server import matches
    from gaigel_server.clock import Clock

    allowed = n in PLAYER_COUNTS

    def accepts(check: object) -> bool:
        try:
            check()  # type: ignore[operator]
        except (ValueError, argparse.ArgumentTypeError) as e:
            assert "players" in str(e) or "deal to" in str(e), e
            return False
        return True

    assert accepts(lambda: players_arg(str(n))) is allowed
    assert accepts(lambda: Ruleset(players=n)) is allowed
    assert accepts(lambda: deal(1, 0, n)) is allowed
    request = ms.CreateMatchRequest(players=n, side_bots=["house:first"] * 2, hands=0)
    with pytest.raises(matches.InvalidMatch) as refused:
        matches.validate(request, (), Clock())  # hands=0 is refused only after players passed
    assert ("players must be" in str(refused.value)) is not allowed
    bots = [{"name": "a", "house": "first"}, {"name": "b", "house": "first"}, {"name": "c", "house": "first"}]
    try:
        parse_config({"game": {"players": n}, "bots": bots})
    except ConfigError as e:
        assert n not in STANDARD_PLAYER_COUNTS and "game.players" in str(e)
    else:
        assert n in STANDARD_PLAYER_COUNTS


def test_atomic_json_write_is_shared_and_leaves_no_temp_file(tmp_path: Path) -> None:
    """Arena records and reports and match records go through one writer; a failed rename leaves no temp file."""
    from gaigel_arena import commands, executors, grpc_executor

    assert vars(executors)["write_json_atomic"] is write_json_atomic is vars(grpc_executor)["write_json_atomic"]
    assert "write_json_atomic" not in vars(commands)  # imported where used, from the engine
    target = tmp_path / "r.json"
    write_json_atomic({"a": [1, 2]}, target)
    assert target.read_text() == '{"a":[1,2]}\n'
    dump_record({"b": 1}, target)
    assert json.loads(target.read_text()) == {"b": 1} and target.read_text().startswith("{\n")
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(OSError):
        write_json_atomic({"c": 3}, tmp_path / "dir.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.json", "r.json"]
