"""The duplicate-leak attack against a real arena run (gRPC executor, `gaigel arena run` subprocess).

A duplicate set plays one deal seed once per seating. The attack bot
(tests/arena/bots/duplicate_leak_bot.py) remembers its own cards per trump card; when the
same deal comes back in the other seating it predicts the opponent's whole hand (its old
hand) and the talon cards it drew before. The predictions are checked against the deals
rebuilt from the kept match records.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gaigel.match import hand_setup, spec_from_record

pytest.importorskip("gaigel_server.server")

BOT = Path(__file__).parent / "bots" / "duplicate_leak_bot.py"


def _run_arena(tmp_path: Path, processes: str | None, in_match: bool = False) -> tuple[Path, Path]:
    log = tmp_path / "leak.jsonl"
    setting = f'bot_processes = "{processes}"\n' if processes else ""
    if in_match:
        setting += "allow_in_match_duplicate = true\n"
    options = '[game.options]\n"match.format" = "duplicate"\n' if in_match else ""
    config = tmp_path / "leak.toml"
    config.write_text(
        f'[arena]\nname = "leak"\nseed = 11\nsets_per_pairing = 3\nworkers = 1\nexecutor = "grpc"\n{setting}'
        f"[game]\nplayers = 2\nhands = 2\n{options}"
        # unconfined: the attack bot reports what it predicted through a file ($GAIGEL_LEAK_LOG), and
        # what is measured here is memory inside a process, which no sandbox changes
        f'[[bots]]\nname = "leak"\ncommand = {json.dumps([sys.executable, str(BOT)])}\nsandbox = "none"\n'
        '[[bots]]\nname = "first"\nhouse = "first"\n'
    )
    out = tmp_path / "out"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GAIGEL_LEAK_LOG": str(log)}
    done = subprocess.run(
        [sys.executable, "-m", "gaigel.cli", "arena", "run", str(config), "--out", str(out), "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out, log


def _score(out: Path, log: Path) -> dict[str, Any]:
    """How many predictions, how many opponent hands exactly right, and the talon cards right in each."""
    records = {}
    for path in (out / "records").glob("*.json"):
        record = json.loads(path.read_text())
        records[record["server_match_id"]] = record
    lines = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    hands_right, talon_right = 0, []
    for line in lines:
        record = records[line["match_id"]]
        d, _dealer, forehand = hand_setup(spec_from_record(record), line["hand_index"])
        opponent = 1 - line["seat"]
        actual = sorted(d.hands[(opponent - forehand) % 2])
        hands_right += line["opponent_hand"] == actual
        talon_right.append(sum(d.talon[int(pos)] == card for pos, card in line["talon"].items()))
    return {"predictions": len(lines), "hands": hands_right, "talon": talon_right}


def test_attack_reads_the_opponents_hand_when_a_process_plays_both_seatings(tmp_path: Path) -> None:
    """bot_processes = "per_run" (one process plays many matches): in whichever seating of each of
    the 3 sets comes second, both hands' opponent cards are known before the first card, and the
    talon cards the bot drew in the other seating (about half the talon)."""
    out, log = _run_arena(tmp_path, "per_run")
    score = _score(out, log)
    assert score["predictions"] == 3 * 2, score  # 3 sets, 2 hands each
    assert score["hands"] == score["predictions"], score  # every prediction exact
    assert min(score["talon"]) >= 5, score


def test_fresh_processes_per_match_leave_nothing_to_remember(tmp_path: Path) -> None:
    """The default (bot_processes = "per_match"): each match gets a new process under a one-match
    alias, so the bot recognises no deal and predicts nothing; the records name the configured bot."""
    out, log = _run_arena(tmp_path, None)
    assert _score(out, log)["predictions"] == 0
    seats = {s["bot"] for p in (out / "records").glob("*.json") for s in json.loads(p.read_text())["seats"]}
    assert seats == {"leak", "first"}


def test_in_match_duplicate_still_leaks_when_the_organiser_opts_in(tmp_path: Path) -> None:
    """What allow_in_match_duplicate = true accepts: hand 1 replays hand 0's deal in the other
    seating inside one match, so even a fresh process knows the opponent's hand in hand 1 of
    every match (the arena refuses this format with such bots unless opted in)."""
    out, log = _run_arena(tmp_path, None, in_match=True)
    score = _score(out, log)
    assert score["predictions"] == 6 and score["hands"] == 6, score  # 6 matches, hand 1 of each
