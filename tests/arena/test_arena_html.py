"""The HTML report as a browser renders it: headless Chromium (Debian package chromium).

The page is loaded with ``--dump-dom`` and the rendered DOM must hold the rating history
plot (an inline SVG with one line and one legend entry per bot, axis labels) and the cross
table. Skipped without Chromium unless the environment variable ``CI`` is set.
"""

from __future__ import annotations

import html.parser
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from gaigel_arena.config import parse_config
from gaigel_arena.report import load_report, render_html
from gaigel_arena.runner import run_arena

CONFIG = {
    "arena": {"name": "html <check> & co", "seed": 7, "sets_per_pairing": 3},
    "game": {"players": 2, "hands": 2},
    "bots": [
        {"name": "heuristic", "house": "heuristic"},
        {"name": "first", "house": "first"},
        {"name": "a_rather_long_bot_name_v2", "house": "random"},
    ],
}


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail("chromium not found (CI is set): install the Debian package chromium")
    pytest.skip("chromium not found (Debian package chromium)")


def _dump_dom(page: Path) -> str:
    browser = _chromium()
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout


class _Dom(html.parser.HTMLParser):
    """Collects elements (tag, attributes, enclosing ids) and text of the rendered DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], tuple[str, ...]]] = []
        self.stack: list[tuple[str, str]] = []
        self.text: dict[str, list[str]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        ids = tuple(i for _, i in self.stack if i)
        self.elements.append((tag, attributes, ids))
        if tag not in ("br", "meta", "img", "input", "link", "hr", "wbr"):  # HTML void elements
            self.stack.append((tag, attributes.get("id", "")))

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        for _, i in self.stack:
            if i:
                self.text.setdefault(i, []).append(data)

    def inside(self, element_id: str, tag: str) -> list[dict[str, str]]:
        return [attrs for t, attrs, ids in self.elements if t == tag and element_id in ids]


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
