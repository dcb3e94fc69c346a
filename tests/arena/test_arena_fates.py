"""The report tells what became of every bot: forfeits by reason, voids, disqualification, and bots
that only forfeited listed apart from the ratings, in text, JSON and HTML.

The arena is real (runner, SQLite journal, ratings, report); its executor plays house bots inline
but stands in for three bad bots the way the gRPC executor reports them: one that cannot start
(:class:`BotFailure` until the runner disqualifies it), one remote bot that never connects
(``ABSENT`` forfeits), and one infrastructure failure (a void, replayed).
"""

from __future__ import annotations

import concurrent.futures
import subprocess
import sys
from pathlib import Path

from gaigel_arena.config import parse_config
from gaigel_arena.executors import BotFailure, InlineExecutor, MatchJob, MatchOutcome, unplayed_forfeit
from gaigel_arena.report import bot_fates, format_fates, load_report, render_html, report_dict
from gaigel_arena.runner import MAX_BOT_FAILURES, run_arena
from tests.tools.browser import Dom

GAIGEL = [sys.executable, "-c", "import sys; from gaigel.cli import main; sys.exit(main(sys.argv[1:]))"]

CONFIG = {
    "arena": {"name": "fates", "seed": 5, "sets_per_pairing": 2},
    "game": {"players": 2, "hands": 1},
    "bots": [
        {"name": "good", "house": "first"},
        {"name": "fine", "house": "random"},
        {"name": "broken", "house": "random"},
        {"name": "ghost", "house": "random"},
    ],
}


class _BadBots(InlineExecutor):
    def __init__(self) -> None:
        self.flaked = False

    def submit(self, job: MatchJob) -> concurrent.futures.Future[MatchOutcome]:
        future: concurrent.futures.Future[MatchOutcome] = concurrent.futures.Future()
        if "broken" in job.seats:
            future.set_exception(BotFailure("broken", "bot 'broken' exited (code 1) before it joined"))
        elif "ghost" in job.seats:
            result = unplayed_forfeit(job.ruleset, job.seats, ["ghost"], "ABSENT", "not connected")
            future.set_result(MatchOutcome(job.match_id, result, None, 0.0))
        elif not self.flaked:
            self.flaked = True
            future.set_exception(ConnectionError("table worker lost"))
        else:
            return super().submit(job)
        return future


def test_every_bot_has_its_fate(tmp_path: Path) -> None:
    out = tmp_path / "out"
    summary = run_arena(parse_config(CONFIG), out, executor_factory=lambda c, w: _BadBots(), bootstrap_samples=0)
    assert summary.done == summary.scheduled == 24  # 6 pairs x 2 sets x 2 seatings: nothing stopped
    report = load_report(out, samples=0, details=True)
    fates = {f.name: f for f in bot_fates(report)}

    assert fates["broken"].disqualified is not None and "exited (code 1)" in fates["broken"].disqualified
    assert not fates["broken"].rated and fates["broken"].played == 0
    assert fates["broken"].forfeits == {"DISQUALIFIED": 12}  # the void attempts too, once it was out
    assert fates["broken"].voids == MAX_BOT_FAILURES  # the attempts before it was disqualified
    # 4 of its 12 matches were against the disqualified bot: won by its forfeit, no game played
    assert fates["ghost"].forfeits == {"ABSENT": 8} and fates["ghost"].played == 4 and not fates["ghost"].rated
    assert fates["ghost"].disqualified is None and fates["ghost"].fate == "not rated: only forfeits"
    assert fates["good"].rated and fates["fine"].rated
    # a void counts for every bot of its match: the lost table worker (good-fine) and broken's 3 failures
    assert fates["good"].voids + fates["fine"].voids == 2 + MAX_BOT_FAILURES
    assert {row.name for row in report.standings.rows} == {"good", "fine"}

    data = report_dict(report)
    assert {b["name"]: b["elo"] is None for b in data["bots"]} == {
        "good": False,
        "fine": False,
        "broken": True,
        "ghost": True,
    }
    by_name = {f["name"]: f for f in data["fates"]}
    assert by_name["broken"]["fate"].startswith("disqualified: ") and by_name["ghost"]["forfeits"] == {"ABSENT": 8}

    text = format_fates(report)
    assert "disqualified" in text and "not rated: only forfeits (ABSENT 8)" in text

    dom = Dom(render_html(report))
    rows = {a["data-bot"]: a for tag, a, ids in dom.elements if tag == "tr" and "fates" in ids and a}
    assert {b: r["data-rated"] for b, r in rows.items()} == {
        "good": "true",
        "fine": "true",
        "broken": "false",
        "ghost": "false",
    }
    ratings = " ".join(dom.text["ratings"])
    assert "ghost" not in ratings and "broken" not in ratings and "ghost" in " ".join(dom.text["unrated"])

    done = subprocess.run([*GAIGEL, "arena", "report", str(out), "--bootstrap", "0"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "what became of every bot:" in done.stdout and "DISQUALIFIED" in done.stdout
