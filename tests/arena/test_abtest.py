"""``gaigel arena test``: the plan, the scores, real runs with house bots, kill -9 and resume."""

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

from gaigel_arena.abreport import ab_report_dict, format_ab, render_ab_html
from gaigel_arena.abtest import (
    CONTROL_META_KEY,
    ABKind,
    ScoreKind,
    load_ab_config,
    open_ab,
    pair_score,
    plan_ab,
    run_ab,
)
from gaigel_arena.sprt import Verdict

GAIGEL = [sys.executable, "-m", "gaigel.cli"]


def _write(
    tmp_path: Path,
    players: int,
    test: str,
    bots: tuple[str, ...] = ("random", "first", "heuristic"),
    hands: int = 2,
    name: str = "t.toml",
) -> Path:
    bot_tables = "".join(f'\n[[bots]]\nname = "{b}"\nhouse = "{b}"\n' for b in bots)
    path = tmp_path / name
    path.write_text(
        f'[arena]\nname = "ab"\nseed = 7\nworkers = 2\n\n[game]\nplayers = {players}\nhands = {hands}\n'
        f"{bot_tables}\n[test]\n{test}\n"
    )
    return path


def test_plan_of_an_ab_test_and_a_gauntlet(tmp_path: Path) -> None:
    arena, test = load_ab_config(_write(tmp_path, 2, 'candidate = "random"\nbaseline = "first"\nmax_sets = 30'))
    plan = plan_ab(arena, test)
    assert test.kind is ABKind.AB and plan.games_per_set == 2 and plan.matches_per_set == 2
    assert len(plan.schedule) == 60
    first, second = plan.schedule[:2]
    assert first.seed == second.seed and first.sides == ("random", "first") and second.sides == ("first", "random")
    assert plan.pairs[first.match_id] == ((0, 1),) and plan.pairs[second.match_id] == ((1, 0),)

    arena3, test3 = load_ab_config(
        _write(tmp_path, 3, 'candidate = "random"\nbaseline = "first"\nfield = ["heuristic"]\nmax_sets = 20')
    )
    plan3 = plan_ab(arena3, test3)
    assert plan3.games_per_set == 3 and plan3.matches_per_set == 3
    # the candidate meets the baseline from each side once per set
    assert sorted(plan3.pairs[m.match_id][0] for m in plan3.schedule[:3]) == [(0, 1), (1, 2), (2, 0)]

    arena_g, gauntlet = load_ab_config(
        _write(tmp_path, 3, 'candidate = "heuristic"\nfield = ["random", "first"]\nmax_sets = 20')
    )
    plan_g = plan_ab(arena_g, gauntlet)
    assert gauntlet.kind is ABKind.GAUNTLET
    assert plan_g.games_per_set == 6  # 3 rotations, two opponents in each match

    arena4, test4 = load_ab_config(_write(tmp_path, 4, 'candidate = "random"\nbaseline = "first"\nmax_sets = 20'))
    plan4 = plan_ab(arena4, test4)
    assert plan4.schedule[0].seats == ("random", "first", "random", "first")
    assert plan4.games_per_set == 2


@pytest.mark.parametrize(
    ("test", "message"),
    [
        ('candidate = "random"\nbaseline = "nobody"', "test.baseline must name a bot"),
        ('candidate = "random"\nbaseline = "first"\nelo0 = 5\nelo1 = 5', "elo1 must be above elo0"),
        (
            'candidate = "random"\nbaseline = "first"\nscore = "tricks"',
            "test.score must be one of match, hands, points",
        ),
        ('candidate = "random"\nbaseline = "first"\nspeed = 3', "unknown key(s) in [test]: speed"),
        ('candidate = "random"\nbaseline = "first"\nmax_sets = 5', "test.max_sets must be an integer 20..1000000"),
        ('candidate = "random"\nbaseline = "first"\ncontrol = "oracle"', "test.control must be a house bot"),
        ('candidate = "random"\nbaseline = "random"', "test.baseline must be another bot"),
    ],
)
def test_bad_test_tables_get_one_line_and_exit_2(tmp_path: Path, test: str, message: str) -> None:
    config = _write(tmp_path, 2, test)
    proc = subprocess.run(
        [*GAIGEL, "arena", "test", str(config), "--out", str(tmp_path / "o")], capture_output=True, text=True
    )
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "o" / "arena.sqlite").exists()


def test_three_sides_need_a_field_and_a_config_needs_a_test(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"needs test\.field"):
        load_ab_config(_write(tmp_path, 3, 'candidate = "random"\nbaseline = "first"'))
    plain = tmp_path / "plain.toml"
    plain.write_text('[[bots]]\nname = "a"\nhouse = "random"\n[[bots]]\nname = "b"\nhouse = "first"\n')
    with pytest.raises(ValueError, match=r"no \[test\] table"):
        load_ab_config(plain)


def test_pair_scores_of_each_kind() -> None:
    result = {"sides": [{"dashes": 1, "hands_won": 3}, {"dashes": 3, "hands_won": 1}], "termination": "completed"}
    assert pair_score(result, 0, 1, ScoreKind.MATCH) == 1.0
    assert pair_score(result, 1, 0, ScoreKind.MATCH) == 0.0
    assert pair_score(result, 0, 1, ScoreKind.HANDS) == 0.75
    assert pair_score(result, 0, 1, ScoreKind.POINTS) == 0.75
    even = {"sides": [{"dashes": 0, "hands_won": 0}, {"dashes": 0, "hands_won": 0}]}
    assert {pair_score(even, 0, 1, kind) for kind in ScoreKind} == {0.5}
    forfeit = {**result, "forfeit_sides": [0]}
    assert {pair_score(forfeit, 0, 1, kind) for kind in ScoreKind} == {0.0}


def test_a_three_player_run_with_the_control_variate_and_its_reports(tmp_path: Path) -> None:
    arena, test = load_ab_config(
        _write(
            tmp_path,
            3,
            'candidate = "heuristic"\nbaseline = "random"\nfield = ["first"]\nelo1 = 40\nmax_sets = 60\nscore = "points"\n'
            'control_against = "random"',
            hands=2,
        )
    )
    run = run_ab(arena, test, tmp_path / "out", executor="inline")
    state = run.state
    assert state.verdict is Verdict.H1  # heuristic is far stronger than random
    assert 20 <= state.sets <= 60
    assert state.baselines is not None and len(set(state.baselines)) > 1  # at 3 sides the baseline varies by deal
    assert run.control is not None and len(run.control) == 60
    # reading the folder again gives the same state, from the journal alone
    plan, again, control, digest, counts = open_ab(tmp_path / "out")
    assert again == state and control == run.control and digest == run.control_hash
    data = ab_report_dict(plan, again, counts, digest)
    assert data["verdict"] == "H1" and data["sets"] == state.sets and data["games"] == 3 * state.sets
    assert sum(data["set_histogram"].values()) == state.sets
    assert data["standard_errors"]["per_set_cv"] is not None
    assert data["with_control_variate"]["sets"] == state.sets
    text = format_ab(plan, again, counts)
    assert "verdict: H1: heuristic is better than random" in text and "per set + control variate" in text
    page = render_ab_html(plan, again, data)
    assert 'id="llr-plot"' in page and 'id="set-histogram"' in page and "<polyline" in page


def test_a_gauntlet_reaches_h1_and_a_bot_against_itself_does_not(tmp_path: Path) -> None:
    arena, test = load_ab_config(
        _write(
            tmp_path,
            2,
            'candidate = "heuristic"\nfield = ["random", "first"]\nelo1 = 40\nmax_sets = 100\ncontrol = "none"',
        )
    )
    run = run_ab(arena, test, tmp_path / "g", executor="inline")
    assert run.state.verdict is Verdict.H1 and run.plan.games_per_set == 4
    assert run.control is None and run.state.y_verdict is None

    arena2, twin = load_ab_config(_twin(tmp_path))  # the same bot under two names: H0 is true
    run2 = run_ab(arena2, twin, tmp_path / "twin", executor="inline")
    assert run2.state.verdict is Verdict.H0


def _twin(tmp_path: Path) -> Path:
    path = tmp_path / "twin.toml"
    path.write_text(
        "[arena]\nseed = 3\n[game]\nplayers = 2\nhands = 2\n"
        '[[bots]]\nname = "heuristic"\nhouse = "heuristic"\n[[bots]]\nname = "twin"\nhouse = "heuristic"\n'
        '[test]\ncandidate = "heuristic"\nbaseline = "twin"\nelo1 = 60\nmax_sets = 200\n'
    )
    return path


def _done(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM matches WHERE status = 'done'").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_kill_9_and_resume_give_the_llr_of_an_uninterrupted_run(tmp_path: Path) -> None:
    config = _write(tmp_path, 2, 'candidate = "random"\nbaseline = "first"\nelo1 = 20\nmax_sets = 400')
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    whole = subprocess.run(
        [*GAIGEL, "arena", "test", str(config), "--out", str(tmp_path / "whole"), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert whole.returncode == 0, whole.stderr
    expected = json.loads(whole.stdout)
    assert "expected sets 800 under H0, 800 under H1" in whole.stderr  # printed before the first game
    assert expected["sets"] > 60  # long enough to be killed in the middle

    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [*GAIGEL, "arena", "test", str(config), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while _done(out / "arena.sqlite") < 40 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    killed_at = _done(out / "arena.sqlite")
    assert 40 <= killed_at < 2 * expected["sets"]
    resumed = subprocess.run(
        [*GAIGEL, "arena", "test", str(config), "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr
    got = json.loads(resumed.stdout)
    for key in ("verdict", "llr", "llr_path", "sets", "games", "set_histogram", "estimate", "standard_errors"):
        assert got[key] == expected[key], key
    assert got["control_variate"]["sha256"] == expected["control_variate"]["sha256"]
    assert "stored in the journal" not in resumed.stderr  # read back from the journal, not computed again
    # every counted set holds its two games once: the journal has each match once, done or not
    with sqlite3.connect(out / "arena.sqlite") as conn:
        rows = conn.execute("SELECT match_id, status FROM matches").fetchall()
    assert len(rows) == len({r[0] for r in rows}) == 800
    report = subprocess.run([*GAIGEL, "arena", "test-report", str(out), "--json"], capture_output=True, text=True)
    assert report.returncode == 0 and json.loads(report.stdout)["llr"] == expected["llr"]


def test_a_changed_control_variate_in_the_journal_is_refused(tmp_path: Path) -> None:
    config = _write(tmp_path, 2, 'candidate = "random"\nbaseline = "first"\nelo1 = 60\nmax_sets = 40')
    out = tmp_path / "out"
    first = subprocess.run(
        [*GAIGEL, "arena", "test", str(config), "--out", str(out), "--quiet"], capture_output=True, text=True
    )
    assert first.returncode == 0, first.stderr
    with sqlite3.connect(out / "arena.sqlite") as conn:
        payload = json.loads(conn.execute("SELECT value FROM meta WHERE key = ?", (CONTROL_META_KEY,)).fetchone()[0])
        payload["values"][0][0] = 1.0 - payload["values"][0][0]
        conn.execute("UPDATE meta SET value = ? WHERE key = ?", (json.dumps(payload), CONTROL_META_KEY))
    again = subprocess.run([*GAIGEL, "arena", "test", str(config), "--out", str(out)], capture_output=True, text=True)
    assert again.returncode == 2
    assert "does not match its hash" in again.stderr


def test_the_arena_gauntlet_schedule_plays_only_the_candidates_groups(tmp_path: Path) -> None:
    from gaigel_arena.config import ConfigError, parse_config
    from gaigel_arena.report import load_report
    from gaigel_arena.runner import run_arena

    raw = {
        "arena": {"name": "g", "seed": 2, "sets_per_pairing": 3, "schedule": "gauntlet", "candidate": "h"},
        "game": {"players": 3, "hands": 1},
        "bots": [
            {"name": n, "house": b} for n, b in (("r", "random"), ("f", "first"), ("h", "heuristic"), ("r2", "random"))
        ],
    }
    config = parse_config(raw)
    round_robin = parse_config({**raw, "arena": {"name": "g", "seed": 2, "sets_per_pairing": 3}})
    assert config.gauntlet == "h" and config.config_hash() != round_robin.config_hash()
    summary = run_arena(config, tmp_path / "out", executor="inline", bootstrap_samples=0)
    # 3 of the 4 triples hold h; 3 rotations each, 3 sets
    assert summary.scheduled == 3 * 3 * 3 == summary.done
    report = load_report(tmp_path / "out", samples=0)
    assert all("h" in m.sides for m in report.matches)
    assert report.standings.connected
    for bad, message in (
        ({"schedule": "swiss"}, "arena.schedule must be"),
        ({"schedule": "gauntlet"}, "needs arena.candidate"),
        ({"candidate": "h"}, "only for schedule"),
    ):
        with pytest.raises(ConfigError, match=message):
            parse_config({**raw, "arena": {"name": "g", **bad}})


def test_only_the_complete_prefix_of_sets_counts_in_any_row_order(tmp_path: Path) -> None:
    """A half-played set, and every set after it, are left out; the order of the rows does not matter."""
    import random

    from gaigel_arena.abtest import evaluate
    from gaigel_arena.journal import JournalRow

    arena, test = load_ab_config(_write(tmp_path, 2, 'candidate = "random"\nbaseline = "first"\nmax_sets = 30'))
    plan = plan_ab(arena, test)
    rng = random.Random(4)

    def row(i: int, status: str) -> JournalRow:
        m = plan.schedule[i]
        dashes = [rng.choice([0, 1, 2]), rng.choice([0, 1, 2])]
        result = {"sides": [{"dashes": d, "hands_won": 0} for d in dashes]} if status == "done" else None
        return JournalRow(i, m.match_id, m.set_id, m.sides, m.seats, m.seed, status, 1, result, None, None)  # type: ignore[arg-type]

    rows = [row(i, "done") for i in range(len(plan.schedule))]
    rows[2 * 10 + 1] = row(2 * 10 + 1, "started")  # set 10 half played
    state = evaluate(plan, rows, None)
    assert state.prefix == 10 and len(state.set_scores) == state.sets <= 10
    shuffled = rows[:]
    rng.shuffle(shuffled)
    assert evaluate(plan, shuffled, None) == state
    full = evaluate(plan, [row(i, "done") if i == 21 else r for i, r in enumerate(rows)], None)
    assert full.prefix == 30


def test_arena_run_points_a_test_config_to_arena_test(tmp_path: Path) -> None:
    config = _write(tmp_path, 2, 'candidate = "random"\nbaseline = "first"')
    proc = subprocess.run(
        [*GAIGEL, "arena", "run", str(config), "--out", str(tmp_path / "o")], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "is for `gaigel arena test`" in proc.stderr


def test_the_cap_ends_a_test_inconclusive_with_its_interval(tmp_path: Path) -> None:
    arena, test = load_ab_config(
        _write(
            tmp_path, 2, 'candidate = "random"\nbaseline = "first"\nelo1 = 5\nmax_sets = 20\ncontrol = "none"', hands=1
        )
    )
    run = run_ab(arena, test, tmp_path / "out", executor="inline")
    assert run.state.verdict is Verdict.INCONCLUSIVE and run.state.sets == 20
    text = format_ab(run.plan, run.state)
    assert "inconclusive at the cap of 20 sets" in text and "nElo " in text
    est = run.state.estimate
    assert est is not None and est.nelo_ci95[0] < est.nelo < est.nelo_ci95[1]
