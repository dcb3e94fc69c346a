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
    assert "ok: 11 of 11 checks passed" in done.stdout
    wrong = _run("arena", "check-bot", str(config), "--bot", "house")
    assert wrong.returncode == 2 and "only command bots are started by the arena" in wrong.stderr


ONE_MATCH = (
    "import random\nfrom gaigel_client import Bot, run\n\n"
    "class Once(Bot):\n    def decide(self, request):\n        return random.choice(request.legal_actions).id\n\n"
    "run(Once(), matches=1)\n"
)
"""A bot that leaves after one match, whole in its command (the sandbox shows it no other file)."""


@pytest.mark.parametrize("processes", ["per_match", "per_run"])
def test_a_bot_that_leaves_after_one_match_fails_only_where_one_process_plays_many(
    tmp_path: Path, processes: str
) -> None:
    """Under ``per_run`` the arena would disqualify a bot that leaves after a match; under
    ``per_match`` (a process per match) leaving is harmless, and check-bot says so."""
    bot = [sys.executable, "-c", ONE_MATCH]
    config = tmp_path / "arena.toml"
    config.write_text(
        f'[arena]\nbot_processes = "{processes}"\n[clock]\ndecision_ms = 1500\n'
        f'[[bots]]\nname = "once"\ncommand = {json.dumps(bot)}\n[[bots]]\nname = "house"\nhouse = "random"\n'
    )
    done = _run("arena", "check-bot", str(config), "--bot", "once", "--startup-timeout", "30", "--json")
    checks = {c["name"]: c for c in json.loads(done.stdout.strip().splitlines()[-1])["checks"]}
    after = checks["plays the next match on its session"]
    if processes == "per_run":
        assert done.returncode == 1 and after["ok"] is False, done.stdout[-2000:]
        assert "after its first match" in after["reason"] and 'bot_processes = "per_run"' in after["reason"]
    else:
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert after["reason"].startswith("not required here (this arena starts a process per match): the bot exited")
