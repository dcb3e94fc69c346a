"""The contest night: one bad bot never stops the contest (issue 23).

An arena of two good bots and three bad ones, each in the default sandbox: one that exits
at once with a message, one that crashes in about every third match, one that needs more
memory than its limit. Every match is counted once; the good bots' matches are played;
the bot that cannot start and the one that cannot get its memory are disqualified with
what they wrote; the crashing one loses the matches it crashed in and plays the others.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gaigel_arena.bwrap import bwrap_problem
from gaigel_arena.config import parse_config
from gaigel_arena.journal import Journal
from gaigel_arena.runner import run_arena

BOTS = Path(__file__).resolve().parent / "bots"
EXITS = "import sys; sys.stderr.write('exits-at-once: no model file\\n'); raise SystemExit(1)"
HOG = "b = bytearray(b'x') * (600 << 20)\nimport runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"


@pytest.mark.skipif(bool(bwrap_problem()) and not __import__("os").environ.get("CI"), reason="needs bubblewrap")
def test_bad_bots_lose_their_matches_and_the_contest_goes_on(tmp_path: Path) -> None:
    sdk_bot = Path(__file__).resolve().parents[2] / "clients" / "python" / "examples" / "random_bot.py"
    data = {
        "arena": {"seed": 11, "sets_per_pairing": 1},
        "game": {"players": 2, "hands": 1},
        "clock": {"resume_grace_ms": 500},
        "sandbox": {"memory_mb": 256},
        "bots": [
            {"name": "exits", "command": [sys.executable, "-c", EXITS]},
            {
                "name": "crashy",
                "command": [sys.executable, str(BOTS / "crashing_bot.py"), "--crash-at", "3", "--every", "3"],
            },
            {"name": "hog", "command": [sys.executable, "-c", HOG, str(sdk_bot)]},
            {"name": "good-a", "house": "first"},
            {"name": "good-b", "house": "random"},
        ],
    }
    summary = run_arena(parse_config(data), tmp_path / "out", workers=1, bootstrap_samples=0)
    assert summary.done == summary.scheduled == 20
    with Journal.open_existing(summary.db_path) as journal:
        rows = journal.rows()
    fate: dict[str, set[str]] = {}
    for row in rows:
        assert row.status == "done" and row.result is not None
        forfeit = row.result.get("forfeit")
        if forfeit:
            fate.setdefault(forfeit["bot"], set()).add(forfeit["reason"])
        if {"exits", "hog"}.isdisjoint(row.sides) and "crashy" not in row.sides:
            assert row.result["termination"] == "completed", row.result
    assert fate["exits"] == {"DISQUALIFIED"} and fate["hog"] == {"DISQUALIFIED"}, fate
    assert fate.get("crashy", set()) <= {"DISCONNECT"}, fate  # forfeits where it crashed, never disqualified
    crashy_played = [r for r in rows if "crashy" in r.sides and r.result and r.result["termination"] == "completed"]
    assert crashy_played, "the crashing bot played none of its matches"
    messages = {
        r.result["forfeit"]["message"] for r in rows if r.result and r.result.get("forfeit", {}).get("bot") == "exits"
    }
    assert any("exits-at-once: no model file" in m for m in messages), messages
    for path in (tmp_path / "out" / "records").glob("*.json"):
        record = json.loads(path.read_text())
        assert record["match_id"] == path.stem
