"""The live report: ``gaigel arena run --web-port N`` serves the HTML report while the arena runs.

A stdlib HTTP server in a daemon thread renders every request from the journal (a
reader beside the runner: SQLite WAL and PostgreSQL both allow it), so the page always
shows the matches finished so far and reloads itself. ``/matches/<id>.html`` is the
viewer page of a finished match, built from its record on first request and then kept
(a done match's record never changes); it loads the shared ``/matches/viewer.js`` and
``viewer.css``. A match whose deal seed is still to be played elsewhere has no page yet.
"""

from __future__ import annotations

import html
import http.server
import threading
from pathlib import Path

from gaigel_arena.journal import DbTarget, JournalError
from gaigel_arena.report import MATCH_PAGES, FaultCache, load_report, render_html

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
        self._pages: dict[str, str] = {}
        self._lock = threading.Lock()

    def index(self) -> str:
        """The report page as it stands (or a waiting page before the journal exists)."""
        try:
            with self._lock:  # the fault cache is shared by the server's threads
                report = load_report(self.target, samples=0, details=True, fault_cache=self._faults)
        except JournalError:
            return _waiting_page(self.refresh_s)
        with self._lock:
            for entry in report.matches:
                if entry.record is not None:
                    self._records[entry.match_id] = entry.record
        pages = {m: f"{MATCH_PAGES}/{m}.html" for m in self._records}
        return render_html(report, pages, refresh_s=self.refresh_s)

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
            path = self.path.split("?", 1)[0].split("#", 1)[0]
            page: str | None
            kind = "text/html"
            try:
                if path.startswith(f"/{MATCH_PAGES}/") and path[len(MATCH_PAGES) + 2 :] in ASSETS:
                    page, kind = ASSETS[path[len(MATCH_PAGES) + 2 :]]  # the script and style every match page shares
                elif path in ("/", "/index.html", "/report.html"):
                    page = live.index()
                elif path.startswith(f"/{MATCH_PAGES}/") and path.endswith(".html"):
                    page = live.match(path[len(MATCH_PAGES) + 2 : -len(".html")])
                else:
                    page = None
            except Exception as e:  # e.g. the database busy for a moment: the page reloads itself
                self.send_error(503, f"report not available now: {type(e).__name__}")
                return
            if page is None:
                self.send_error(404, "no such page")
                return
            body = page.encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Type", f"{kind}; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
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
