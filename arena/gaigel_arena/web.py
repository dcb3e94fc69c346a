"""The live report: ``gaigel arena run --web-port N`` serves the HTML report while the arena runs.

A small HTTP server in daemon threads (:class:`LiveReportServer`: bounded threads, a
request deadline, security headers) renders every request from the journal (a
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

import contextlib
import html
import http.server
import io
import json
import queue
import selectors
import socket
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Protocol

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

__all__ = ["LiveReport", "LiveReportServer", "serve_live_report"]

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


# Every response carries these. The report page has no script and inline styles (its
# <style> block and style attributes for the plot's colours); the viewer pages load their
# script and style from viewer.js and viewer.css and embed the match as a JSON data block,
# which is not executed, so they need no inline anything.
_COMMON_CSP = "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
REPORT_CSP = f"default-src 'self'; script-src 'none'; style-src 'self' 'unsafe-inline'; {_COMMON_CSP}"
VIEWER_CSP = f"default-src 'self'; {_COMMON_CSP}"
SECURITY_HEADERS = (("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"))

REQUEST_TIMEOUT_S = 10.0
"""Time a connection has to send its request line and headers, and a response to be written."""
WORKERS = 32
"""Threads that render and write responses (connections still sending their request hold none)."""
MAX_PENDING = 1024
"""Connections still sending their request; one more closes the one that has waited longest."""
MAX_QUEUED = 256
"""Complete requests waiting for a worker; beyond it a request is answered 503 and closed."""
MAX_HEAD_BYTES = 16 * 1024
"""Request line and headers; a longer head is answered 431 and closed."""


class _Request(Protocol):
    def __call__(self, head: bytes, conn: socket.socket, address: tuple[str, int], server: Any) -> object: ...


def _handler(live: LiveReport) -> _Request:
    class Handler(http.server.BaseHTTPRequestHandler):
        csp = VIEWER_CSP

        def __init__(self, head: bytes, conn: socket.socket, address: tuple[str, int], server: Any) -> None:
            self.head = head  # read by the server's selector, within the deadline
            super().__init__(conn, address, server)  # handles the request

        def setup(self) -> None:
            super().setup()
            self.rfile.close()
            self.rfile = io.BytesIO(self.head)

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
                    self.csp = REPORT_CSP
                    page = live.index()
                elif path.startswith(f"/{MATCH_PAGES}/") and path.endswith(".html"):
                    page = live.match(path[len(MATCH_PAGES) + 2 : -len(".html")])
                elif len(parts) == 3 and parts[0] == LOG_FOLDER:
                    body = live.log(parts[1], parts[2])
                    # written by an untrusted bot: never to be rendered as a page of this origin
                    kind = "text/plain; charset=utf-8"
                    self.csp = "default-src 'none'"  # (nosniff is on every response)
                elif len(parts) == 3 and parts[0] == BUNDLE_FOLDER and parts[2].endswith(".zip"):
                    body = live.bundle(parts[1], parts[2][: -len(".zip")])
                    kind = "application/zip"
                    filename = f"{parts[1]}-{parts[2]}".encode("ascii", "replace").decode().replace('"', "_")
                    headers = {"Content-Disposition": f'attachment; filename="{filename}"'}
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

        def end_headers(self) -> None:
            """Adds the security headers to every response, errors included."""
            self.send_header("Content-Security-Policy", self.csp)
            for name, value in SECURITY_HEADERS:
                self.send_header(name, value)
            super().end_headers()

        def log_message(self, format: str, *args: object) -> None:
            """Quiet: the arena's own log says what matters."""

    return Handler


class LiveReportServer:
    """The live report's HTTP server: one selector thread reads request heads, a fixed pool of
    worker threads answers them.

    A connection costs a thread only once its request has fully arrived, so idle or slow
    clients (slowloris) hold a file descriptor each, up to :data:`MAX_PENDING`, never a
    thread, and are closed after :data:`REQUEST_TIMEOUT_S`. Requests are GET only: one per
    connection (HTTP/1.0, no keep-alive), and no body is read.
    """

    def __init__(
        self,
        live: LiveReport,
        host: str,
        port: int,
        *,
        request_timeout: float = REQUEST_TIMEOUT_S,
        workers: int = WORKERS,
        max_pending: int = MAX_PENDING,
        max_queued: int = MAX_QUEUED,
    ) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.create_server((host, port), family=family, backlog=128)
        self.socket.setblocking(False)
        self.server_address: tuple[str, int] = self.socket.getsockname()[:2]
        self.live = live
        self._handler = _handler(live)
        self.request_timeout = request_timeout
        self.max_pending = max_pending
        self.pending: dict[socket.socket, tuple[float, bytearray]] = {}  # in accept order: oldest first
        self._jobs: queue.Queue[tuple[socket.socket, bytes] | None] = queue.Queue(max_queued)
        self._wake_r, self._wake_w = socket.socketpair()
        self._stopping = False
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.socket, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._threads = [
            threading.Thread(target=self._work, name=f"arena-web-{i}", daemon=True) for i in range(workers)
        ]
        self._loop = threading.Thread(target=self._serve, name="arena-web", daemon=True)

    def start(self) -> None:
        for t in self._threads:
            t.start()
        self._loop.start()

    @property
    def threads(self) -> list[threading.Thread]:
        """The server's threads (the selector and the workers)."""
        return [self._loop, *self._threads]

    # --- the selector thread ---------------------------------------------------------

    def _serve(self) -> None:
        try:
            while not self._stopping:
                timeout = self._expire()
                for key, _ in self._selector.select(timeout):
                    if key.fileobj is self.socket:
                        self._accept()
                    elif key.fileobj is self._wake_r:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(64)
                    else:
                        self._read(key.fileobj)  # type: ignore[arg-type]
        finally:
            for conn in list(self.pending):
                self._drop(conn)
            self._selector.close()

    def _expire(self) -> float:
        """Closes the connections past their deadline; the seconds until the next one's."""
        now = time.monotonic()
        while self.pending:  # in accept order, which is deadline order
            conn, (deadline, _) = next(iter(self.pending.items()))
            if deadline > now:
                return deadline - now
            self._drop(conn)
        return self.request_timeout

    def _accept(self) -> None:
        for _ in range(64):  # a burst at a time, so reads and deadlines are not starved
            try:
                conn, _ = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. out of descriptors: the client stays in the backlog
                return
            conn.setblocking(False)
            if len(self.pending) >= self.max_pending:
                self._drop(next(iter(self.pending)))  # the one waiting longest: a real client sends at once
            self.pending[conn] = (time.monotonic() + self.request_timeout, bytearray())
            self._selector.register(conn, selectors.EVENT_READ)

    def _read(self, conn: socket.socket) -> None:
        _, buf = self.pending[conn]
        try:
            data = conn.recv(MAX_HEAD_BYTES + 1)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn)
            return
        buf += data
        end = buf.find(b"\r\n\r\n")
        if end < 0 and len(buf) <= MAX_HEAD_BYTES:
            return
        self._selector.unregister(conn)
        del self.pending[conn]
        if end < 0:
            self._refuse(conn, b"431 Request Header Fields Too Large")
            return
        try:
            self._jobs.put_nowait((conn, bytes(buf[: end + 4])))
        except queue.Full:
            self._refuse(conn, b"503 Service Unavailable")

    def _refuse(self, conn: socket.socket, status: bytes) -> None:
        """A short answer without blocking (best effort), then the connection is closed."""
        with contextlib.suppress(OSError):
            conn.send(b"HTTP/1.0 " + status + b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        conn.close()

    def _drop(self, conn: socket.socket) -> None:
        self.pending.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn)
        conn.close()

    # --- the workers -------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            conn, head = job
            try:
                conn.setblocking(True)
                conn.settimeout(self.request_timeout)  # sendall: the whole response within it
                self._handler(head, conn, conn.getpeername()[:2], self)
            except OSError:  # the client went away, or read too slowly
                pass
            finally:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_WR)
                conn.close()

    # --- stopping ----------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stops accepting and closes every connection still sending its request; idempotent."""
        if self._stopping:
            return
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if self._loop.is_alive():
            self._loop.join(5)
        for _ in self._threads:
            with contextlib.suppress(queue.Full):
                self._jobs.put_nowait(None)
        self.server_close()

    def server_close(self) -> None:
        """Closes the listening socket (after :meth:`shutdown`)."""
        for s in (self.socket, self._wake_r, self._wake_w):
            s.close()


def serve_live_report(target: DbTarget, host: str, port: int) -> LiveReportServer:
    """Starts serving the live report of *target* on *host*:*port* in daemon threads.

    Call ``shutdown()`` on the returned server to stop it.

    :raises OSError: if the port cannot be bound.
    """
    server = LiveReportServer(LiveReport(target), host, port)
    server.start()
    return server
