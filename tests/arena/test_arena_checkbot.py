"""``gaigel arena check-bot``: the checks with the bot in its arena sandbox, limits and clock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gaigel_arena.bwrap import bwrap_problem

ROOT = Path(__file__).resolve().parents[2]
SDK_BOT = ROOT / "clients" / "python" / "examples" / "random_bot.py"
NEEDS = (
    "import pathlib, runpy, sys; pathlib.Path({path!r}).read_text(); runpy.run_path(sys.argv[1], run_name='__main__')"
)
"""A bot that reads a file of the organiser's at start (named inside its code, not as an argument:
files its command names are shown to it read-only)."""

pytestmark = pytest.mark.skipif(bool(bwrap_problem()) and not os.environ.get("CI"), reason="needs bubblewrap")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "gaigel.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_a_bot_that_passes_plain_check_bot_but_reads_the_organisers_files_fails_in_its_sandbox(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "organiser" / "notes.txt"  # outside every folder the bot is shown
    notes.parent.mkdir()
    notes.write_text("the organiser's notes")
    bot = [sys.executable, "-c", NEEDS.format(path=str(notes)), str(SDK_BOT)]
    config = tmp_path / "arena.toml"
    config.write_text(
        f'[clock]\ndecision_ms = 1000\n[[bots]]\nname = "needy"\ncommand = {json.dumps(bot)}\n'
        '[[bots]]\nname = "house"\nhouse = "random"\n'
    )
    plain = _run("check-bot", "--startup-timeout", "30", "--", *bot)
    assert plain.returncode == 0, plain.stdout[-2000:]
    confined = _run("arena", "check-bot", str(config), "--bot", "needy", "--startup-timeout", "30")
    assert confined.returncode == 1, confined.stdout[-2000:]
    assert "checking bot 'needy' in the bwrap sandbox" in confined.stderr
    assert "FAIL  joins with the right protocol version" in confined.stdout
    assert "notes.txt" in confined.stdout  # the bot's own error, quoted


def test_the_sdk_bot_passes_in_its_sandbox_with_the_arena_clock(tmp_path: Path) -> None:
    config = tmp_path / "arena.toml"
    config.write_text(
        f'[clock]\ndecision_ms = 1500\n[[bots]]\nname = "py"\ncommand = ["python", "{SDK_BOT}"]\n'
        '[[bots]]\nname = "house"\nhouse = "random"\n'
    )
    done = _run("arena", "check-bot", str(config), "--bot", "py", "--startup-timeout", "30")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "decision_ms 1500 x load factor" in done.stderr
    assert "ok: 10 of 10 checks passed" in done.stdout
    wrong = _run("arena", "check-bot", str(config), "--bot", "house")
    assert wrong.returncode == 2 and "only command bots are started by the arena" in wrong.stderr
