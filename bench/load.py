"""Load: many concurrent bot streams against a real ``gaigel serve``, and where it gives way.

Run from the repository root::

    python bench/load.py --streams 256 --seconds 300                      # the 5-minute run
    python bench/load.py --ramp 256,512,1024,2048,4096 --seconds 60       # double until it degrades
    python bench/load.py --streams 64 --seconds 10 --json                 # a short look

Each step starts a fresh ``gaigel serve`` subprocess (clocks at the server defaults, a
bots file with the load bots' tokens, an admin token, the metrics endpoint on) and runs
the Go load generator (``bench/loadgen``, built with ``go build`` and cached) against it.
The generator opens N ``BotService.Play`` streams over one HTTP/2 connection per
``--per-conn`` streams, joins them as ``--per-bot`` sessions per bot name, pairs its own
sessions into 2-player matches with ``MatchService.CreateMatch`` (seat_bots names one bot
twice; the server seats two idle sessions of it), creates the next match whenever one ends,
and answers every ``DecisionRequest`` at once with a random legal action.

* **round trip**: ``Action`` written -> next ``DecisionRequest`` of that stream (as in
  ``bench/server.py``); here the other seat is a remote bot too, so when the turn passes
  to the opponent the round trip spans two server cycles and the opponent's answer.
* **turnaround**: the previous ``Action`` of the match (either seat; both streams are in
  the generator) -> the next ``DecisionRequest``: one server cycle.
* **server decision time**: ``gaigel_decision_duration_seconds`` (what the server charged
  the bots: send to receipt), and **server lag** ``gaigel_server_lag_seconds``, as
  quantiles estimated from the histogram buckets over the window.
* **RSS**: the server's ``VmRSS`` before the load (after start-up), at its peak (sampled
  every second), at the end of the window, and after every stream has closed.
* **CPU**: user + system seconds of the server (``/proc``) and of the generator
  (``getrusage``) over the window, so the generator can be seen not to be the bottleneck.

After the window every stream sends ``Leave``; matches still running after ``--drain``
seconds are cancelled with ``CancelMatch``; a stream that still does not close, a match
still running, an ``INTERNAL``/``UNKNOWN`` status, an error in the server log or a server
that dies or does not stop on SIGTERM marks the step **broken**. Each step is classified:
**ok**; **slow** (round-trip p99 over the decision time); **timeouts** (``TIMEOUT_FALLBACK``
faults, or Joins that got no answer); **refused** (streams refused at Join: the status
and message are shown; ``RESOURCE_EXHAUSTED`` with a message is the intended way);
**starved** (under 90 % of the accepted streams got a decision in the window: the
server's answers to ``CreateMatch`` lag so far behind that sessions sit idle).
The first output line is the command that reproduces the run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import resource
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from prometheus_client.parser import text_string_to_metric_families

from gaigel_server.clock import CLOCK_DEFAULTS

REPO = Path(__file__).resolve().parent.parent
LOADGEN = REPO / "bench" / "loadgen"
GO_SOURCES = (LOADGEN, REPO / "clients" / "go" / "gaigelpb", REPO / "clients" / "go" / "go.mod")
CLASS_ORDER = ("broken", "timeouts", "refused", "starved", "slow", "ok")
STARVED_SHARE = 0.9
"""A step is *starved* when fewer than this share of the accepted streams got a decision in the window."""
BAD_CODES = ("Internal", "Unknown")
SETTLE_S = 2.0
"""Seconds between the server's quiescence (no session, no match) and the "after" snapshot."""


# --- the load generator -----------------------------------------------------------------------


def loadgen_binary() -> Path:
    """The built generator, rebuilt with ``go build`` when a Go source is newer than the binary."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gaigel-bench"
    binary = cache / "loadgen"
    newest = max(p.stat().st_mtime for src in GO_SOURCES for p in _go_files(src))
    if binary.exists() and binary.stat().st_mtime >= newest:
        return binary
    go = shutil.which("go")
    if go is None:
        raise SystemExit("bench/load.py needs Go 1.26 or newer on PATH to build bench/loadgen")
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run([go, "build", "-o", str(binary), "."], cwd=LOADGEN, check=True)
    return binary


def _go_files(src: Path) -> list[Path]:
    if src.is_file():
        return [src]
    return [p for p in src.iterdir() if p.suffix == ".go" or p.name in ("go.mod", "go.sum")]


# --- the server -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gaigel_command() -> list[str]:
    """The ``gaigel`` entry point of this interpreter's environment."""
    script = Path(sys.executable).with_name("gaigel")
    if script.exists():
        return [str(script)]
    found = shutil.which("gaigel")
    if found is None:
        raise SystemExit("the gaigel command is not installed: pip install -e . first")
    return [found]


@dataclass
class Snapshot:
    """The server process and its metrics at one moment."""

    t: float
    rss_mb: float | None
    cpu_s: float | None
    fds: int | None
    threads: int | None
    metrics: dict[str, list[tuple[dict[str, str], float]]]


class Server:
    """A ``gaigel serve`` subprocess with a bots file, an admin token and metrics, for one step."""

    def __init__(self, workdir: Path, bots: dict[str, str], args: argparse.Namespace) -> None:
        self.admin_token = secrets.token_urlsafe(24)
        self.port, self.metrics_port = free_port(), free_port()
        self.bots_file = workdir / "bots.json"
        self.bots_file.write_text(json.dumps(bots))
        self.log_path = workdir / "server.log"
        cmd = [
            *gaigel_command(),
            "serve",
            "--address",
            f"127.0.0.1:{self.port}",
            "--bots",
            str(self.bots_file),
            f"--admin-token={self.admin_token}",  # a token may start with "-"
            "--metrics-port",
            str(self.metrics_port),
            "--log-level",
            args.log_level,
            "--max-sessions",
            str(args.per_bot),
        ]
        if args.max_streams is not None:
            cmd += ["--max-streams", str(args.max_streams)]
        self.log_file: IO[bytes] = self.log_path.open("wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.started = time.monotonic()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gaigel serve exited with {self.proc.returncode}: {self.log_tail()}")
            with contextlib.suppress(OSError):
                self.scrape()
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            time.sleep(0.1)
        raise RuntimeError(f"gaigel serve not ready within {timeout:g} s: {self.log_tail()}")

    def scrape(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        """The metrics endpoint as {sample name: [(labels, value)]}."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as r:
            text = r.read().decode()
        out: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
        return out

    def snapshot(self) -> Snapshot:
        pid = self.proc.pid
        try:
            metrics = self.scrape()
        except OSError:
            metrics = {}
        return Snapshot(time.monotonic(), rss_mb(pid), cpu_seconds(pid), open_fds(pid), threads(pid), metrics)

    def wait_quiet(self, timeout: float) -> dict[str, Any]:
        """Waits until the server counts no open session and no running match (matches whose
        streams were cut play on under the disconnect policy until they end), up to *timeout* s."""
        t0 = time.monotonic()
        left: dict[str, float | None] = {}
        while time.monotonic() - t0 < timeout and self.proc.poll() is None:
            try:
                m = self.scrape()
            except OSError:
                m = {}
            left = {k: gauge(m, f"gaigel_{k}") for k in ("active_sessions", "active_matches")}
            if not any(left.values()):
                return {"quiet": True, "seconds": round(time.monotonic() - t0, 1)}
            time.sleep(1.0)
        return {"quiet": False, "seconds": round(time.monotonic() - t0, 1), "still": left}

    def stop(self, timeout: float = 30.0) -> dict[str, Any]:
        """SIGTERM, and how the server took it (exit code, seconds, killed when it hung)."""
        crashed = self.proc.poll()
        t0 = time.monotonic()
        if crashed is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
            hung = False
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
            hung = True
        self.log_file.close()
        return {
            "exit_code": code,
            "died_during_run": crashed is not None,
            "stop_seconds": round(time.monotonic() - t0, 3),
            "hung_on_sigterm": hung,
        }

    def log_tail(self, lines: int = 5) -> str:
        with contextlib.suppress(OSError):
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def log_problems(self) -> dict[str, Any]:
        """Lines of the server log at warning level or above, or with a traceback, by event."""
        events: dict[str, int] = {}
        samples: list[str] = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            level, event = _log_level(line)
            if level in ("warning", "error", "critical") or "Traceback" in line:
                key = f"{level}:{event}"
                events[key] = events.get(key, 0) + 1
                if len(samples) < 5:
                    samples.append(line[:400])
        return {"by_event": events, "samples": samples}


def _log_level(line: str) -> tuple[str, str]:
    try:
        entry = json.loads(line)
    except json.JSONDecodeError:
        return "text", line[:60]
    if not isinstance(entry, dict):
        return "text", line[:60]
    return str(entry.get("level", "")), str(entry.get("event", ""))


def _proc_status(pid: int, key: str) -> str | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def rss_mb(pid: int) -> float | None:
    value = _proc_status(pid, "VmRSS")
    return int(value.split()[0]) / 1024 if value else None


def threads(pid: int) -> int | None:
    value = _proc_status(pid, "Threads")
    return int(value) if value else None


def open_fds(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of *pid* (Linux ``/proc``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Sampler:
    """Samples the server's RSS, CPU and fds every second, for the peak and the timeline."""

    def __init__(self, pid: int, interval: float = 1.0) -> None:
        self.pid = pid
        self.interval = interval
        self.rows: list[tuple[float, float | None, float | None, int | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            p = self.pid
            self.rows.append((time.monotonic(), rss_mb(p), cpu_seconds(p), open_fds(p)))
            self._stop.wait(self.interval)

    def peak_rss_mb(self) -> float | None:
        values = [r[1] for r in self.rows if r[1] is not None]
        return max(values) if values else None

    def rss_between(self, start: float, end: float, step: float) -> list[float | None]:
        """RSS (MB) at *start* and every *step* seconds up to *end* (the nearest sample to each)."""
        rows = [r for r in self.rows if r[1] is not None]
        if not rows or step <= 0:
            return []
        marks = [start + k * step for k in range(int((end - start) / step + 0.5))] + [end]
        return [_r(min(rows, key=lambda r: abs(r[0] - t))[1], 1) for t in marks]

    def peak_fds(self) -> int | None:
        values = [r[3] for r in self.rows if r[3] is not None]
        return max(values) if values else None


# --- metrics arithmetic -----------------------------------------------------------------------


Metrics = dict[str, list[tuple[dict[str, str], float]]]


def metric_sum(m: Metrics, name: str, **labels: str) -> float:
    """The sum of the samples of *name* whose labels include *labels*."""
    return sum(v for lab, v in m.get(name, []) if all(lab.get(k) == x for k, x in labels.items()))


def metric_by(m: Metrics, name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for lab, v in m.get(name, []):
        out[lab.get(label, "")] = out.get(lab.get(label, ""), 0.0) + v
    return out


def gauge(m: Metrics, name: str) -> float | None:
    return metric_sum(m, name) if name in m else None


def histogram_delta(a: Metrics, b: Metrics, name: str) -> list[tuple[float, float]]:
    """Cumulative bucket counts of *name* (all label sets together) gained from *a* to *b*."""

    def buckets(m: Metrics) -> dict[float, float]:
        out: dict[float, float] = {}
        for lab, v in m.get(name + "_bucket", []):
            le = float(lab["le"])
            out[le] = out.get(le, 0.0) + v
        return out

    before, after = buckets(a), buckets(b)
    return sorted((le, after[le] - before.get(le, 0.0)) for le in after)


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus' estimate: linear within the bucket holding rank q; the lower bound in the +Inf bucket."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, cum in buckets:
        if cum >= rank:
            if math.isinf(upper):
                return lower
            return lower + (upper - lower) * (rank - below) / (cum - below) if cum > below else upper
        lower, below = upper, cum
    return lower


def histogram_summary(a: Metrics, b: Metrics, name: str) -> dict[str, Any]:
    buckets = histogram_delta(a, b, name)
    count = metric_sum(b, name + "_count") - metric_sum(a, name + "_count")
    total = metric_sum(b, name + "_sum") - metric_sum(a, name + "_sum")

    def ms(q: float) -> float | None:
        x = histogram_quantile(q, buckets)
        return None if x is None else round(x * 1e3, 3)

    return {
        "count": int(count),
        "mean_ms": round(total / count * 1e3, 3) if count else None,
        "p50_ms": ms(0.5),
        "p99_ms": ms(0.99),
    }


def delta_by(a: Metrics, b: Metrics, name: str, label: str) -> dict[str, int]:
    before, after = metric_by(a, name, label), metric_by(b, name, label)
    return {k: int(v - before.get(k, 0.0)) for k, v in after.items() if v - before.get(k, 0.0)}


# --- one step ---------------------------------------------------------------------------------


@dataclass
class Events:
    """What the generator reported, and the server snapshots taken at its window marks."""

    joined: dict[str, Any] = field(default_factory=dict)
    window_start: Snapshot | None = None
    window_end: Snapshot | None = None
    result: dict[str, Any] | None = None
    other: list[str] = field(default_factory=list)


def drive(binary: Path, server: Server, n: int, args: argparse.Namespace, workdir: Path) -> tuple[Events, str]:
    """Runs the generator with *n* streams, snapshotting the server at the window marks."""
    cmd = [
        str(binary),
        "-server",
        server.address,
        "-bots",
        str(server.bots_file),
        f"-admin-token={server.admin_token}",
        "-streams",
        str(n),
        "-per-bot",
        str(args.per_bot),
        "-per-conn",
        str(args.per_conn),
        "-hands",
        str(args.hands),
        "-warmup",
        str(args.warmup),
        "-seconds",
        str(args.seconds),
        "-drain",
        str(args.drain),
        "-step",
        str(args.step),
        "-seed",
        str(args.seed),
    ]
    events = Events()
    err_path = workdir / "loadgen.err"
    limit = args.warmup + args.seconds + 3 * args.drain + 240  # the generator bounds its phases well within this
    with err_path.open("wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True)
        timer = threading.Timer(limit, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                _on_event(line, events, server)
            proc.wait()
        finally:
            timer.cancel()
    problem = "" if proc.returncode == 0 else f"loadgen exited with {proc.returncode}: {err_path.read_text()[-500:]}"
    return events, problem


def _on_event(line: str, events: Events, server: Server) -> None:
    try:
        msg = json.loads(line)
    except json.JSONDecodeError:
        events.other.append(line.strip())
        return
    kind = msg.pop("event", "")
    if kind == "joined":
        events.joined = msg
    elif kind == "window_start":
        events.window_start = server.snapshot()
    elif kind == "window_end":
        events.window_end = server.snapshot()
    elif kind == "result":
        events.result = msg


def run_step(binary: Path, n: int, args: argparse.Namespace) -> dict[str, Any]:
    """One fresh server, *n* streams for the window, and everything measured about it."""
    bots = {f"load-{i:03d}": secrets.token_urlsafe(18) for i in range(math.ceil(n / args.per_bot))}
    with tempfile.TemporaryDirectory(prefix="gaigel-load-") as tmp:
        workdir = Path(tmp)
        server = Server(workdir, bots, args)
        try:
            server.wait_ready()
            before = server.snapshot()
            with Sampler(server.proc.pid) as sampler:
                events, problem = drive(binary, server, n, args, workdir)
                quiet = server.wait_quiet(args.settle)
                time.sleep(SETTLE_S)
                after = server.snapshot()
            stopped = server.stop()
        except BaseException:
            server.stop(5)
            raise
        log = server.log_problems()
        if args.keep_logs:
            keep = Path(args.keep_logs) / f"step-{n}"
            keep.mkdir(parents=True, exist_ok=True)
            for name in ("server.log", "loadgen.err"):
                if (workdir / name).exists():
                    shutil.copy(workdir / name, keep / name)
    stopped["quiescence"] = quiet
    return summarise_step(n, args, events, problem, before, after, sampler, stopped, log)


def summarise_step(
    n: int,
    args: argparse.Namespace,
    events: Events,
    problem: str,
    before: Snapshot,
    after: Snapshot,
    sampler: Sampler,
    stopped: dict[str, Any],
    log: dict[str, Any],
) -> dict[str, Any]:
    load = events.result or {}
    w0, w1 = events.window_start, events.window_end
    server: dict[str, Any] = {
        "rss_mb": {
            "before": _r(before.rss_mb),
            "peak": _r(sampler.peak_rss_mb()),
            "window_end": _r(w1.rss_mb if w1 else None),
            "after": _r(after.rss_mb),
        },
        "open_fds": {"before": before.fds, "peak": sampler.peak_fds(), "after": after.fds},
        "threads": {"before": before.threads, "after": after.threads},
        "event_loop_tasks": {
            "before": gauge(before.metrics, "gaigel_event_loop_tasks"),
            "after": gauge(after.metrics, "gaigel_event_loop_tasks"),
        },
        "after": {
            "active_sessions": gauge(after.metrics, "gaigel_active_sessions"),
            "active_matches": gauge(after.metrics, "gaigel_active_matches"),
        },
        "stop": stopped,
        "log": log,
    }
    if w0 and w1:
        window = w1.t - w0.t
        cpu = (w1.cpu_s - w0.cpu_s) if w1.cpu_s is not None and w0.cpu_s is not None else None
        server["window"] = {
            "cpu_s": _r(cpu),
            "cpu_share": _r(cpu / window if cpu is not None and window > 0 else None),
            "rss_mb_every_step": sampler.rss_between(w0.t, w1.t, args.step),
            "decisions": delta_by(w0.metrics, w1.metrics, "gaigel_decisions_total", "outcome"),
            "faults": delta_by(w0.metrics, w1.metrics, "gaigel_faults_total", "reason"),
            "matches": delta_by(w0.metrics, w1.metrics, "gaigel_matches_total", "termination"),
            "sessions": delta_by(w0.metrics, w1.metrics, "gaigel_sessions_total", "result"),
            "decision_time": histogram_summary(w0.metrics, w1.metrics, "gaigel_decision_duration_seconds"),
            "server_lag": histogram_summary(w0.metrics, w1.metrics, "gaigel_server_lag_seconds"),
        }
    server["whole_run"] = {
        "sessions": delta_by(before.metrics, after.metrics, "gaigel_sessions_total", "result"),
        "matches": delta_by(before.metrics, after.metrics, "gaigel_matches_total", "termination"),
        "faults": delta_by(before.metrics, after.metrics, "gaigel_faults_total", "reason"),
    }
    step: dict[str, Any] = {"streams": n, "load": load, "server": server}
    step["problems"] = problems(step, problem)
    step["classes"] = classify(step, args.decision_time)
    step["class"] = next(c for c in CLASS_ORDER if c in step["classes"])
    return step


def _r(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(x, digits)


# --- classification ---------------------------------------------------------------------------


def problems(step: dict[str, Any], loadgen_problem: str) -> list[str]:
    """Everything that says the server broke rather than degraded."""
    load, server = step["load"], step["server"]
    out = [loadgen_problem] if loadgen_problem else []
    if not load:
        out.append("the generator reported no result")
        return out
    stop = server["stop"]
    if stop["died_during_run"]:
        out.append(f"the server died during the run (exit code {stop['exit_code']})")
    if stop["hung_on_sigterm"]:
        out.append("the server did not stop within 30 s of SIGTERM")
    errors = {**load.get("errors", {}), **load.get("drain", {}).get("errors", {})}
    for code in BAD_CODES:
        if code in errors:
            out.append(f"{errors[code]['count']} streams ended with {code.upper()}: {errors[code]['samples']}")
    drain = load.get("drain", {})
    if drain.get("not_closed") and not drain.get("errors"):  # after failed CancelMatch calls they may still play
        out.append(
            f"{drain['not_closed']} streams did not close after Leave and CancelMatch: {drain['not_closed_sample']}"
        )
    if drain.get("running_after") and not drain.get("errors"):
        out.append(f"{drain['running_after']} matches still running after the drain")
    health = load.get("health_at_window_end", {})
    if health.get("stalled_in_match"):
        out.append(f"{health['stalled_in_match']} streams in a match received nothing for the stall time")
    if load.get("accepted") and not load.get("decisions"):
        out.append("no decision in the window")
    for key, count in server["log"]["by_event"].items():
        if key.startswith(("error", "critical", "text")) or "Traceback" in key:
            out.append(f"server log: {count} x {key}")
    quiet = stop.get("quiescence") or {}
    if not quiet.get("quiet", True):
        out.append(f"the server did not quiesce within {quiet['seconds']} s of the generator's exit: {quiet['still']}")
    return out


def classify(step: dict[str, Any], decision_time: float) -> list[str]:
    """The degradation classes of a step (CLASS_ORDER), "ok" when none applies."""
    load = step["load"]
    classes = []
    if step["problems"]:
        classes.append("broken")
    refused = load.get("refused", {})
    if load.get("fallbacks") or "CLIENT_TIMEOUT" in refused:
        classes.append("timeouts")
    if refused:
        classes.append("refused")
    busy = busy_streams(load)
    if busy is not None and busy < STARVED_SHARE * load["accepted"]:
        classes.append("starved")
    p99 = (load.get("round_trip") or {}).get("p99_ms")
    if p99 is not None and p99 > decision_time * 1e3:
        classes.append("slow")
    return classes or ["ok"]


def busy_streams(load: dict[str, Any]) -> int | None:
    """Accepted streams that answered at least one decision in the window (all, when the server keeps up)."""
    health = load.get("health_at_window_end")
    if not health or not load.get("accepted"):
        return None
    return int(load["accepted"] - health["without_decisions"] - health["ended_early"])


def refusal_summary(refused: dict[str, Any]) -> str:
    """'512 RESOURCE_EXHAUSTED (with a message)' and the like."""
    parts = []
    for code, entry in sorted(refused.items()):
        has_message = all(s.strip() for s in entry["samples"]) and entry["samples"]
        parts.append(f"{entry['count']} {_code_name(code)}{'' if has_message else ' (no message)'}")
    return ", ".join(parts) or "0"


def _code_name(code: str) -> str:
    """gRPC-Go's 'ResourceExhausted' as 'RESOURCE_EXHAUSTED'."""
    if code.isupper():
        return code
    return "".join("_" + c if c.isupper() and i else c for i, c in enumerate(code)).upper()


# --- output -----------------------------------------------------------------------------------


def _f(x: Any, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def print_table(steps: list[dict[str, Any]]) -> None:
    head = (
        f"{'streams':>7} | {'accepted':>8} | {'busy':>5} | {'refused':>24} | {'dec/s':>6} | {'rtt p50':>8} | {'rtt p99':>8} | "
        f"{'turn p50':>8} | {'turn p99':>8} | {'fallbk':>6} | {'errors':>6} | {'matches':>7} | "
        f"{'RSS MB before/peak/after':>24} | {'CPU s srv/gen':>13} | class"
    )
    print(head)
    print("-" * len(head))
    for s in steps:
        if s["server"] is None:
            print(f"{s['streams']:>7} | could not run: {s['problems'][0]}")
            continue
        load, srv = s["load"], s["server"]
        rtt, turn = load.get("round_trip") or {}, load.get("turnaround") or {}
        rss = srv["rss_mb"]
        errors = sum(e["count"] for e in load.get("errors", {}).values())
        cpu = (srv.get("window") or {}).get("cpu_s")
        gen = (load.get("client") or {}).get("cpu_s_window")
        print(
            f"{s['streams']:>7} | {_f(load.get('accepted'), '>8')} | {_f(busy_streams(load), '>5')} | "
            f"{refusal_summary(load.get('refused', {})):>24} | "
            f"{_f(load.get('decisions_per_s'), '>6.0f')} | {_f(rtt.get('p50_ms'), '>8.1f')} | "
            f"{_f(rtt.get('p99_ms'), '>8.1f')} | {_f(turn.get('p50_ms'), '>8.1f')} | {_f(turn.get('p99_ms'), '>8.1f')} | "
            f"{_f(load.get('fallbacks', 0), '>6')} | {errors:>6} | "
            f"{_f((load.get('matches') or {}).get('ended_in_window'), '>7')} | "
            f"{_f(rss['before'], '.0f') + '/' + _f(rss['peak'], '.0f') + '/' + _f(rss['after'], '.0f'):>24} | "
            f"{_f(cpu, '.1f') + '/' + _f(gen, '.1f'):>13} | {'+'.join(s['classes'])}"
        )


def print_details(s: dict[str, Any]) -> None:
    load, srv = s["load"], s["server"]
    if srv is None:
        print(f"\n{s['streams']} streams (broken): could not run: {s['problems'][0]}")
        return
    w = srv.get("window") or {}
    print(f"\n{s['streams']} streams ({s['class']}):")
    joins = load.get("join_ms") or {}
    for code, e in sorted(load.get("refused", {}).items()):
        took = joins.get(code) or {}
        print(
            f"  refused at Join: {e['count']} x {_code_name(code)} after {_f(took.get('p50_ms'), '.0f')} ms "
            f"(p50; max {_f(took.get('max_ms'), '.0f')}): {e['samples']}"
        )
    for code, e in sorted(load.get("errors", {}).items()):
        print(f"  stream errors: {e['count']} x {_code_name(code)}: {e['samples']}")
    for code, e in sorted(load.get("create_match_errors", {}).items()):
        print(f"  CreateMatch errors: {e['count']} x {_code_name(code)}: {e['samples']}")
    rtt = load.get("round_trip") or {}
    print(
        f"  round trip ms: p50 {_f(rtt.get('p50_ms'), '.1f')}, p90 {_f(rtt.get('p90_ms'), '.1f')}, "
        f"p99 {_f(rtt.get('p99_ms'), '.1f')}, max {_f(rtt.get('max_ms'), '.1f')} over {rtt.get('n', 0)} decisions; "
        f"Welcome after p50 {_f((joins.get('Welcome') or {}).get('p50_ms'), '.0f')} ms, "
        f"max {_f((joins.get('Welcome') or {}).get('max_ms'), '.0f')} ms"
    )
    dt, lag = w.get("decision_time") or {}, w.get("server_lag") or {}
    print(
        f"  server (window): decisions {w.get('decisions')}, faults {w.get('faults') or {}}, "
        f"decision time p50/p99 {_f(dt.get('p50_ms'), '.1f')}/{_f(dt.get('p99_ms'), '.1f')} ms, "
        f"lag p50/p99 {_f(lag.get('p50_ms'), '.1f')}/{_f(lag.get('p99_ms'), '.1f')} ms (bucket estimates), "
        f"CPU {_f(w.get('cpu_share'), '.2f')} cores"
    )
    m = load.get("matches") or {}
    ends = {k.removeprefix("MATCH_TERMINATION_").lower(): v for k, v in (m.get("ended_by_termination") or {}).items()}
    create = m.get("create_ms") or {}
    print(
        f"  matches: created {m.get('created')}, CreateMatch took p50 {_f(create.get('p50_ms'), '.0f')} ms, "
        f"p99 {_f(create.get('p99_ms'), '.0f')} ms; ended {ends}; timeline (decisions/s, rtt p99 ms): ",
        end="",
    )
    print(", ".join(f"{i['decisions_per_s']:.0f}/{_f(i['rtt_p99_ms'], '.0f')}" for i in load.get("timeline") or []))
    print(f"  server RSS MB over the window, every step: {w.get('rss_mb_every_step')}")
    d, h = load.get("drain") or {}, load.get("health_at_window_end") or {}
    for code, e in sorted((d.get("errors") or {}).items()):
        print(f"  drain errors (CancelMatch, ListMatches, streams): {e['count']} x {_code_name(code)}: {e['samples']}")
    print(
        f"  at window end: {h}; drain: {d.get('closed_after_leave')} closed after Leave, "
        f"{d.get('cancelled_running')} running and {d.get('cancelled_waiting')} waiting matches cancelled, "
        f"{d.get('not_closed')} not closed, {d.get('seconds')} s"
    )
    print(
        f"  leak check: fds {srv['open_fds']}, event-loop tasks {srv['event_loop_tasks']}, "
        f"threads {srv['threads']}; stop: {srv['stop']}"
    )
    if srv["log"]["by_event"]:
        print(f"  server log (warning and above): {srv['log']['by_event']}")
    for p in s["problems"]:
        print(f"  PROBLEM: {p}")


def raise_fd_limit() -> int:
    """Raises the soft open-file limit to the hard one (the server and generator inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--streams", type=int, default=256, help="concurrent bot streams (default 256)")
    mode.add_argument("--ramp", help="comma-separated stream counts, one fresh server each (e.g. 256,512,1024)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per step (default 10)")
    parser.add_argument("--warmup", type=float, default=5.0, help="unmeasured seconds of play first (default 5)")
    parser.add_argument("--drain", type=float, default=10.0, help="seconds for matches to end after Leave (default 10)")
    parser.add_argument("--hands", type=int, default=2, help="hands per match (default 2)")
    parser.add_argument("--per-bot", type=int, default=64, help="streams per bot name = server --max-sessions (64)")
    parser.add_argument("--per-conn", type=int, default=100, help="streams per HTTP/2 connection (default 100)")
    parser.add_argument("--max-streams", type=int, default=None, help="server --max-streams (default: its default)")
    parser.add_argument("--log-level", default="info", help="server --log-level (default info, as deployed)")
    parser.add_argument(
        "--settle",
        type=float,
        default=120.0,
        help="seconds the server may take to end every session and match after the run (default 120)",
    )
    parser.add_argument("--step", type=float, default=10.0, help="seconds per timeline interval (default 10)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the bots' random choices (default 1)")
    parser.add_argument("--keep-logs", metavar="DIR", help="copy each step's server log and generator stderr here")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    args.decision_time = CLOCK_DEFAULTS["decision_time"]
    counts = [int(x) for x in args.ramp.split(",") if x.strip()] if args.ramp else [args.streams]
    command = "python bench/load.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    if not args.json:
        print(command, flush=True)
    fd_limit = raise_fd_limit()
    binary = loadgen_binary()
    steps: list[dict[str, Any]] = []
    for n in counts:
        try:
            step = run_step(binary, n, args)
        except (RuntimeError, OSError, subprocess.SubprocessError) as e:  # the server did not start, ...
            steps.append({"streams": n, "load": {}, "server": None, "problems": [str(e)], "classes": ["broken"]})
            steps[-1]["class"] = "broken"
            break
        steps.append(step)
        if not args.json:
            print(f"# {n} streams: {step['class']}", file=sys.stderr, flush=True)
        if step["server"]["stop"]["died_during_run"]:
            break  # a crashed server will not do better with more streams
    result = {
        "command": command,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": list(os.getloadavg()),
        "fd_limit": fd_limit,
        "decision_time_s": args.decision_time,
        "steps": steps,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"python {result['python']}, {result['cpus']} CPUs, open-file limit {fd_limit}; "
        f"{args.warmup:g} s warm-up + {args.seconds:g} s measured per step, a fresh gaigel serve each; "
        f"decision time {args.decision_time:g} s; {args.hands} hands per match; "
        f"load average {result['load_average'][0]:.1f} at the end"
    )
    print(
        "rtt: Action -> next DecisionRequest of the stream (spans the opponent's move when the turn passes); "
        "turn: the match's previous Action -> next DecisionRequest (one server cycle); ms"
    )
    print()
    print_table(steps)
    for s in steps:
        print_details(s)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
