"""A command bot that crashes mid-match, through the gRPC executor.

The bot (tests/arena/bots/crashing_bot.py, on the Python SDK) dies with ``os._exit(3)`` on
its Nth decision in each process. The executor restarts it; the match it was playing ends
as a forfeit after ``[clock] resume_grace_ms`` (reason DISCONNECT), the forfeit is stored
with its reason and rated as a loss, and the arena plays every match.

The arenas run as ``gaigel arena run`` subprocesses, so this test process never starts
gRPC threads (later tests fork worker processes).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gaigel_arena.journal import Journal
from gaigel_arena.results import pairwise_results
from gaigel_arena.runner import standings_from_journal

pytest.importorskip("gaigel_server.server")

BOT = Path(__file__).parent / "bots" / "crashing_bot.py"


def _toml(tmp_path: Path, crash_at: int, sets: int) -> Path:
    command = json.dumps([sys.executable, str(BOT), "--crash-at", str(crash_at), "--marker", str(tmp_path)])
    path = tmp_path / "crash.toml"
    path.write_text(
        f"""
[arena]
name = "crash test"
seed = 3
sets_per_pairing = {sets}
workers = 1
executor = "grpc"
bot_processes = "per_run"  # one process per bot, restarted after a crash

[game]
players = 2
hands = 1

[clock]
decision_ms = 2000
bank_ms = 5000
resume_grace_ms = 300

[[bots]]
name = "crashy"
command = {command}

[[bots]]
name = "first"
house = "first"

[[bots]]
name = "random"
house = "random"
"""
    )
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", "GAIGEL_TEST_MARKER": str(tmp_path)}


def _marked(marker: str) -> list[int]:
    """Live processes (not zombies) whose environment holds GAIGEL_TEST_MARKER=*marker* (the runner,
    its workers, house bots) or whose command line holds *marker* (the sandboxed bot, whose
    environment the sandbox cuts)."""
    needle = f"GAIGEL_TEST_MARKER={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().split(")")[-1].split()[0]
            except OSError:
                continue
            if (needle in environ.split(b"\0") or marker.encode() in cmdline.split(b"\0")) and state != "Z":
                found.append(int(entry))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and SIGKILL")
class TestCrashingBot:
    """Crashes are forfeits with a reason, rated as losses; the arena goes on."""

    def test_crashing_bot_is_restarted_and_forfeits(self, tmp_path: Path) -> None:
        """Every match is played; each crash is a DISCONNECT forfeit of the crashing bot, rated as its loss."""
        config = _toml(tmp_path, crash_at=40, sets=3)
        out = tmp_path / "out"
        command = [sys.executable, "-m", "gaigel.cli", "arena", "run", str(config), "--out", str(out), "--quiet"]
        done = subprocess.run(
            [*command, "--bootstrap", "0", "--log-level", "info"],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
        # What the bot wrote is in its own log files, not in the runner's log.
        assert "crashing_bot: crashing" not in done.stderr
        said = "\n".join(p.read_text() for p in sorted((out / "logs").rglob("crashy-*.log")))
        crashes = [line for line in said.splitlines() if line.startswith("crashing_bot: crashing")]
        restarts = [e for e in events if e["event"] == "bot_restarted"]
        assert crashes, "the bot never crashed: lower --crash-at"
        # every crash is followed by a restart (one at the very end may race the shutdown)
        assert len(crashes) - 1 <= len(restarts) <= len(crashes) < 10  # executor's MAX_RESTARTS
        assert all(e["bot"] == "crashy" and e["exit_code"] == 3 for e in restarts)

        with Journal.open_existing(out / "arena.sqlite") as journal:
            rows = journal.rows()
            standings = standings_from_journal(journal, samples=0)
        assert all(r.status == "done" for r in rows) and len(rows) == 18
        forfeits = [r for r in rows if r.result and r.result["termination"] == "forfeit"]
        assert forfeits, "no crash landed inside a match"
        assert len(forfeits) <= len(crashes)
        print(f"{len(crashes)} crashes, {len(restarts)} restarts, {len(forfeits)} forfeits")
        crashy_score = 0.0
        for row in rows:
            assert row.result is not None
            pairs = pairwise_results(row.set_id, row.sides, row.result)
            crashy_score += sum(g.score if g.a == "crashy" else 1.0 - g.score for g in pairs if "crashy" in (g.a, g.b))
            if row not in forfeits:
                assert "forfeit" not in row.result
                continue
            side = row.sides.index("crashy")
            assert row.result["forfeit_sides"] == [side]
            assert row.result["winners"] == [1 - side]
            why = row.result["forfeit"]
            assert (why["reason"], why["bot"], why["side"]) == ("DISCONNECT", "crashy", side)
            assert "did not resume within 0.3 s" in why["message"]
            assert [(g.a, g.b, g.score) for g in pairs] == [(row.sides[0], row.sides[1], float(side))]  # a loss
            record = json.loads(Path(row.record_path or "").read_text())
            reasons = [f["reason"] for f in record["faults"] if f["seat"] == why["seat"]]
            assert reasons[-2:] == ["DISCONNECT", "FORFEIT"]
        crashy = next(r for r in standings.rows if r.name == "crashy")
        assert crashy.games == 12 and crashy.score == crashy_score

        # The forfeits are in the reports too.
        report = subprocess.run(
            [sys.executable, "-m", "gaigel.cli", "arena", "report", str(out), "--json", "--bootstrap", "0"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        data = json.loads(report.stdout)
        assert next(b for b in data["bots"] if b["name"] == "crashy")["score"] == crashy_score

    def test_killed_runner_leaves_no_bot_processes(self, tmp_path: Path) -> None:
        """kill -9 of the runner ends its bot processes too (parent-death signal), and a rerun finishes."""
        config = _toml(tmp_path, crash_at=10**6, sets=8)
        out = tmp_path / "out"
        command = [sys.executable, "-m", "gaigel.cli", "arena", "run", str(config), "--out", str(out)]
        command += ["--quiet", "--bootstrap", "0"]
        proc = subprocess.Popen(command, env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        db = out / "arena.sqlite"
        deadline = time.monotonic() + 60
        done = 0
        while proc.poll() is None and time.monotonic() < deadline and done < 2:
            time.sleep(0.05)
            try:
                with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
                    done = conn.execute("SELECT COUNT(*) FROM matches WHERE status = 'done'").fetchone()[0]
            except sqlite3.Error:
                pass
        assert proc.poll() is None, "the run ended before it could be killed"
        assert len(_marked(str(tmp_path))) >= 4  # the runner and its bots
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while _marked(str(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _marked(str(tmp_path)) == [], "bot processes outlived the killed runner"

        again = subprocess.run(command, env=_env(tmp_path), capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr[-3000:]
        with Journal.open_existing(db) as journal:
            assert journal.counts()["done"] == 48
        assert _marked(str(tmp_path)) == []


def test_ctrl_c_says_that_a_rerun_resumes(tmp_path: Path) -> None:
    """SIGINT (Ctrl-C) mid-run: exit 130 with one line naming the journal and the rerun; the rerun finishes."""
    config = tmp_path / "long.toml"
    config.write_text(
        '[arena]\nseed = 1\nsets_per_pairing = 400\nexecutor = "local"\nworkers = 1\n'
        '[game]\nplayers = 2\nhands = 2\n[[bots]]\nname = "a"\nhouse = "first"\n[[bots]]\nname = "b"\nhouse = "random"\n'
    )
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "gaigel.cli", "arena", "run", str(config), "--out", str(out), "--quiet"]
    argv += ["--log-level", "warning", "--bootstrap", "0"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not _done_count(out / "arena.sqlite") and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == (
        f"gaigel arena run: interrupted; finished matches are kept in {out / 'arena.sqlite'}: "
        "run the same command again to resume (unfinished matches are replayed from their seed)"
    )
    rerun = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "800/800 matches done" in rerun.stdout
    assert "crash" not in rerun.stdout  # an interrupted run is no crash: "left unfinished by an earlier run"


def _done_count(db: Path) -> int:
    """Matches done in a running arena's journal (0 while it does not exist yet)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM matches WHERE status = 'done'").fetchone()[0])
    except sqlite3.Error:
        return 0
