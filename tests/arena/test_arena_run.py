"""End-to-end tests of the arena runner, the report and the ``gaigel arena`` commands."""

from __future__ import annotations

import io
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import structlog.testing

from gaigel.cli import main
from gaigel_arena.config import parse_config
from gaigel_arena.journal import Journal
from gaigel_arena.metrics import ArenaMetrics
from gaigel_arena.report import load_report, render_html, report_dict
from gaigel_arena.runner import Progress, run_arena

SMALL = {
    "arena": {"name": "small", "seed": 11, "sets_per_pairing": 2},
    "game": {"players": 3, "hands": 2},
    "bots": [
        {"name": "r", "house": "random"},
        {"name": "f", "house": "first"},
        {"name": "f2", "house": "first"},
    ],
}

KILL_TOML = """
[arena]
name = "kill test"
seed = 5
sets_per_pairing = 120
workers = 2

[game]
players = 2
hands = 3

[[bots]]
name = "random"
house = "random"

[[bots]]
name = "first"
house = "first"

[[bots]]
name = "random2"
house = "random"
"""


def _results(db: Path) -> dict[str, object]:
    with Journal.open_existing(db) as journal:
        rows = journal.rows()
    ids = [r.match_id for r in rows]
    assert len(ids) == len(set(ids))
    return {r.match_id: (r.status, r.result) for r in rows}


class TestRunner:
    """run_arena plays the schedule into the journal and rates it."""

    def test_inline_equals_local_and_resume_is_a_no_op(self, tmp_path: Path) -> None:
        """In-process and worker-process execution store the same results; a rerun plays nothing."""
        config = parse_config(SMALL)
        stream = io.StringIO()
        metrics = ArenaMetrics(config.bot_names)
        a = run_arena(config, tmp_path / "a", executor="inline", progress=Progress(stream, interval=0), metrics=metrics)
        b = run_arena(config, tmp_path / "b", workers=2, bootstrap_samples=50)
        assert a.done == a.scheduled == 2 * 1 * 3  # 2 sets x 1 triple x 3 rotations
        assert _results(a.db_path) == _results(b.db_path)
        again = run_arena(config, tmp_path / "a", executor="inline", bootstrap_samples=50)
        assert again.played_now == 0 and again.done == a.done
        assert "top:" in stream.getvalue()
        assert metrics.registry.get_sample_value("gaigel_arena_matches_done") == a.done
        assert metrics.registry.get_sample_value("gaigel_arena_matches_total", {"outcome": "completed"}) == a.done
        assert metrics.registry.get_sample_value("gaigel_arena_match_duration_seconds_count") == a.done
        assert metrics.registry.get_sample_value("gaigel_arena_rating_elo", {"bot": "r"}) is not None
        records = sorted((tmp_path / "a" / "records").glob("*.json"))
        assert len(records) == a.done
        record = json.loads(records[0].read_text())
        assert record["match_id"] == records[0].stem


class TestReport:
    """The report exports the required JSON fields and a self-contained HTML page."""

    def test_json_and_html(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """JSON has the counts and per-bot ratings; HTML has an inline SVG and the cross table."""
        config = parse_config(SMALL)
        run_arena(config, tmp_path / "out", executor="inline", bootstrap_samples=50)
        data = report_dict(load_report(tmp_path / "out", samples=50))
        assert data["matches_scheduled"] == data["matches_done"] == 6
        assert {b["name"] for b in data["bots"]} == {"r", "f", "f2"}
        for bot in data["bots"]:
            assert set(bot) >= {"name", "elo", "bt", "bt_ci95", "games"}
            assert len(bot["bt_ci95"]) == 2
            assert bot["games"] == 6 * 2  # two pairwise games per match
        html_file = tmp_path / "report.html"
        assert main(["arena", "report", str(tmp_path / "out"), "--html", str(html_file), "--bootstrap", "20"]) == 0
        text = html_file.read_text()
        assert "<svg" in text and "polyline" in text and "Cross table" in text
        assert "http" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
        capsys.readouterr()
        assert main(["arena", "report", str(tmp_path / "out"), "--json", "--bootstrap", "20"]) == 0
        printed = json.loads(capsys.readouterr().out)
        assert printed["matches_done"] == 6
        assert "<svg" in render_html(load_report(tmp_path / "out", samples=0))


class TestCommands:
    """The CLI has --help and one-line errors."""

    def test_help(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Both subcommands document their options."""
        for sub in ("run", "report"):
            with pytest.raises(SystemExit) as e:
                main(["arena", sub, "--help"])
            assert e.value.code == 0
        out = capsys.readouterr().out
        assert "--workers" in out and "--html" in out

    def test_errors_are_one_line(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A bad config, a missing journal and remote bots (not supported yet) exit 2 with one line."""
        bad = tmp_path / "bad.toml"
        bad.write_text('[game]\nplayers = 5\n[[bots]]\nname = "a"\nhouse = "random"\n')
        assert main(["arena", "run", str(bad), "--out", str(tmp_path / "o")]) == 2
        assert main(["arena", "report", str(tmp_path / "nothing")]) == 2
        cmd = tmp_path / "cmd.toml"
        cmd.write_text(
            '[[bots]]\nname = "a"\nremote = true\ntoken = "0123456789"\n[[bots]]\nname = "b"\nhouse = "random"\n'
        )
        assert main(["arena", "run", str(cmd), "--out", str(tmp_path / "o2"), "--quiet"]) == 2
        err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("gaigel arena: error:")]
        assert len(err) == 3
        assert "game.players" in err[0]
        assert "no arena journal" in err[1]
        assert "remote bots" in err[2]
        assert not (tmp_path / "o2" / "arena.sqlite").exists()


def _orphans(marker: str) -> list[int]:
    """Pids of live processes whose command line mentions *marker* (forked workers inherit it)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().split(")")[-1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state != "Z":
                found.append(int(entry))
    return found


def _done_count(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM matches WHERE status = 'done'").fetchone()[0])
    except sqlite3.Error:
        return -1  # not created yet


def _wait_for_progress(db: Path, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Waits until the running arena fixes one more match (or exits)."""
    before = _done_count(db)
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        if _done_count(db) > max(before, 0):
            return
        time.sleep(0.01)


def _run_to_end(command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    errors = [line for line in done.stderr.splitlines() if "match_done" not in line]
    assert done.returncode == 0, "\n".join(errors[-30:])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and SIGKILL")
class TestKill:
    """kill -9 at random moments, then the same command again: nothing lost, nothing doubled."""

    KILLS = 10
    """Each kill costs a fresh runner's start-up (Python, journal, two worker processes): 20 of them ran past
    300 s on a loaded 2-core machine. Ten still cover both kinds of moment, five each, over several rounds."""

    @pytest.mark.timeout(900)  # alone 99-288 s with 20 kills; a loaded 2-core machine is several times slower
    def test_kill_and_resume_matches_uninterrupted_run(self, tmp_path: Path) -> None:
        """SIGKILLs at random moments (KILLS of them) end with the journal of an uninterrupted run."""
        config_path = tmp_path / "kill.toml"
        config_path.write_text(KILL_TOML)
        gaigel = [sys.executable, "-m", "gaigel.cli", "arena", "run", str(config_path), "--quiet", "--bootstrap", "0"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}

        baseline = tmp_path / "baseline"
        _run_to_end([*gaigel, "--out", str(baseline)], env)
        expected = _results(baseline / "arena.sqlite")
        assert all(status == "done" for status, _ in expected.values())

        seed = int(os.environ.get("GAIGEL_KILL_SEED", time.time_ns() % 10**6))
        rng = random.Random(seed)
        kills = finished = rounds = replays = 0
        # Rounds: on a fast machine one journal can fill up before every kill landed; then
        # the next round starts a fresh output folder. Every round must end equal to the baseline.
        while kills < self.KILLS:
            assert rounds < 10, f"only {kills} kills landed in {rounds} rounds (kill seed {seed})"
            killed = tmp_path / f"killed-{rounds}"
            for _ in range(200):
                err_path = tmp_path / f"run-{rounds}-{kills + finished}.err"
                with err_path.open("wb") as err:
                    proc = subprocess.Popen(
                        [*gaigel, "--out", str(killed)], env=env, stdout=subprocess.DEVNULL, stderr=err
                    )
                if kills % 2:  # any moment: start-up, journal creation, play, shutdown
                    time.sleep(rng.uniform(0.05, 0.8))
                else:  # a moment while matches are being played, whatever the machine's load
                    _wait_for_progress(killed / "arena.sqlite", proc, timeout=30.0)
                    time.sleep(rng.uniform(0.0, 0.25))
                if proc.poll() is None:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                    kills += 1
                    continue
                finished += 1
                tail = err_path.read_text(errors="replace").splitlines()[-15:]
                assert proc.returncode == 0, f"run exited with {proc.returncode} (kill seed {seed}):\n" + "\n".join(
                    tail
                )
                break  # a run that is not killed plays every pending match: this round is complete
            time.sleep(0.3)  # workers die with their runner (PR_SET_PDEATHSIG)
            assert _orphans(str(killed)) == [], "worker processes outlived a killed runner"
            _run_to_end([*gaigel, "--out", str(killed)], env)  # a no-op run on a complete journal
            replays += self._assert_same_as_baseline(killed, expected, seed)
            rounds += 1
        print(f"kill seed {seed}: {kills} kills in {rounds} rounds, {finished} runs finished, {replays} replays")
        assert replays > 0, f"no kill landed while a match was running (kill seed {seed})"

    @staticmethod
    def _assert_same_as_baseline(killed: Path, expected: dict[str, object], seed: int) -> int:
        """Asserts the journal equals the baseline match for match; returns how many matches were replayed."""
        got = _results(killed / "arena.sqlite")
        assert got.keys() == expected.keys(), f"kill seed {seed}"
        for match_id, value in expected.items():
            assert got[match_id] == value, f"{match_id} differs (kill seed {seed})"
        with Journal.open_existing(killed / "arena.sqlite") as journal:
            rows = journal.rows()
        for row in rows:
            record = json.loads(Path(row.record_path or "").read_text())
            assert record["result"] == row.result
        assert not list((killed / "records").glob("*.tmp"))
        return sum(row.attempts for row in rows) - len(rows)


class TestVoidGames:
    """A worker that dies is an infrastructure failure: the match is replayed, not counted."""

    def test_dead_worker_is_replaced(self, tmp_path: Path) -> None:
        """Killing a worker process mid-run still ends with every match done once."""
        config = parse_config({**SMALL, "arena": {"seed": 2, "sets_per_pairing": 20}})
        from gaigel_arena import executors

        class Killing(executors.LocalExecutor):
            """Kills one of its workers once, after a few matches."""

            submitted = 0

            def submit(self, job: executors.MatchJob) -> executors.concurrent.futures.Future[executors.MatchOutcome]:
                Killing.submitted += 1
                future = super().submit(job)
                if Killing.submitted == 6:
                    pid = next(iter(self._pool._processes))
                    os.kill(pid, signal.SIGKILL)
                return future

        with structlog.testing.capture_logs() as logs:
            summary = run_arena(config, tmp_path / "o", executor_factory=lambda c, w: Killing(w), bootstrap_samples=0)
        assert summary.done == summary.scheduled == 60
        assert any(entry["event"] == "match_void" for entry in logs)
        reference = run_arena(config, tmp_path / "ref", executor="inline", bootstrap_samples=0)
        assert _results(summary.db_path) == _results(reference.db_path)


def test_one_duplicate_set_reports_unknown_intervals(tmp_path: Path) -> None:
    """sets_per_pairing = 1: no zero-width interval anywhere; text and HTML say unknown, JSON has null."""
    from gaigel_arena.report import format_table

    data = {
        "arena": {"seed": 2, "sets_per_pairing": 1, "executor": "inline"},
        "game": {"players": 2, "hands": 2},
        "bots": [{"name": "heuristic", "house": "heuristic"}, {"name": "random", "house": "random"}],
    }
    summary = run_arena(parse_config(data), tmp_path / "one", bootstrap_samples=200)
    report = load_report(summary.db_path, samples=200)
    exported = json.loads(json.dumps(report_dict(report), allow_nan=False))
    assert [bot["bt_ci95"] for bot in exported["bots"]] == [[None, None], [None, None]]
    text = format_table(report.standings)
    assert [line.split()[4] for line in text.splitlines()[2:4]] == [
        "unknown",
        "unknown",
    ] and "fewer than 2 duplicate sets" in text
    page = render_html(report)
    assert page.count("<td>unknown</td>") == 2 and "fewer than 2 duplicate sets" in page
