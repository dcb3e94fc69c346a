"""The HTML report as a browser renders it: headless Chromium (Debian package chromium).

The page is loaded with ``--dump-dom`` and the rendered DOM must hold the rating history
plot (an inline SVG with one line and one legend entry per bot, axis labels), the cross
table, games per pair, faults per bot and the match list whose links open each match's
viewer page; the live report (``--web-port``) serves the same while an arena runs.
Skipped without Chromium unless the environment variable ``CI`` is set.
"""

from __future__ import annotations

import concurrent.futures
import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from gaigel_arena.config import ArenaConfig, parse_config
from gaigel_arena.executors import InlineExecutor, MatchJob, MatchOutcome
from gaigel_arena.report import load_report, render_html, report_dict, write_html_report
from gaigel_arena.runner import run_arena
from gaigel_arena.schedule import set_seed
from gaigel_arena.web import serve_live_report
from tests.tools.browser import Dom, dump_dom

CONFIG = {
    "arena": {"name": "html <check> & co", "seed": 7, "sets_per_pairing": 3},
    "game": {"players": 2, "hands": 2},
    "bots": [
        {"name": "heuristic", "house": "heuristic"},
        {"name": "first", "house": "first"},
        {"name": "a_rather_long_bot_name_v2", "house": "random"},
    ],
}


def _dump_dom(page: Path) -> str:
    return dump_dom(page.as_uri())


_Dom = Dom


class TestHtmlReport:
    """report.html renders in Chromium with the plot and the cross table."""

    def test_rendered_dom_has_plot_and_cross_table(self, tmp_path: Path) -> None:
        """The rendered page holds the SVG plot (a line and legend entry per bot, axes) and the full cross table."""
        config = parse_config(CONFIG)
        run_arena(config, tmp_path / "out", executor="inline", bootstrap_samples=0)
        page = tmp_path / "report.html"
        page.write_text(render_html(load_report(tmp_path / "out", samples=50)), encoding="utf-8")

        dom = _Dom()
        dom.feed(_dump_dom(page))
        svgs = [attrs for tag, attrs, _ in dom.elements if tag == "svg"]
        assert [s.get("id") for s in svgs] == ["rating-history"]
        assert len(dom.inside("rating-history", "polyline")) == 3
        assert len(dom.inside("rating-history", "g")) == 3  # legend entries
        plot_text = " ".join(dom.text["rating-history"])
        assert "Elo (start 1500)" in plot_text and "in schedule order (18)" in plot_text
        for name in ("heuristic", "first", "a_rather_long_bot_name_v2"):
            assert name in plot_text

        rows = [attrs for tag, attrs, ids in dom.elements if tag == "tr" and "cross-table" in ids]
        assert len(rows) == 1 + 3  # header and one row per bot
        cells = dom.inside("cross-table", "td")
        assert len(cells) == 3 * (3 + 1)  # a cell per column and the total
        cross_text = " ".join(dom.text["cross-table"])
        assert "/12" in cross_text and "total" in cross_text
        assert "0 of 18 matches" not in " ".join(t for parts in dom.text.values() for t in parts)

    def test_empty_arena_renders(self, tmp_path: Path) -> None:
        """A report of an arena without games still renders, with an empty plot."""
        config = parse_config(CONFIG)
        from gaigel_arena.journal import Journal
        from gaigel_arena.schedule import build_schedule

        schedule = build_schedule(config.bot_names, config.ruleset, config.sets_per_pairing, config.seed)
        (tmp_path / "out").mkdir()
        Journal.create_or_open(
            tmp_path / "out" / "arena.sqlite", config.canonical_json(), config.config_hash(), schedule
        ).close()
        page = tmp_path / "report.html"
        page.write_text(render_html(load_report(tmp_path / "out", samples=0)), encoding="utf-8")
        dom = _Dom()
        dom.feed(_dump_dom(page))
        assert "no games yet" in " ".join(dom.text["rating-history"])


GAIGEL = [sys.executable, "-c", "import sys; from gaigel.cli import main; sys.exit(main(sys.argv[1:]))"]


def _chaos_config(tmp: Path) -> Path:
    """A gRPC arena where a chaos bot (illegal answers, stale decision ids) meets a house bot."""
    chaos = [sys.executable, "-m", "gaigel.cli", "chaos-bot", "--chaos", "illegal=0.1,stale=0.05", "--seed", "1"]
    config = tmp / "chaos.toml"
    config.write_text(
        f"""
[arena]
name = "faults"
seed = 11
sets_per_pairing = 1
executor = "grpc"

[game]
players = 2
hands = 1

[clock]
decision_ms = 500
bank_ms = 1000

[[bots]]
name = "chaos"
command = {json.dumps([*chaos, "--fault-log", str(tmp / "faults.jsonl")])}

[[bots]]
name = "first"
house = "first"
""",
        encoding="utf-8",
    )
    return config


def _rows(dom: Dom, table: str) -> list[dict[str, str]]:
    return [attrs for tag, attrs, ids in dom.elements if tag == "tr" and table in ids and attrs]


class TestReportPages:
    """``gaigel arena report DIR --html FILE``: the match list, faults per bot, games per pair, viewer pages."""

    def test_match_links_open_their_viewer(self, tmp_path: Path) -> None:
        """Every done match is listed and linked; each link opens a viewer page of that match."""
        config = parse_config(CONFIG)
        run_arena(config, tmp_path / "out", executor="inline", bootstrap_samples=0)
        page = tmp_path / "site" / "report.html"
        done = subprocess.run(
            [*GAIGEL, "arena", "report", str(tmp_path / "out"), "--html", str(page), "--bootstrap", "0"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        dom = Dom(_dump_dom(page))
        rows = _rows(dom, "matches")
        records = sorted(p.stem for p in (tmp_path / "out" / "records").glob("*.json"))
        assert sorted(r["data-match"] for r in rows) == records and len(records) == 18
        links = {a["href"] for a in dom.inside("matches", "a")}
        assert links == {f"matches/{m}.html" for m in records}
        for match_id in records[:2] + records[-1:]:  # a few: each browser start costs seconds
            viewer = Dom(dump_dom((page.parent / "matches" / f"{match_id}.html").as_uri() + "#step=0&seat=all"))
            record = json.loads((tmp_path / "out" / "records" / f"{match_id}.json").read_text(encoding="utf-8"))
            assert match_id in viewer.all_text("title") and f"seed {record['seed']}" in viewer.all_text("summary")
            for seat, entry in enumerate(record["seats"]):
                assert entry["bot"] in viewer.all_text(f"seat-{seat}")
            assert len([a for a in viewer.inside("seat-0", "span") if a.get("data-card")]) == 5
        pairs = {r["data-pair"]: r for r in _rows(dom, "pairs")}
        assert len(pairs) == 3
        assert {r["data-games"] for r in pairs.values()} == {"6"}  # 3 sets x 2 rotations, one game per match
        again = subprocess.run(
            [*GAIGEL, "arena", "report", str(tmp_path / "out"), "--html", str(page), "--bootstrap", "0"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert again.returncode == 0 and "0 new match page(s)" in again.stdout  # existing pages are kept

    def test_faults_per_bot_from_a_grpc_arena(self, tmp_path: Path) -> None:
        """A chaos bot's faults (from the kept records) are counted per bot and per match, by reason code."""
        out = tmp_path / "out"
        run = subprocess.run(
            [*GAIGEL, "arena", "run", str(_chaos_config(tmp_path)), "--out", str(out), "--quiet", "--bootstrap", "0"],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        faults: dict[str, list[str]] = {}
        for record_path in (out / "records").glob("*.json"):
            record = json.loads(record_path.read_text(encoding="utf-8"))
            faults[record["match_id"]] = [f["reason"] for f in record["faults"]]
        assert sum(map(len, faults.values())) >= 2, faults
        page = tmp_path / "report.html"
        done = subprocess.run(
            [*GAIGEL, "arena", "report", str(out), "--html", str(page), "--bootstrap", "0"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        dom = Dom(_dump_dom(page))
        per_bot = {r["data-bot"]: r for r in _rows(dom, "faults-per-bot")}
        assert set(per_bot) == {"chaos", "first"}
        text = " ".join(dom.text.get("faults-per-bot", []))
        for reason in {r for reasons in faults.values() for r in reasons}:
            assert reason in text
        cells = [
            (ids, attrs)
            for tag, attrs, ids in dom.elements
            if tag == "td" and "faults-per-bot" in ids and attrs.get("class") == "faulty"
        ]
        assert len(cells) == 1  # only the chaos bot has faults
        matches = {attrs["data-match"]: attrs for attrs in _rows(dom, "matches")}
        assert set(matches) == set(faults) and all(row["data-status"] == "done" for row in matches.values())
        total = sum(map(len, faults.values()))
        assert f"chaos {total} " in " ".join(" ".join(dom.text.get("faults-per-bot", [])).split()) + " "


def test_unwritable_html_is_one_line(tmp_path: Path) -> None:
    """--html where nothing can be written: one line, exit 2."""
    run_arena(parse_config(CONFIG), tmp_path / "out", executor="inline", bootstrap_samples=0)
    done = subprocess.run(
        [*GAIGEL, "arena", "report", str(tmp_path / "out"), "--html", "/proc/no-such/report.html"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "cannot write" in done.stderr, done.stderr


def test_without_records_nothing_is_linked(tmp_path: Path) -> None:
    """keep_records = false: the matches are listed, without links, faults unknown and said so."""
    arena = {"name": "no records", "seed": 7, "sets_per_pairing": 3, "keep_records": False}
    config = parse_config({**CONFIG, "arena": arena})
    run_arena(config, tmp_path / "out", executor="inline", bootstrap_samples=0)
    page = tmp_path / "report.html"
    assert write_html_report(load_report(tmp_path / "out", samples=0, details=True), page) == 0
    text = page.read_text(encoding="utf-8")
    assert text.count("<tr data-match=") == 18 and 'href="matches/' not in text
    assert "No match record was read" in text and not (tmp_path / "matches").exists()


class _GatedExecutor(InlineExecutor):
    """Plays inline but holds the run before the match number *hold_at* until released."""

    def __init__(self, hold_at: int) -> None:
        self.hold_at = hold_at
        self.submitted = 0
        self.holding = threading.Event()
        self.release = threading.Event()

    def submit(self, job: MatchJob) -> concurrent.futures.Future[MatchOutcome]:
        if self.submitted == self.hold_at:
            self.holding.set()
            assert self.release.wait(60)
        self.submitted += 1
        return super().submit(job)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return str(response.read().decode("utf-8"))


class TestLiveReport:
    """The live report serves the journal while the arena runs and refreshes as matches finish."""

    def test_live_page_follows_the_run(self, tmp_path: Path) -> None:
        """Before the journal: a waiting page; held after 8 matches: 8 done, the 6 of the first deal seed
        linked with their seed, the 2 of the next seed without seed or viewer page; at the end: all 18."""
        config: ArenaConfig = parse_config(CONFIG)
        out = tmp_path / "out"
        first_seed, next_seed = set_seed(7, 0), set_seed(7, 1)  # 3 pairs x 2 seatings play each seed
        gated = _GatedExecutor(hold_at=8)
        server = serve_live_report(out, "127.0.0.1", 0)
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        try:
            assert "starting" in _get(base)
            runner = threading.Thread(
                target=run_arena,
                args=(config, out),
                kwargs={"executor_factory": lambda c, w: gated, "bootstrap_samples": 0},
            )
            runner.start()
            assert gated.holding.wait(60)
            held_page = _get(base)
            held = Dom(held_page)
            assert "8 of 18 matches done" in held_page
            assert any(tag == "meta" and attrs.get("http-equiv") == "refresh" for tag, attrs, _ in held.elements)
            links = [a["href"] for a in held.inside("matches", "a")]
            assert len(links) == 6 and all(link.startswith("matches/s0000-") for link in links)
            assert str(first_seed) in held_page and str(next_seed) not in held_page
            rows = _rows(held, "matches")
            assert [r["data-match"][:5] for r in rows if r["data-status"] == "done"] == ["s0000"] * 6 + ["s0001"] * 2
            viewer = _get(base + links[0])
            assert 'id="match-data"' in viewer and links[0].split("/")[-1][: -len(".html")] in viewer
            assert '<script src="viewer.js">' in viewer and "function unpack" in _get(base + "matches/viewer.js")
            for early in [r["data-match"] for r in rows if r["data-status"] == "done"][6:]:
                with pytest.raises(urllib.error.HTTPError) as hidden:
                    _get(f"{base}matches/{early}.html")  # played, but its deal is still to come at other tables
                assert hidden.value.code == 404
            # the published files of the same moment: no page, seed or arena seed of the deal to come
            partial = load_report(out, samples=0, details=True)
            assert write_html_report(partial, tmp_path / "site" / "index.html") == 6
            published = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
            assert str(next_seed) not in published and published.count('href="matches/') == 6
            pages = "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "site" / "matches").glob("*"))
            assert str(next_seed) not in pages
            data = json.dumps(report_dict(partial))
            assert report_dict(partial)["config"]["arena"]["seed"] is None and str(next_seed) not in data
            gated.release.set()
            runner.join(120)
            assert not runner.is_alive()
            final = _get(base)
            assert "18 of 18 matches done" in final and final.count('href="matches/') == 18
            assert str(next_seed) in final and "hidden" not in final
            assert report_dict(load_report(out, samples=0))["config"]["arena"]["seed"] == 7
            with pytest.raises(urllib.error.HTTPError) as missing:
                _get(base + "matches/no-such-match.html")
            assert missing.value.code == 404
        finally:
            gated.release.set()
            server.shutdown()
            server.server_close()

    def test_web_port_in_use_is_one_line(self, tmp_path: Path) -> None:
        """``--web-port`` on a taken port: one line, exit 2, nothing played."""
        server = serve_live_report(tmp_path / "other", "127.0.0.1", 0)
        try:
            config = tmp_path / "a.toml"
            config.write_text(
                '[arena]\nseed = 1\nexecutor = "inline"\n[game]\nplayers = 2\nhands = 1\n'
                '[[bots]]\nname = "a"\nhouse = "first"\n[[bots]]\nname = "b"\nhouse = "random"\n',
                encoding="utf-8",
            )
            port = str(server.server_address[1])
            done = subprocess.run(
                [*GAIGEL, "arena", "run", str(config), "--out", str(tmp_path / "out"), "--web-port", port, "--quiet"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
            assert "cannot serve the live report" in done.stderr
            assert not (tmp_path / "out" / "arena.sqlite").exists()
        finally:
            server.shutdown()
            server.server_close()
