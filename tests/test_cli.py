"""The gaigel command line as a user runs it: real processes, real files, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

VECTORS = json.loads((Path(__file__).parent / "data" / "deals.json").read_text())


def gaigel(*args: str) -> subprocess.CompletedProcess[str]:
    """Runs the console script's entry point in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "gaigel.cli", *args], capture_output=True, text=True, timeout=120, check=False
    )


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit code 2, a single line on stderr naming the problem, no traceback."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    for needle in needles:
        assert needle in last, last


class TestDeal:
    @pytest.mark.parametrize("vector", VECTORS[::7], ids=lambda v: f"s{v['seed']}-h{v['hand']}-p{v['players']}")
    def test_json_matches_vector(self, vector: dict[str, object]) -> None:
        """`gaigel deal --json` prints exactly the keys and values of vectors/deals.json."""
        proc = gaigel(
            "deal",
            "--seed",
            str(vector["seed"]),
            "--hand",
            str(vector["hand"]),
            "--players",
            str(vector["players"]),
            "--json",
        )
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == vector

    def test_seed_out_of_range(self) -> None:
        """A seed above 2^64-1 is refused with the allowed range."""
        assert_one_line_error(gaigel("deal", "--seed", str(2**64), "--players", "4"), "0..18446744073709551615")

    def test_negative_seed(self) -> None:
        """A negative seed is refused."""
        assert_one_line_error(gaigel("deal", "--seed=-1", "--players", "4"), "a seed in 0..18446744073709551615")

    def test_impossible_player_count(self) -> None:
        """Five players cannot be dealt whole draw rounds."""
        assert_one_line_error(gaigel("deal", "--seed", "1", "--players", "5"), "players must be 2, 3, 4 or 6")


class TestPlay:
    def test_json_sides(self, tmp_path: Path) -> None:
        """`gaigel play --json` reports every side with seats, bots, hands won and dashes."""
        proc = gaigel(
            "play", "--players", "4", "--hands", "4", "--seed", "11", "--bot", "random", "--bot", "first", "--json"
        )
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert [s["seats"] for s in out["sides"]] == [[0, 2], [1, 3]]
        assert [s["bots"] for s in out["sides"]] == [["random", "random"], ["first", "first"]]
        assert sum(s["hands_won"] for s in out["sides"]) <= 4
        assert all(s["dashes"] >= 0 for s in out["sides"])
        assert len(out["hand_results"]) == 4

    def test_same_seed_same_match(self) -> None:
        """The seeded random bot and the deals make a match reproducible from its seed."""
        a = gaigel("play", "--players", "3", "--hands", "3", "--seed", "5", "--json")
        b = gaigel("play", "--players", "3", "--hands", "3", "--seed", "5", "--json")
        assert a.stdout == b.stdout and a.returncode == 0

    def test_unknown_option(self) -> None:
        """An unknown ruleset option is named in a one-line error."""
        assert_one_line_error(gaigel("play", "-o", "meld.timeing=lead_only"), "unknown ruleset option 'meld.timeing'")

    def test_bad_option_value(self) -> None:
        """A ruleset option with a value outside its choices lists the choices."""
        assert_one_line_error(gaigel("play", "-o", "strict.mode=lenient"), "strict.mode must be one of")

    def test_unknown_bot(self) -> None:
        """An unknown bot name lists the house bots."""
        assert_one_line_error(gaigel("play", "--bot", "nobody"), "unknown bot 'nobody'")


class TestSelfplay:
    def test_json_fields(self) -> None:
        """`gaigel selfplay --json` reports hands, decisions, seconds and decisions per second."""
        proc = gaigel("selfplay", "--players", "2", "--games", "50", "--seed", "3", "--json")
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert out["hands"] == 50
        assert out["decisions"] >= 50 * 10  # at least ten card plays per 2-player hand
        assert out["seconds"] > 0 and out["decisions_per_second"] > 0


class TestReplay:
    @pytest.fixture
    def record(self, tmp_path: Path) -> Path:
        path = tmp_path / "match.json"
        proc = gaigel("play", "--players", "2", "--hands", "2", "--seed", "8", "--record", str(path))
        assert proc.returncode == 0, proc.stderr
        return path

    def test_ok(self, record: Path) -> None:
        """A record made by `gaigel play` re-derives hash for hash."""
        proc = gaigel("replay", str(record))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("ok: 2 hands")

    def test_mismatch_names_step(self, record: Path) -> None:
        """A tampered hash makes replay exit 1 and name the hand and step."""
        data = json.loads(record.read_text())
        data["hands"][1]["actions"][3]["hash"] = "0" * 32
        record.write_text(json.dumps(data))
        proc = gaigel("replay", str(record))
        assert proc.returncode == 1
        assert "hand 1 step 3" in proc.stderr

    def test_changed_action_names_step(self, record: Path) -> None:
        """A swapped action is caught at that step (as illegal or by its hash)."""
        data = json.loads(record.read_text())
        actions = data["hands"][0]["actions"]
        actions[0]["action"] = 999
        record.write_text(json.dumps(data))
        proc = gaigel("replay", str(record))
        assert proc.returncode == 1
        assert "hand 0 step 0" in proc.stderr

    def test_truncated(self, record: Path) -> None:
        """A truncated file is exit 2 with a one-line message."""
        record.write_text(record.read_text()[:300])
        assert_one_line_error(gaigel("replay", str(record)), "not valid JSON")

    def test_not_a_record(self, tmp_path: Path) -> None:
        """Valid JSON that is not a record is exit 2."""
        path = tmp_path / "x.json"
        path.write_text('{"hello": 1}')
        assert_one_line_error(gaigel("replay", str(path)), "not a Gaigel match record")

    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing file is exit 2."""
        assert_one_line_error(gaigel("replay", str(tmp_path / "nope.json")), "cannot read")

    def test_binary_garbage(self, tmp_path: Path) -> None:
        """Random bytes are exit 2."""
        path = tmp_path / "x.json"
        path.write_bytes(bytes(range(256)))
        assert_one_line_error(gaigel("replay", str(path)))


class TestHelp:
    @pytest.mark.parametrize("command", ["deal", "play", "selfplay", "replay"])
    def test_every_command_has_help(self, command: str) -> None:
        """Every command answers --help with a usage line."""
        proc = gaigel(command, "--help")
        assert proc.returncode == 0 and "usage: gaigel" in proc.stdout


def test_engine_imports_no_grpc() -> None:
    """The rules engine is pure: importing it (and its house bots, records, replay) loads no grpc."""
    code = (
        "import sys, gaigel, gaigel.state, gaigel.match, gaigel.record, gaigel.replay, gaigel.bots, gaigel.observation;"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('grpc', 'gaigel_api', 'gaigel_server', 'asyncio', 'socket')];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
