"""The set-outcome histogram per pair in the ordinary arena report (text, JSON, HTML)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gaigel.cli import main
from gaigel_arena.config import parse_config
from gaigel_arena.ratings import GameResult
from gaigel_arena.report import format_set_histograms, load_report, render_html, report_dict
from gaigel_arena.runner import run_arena
from gaigel_arena.sprt import pair_set_histograms


def test_histogram_of_hand_made_results() -> None:
    results = [
        GameResult("s0", "b", "a", 1.0),  # seen from a: a lost this game ...
        GameResult("s0", "a", "b", 1.0),  # ... and won this one: 1 point out of 2
        GameResult("s1", "a", "b", 1.0),
        GameResult("s1", "a", "b", 0.5),
        GameResult("s2", "a", "b", 0.0),
        GameResult("s2", "b", "a", 1.0),
        GameResult("s0", "a", "c", 0.5),
    ]
    assert pair_set_histograms(results) == {("a", "b"): {"0": 1, "1": 1, "1.5": 1}, ("a", "c"): {"0.5": 1}}


def test_the_arena_report_shows_the_sets_of_each_pair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = parse_config(
        {
            "arena": {"name": "hist", "seed": 4, "sets_per_pairing": 6},
            "game": {"players": 2, "hands": 2},
            "bots": [
                {"name": "r", "house": "random"},
                {"name": "f", "house": "first"},
                {"name": "h", "house": "heuristic"},
            ],
        }
    )
    run_arena(config, tmp_path / "out", executor="inline", bootstrap_samples=0)
    report = load_report(tmp_path / "out", samples=0)
    data = report_dict(report)
    pairs = {(h["a"], h["b"]): h["points_of_a"] for h in data["set_histograms"]}
    assert set(pairs) == {("f", "h"), ("f", "r"), ("h", "r")}
    assert all(sum(hist.values()) == 6 for hist in pairs.values())  # every set once, two games in each
    assert all(0 <= float(k) <= 2 for hist in pairs.values() for k in hist)
    assert "h vs r: " in format_set_histograms(report)
    assert 'id="set-histograms"' in render_html(report)
    assert main(["arena", "report", str(tmp_path / "out"), "--bootstrap", "0"]) == 0
    assert "duplicate sets by points of the first bot" in capsys.readouterr().out
