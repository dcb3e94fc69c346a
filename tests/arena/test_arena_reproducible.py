"""Reproducible bots: an arena of stochastic bots over gRPC plays the same every time.

A small version of examples/demo.toml (random, search and heuristic as bot processes over
gRPC): two runs, and a run killed with kill -9 and resumed, give the same journal and the
same records action for action; ``gaigel rematch`` plays every record again identically.
Every run is a ``gaigel`` process, so no gRPC thread of this test process meets a fork.
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
from typing import Any

import pytest

from gaigel import cli
from gaigel.botseed import bot_seed

CONFIG = """
[arena]
seed = 12
sets_per_pairing = 1
executor = "grpc"
keep_records = true
[game]
players = 2
hands = 1
[clock]
decision_ms = 5000     # generous: a timeout fallback on a loaded machine would differ
bank_ms = 60000
[[bots]]
name = "random"
house = "random"
[[bots]]
name = "search"
house = "search"
[[bots]]
name = "heuristic"
house = "heuristic"
"""
MATCHES = 6  # 3 pairings x 1 set x 2 seatings
GAIGEL = [sys.executable, "-m", "gaigel.cli"]


def _arena(config: Path, out: Path) -> list[str]:
    return [*GAIGEL, "arena", "run", str(config), "--out", str(out), "--quiet", "--bootstrap", "0"]


def _run(command: list[str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def played(out: Path) -> dict[str, Any]:
    """Per arena match id: the journal row (status, seed, result) and the record's actions with their flags."""
    with sqlite3.connect(f"file:{out / 'arena.sqlite'}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT match_id, status, seed, result FROM matches").fetchall()
    table: dict[str, Any] = {}
    for match_id, status, seed, result in rows:
        record = json.loads((out / "records" / f"{match_id}.json").read_text())
        actions = [[(a["seat"], a["action"], a.get("flags", [])) for a in h["actions"]] for h in record["hands"]]
        table[match_id] = (status, seed, json.loads(result), actions)
    return table


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The config and the output folder of one complete run."""
    root = tmp_path_factory.mktemp("reproducible")
    config = root / "arena.toml"
    config.write_text(CONFIG)
    _run(_arena(config, root / "first"))
    return config, root / "first"


def test_records_carry_the_schedules_match_key_and_bot_seeds(first_run: tuple[Path, Path]) -> None:
    """Each record's match key is the arena match id; its bot seeds follow from seed, seat and key."""
    _, out = first_run
    records = [json.loads(p.read_text()) for p in sorted((out / "records").glob("*.json"))]
    assert len(records) == MATCHES
    for record in records:
        assert record["match_key"] == record["match_id"] != record["server_match_id"]
        assert [s["bot_seed"] for s in record["seats"]] == [
            bot_seed(record["seed"], seat, record["match_key"]) for seat in range(2)
        ]


def test_a_second_run_gives_the_same_journal_and_records(first_run: tuple[Path, Path], tmp_path: Path) -> None:
    """Two runs of the config: equal journal rows and equal actions in every record, none timed out or capped."""
    config, out = first_run
    _run(_arena(config, tmp_path / "second"))
    first, second = played(out), played(tmp_path / "second")
    assert len(first) == MATCHES
    assert first == second
    flags = {f for *_, actions in first.values() for hand in actions for _, _, fs in hand for f in fs}
    assert not flags & {"TIMEOUT_FALLBACK", "TIME_CAPPED"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGKILL of a process group")
def test_a_run_killed_with_sigkill_and_resumed_gives_the_same(first_run: tuple[Path, Path], tmp_path: Path) -> None:
    """kill -9 of the runner and its bots after some matches, then the same command: the same as a clean run."""
    config, out = first_run
    resumed = tmp_path / "resumed"
    proc = subprocess.Popen(
        _arena(config, resumed), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    done, deadline = 0, time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and done < 2:
        time.sleep(0.05)
        try:
            with sqlite3.connect(f"file:{resumed / 'arena.sqlite'}?mode=ro", uri=True, timeout=5) as conn:
                done = conn.execute("SELECT COUNT(*) FROM matches WHERE status = 'done'").fetchone()[0]
        except sqlite3.Error:
            pass
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 2 <= done < MATCHES
    _run(_arena(config, resumed))
    assert played(resumed) == played(out)


def test_rematch_reproduces_every_record(first_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """gaigel rematch: every record in-process, and those of random against search with the bots' own
    commands through a match server, choose every decision as recorded."""
    _, out = first_run
    records = sorted((out / "records").glob("*.json"))
    for path in records:  # house bots only: played in this process, no gRPC
        assert cli.main(["rematch", str(path), "--json"]) == 0, path.name
        assert json.loads(capsys.readouterr().out)["same"]
    commands = [f"--bots={name}={' '.join([*GAIGEL, 'bot', name])}" for name in ("random", "search")]
    over_grpc = [p for p in records if "random-search" in p.name]
    assert len(over_grpc) == 2
    for path in over_grpc:
        same = _run([*GAIGEL, "rematch", str(path), "--json", *commands])
        assert json.loads(same.stdout)["same"], (path.name, same.stdout)
