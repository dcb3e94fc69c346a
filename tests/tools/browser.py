"""Headless Chromium for the HTML tests: the rendered DOM of a page, parsed.

Chromium is the Debian package ``chromium``. Without it the tests are skipped, unless the
environment variable ``CI`` is set: then they fail, so CI never passes without a browser.
"""

from __future__ import annotations

import html.parser
import os
import shutil
import subprocess
import tempfile

import pytest

__all__ = ["Dom", "chromium", "dump_dom", "render"]


def chromium() -> str:
    """The browser's path; skips the test without one (fails it when ``CI`` is set)."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail("chromium not found (CI is set): install the Debian package chromium")
    pytest.skip("chromium not found (Debian package chromium)")


def dump_dom(url: str) -> str:
    """The DOM of *url* after its scripts ran, also asynchronously (``--dump-dom``); a ``#fragment`` is kept."""
    return render(url)[0]


def render(url: str) -> tuple[str, str]:
    """The DOM of *url* as :func:`dump_dom` gives it, and the browser's log (``--enable-logging``):
    console messages, among them every Content Security Policy violation."""
    browser = chromium()
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
                "--enable-logging=stderr",
                "--v=0",
                # wait for the page's asynchronous work (a compact viewer page gunzips its steps
                # first): the budget is virtual time, spent only while the page is idle
                "--virtual-time-budget=2000",
                "--dump-dom",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout, done.stderr


class Dom(html.parser.HTMLParser):
    """Collects elements (tag, attributes, enclosing ids) and text of the rendered DOM."""

    def __init__(self, markup: str | None = None) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], tuple[str, ...]]] = []
        self.stack: list[tuple[str, str]] = []
        self.text: dict[str, list[str]] = {}
        if markup is not None:
            self.feed(markup)

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
        """Attributes of every *tag* element inside the element with id *element_id*."""
        return [attrs for t, attrs, ids in self.elements if t == tag and element_id in ids]

    def by_id(self, element_id: str) -> dict[str, str]:
        """Attributes of the element with id *element_id*."""
        found = [attrs for _, attrs, _ in self.elements if attrs.get("id") == element_id]
        assert found, f"no element with id {element_id!r}"
        return found[0]

    def all_text(self, element_id: str) -> str:
        """The text inside the element with id *element_id*."""
        return " ".join(self.text.get(element_id, []))
