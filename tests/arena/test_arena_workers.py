"""Table workers: the gRPC executor's matches on worker processes, each with its own server and bots.

Real worker processes, real bot processes over gRPC on loopback, a real SQLite journal.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import structlog.testing

from gaigel_arena.config import ArenaConfig, parse_config
from gaigel_arena.executors import MatchJob, MatchOutcome
from gaigel_arena.journal import Journal
from gaigel_arena.metrics import ArenaMetrics
from gaigel_arena.runner import ArenaError, make_executor, run_arena

pytest.importorskip("gaigel_server.server")

from gaigel_arena.workers import WorkerExecutor


def _bot(house: str) -> list[str]:
    return [sys.executable, "-m", "gaigel.cli", "bot", house]


def _config(processes: str = "per_run", sets: int = 2, seed: int = 8) -> ArenaConfig:
    return parse_config(
        {
            "arena": {"name": "workers", "seed": seed, "sets_per_pairing": sets, "bot_processes": processes},
            "game": {"players": 2, "hands": 2},
            "bots": [
                {"name": "cmd-random", "command": _bot("random")},
                {"name": "cmd-heuristic", "command": _bot("heuristic")},
                {"name": "first", "house": "first"},
            ],
        }
    )


def _results(db: Path) -> dict[str, Any]:
    with Journal.open_existing(db) as journal:
        return {r.match_id: (r.status, r.result) for r in journal.rows()}


def _played_by(folder: Path) -> dict[str, str]:
    return {f.stem: json.loads(f.read_text())["played_by"] for f in sorted((folder / "records").glob("*.json"))}


def test_grpc_executor_uses_table_workers(tmp_path: Path) -> None:
    pool = make_executor(_config(), 2, "grpc")
    try:
        assert isinstance(pool, WorkerExecutor)
        pids = pool.pids()
        assert len(pids) == 2 and os.getpid() not in pids.values()
        assert all(Path(f"/proc/{pid}").exists() for pid in pids.values())
    finally:
        pool.shutdown()
    assert {s["where"].split(" (")[0] for s in pool.worker_stats} == {"table worker 0", "table worker 1"}
    for pid in pids.values():  # every worker (and with it its server and bots) is gone
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_one_and_two_workers_play_the_same_matches(tmp_path: Path) -> None:
    """Deterministic bots: the journal of 2 workers is that of 1 worker, match for match, and both workers played."""
    config = _config()
    one = run_arena(config, tmp_path / "one", workers=1, executor="grpc", bootstrap_samples=0)
    two = run_arena(config, tmp_path / "two", workers=2, executor="grpc", bootstrap_samples=0)
    assert one.done == one.scheduled == two.done == 12
    assert _results(one.db_path) == _results(two.db_path)
    assert all(status == "done" for status, _ in _results(two.db_path).values())
    assert len({w.split(" (")[0] for w in _played_by(tmp_path / "two").values()}) == 2
    assert {w.split(" (")[0] for w in _played_by(tmp_path / "one").values()} == {"table worker 0"}
    inline = run_arena(
        parse_config(
            {
                **json.loads(json.dumps({"arena": {"name": "workers", "seed": 8, "sets_per_pairing": 2}})),
                "game": {"players": 2, "hands": 2},
                "bots": [
                    {"name": "cmd-random", "house": "random"},
                    {"name": "cmd-heuristic", "house": "heuristic"},
                    {"name": "first", "house": "first"},
                ],
            }
        ),
        tmp_path / "inline",
        executor="inline",
        bootstrap_samples=0,
    )
    assert _results(inline.db_path) == _results(one.db_path)  # the same matches as in-process play


class _KillOnce:
    """Wraps a WorkerExecutor: kills (SIGKILL) the worker of the first match while that match plays."""

    def __init__(self, inner: WorkerExecutor) -> None:
        self.inner = inner
        self.workers = inner.workers
        self.killed: list[tuple[str, int]] = []
        self.armed = False

    def submit(self, job: MatchJob) -> concurrent.futures.Future[MatchOutcome]:
        future = self.inner.submit(job)
        if not self.killed and not self.armed:
            self.armed = True
            pid = self.inner.playing()[job.match_id]  # dispatched at once: the workers are idle
            threading.Timer(0.3, self._kill, (pid,)).start()
        return future

    def _kill(self, pid: int) -> None:
        """Kills worker *pid*, noting the match it is playing at that moment."""
        match_id = {p: m for m, p in self.inner.playing().items()}.get(pid, "")
        os.kill(pid, signal.SIGKILL)
        self.killed.append((match_id, pid))

    def shutdown(self) -> None:
        self.inner.shutdown()


def test_killed_worker_voids_its_match_which_is_replayed(tmp_path: Path) -> None:
    """kill -9 of a worker mid-match: that match comes back void and is replayed, the worker is restarted,
    nothing is lost or counted twice: the journal equals that of an undisturbed run."""
    config = _config("per_match", sets=1, seed=5)
    metrics = ArenaMetrics(config.bot_names)
    pools: list[_KillOnce] = []

    def factory(c: ArenaConfig, w: int) -> _KillOnce:
        pools.append(_KillOnce(WorkerExecutor(c, w)))
        return pools[0]

    with structlog.testing.capture_logs() as logs:
        killed = run_arena(config, tmp_path / "killed", workers=2, executor_factory=factory, metrics=metrics)
    ((match_id, pid),) = pools[0].killed
    assert killed.done == killed.scheduled == 6
    assert pools[0].inner.restarts == 1
    voids = [e for e in logs if e["event"] == "match_void"]
    assert [e["match_id"] for e in voids] == [match_id]
    assert f"(pid {pid}) ended with exit code -9 in match {match_id}" in voids[0]["error"]
    assert metrics.matches_total.labels(outcome="void")._value.get() == 1
    assert f"pid {pid} " not in _played_by(tmp_path / "killed")[match_id]  # the replay's record
    calm = run_arena(config, tmp_path / "calm", workers=1, executor="grpc", bootstrap_samples=0)
    assert _results(killed.db_path) == _results(calm.db_path)


def test_missing_command_fails_before_any_worker_starts(tmp_path: Path) -> None:
    data = {
        "game": {"players": 2, "hands": 1},
        "bots": [{"name": "ghost", "command": ["gaigel-no-such-bot-command"]}, {"name": "f", "house": "first"}],
    }
    with pytest.raises(ValueError, match="bot 'ghost' cannot run on this machine: its command 'gaigel-no-such"):
        run_arena(parse_config(data), tmp_path / "o", workers=2, executor="grpc", bootstrap_samples=0)
    assert not (tmp_path / "o" / "arena.sqlite").exists()


def test_bot_missing_in_a_restarted_worker_voids_its_matches_with_the_reason(tmp_path: Path) -> None:
    """A bot command that disappears while the arena runs: the restarted worker cannot start that bot, its
    matches are void with a message naming the worker, the bot and the command; the arena stops after 3."""
    script = tmp_path / "vanishing-bot"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -m gaigel.cli bot first\n")
    script.chmod(0o755)
    data = {
        "arena": {"sets_per_pairing": 3, "bot_processes": "per_run"},
        "game": {"players": 2, "hands": 1},
        "bots": [{"name": "v", "command": [str(script)]}, {"name": "f", "house": "first"}],
    }
    pools: list[WorkerExecutor] = []

    def factory(c: ArenaConfig, w: int) -> WorkerExecutor:
        pool = WorkerExecutor(c, w)
        pools.append(pool)
        script.unlink()
        for pid in pool.pids().values():
            os.kill(pid, signal.SIGKILL)
        return pool

    started = time.monotonic()
    reason = r"BotMissingError: bot 'v' cannot run on table worker 0 \(pid \d+ on .*\): its command '.*vanishing-bot'"
    with pytest.raises(ArenaError, match=reason):
        run_arena(parse_config(data), tmp_path / "o", workers=1, executor_factory=factory, bootstrap_samples=0)
    assert time.monotonic() - started < 120
