"""The report names each bot's sandbox and links each match's bot logs and bundles (issue 21).

A real gRPC arena of the Python SDK's example bot (it writes "joined session ... as NAME" to
stderr) against a house bot: the published report, in the arena folder and in a folder of
its own, shows the sandbox and its limits per bot and links files that are there; the live
report serves them with safe headers, refuses every other path, and neither links nor
serves a match's files while its duplicate sibling (the same deal seed) is still to play.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import io
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import pytest

from gaigel_arena.bwrap import bwrap_problem
from gaigel_arena.config import ArenaConfig, parse_config
from gaigel_arena.executors import Executor, MatchJob, MatchOutcome
from gaigel_arena.report import load_report, report_dict, write_html_report
from gaigel_arena.runner import make_executor, run_arena
from gaigel_arena.web import serve_live_report
from tests.tools.browser import Dom

SDK_BOT = Path(__file__).resolve().parents[2] / "clients" / "python" / "examples" / "random_bot.py"
NO_BWRAP = bool(bwrap_problem()) and not os.environ.get("CI")


def _config(sandbox: str) -> ArenaConfig:
    return parse_config(
        {
            "arena": {"name": "links", "seed": 2, "sets_per_pairing": 1},
            "game": {"players": 2, "hands": 1},
            "bots": [
                {"name": "alpha", "command": [sys.executable, str(SDK_BOT)], "sandbox": sandbox},
                {"name": "first", "house": "first"},
            ],
        }
    )


def _links(dom: Dom) -> dict[str, list[str]]:
    """Per match row: the hrefs of its bot-output cell."""
    out: dict[str, list[str]] = {}
    match = ""
    for tag, attrs, ids in dom.elements:
        if "matches" not in ids:
            continue
        if tag == "tr" and "data-match" in attrs:
            match = attrs["data-match"]
            out[match] = []
        elif tag == "a" and match and not attrs["href"].startswith("matches/"):
            out[match].append(attrs["href"])
    return out


def _sandbox_cells(dom: Dom) -> dict[str, str]:
    bot, cells = "", {}
    for tag, attrs, ids in dom.elements:
        if "fates" in ids and tag == "tr" and "data-bot" in attrs:
            bot = attrs["data-bot"]
        elif "fates" in ids and tag == "td" and "data-sandbox" in attrs:
            cells[bot] = attrs["data-sandbox"]
    return cells


@pytest.mark.parametrize(
    "sandbox",
    ["process", pytest.param("bwrap", marks=pytest.mark.skipif(NO_BWRAP, reason="needs bubblewrap"))],
)
def test_published_report_shows_sandboxes_and_links_files_that_exist(tmp_path: Path, sandbox: str) -> None:
    out = tmp_path / "out"
    run_arena(_config(sandbox), out, workers=1, bootstrap_samples=0)
    records = {p.stem: json.loads(p.read_text()) for p in (out / "records").glob("*.json")}
    assert len(records) == 2 and all(r["sandboxes"]["alpha"]["sandbox"] == sandbox for r in records.values())
    report = load_report(out, samples=0, details=True)
    assert report_dict(report)["sandboxes"]["alpha"] == [records[min(records)]["sandboxes"]["alpha"]]
    for page in (out / "report.html", tmp_path / "site" / "index.html"):  # in the arena folder, and apart
        write_html_report(report, page)
        text = page.read_text(encoding="utf-8")
        dom = Dom(text)
        assert _sandbox_cells(dom) == {"alpha": sandbox, "first": "house"}
        fates = " ".join(dom.text["fates"])
        assert "memory" in fates and "pids" in fates and "house bot" in fates
        assert ('id="unconfined"' in text) == (sandbox == "process")  # an unconfined bot is pointed out
        links = _links(dom)
        assert set(links) == set(records)
        for match_id, hrefs in links.items():
            seat = next(s for s, e in enumerate(records[match_id]["seats"]) if e["bot"] == "alpha")
            log = f"logs/{match_id}/seat{seat}-alpha.log"
            assert hrefs == [log, f"bundles/{match_id}/alpha.zip"], hrefs
            said = (page.parent / log).read_text(encoding="utf-8")
            assert "as 'alpha." in said  # the SDK's "joined session ... as NAME" on stderr
            assert said == (out / records[match_id]["bot_logs"][str(seat)]).read_text(encoding="utf-8")
            z = zipfile.ZipFile(page.parent / f"bundles/{match_id}/alpha.zip")
            assert json.loads(z.read("record.json"))["match_id"] == match_id
            assert z.read(f"seat{seat}-alpha.log").decode() == said
        assert "joined session" not in text  # a log is linked, never shown: a bot wrote it


class _HoldSecond:
    """An executor that plays the first match at once and the second only when released."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.workers = inner.workers
        self.submitted = 0
        self.release = threading.Event()

    def submit(self, job: MatchJob) -> concurrent.futures.Future[MatchOutcome]:
        self.submitted += 1
        if self.submitted != 2:
            return self.inner.submit(job)
        held: concurrent.futures.Future[MatchOutcome] = concurrent.futures.Future()

        def later() -> None:
            self.release.wait(120)
            try:
                held.set_result(self.inner.submit(job).result())
            except BaseException as e:
                held.set_exception(e)

        threading.Thread(target=later, daemon=True).start()
        return held

    def shutdown(self) -> None:
        self.release.set()
        self.inner.shutdown()


def _get(url: str) -> tuple[bytes, Any]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read(), response.headers


def _status(port: int, raw_path: str) -> int:
    """The status of GET *raw_path* sent as it is (urllib would not send some of these paths)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", raw_path)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def test_live_report_serves_a_log_only_once_its_deal_is_done(tmp_path: Path) -> None:
    out = tmp_path / "out"
    held: list[_HoldSecond] = []

    def factory(config: ArenaConfig, workers: int) -> Executor:
        held.append(_HoldSecond(make_executor(config, workers)))
        return held[0]

    server = serve_live_report(out, "127.0.0.1", 0)
    port = server.server_address[1]
    base = f"http://127.0.0.1:{port}/"
    runner = threading.Thread(
        target=run_arena,
        args=(_config("process"), out),
        kwargs={"workers": 1, "executor_factory": factory, "bootstrap_samples": 0},
    )
    try:
        runner.start()
        deadline = time.monotonic() + 90
        page = ""
        while "1 of 2 matches done" not in page and time.monotonic() < deadline:
            time.sleep(0.2)
            page = _get(base)[0].decode()
        assert "1 of 2 matches done" in page
        (played,) = [p.stem for p in (out / "records").glob("*.json")]
        (log,) = [p.name for p in (out / "logs" / played).iterdir()]  # on disk, with alpha's hand in it
        assert "as 'alpha." in (out / "logs" / played / log).read_text()
        # its sibling plays the same deal: nothing of the played match is linked or served yet
        assert 'href="logs/' not in page and 'href="bundles/' not in page and 'href="matches/' not in page
        for path in (f"logs/{played}/{log}", f"bundles/{played}/alpha.zip", f"matches/{played}.html"):
            with pytest.raises(urllib.error.HTTPError) as hidden:
                _get(base + path)
            assert hidden.value.code == 404, path
        held[0].release.set()
        runner.join(120)
        assert not runner.is_alive()

        links = _links(Dom(_get(base)[0].decode()))
        assert len(links) == 2 and all(len(hrefs) == 2 for hrefs in links.values())
        for match_id, (log_href, bundle_href) in links.items():
            body, headers = _get(base + log_href)
            assert body == (out / urllib.parse.unquote(log_href)).read_bytes() and b"as 'alpha." in body
            assert headers["Content-Type"] == "text/plain; charset=utf-8"
            assert headers["X-Content-Type-Options"] == "nosniff"
            body, headers = _get(base + bundle_href)
            assert headers["Content-Type"] == "application/zip"
            assert headers["Content-Disposition"] == f'attachment; filename="{match_id}-alpha.zip"'
            assert json.loads(zipfile.ZipFile(io.BytesIO(body)).read("record.json"))["match_id"] == match_id
        # only the files a revealed record names, inside logs/: every other path is 404
        secret = tmp_path / "secret.txt"
        secret.write_text("the organiser's secret\n")
        for raw in (
            "/logs/../arena.sqlite",
            f"/logs/{played}/..%2F..%2Farena.sqlite",
            "/logs/%2e%2e/%2e%2e/arena.sqlite",
            f"/logs/{played}/..",
            f"/logs/{played}/",
            f"/logs/{played}/{log}/x",
            "/logs/processes/" + next(p.name for p in (out / "logs" / "processes").iterdir()),
            f"/logs/{played}/{secret}",
            f"/bundles/{played}/first.zip",  # a house bot has no bundle
            f"/bundles/{played}/..%2Falpha.zip",
            "/records/" + played + ".json",
        ):
            assert _status(port, raw) == 404, raw
        # a log replaced by a symlink out of logs/: neither served, nor linked, nor bundled
        target = out / "logs" / played / log
        target.unlink()
        target.symlink_to(secret)
        assert _status(port, f"/logs/{played}/{log}") == 404
        assert _links(Dom(_get(base)[0].decode()))[played] == [f"bundles/{played}/alpha.zip"]
        bundle = zipfile.ZipFile(io.BytesIO(_get(f"{base}bundles/{played}/alpha.zip")[0]))
        assert b"secret" not in b"".join(bundle.read(n) for n in bundle.namelist())
    finally:
        if held:
            held[0].release.set()
        runner.join(120)
        server.shutdown()
        server.server_close()
