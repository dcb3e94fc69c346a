"""Tests of the gRPC executor: command bots through a local match server.

Kept in a file of its own that runs after the other arena tests, so that no worker
process is forked from a test process that has already started gRPC threads.
"""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from gaigel_arena.config import parse_config
from gaigel_arena.journal import Journal
from gaigel_arena.runner import run_arena

pytest.importorskip("gaigel_server.server")


def _results(db: Path) -> dict[str, object]:
    with Journal.open_existing(db) as journal:
        return {r.match_id: (r.status, r.result) for r in journal.rows()}


GRPC_BOTS = [
    {"name": "cmd", "command": [sys.executable, "-m", "gaigel.cli", "bot", "first"]},
    {"name": "house", "house": "first"},
]


class TestGrpcExecutor:
    """Command bots play through a local match server, with the results of in-process play."""

    def test_command_bot_matches_in_process_results(self, tmp_path: Path) -> None:
        """A command bot (the SDK's `gaigel bot first`) against a house bot gives the in-process results."""
        data = {"arena": {"seed": 4, "sets_per_pairing": 2}, "game": {"players": 2, "hands": 2}, "bots": GRPC_BOTS}
        summary = run_arena(parse_config(data), tmp_path / "grpc", workers=1, bootstrap_samples=0)
        assert summary.done == summary.scheduled == 4
        local = {**data, "bots": [{"name": "cmd", "house": "first"}, {"name": "house", "house": "first"}]}
        inline = run_arena(parse_config(local), tmp_path / "inline", executor="inline", bootstrap_samples=0)
        assert _results(summary.db_path) == _results(inline.db_path)
        for record in (tmp_path / "grpc" / "records").glob("*.json"):
            assert json.loads(record.read_text())["match_id"] == record.stem

    @pytest.mark.parametrize("processes", ["per_match", "per_run"])
    def test_a_bot_that_cannot_start_is_disqualified_and_the_arena_goes_on(
        self, tmp_path: Path, processes: str, capfd: pytest.CaptureFixture[str]
    ) -> None:
        """A bot command that keeps exiting (per_match: before it joins; per_run: too often) loses
        its matches as DISQUALIFIED forfeits, what it wrote is in the message, the other bots' matches
        are played, and every match is counted once."""
        failing = "import sys; sys.stderr.write('broken: cannot find my weights\\n'); raise SystemExit(3)"
        bots = [{"name": "broken", "command": [sys.executable, "-c", failing]}, *GRPC_BOTS]
        arena = {"sets_per_pairing": 1, "bot_processes": processes}
        data = {"arena": arena, "game": {"players": 2, "hands": 1}, "bots": bots}
        summary = run_arena(parse_config(data), tmp_path / "o", workers=1, bootstrap_samples=0)
        assert summary.done == summary.scheduled == 6
        results = _results(tmp_path / "o" / "arena.sqlite")
        for match_id, (status, result) in results.items():
            assert status == "done"
            if "broken" in match_id:
                assert result["forfeit"]["bot"] == "broken" and result["forfeit"]["reason"] == "DISQUALIFIED"
                assert "broken: cannot find my weights" in result["forfeit"]["message"] or processes == "per_run"
            else:
                assert result["termination"] == "completed", result
        captured = capfd.readouterr()
        err = captured.out + captured.err
        assert err.count("bot_disqualified") == 1, err[-3000:]
        assert "broken: cannot find my weights" not in [line.strip() for line in err.splitlines()]  # in its log

    @pytest.mark.parametrize("leaves", [False, True])
    def test_a_per_run_bot_plays_all_its_matches_unless_it_leaves_after_each(
        self, tmp_path: Path, leaves: bool, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Under bot_processes = "per_run" one process plays all of a bot's matches: the SDK's
        default (until the server ends the session, as every kit's) plays them all, even with a
        GAIGEL_MATCHES in the organiser's environment (the arena gives its bots 0); a bot that
        leaves after one match (--matches 1) exits cleanly after each, is restarted, and past the
        restart limit is disqualified with a message that says why."""
        monkeypatch.setenv("GAIGEL_MATCHES", "1")
        command = [sys.executable, "-m", "gaigel.cli", "bot", "first", *(["--matches", "1"] if leaves else [])]
        bots = [{"name": "sdk", "command": command}, {"name": "house", "house": "first"}]
        data = {"arena": {"sets_per_pairing": 6, "bot_processes": "per_run"}, "game": {"players": 2, "hands": 1}}
        summary = run_arena(parse_config({**data, "bots": bots}), tmp_path / "o", workers=1, bootstrap_samples=0)
        assert summary.done == summary.scheduled == 12
        results = list(_results(tmp_path / "o" / "arena.sqlite").values())
        if not leaves:
            assert all(res["termination"] == "completed" for _, res in results), results
            return
        forfeits = [res["forfeit"] for _, res in results if res.get("forfeit")]
        assert forfeits, results
        assert all(f["bot"] == "sdk" and f["reason"] == "DISQUALIFIED" for f in forfeits), forfeits
        assert 'bot_processes = "per_run"' in forfeits[0]["message"] and "GAIGEL_MATCHES" in forfeits[0]["message"]
        assert "(last exit code 0)" in forfeits[0]["message"]


def test_relative_command_runs_in_the_directory_of_gaigel_arena_run(tmp_path: Path) -> None:
    """``command = ["python", "mybot.py"]`` in conf/arena.toml finds ./mybot.py where the arena was started
    (not beside the config), with this installation's python though no venv is on PATH."""
    sdk_bot = Path(__file__).resolve().parents[2] / "clients" / "python" / "examples" / "random_bot.py"
    (tmp_path / "mybot.py").write_text(sdk_bot.read_text())
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "arena.toml").write_text(
        "[arena]\nsets_per_pairing = 1\nworkers = 1\n[game]\nplayers = 2\nhands = 1\n"
        '[[bots]]\nname = "my-bot"\ncommand = ["python", "mybot.py"]\n[[bots]]\nname = "first"\nhouse = "first"\n'
    )
    gaigel = Path(sysconfig.get_path("scripts")) / "gaigel"
    out = subprocess.run(
        [str(gaigel), "arena", "run", "conf/arena.toml", "--out", "out", "--json", "--quiet", "--bootstrap", "0"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)
    assert report["matches_done"] == 2 and {b["name"] for b in report["bots"]} == {"my-bot", "first"}
