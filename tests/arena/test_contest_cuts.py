"""Small things an organiser met on a contest night: each a one-line answer, not a traceback or a wait."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gaigel_arena.config import ArenaConfig, parse_config
from gaigel_arena.executors import Executor
from gaigel_arena.journal import JournalError
from gaigel_arena.runner import run_arena

GAIGEL = [sys.executable, "-c", "import sys; from gaigel.cli import main; sys.exit(main(sys.argv[1:]))"]

CONFIG = {
    "arena": {"name": "cuts", "seed": 3, "sets_per_pairing": 1},
    "game": {"players": 2, "hands": 1},
    "bots": [{"name": "a", "house": "first"}, {"name": "b", "house": "random"}],
}


def test_taken_listen_port_is_one_line(tmp_path: Path) -> None:
    """``[arena] listen`` on a port in use: one line naming the key and the address, exit 2, nothing played."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "remote.toml"
        config.write_text(
            f'[arena]\nseed = 1\nlisten = "127.0.0.1:{port}"\n[game]\nplayers = 2\nhands = 1\n'
            '[[bots]]\nname = "friend"\nremote = true\ntoken = "0123456789abcdef0123"\n'
            '[[bots]]\nname = "b"\nhouse = "random"\n',
            encoding="utf-8",
        )
        done = subprocess.run(
            [*GAIGEL, "arena", "run", str(config), "--out", str(tmp_path / "out"), "--quiet"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"[arena] listen 127.0.0.1:{port}: cannot listen there" in done.stderr
    assert not (tmp_path / "out" / "arena.sqlite").exists()


def test_changed_config_is_refused_before_the_executor_starts(tmp_path: Path) -> None:
    """A journal of another config is refused before any worker (and bot) is started."""
    run_arena(parse_config(CONFIG), tmp_path / "out", executor="inline", bootstrap_samples=0)
    changed = parse_config({**CONFIG, "game": {"players": 2, "hands": 2}})
    started: list[int] = []

    def factory(config: ArenaConfig, workers: int) -> Executor:
        started.append(workers)
        raise AssertionError("the executor was started for a journal that is refused")

    with pytest.raises(JournalError, match=r"different arena config \(changed: game.hands\)"):
        run_arena(changed, tmp_path / "out", executor_factory=factory, bootstrap_samples=0)
    assert started == []


@pytest.mark.parametrize("make", ["nothing", "empty folder"])
def test_report_of_a_folder_without_journal_is_one_line(tmp_path: Path, make: str) -> None:
    """``gaigel arena report`` of a missing folder, or one without a journal: one plain line, exit 2."""
    target = tmp_path / "runs" / "nonexistent"
    if make == "empty folder":
        target.mkdir(parents=True)
    done = subprocess.run([*GAIGEL, "arena", "report", str(target)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "(expected" not in done.stderr and "give the --out folder of `gaigel arena run`" in done.stderr
    why = "no folder or file of that name" if make == "nothing" else "no arena.sqlite there"
    assert f"no arena journal in {target} ({why})" in done.stderr
