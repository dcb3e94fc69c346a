"""The live report: ``gaigel arena run --web-port N`` serves the HTML report while the arena runs.

A stdlib HTTP server in a daemon thread renders every request from the journal (a
reader beside the runner: SQLite WAL and PostgreSQL both allow it), so the page always
shows the matches finished so far and reloads itself. ``/matches/<id>.html`` is the
viewer page of a finished match, built from its record on first request and then kept
(a done match's record never changes); it loads the shared ``/matches/viewer.js`` and
``viewer.css``. ``/logs/<id>/<file>`` serves a seat's captured output as plain text and
``/bundles/<id>/<bot>.zip`` a bot's debug bundle as a download: only the files the match's
record names, under the arena's ``logs/`` folder. A match whose deal seed is still to be
played elsewhere has no page, log or bundle yet (404, as if it did not exist).
"""

from __future__ import annotations

import html
import http.server
import json
import threading
import urllib.parse
from pathlib import Path

from gaigel_arena.journal import DbTarget, JournalError
from gaigel_arena.report import (
    BUNDLE_FOLDER,
    LOG_FOLDER,
    MATCH_PAGES,
    FaultCache,
    MatchEntry,
    MatchFile,
    load_report,
    match_files,
    render_html,
)

__all__ = ["LiveReport", "serve_live_report"]

REFRESH_S = 5
"""How often the live page reloads itself."""

_TYPES = {".js": "text/javascript", ".css": "text/css"}


def _assets() -> dict[str, tuple[str, str]]:
    from gaigel_harness.viewer import viewer_assets

    return {name: (text, _TYPES[Path(name).suffix]) for name, text in viewer_assets().items()}


ASSETS = _assets()
"""The shared files of the match pages by name: text and content type."""


class LiveReport:
    """Renders the report and the match pages of the journal at *target* on demand."""

    def __init__(self, target: DbTarget, refresh_s: int = REFRESH_S) -> None:
        self.target = target
        self.refresh_s = refresh_s
        self._faults: FaultCache = {}
        self._records: dict[str, Path] = {}
        self._revealed: dict[str, MatchEntry] = {}
        self._house: set[str] = set()
        self._pages: dict[str, str] = {}
        self._lock = threading.Lock()

    def index(self) -> str:
        """The report page as it stands (or a waiting page before the journal exists)."""
        try:
            with self._lock:  # the fault cache is shared by the server's threads
                report = load_report(self.target, samples=0, details=True, fault_cache=self._faults)
        except JournalError:
            return _waiting_page(self.refresh_s)
        house = {str(b.get("name")) for b in report.config.get("bots", []) if b.get("kind") == "house"}
        with self._lock:
            self._house = house
            for entry in report.matches:
                if entry.record is not None:  # revealed: every match of its deal seed is done
                    self._records[entry.match_id] = entry.record
                    self._revealed[entry.match_id] = entry
        pages = {m: f"{MATCH_PAGES}/{m}.html" for m in self._records}
        files = {e.match_id: match_files(e, house) for e in report.matches if e.record is not None}
        return render_html(report, pages, refresh_s=self.refresh_s, files=files)

    def _file(self, match_id: str, href: str) -> tuple[MatchEntry, MatchFile] | None:
        """The linked file *href* of revealed match *match_id* as the report would link it now, else None."""
        with self._lock:
            entry = self._revealed.get(match_id)
        if entry is None:
            self.index()  # the match may have been revealed since the last report request
            with self._lock:
                entry = self._revealed.get(match_id)
            if entry is None:
                return None
        with self._lock:
            house = set(self._house)
        found = [f for f in match_files(entry, house) if f.href == href]  # checks the log's path again
        return (entry, found[0]) if found else None

    def log(self, match_id: str, name: str) -> bytes | None:
        """A seat's captured output of a revealed match, as written (None: no such file linked)."""
        href = f"{LOG_FOLDER}/{urllib.parse.quote(match_id)}/{urllib.parse.quote(name)}"
        found = self._file(match_id, href)
        if found is None or found[1].source is None:
            return None
        try:
            return found[1].source.read_bytes()
        except OSError:
            return None

    def bundle(self, match_id: str, bot: str) -> bytes | None:
        """*bot*'s debug bundle of a revealed match (None: the match has none for that bot)."""
        from gaigel_arena.bundle import bundle_bytes

        href = f"{BUNDLE_FOLDER}/{urllib.parse.quote(match_id)}/{urllib.parse.quote(bot)}.zip"
        found = self._file(match_id, href)
        if found is None or found[0].record is None:
            return None
        record = found[0].record
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return bundle_bytes(data, bot, record.parent.parent)

    def match(self, match_id: str) -> str | None:
        """The viewer page of a finished match with a record, else None."""
        from gaigel.record import RecordError, load_record
        from gaigel_harness.viewer import ViewerError, build_view, render_viewer

        with self._lock:
            if match_id in self._pages:
                return self._pages[match_id]
            record = self._records.get(match_id)
        if record is None:
            self.index()  # the match may have finished since the last report request
            record = self._records.get(match_id)
            if record is None:
                return None
        try:
            page = render_viewer(build_view(load_record(record), compact=True), shared=True)
        except (RecordError, ViewerError) as e:
            page = f"<!DOCTYPE html><title>match {html.escape(match_id)}</title><p>{html.escape(str(e))}</p>"
        with self._lock:
            self._pages[match_id] = page
        return page


def _waiting_page(refresh_s: int) -> str:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" '
        f'content="{refresh_s}"><title>Gaigel arena</title></head><body><p>The arena is starting; '
        "this page reloads itself.</p></body></html>"
    )


def _handler(live: LiveReport) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urllib.parse.unquote(self.path.split("?", 1)[0].split("#", 1)[0])
            parts = path.split("/")[1:]
            page: str | None = None
            body: bytes | None = None
            kind = "text/html; charset=utf-8"
            headers: dict[str, str] = {}
            try:
                if any(p in ("", ".", "..") or "\x00" in p or "\\" in p for p in parts[1:]):
                    pass  # no empty, relative or odd component: 404
                elif path.startswith(f"/{MATCH_PAGES}/") and path[len(MATCH_PAGES) + 2 :] in ASSETS:
                    page, kind = ASSETS[path[len(MATCH_PAGES) + 2 :]]  # the script and style every match page shares
                    kind += "; charset=utf-8"
                elif path in ("/", "/index.html", "/report.html"):
                    page = live.index()
                elif path.startswith(f"/{MATCH_PAGES}/") and path.endswith(".html"):
                    page = live.match(path[len(MATCH_PAGES) + 2 : -len(".html")])
                elif len(parts) == 3 and parts[0] == LOG_FOLDER:
                    body = live.log(parts[1], parts[2])
                    # written by an untrusted bot: never to be rendered as a page of this origin
                    kind = "text/plain; charset=utf-8"
                    headers = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "default-src 'none'"}
                elif len(parts) == 3 and parts[0] == BUNDLE_FOLDER and parts[2].endswith(".zip"):
                    body = live.bundle(parts[1], parts[2][: -len(".zip")])
                    kind = "application/zip"
                    filename = f"{parts[1]}-{parts[2]}".encode("ascii", "replace").decode().replace('"', "_")
                    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
                    headers["X-Content-Type-Options"] = "nosniff"
            except Exception as e:  # e.g. the database busy for a moment: the page reloads itself
                self.send_error(503, f"report not available now: {type(e).__name__}")
                return
            if page is not None:
                body = page.encode("utf-8")
            if body is None:
                self.send_error(404, "no such page")
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: the arena's own log says what matters."""

    return Handler


def serve_live_report(target: DbTarget, host: str, port: int) -> http.server.ThreadingHTTPServer:
    """Starts serving the live report of *target* on *host*:*port* in a daemon thread.

    Call ``shutdown()`` on the returned server to stop it.

    :raises OSError: if the port cannot be bound.
    """
    server = http.server.ThreadingHTTPServer((host, port), _handler(LiveReport(target)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="arena-web", daemon=True).start()
    return server
