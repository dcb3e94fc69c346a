"""Tests for the arena schedule, the result conversion and the config loader."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from gaigel.ruleset import preset
from gaigel_arena.config import ConfigError, load_config, parse_config
from gaigel_arena.results import pairwise_results
from gaigel_arena.schedule import build_schedule, set_seed

BOTS = ("alice", "bob", "carol", "dave")
ROOT = Path(__file__).resolve().parents[2]
BASE: dict[str, object] = {"bots": [{"name": "r", "house": "random"}, {"name": "f", "house": "first"}]}


class TestSchedule:
    """The schedule is complete, balanced over rotations and deterministic."""

    @pytest.mark.parametrize(("players", "teams"), [(2, "2x3"), (3, "2x3"), (4, "2x3"), (6, "2x3"), (6, "3x2")])
    def test_every_group_every_rotation_once_per_set(self, players: int, teams: str) -> None:
        """Each group of bots (pair or triple) plays each set seed once per rotation of the sides."""
        rules = preset("default", players)
        if players == 6:
            rules = rules.replace(six_player_teams=teams)
        sides = rules.num_sides
        sets = 3
        schedule = build_schedule(BOTS, rules, sets, arena_seed=7)
        groups = list(itertools.combinations(BOTS, sides))
        assert len(schedule) == sets * len(groups) * sides
        assert [m.index for m in schedule] == list(range(len(schedule)))
        assert len({m.match_id for m in schedule}) == len(schedule)
        for s in range(sets):
            for group in groups:
                ms = [m for m in schedule if m.set_index == s and m.group == group]
                assert sorted(m.rotation for m in ms) == list(range(sides))
                assert {m.seed for m in ms} == {set_seed(7, s)}
                # every bot sits on every side exactly once within the set
                for x in range(sides):
                    assert sorted(m.sides[x] for m in ms) == sorted(group)
                for m in ms:
                    assert m.seats == tuple(m.sides[rules.side_of(seat)] for seat in range(players))
                    assert sorted(set(m.seats)) == sorted(group)

    def test_pairs_for_two_sides_and_triples_for_three(self) -> None:
        """Two sides give every pair, three sides every triple."""
        two = build_schedule(BOTS, preset("default", 2), 1, 0)
        assert {m.group for m in two} == set(itertools.combinations(BOTS, 2))
        three = build_schedule(BOTS, preset("default", 3), 1, 0)
        assert {m.group for m in three} == set(itertools.combinations(BOTS, 3))

    def test_team_sides_are_filled_by_one_bot(self) -> None:
        """At 4 players a bot fills both seats of its side."""
        for m in build_schedule(BOTS, preset("default", 4), 2, 1):
            assert m.seats[0] == m.seats[2] == m.sides[0]
            assert m.seats[1] == m.seats[3] == m.sides[1]

    def test_deterministic_and_seeded(self) -> None:
        """The same inputs give the same schedule; another arena seed gives other deal seeds."""
        rules = preset("default", 2)
        a = build_schedule(BOTS, rules, 4, 99)
        assert a == build_schedule(BOTS, rules, 4, 99)
        b = build_schedule(BOTS, rules, 4, 100)
        assert [m.match_id for m in a] == [m.match_id for m in b]
        assert {m.seed for m in a}.isdisjoint({m.seed for m in b})
        assert all(0 <= m.seed < 2**63 for m in a)
        assert len({m.seed for m in a}) == 4

    def test_match_id_format(self) -> None:
        """Ids name the set, the rotation and the group."""
        schedule = build_schedule(("alice", "bob"), preset("default", 2), 5, 0)
        assert schedule[7].match_id == "s0003-r1-alice-bob"
        assert schedule[7].sides == ("bob", "alice")
        assert schedule[7].set_id == "s0003-alice-bob"

    def test_dashed_names_play_under_unambiguous_ids(self) -> None:
        """The SDK's example name ``my-bot`` is a valid arena bot; its match ids keep the format."""
        schedule = build_schedule(("my-bot", "house-random"), preset("default", 2), 1, 0)
        assert [m.match_id for m in schedule] == ["s0000-r0-my-bot-house-random", "s0000-r1-my-bot-house-random"]

    def test_bad_input(self) -> None:
        """Names whose ids collide, too few bots and repeated names are refused."""
        with pytest.raises(ValueError, match="same match ids"):
            build_schedule(("a-b", "c", "a", "b-c"), preset("default", 2), 1, 0)
        with pytest.raises(ValueError, match="at least 3 bots"):
            build_schedule(("a", "b"), preset("default", 3), 1, 0)
        with pytest.raises(ValueError, match="unique"):
            build_schedule(("a", "a"), preset("default", 2), 1, 0)


def _result(*dashes: int, forfeit: list[int] | None = None) -> dict[str, object]:
    out: dict[str, object] = {"sides": [{"side": i, "dashes": d} for i, d in enumerate(dashes)]}
    if forfeit:
        out["forfeit_sides"] = forfeit
    return out


class TestPairwiseResults:
    """Match results become pairwise results by fewer dashes."""

    def test_two_sides(self) -> None:
        """Fewer dashes wins, equal dashes draw."""
        assert pairwise_results("s", ("a", "b"), _result(2, 5))[0].score == 1.0
        assert pairwise_results("s", ("a", "b"), _result(5, 2))[0].score == 0.0
        assert pairwise_results("s", ("a", "b"), _result(3, 3))[0].score == 0.5

    def test_three_sides_from_dash_order(self) -> None:
        """Three sides give three pairwise results."""
        got = {(r.a, r.b): r.score for r in pairwise_results("s", ("a", "b", "c"), _result(1, 4, 1))}
        assert got == {("a", "b"): 1.0, ("a", "c"): 0.5, ("b", "c"): 0.0}

    def test_forfeit_loses(self) -> None:
        """A forfeiting side loses whatever the dashes say."""
        assert pairwise_results("s", ("a", "b"), _result(0, 9, forfeit=[0]))[0].score == 0.0


class TestConfig:
    """The TOML config is validated with clear errors."""

    def test_demo_loads(self) -> None:
        """examples/demo.toml is valid and has only house bots."""
        config = load_config(ROOT / "examples" / "demo.toml")
        assert {b.kind for b in config.bots} == {"house"}
        assert config.players == 2

    def test_defaults_and_hash(self) -> None:
        """Workers do not change the config hash; the seed does."""
        a = parse_config({**BASE, "arena": {"workers": 1}})
        b = parse_config({**BASE, "arena": {"workers": 3}})
        c = parse_config({**BASE, "arena": {"seed": 5}})
        assert a.config_hash() == b.config_hash() != c.config_hash()

    def test_sdk_example_name_is_a_valid_bot_name(self) -> None:
        """``my-bot`` (the SDK's example class name) is accepted, as the server accepts it."""
        config = parse_config({"bots": [{"name": "my-bot", "house": "random"}, {"name": "b", "house": "first"}]})
        assert config.bot_names == ("my-bot", "b")

    def test_bot_kinds(self) -> None:
        """Command and remote bots parse; the token is not stored in the canonical form."""
        config = parse_config(
            {
                "arena": {"listen": "127.0.0.1:0"},
                "bots": [
                    {"name": "a", "command": ["python", "bot.py"]},
                    {"name": "b", "remote": True, "token": "secret-token"},
                ],
            }
        )
        assert [b.kind for b in config.bots] == ["command", "remote"]
        assert "secret-token" not in config.canonical_json()

    @pytest.mark.parametrize(
        ("data", "message"),
        [
            ({"arena": {"sedd": 1}}, "unknown key"),
            ({"game": {"players": 5}}, "game.players"),
            ({"game": {"rules": "nope"}}, "game.rules"),
            ({"game": {"options": {"meld.timing": "never"}}}, "meld.timing"),
            ({"bots": [{"name": "a", "house": "random"}]}, "at least 2 bots"),
            ({"bots": [{"name": "a", "house": "random"}, {"name": "a", "house": "first"}]}, "used twice"),
            ({"bots": [{"name": "a b", "house": "random"}, {"name": "c", "house": "first"}]}, "1 to 64 characters"),
            (
                {"bots": [{"name": n, "house": "random"} for n in ("a-b", "c", "a", "b-c")]},
                "same match ids",
            ),
            ({"bots": [{"name": "a"}, {"name": "c", "house": "first"}]}, "exactly one of"),
            ({"bots": [{"name": "a", "house": "zz"}, {"name": "c", "house": "first"}]}, "unknown house bot"),
            ({"bots": [{"name": "a", "remote": True}, {"name": "c", "house": "first"}]}, "token"),
            ({"bots": [{"name": "a", "command": []}, {"name": "c", "house": "first"}]}, "command"),
            ({"arena": {"sets_per_pairing": 0}, **BASE}, "sets_per_pairing"),
        ],
    )
    def test_errors(self, data: dict[str, object], message: str) -> None:
        """Each invalid setting is named in the error."""
        merged = {**BASE, **data}
        with pytest.raises(ConfigError, match=message):
            parse_config(merged)

    def test_file_errors(self, tmp_path: Path) -> None:
        """Bad TOML and missing files give one-line errors naming the file."""
        bad = tmp_path / "bad.toml"
        bad.write_text("[arena\n")
        with pytest.raises(ConfigError, match="not valid TOML"):
            load_config(bad)
        with pytest.raises(ConfigError, match="cannot read"):
            load_config(tmp_path / "missing.toml")
