"""Soak: an arena in which one bot misbehaves on purpose, then an audit of everything it left.

Run from the repository root::

    python bench/soak.py                          # examples/soak.toml, 2,000 matches (10 to 15 minutes)
    python bench/soak.py --matches 100 --json     # a short run

The arena (``examples/soak.toml``, or ``--config``) is run as ``gaigel arena run`` in a
subprocess, into a fresh output folder (``--out``, default a new temporary folder that is
kept). Its ``chaos`` bot is ``gaigel chaos-bot`` (``gaigel_harness.chaos``): at seeded random
decisions it times out, answers illegally, quotes stale decision ids, sends bytes that are
not a PlayRequest, drops its stream and resumes, or crashes, and appends one JSON line per
injected fault to ``OUT/chaos-faults.jsonl``. ``--matches N`` sets the schedule size:
``sets_per_pairing`` becomes the smallest number of duplicate sets with at least N matches
(the effective config is written to ``OUT/soak.toml``).

Then, from the journal (SQLite), the kept match records, the fault log and the arena's
JSON log (``OUT/arena.log``), every invariant below is checked; the exit status is 1 when
one fails (2 when the arena itself failed or hung, ``--timeout``):

* **accounted for**: every scheduled match has exactly one journal row, ``done``, and one
  ``match_done`` log line; none is missing, none twice; the server started exactly one
  match per scheduled match (no void games, no duplicates);
* **records**: every done match has its record, which replays hash for hash
  (``gaigel.replay``) and has the journal's result; a forfeit in the journal names the
  reason of the record's last fault before the FORFEIT; no match ended ``aborted`` (a
  server error);
* **faults**: per match, every injected fault is in the record under its reason code:
  exactly one ILLEGAL_ACTION per illegal id, one MALFORMED_MESSAGE per garbage message,
  one DISCONNECT per garbage, dropped stream and crash; at least one STALE_DECISION per
  stale id and one TIMEOUT_FALLBACK per timeout; no more RESUMED than DISCONNECT; bots that
  injected nothing (``calm``, the house bots) have no fault but timeouts (a process starved
  of CPU on a loaded machine can be late; these are listed as unexplained). In a match the chaos
  side forfeited, faults injected after the forfeit cannot be recorded: they are counted,
  not failed. Every crash is one ``bot_restarted`` of the arena;
* **ratings**: ``gaigel arena report OUT --json`` rates every bot with the games it played.

Printed: the reproducing command first, then wall time, matches/s and decisions/s, the
RSS of the runner process (arena and match server) and of the bot processes (sampled
every 0.5 s: after the first 10 % of matches, peak, at the end), the fault table
(injected, expected reason codes, recorded) and the invariants.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import math
import os
import platform
import shlex
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = REPO / "examples" / "soak.toml"
FAULT_LOG = "chaos-faults.jsonl"
REASONS = (
    "ILLEGAL_ACTION",
    "STALE_DECISION",
    "TIMEOUT_FALLBACK",
    "MALFORMED_MESSAGE",
    "DISCONNECT",
    "RESUMED",
    "FORFEIT",
    "MISSING_JOIN",
)
EXACT = ("ILLEGAL_ACTION", "MALFORMED_MESSAGE", "DISCONNECT")
"""Reason codes a well-behaved SDK bot never gets without an injected fault: counted exactly."""
AT_LEAST = ("STALE_DECISION", "TIMEOUT_FALLBACK")
"""Reason codes an outage can add to (a decision that runs out while the bot is away)."""


# --- the configuration ------------------------------------------------------------------------


def dump_toml(data: Mapping[str, Any]) -> str:
    """The TOML text of a parsed arena config (tables, one level of sub-tables, arrays of tables)."""
    out: list[str] = []

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)  # JSON string escapes are TOML basic-string escapes
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        raise TypeError(f"cannot write {v!r} as TOML")

    def table(header: str, t: Mapping[str, Any]) -> None:
        out.append(header)
        subs = {k: v for k, v in t.items() if isinstance(v, Mapping)}
        out.extend(f"{json.dumps(k)} = {value(v)}" for k, v in t.items() if k not in subs)
        out.append("")
        name = header.strip("[]")
        for k, sub in subs.items():
            table(f"[{name}.{json.dumps(k)}]", sub)

    for key, section in data.items():
        if isinstance(section, list):
            for entry in section:
                table(f"[[{key}]]", entry)
        else:
            table(f"[{key}]", section)
    return "\n".join(out)


def with_chaos(command: list[str], spec: str) -> list[str]:
    """*command* with the value of its ``--chaos`` flag replaced by *spec* (bots with ``none`` keep it)."""
    out = list(command)
    if "chaos-bot" in out and "--chaos" in out:
        i = out.index("--chaos") + 1
        if i < len(out) and out[i] != "none":
            out[i] = spec
    return out


def effective_config(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    """The config to run (as parsed TOML) and its number of matches."""
    from gaigel_arena.config import parse_config
    from gaigel_arena.schedule import build_schedule

    with Path(args.config).open("rb") as f:
        data = tomllib.load(f)
    arena = data.setdefault("arena", {})
    if args.seed is not None:
        arena["seed"] = args.seed
    if args.workers is not None:
        arena["workers"] = args.workers
    arena["executor"] = "grpc"
    arena["keep_records"] = True
    if args.chaos is not None:
        for bot in data.get("bots", []):
            if "command" in bot:
                bot["command"] = with_chaos(bot["command"], args.chaos)
    config = parse_config(dict(data, arena=dict(arena, sets_per_pairing=1)))
    per_set = len(build_schedule(config.bot_names, config.ruleset, 1, config.seed))
    arena["sets_per_pairing"] = max(1, math.ceil(args.matches / per_set))
    return data, arena["sets_per_pairing"] * per_set


# --- running the arena ------------------------------------------------------------------------


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _children(pid: int) -> list[int]:
    """Processes whose parent is *pid* (the bot processes of the arena runner)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry))
    return out


def _done_count(db: Path) -> int | None:
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=2)) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM matches WHERE status = 'done'").fetchone()[0])
    except sqlite3.Error:
        return None


@dataclasses.dataclass
class Run:
    """What happened while the arena ran."""

    returncode: int | None
    wall_s: float
    timed_out: bool
    samples: list[tuple[float, int, int, int]]
    """(seconds since start, matches done, runner RSS KiB, bot processes RSS KiB)."""


def run_arena(out: Path, config_path: Path, bootstrap: int, timeout: float) -> Run:
    """``gaigel arena run`` into *out*, its stderr (JSON log lines) to ``OUT/arena.log``."""
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",  # gaigel chaos-bot
        "GAIGEL_CHAOS_LOG": str(out / FAULT_LOG),
        "GAIGEL_CHAOS_STATE_DIR": str(out / "chaos-state"),
        "PYTHONUNBUFFERED": "1",
        "GRPC_VERBOSITY": "ERROR",
    }
    command = [sys.executable, "-m", "gaigel.cli", "arena", "run", str(config_path), "--out", str(out)]
    command += ["--quiet", "--log-level", "info", "--bootstrap", str(bootstrap), "--json"]
    samples: list[tuple[float, int, int, int]] = []
    started = time.monotonic()
    with (out / "arena.log").open("wb") as err, (out / "arena.out").open("wb") as stdout:
        proc = subprocess.Popen(command, env=env, stdout=stdout, stderr=err, start_new_session=True)
        timed_out = False
        last_done = 0
        while proc.poll() is None:
            time.sleep(0.5)
            now = time.monotonic() - started
            done = _done_count(out / "arena.sqlite")
            last_done = done if done is not None else last_done
            bots = sum(_rss_kib(p) for p in _children(proc.pid))
            samples.append((now, last_done, _rss_kib(proc.pid), bots))
            if now > timeout:
                timed_out = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        wall = time.monotonic() - started
    return Run(proc.returncode, wall, timed_out, samples)


# --- reading what the run left ----------------------------------------------------------------


def json_lines(path: Path) -> list[dict[str, Any]]:
    """Every JSON object that starts a line of *path*.

    Bot processes share the runner's stderr, so a bot's text can land right after a log
    line: each object is decoded on its own and what follows it is ignored.
    """
    decoder = json.JSONDecoder()
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                obj, _ = decoder.raw_decode(line)
                if isinstance(obj, dict):
                    out.append(obj)
    return out


@dataclasses.dataclass
class Audit:
    """The findings: failed invariants, notes and the figures of the fault table."""

    problems: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    checks: dict[str, bool] = dataclasses.field(default_factory=dict)

    def check(self, name: str, ok: bool, why: Iterable[str] = ()) -> None:
        """Records invariant *name*; its problems (at most 20 shown) when it fails."""
        self.checks[name] = ok
        if not ok:
            why = list(why)
            self.problems.extend(f"{name}: {w}" for w in why[:20])
            if len(why) > 20:
                self.problems.append(f"{name}: ... {len(why) - 20} more")
            if not why:
                self.problems.append(name)


def audit_accounting(db: Path, schedule_ids: list[str], events: list[dict[str, Any]], audit: Audit) -> list[Any]:
    """Journal rows against the schedule and the runner's match_done lines; returns the rows."""
    from gaigel_arena.journal import Journal

    with Journal.open_existing(db) as journal:
        rows = journal.rows()
    ids = [r.match_id for r in rows]
    twice = [m for m, n in collections.Counter(ids).items() if n > 1]
    missing = sorted(set(schedule_ids) - set(ids))
    extra = sorted(set(ids) - set(schedule_ids))
    not_done = [f"{r.match_id} is {r.status}" for r in rows if r.status != "done"]
    audit.check(
        "every scheduled match has exactly one journal row, done",
        not (twice or missing or extra or not_done),
        [f"{m} twice" for m in twice]
        + [f"{m} missing" for m in missing]
        + [f"{m} not scheduled" for m in extra]
        + not_done,
    )
    done_lines = collections.Counter(e["match_id"] for e in events if e.get("event") == "match_done")
    wrong = [f"{m}: {done_lines.get(m, 0)} match_done lines" for m in schedule_ids if done_lines.get(m, 0) != 1]
    audit.check("every scheduled match finished exactly once (match_done)", not wrong, wrong)
    voids = [f"{e.get('match_id')}: {e.get('error')}" for e in events if e.get("event") == "match_void"]
    audit.check("no void match (infrastructure failure, replayed)", not voids, voids)
    server_ends = [e for e in events if e.get("event") == "match_end" and "termination" in e and "dashes" in e]
    server_ids = collections.Counter(e["match_id"] for e in server_ends)
    dup = [m for m, n in server_ids.items() if n > 1]
    audit.check(
        "the server ended exactly one match per scheduled match",
        len(server_ids) == len(schedule_ids) and not dup,
        [f"{len(server_ids)} server matches ended for {len(schedule_ids)} scheduled"]
        + [f"{m} ended twice" for m in dup],
    )
    return rows


def audit_records(rows: list[Any], audit: Audit) -> dict[str, dict[str, Any]]:
    """Every done row's record: present, replays, same result; returns records by server match id."""
    from gaigel.record import RecordError, load_record
    from gaigel.replay import replay
    from gaigel_arena.records import forfeit_reason

    by_server: dict[str, dict[str, Any]] = {}
    bad: list[str] = []
    mismatched: list[str] = []
    failed_replay: list[str] = []
    for row in rows:
        if row.status != "done":
            continue
        try:
            record = load_record(row.record_path or "")
        except RecordError as e:
            bad.append(f"{row.match_id}: {e}")
            continue
        report = replay(record)
        if not report.ok:
            failed_replay.append(f"{row.match_id}: {report.mismatch}")
        result = dict(row.result or {})
        forfeit = result.pop("forfeit", None)
        if result != record.get("result") or forfeit != forfeit_reason(record):
            mismatched.append(f"{row.match_id}: journal {row.result} / record {record.get('result')}")
        server_id = str(record.get("server_match_id") or "")
        if not server_id or server_id in by_server:
            bad.append(f"{row.match_id}: server_match_id {server_id!r} missing or shared")
        record["_arena_match_id"] = row.match_id
        by_server[server_id] = record
    aborted = [
        f"{r['_arena_match_id']}: {r['result'].get('termination')}"
        for r in by_server.values()
        if (r.get("result") or {}).get("termination") not in ("completed", "forfeit")
    ]
    audit.check("every done match has its record", not bad, bad)
    audit.check("every match completed or was forfeited (none aborted by a server error)", not aborted, aborted)
    audit.check("every record replays hash for hash", not failed_replay, failed_replay)
    audit.check("journal results equal the records' results (forfeit reasons included)", not mismatched, mismatched)
    return by_server


@dataclasses.dataclass
class FaultTable:
    """Per reason code: expected from injections, recorded for injecting bots, recorded for the others."""

    injected: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    expected: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    recorded: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    others: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    unexplained: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    """Recorded beyond what the injections and outages explain (late answers on a loaded machine)."""
    unexplained_faults: list[str] = dataclasses.field(default_factory=list)
    outage_timeouts: int = 0
    after_forfeit: int = 0
    forfeits_by_reason: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)


def _expected(kinds: collections.Counter[str]) -> collections.Counter[str]:
    from gaigel_harness.chaos import EXPECTED_REASONS

    out: collections.Counter[str] = collections.Counter()
    for kind, n in kinds.items():
        for reason in EXPECTED_REASONS[kind]:
            out[reason] += n
    return out


def _outage_timeouts(record: dict[str, Any], seat: int) -> int:
    """TIMEOUT_FALLBACKs of *seat* while it was away: after a DISCONNECT and before its RESUMED,
    or at the step it resumed at, or on an action flagged DISCONNECTED (not injected)."""
    flagged = {
        (hand["index"], step)
        for hand in record["hands"]
        for step, action in enumerate(hand["actions"])
        if action["seat"] == seat and "DISCONNECTED" in action.get("flags", [])
    }
    away, back_at, n = False, None, 0
    for f in record["faults"]:
        if f["seat"] != seat:
            continue
        where = (f.get("hand"), f.get("step"))
        if f["reason"] == "DISCONNECT":
            away = True
        elif f["reason"] == "RESUMED":
            away, back_at = False, where
        elif f["reason"] == "TIMEOUT_FALLBACK" and (away or where == back_at or where in flagged):
            n += 1
    return n


def audit_faults(records: dict[str, dict[str, Any]], injections: list[dict[str, Any]], audit: Audit) -> FaultTable:
    """Reconciles the fault log with the records, match by match and seat by seat."""
    table = FaultTable()
    by_seat: dict[tuple[str, int], collections.Counter[str]] = collections.defaultdict(collections.Counter)
    injectors = {e["bot"] for e in injections}  # configured names: main() maps one-match aliases
    orphans = []
    for e in injections:
        table.injected[e["kind"]] += 1
        if e["match_id"] not in records:
            orphans.append(f"{e['kind']} in server match {e['match_id']} (pid {e['pid']}): no record")
            continue
        by_seat[(e["match_id"], int(e["seat"]))][e["kind"]] += 1
    audit.check("every injected fault is in a match that has a record", not orphans, orphans)
    table.expected = _expected(table.injected)
    wrong: list[str] = []
    clean: list[str] = []
    for server_id, record in records.items():
        forfeit_sides = (record.get("result") or {}).get("forfeit_sides") or []
        for f in record["faults"]:
            bot = record["seats"][f["seat"]]["bot"]
            if f["reason"] == "FORFEIT":
                table.forfeits_by_reason[_forfeit_cause(record)] += 1
            if bot in injectors:
                table.recorded[f["reason"]] += 1
            else:
                table.others[f["reason"]] += 1
                line = f"{record['_arena_match_id']} seat {f['seat']} ({bot}): {f['reason']} {f['message']}"
                # A well-behaved process starved of CPU on a loaded machine can run out of time:
                # reported, not failed. Any other fault of a bot that injected none is the server's.
                (table.unexplained_faults if f["reason"] == "TIMEOUT_FALLBACK" else clean).append(line)
        for seat, info in enumerate(record["seats"]):
            if info["bot"] not in injectors:
                continue
            kinds = by_seat.get((server_id, seat), collections.Counter())
            got = collections.Counter(f["reason"] for f in record["faults"] if f["seat"] == seat)
            outage = _outage_timeouts(record, seat)
            table.outage_timeouts += outage
            forfeited = record["seats"][seat]["side"] in forfeit_sides
            wrong.extend(_seat_problems(record["_arena_match_id"], seat, kinds, got, outage, forfeited, table))
    audit.check("every injected fault is recorded under its reason code", not wrong, wrong)
    audit.check("bots that injected no fault were charged none (timeouts aside)", not clean, clean)
    return table


def _forfeit_cause(record: dict[str, Any]) -> str:
    from gaigel_arena.records import forfeit_reason

    why = forfeit_reason(record)
    return str(why["reason"]) if why else "?"


def _seat_problems(
    match_id: str,
    seat: int,
    kinds: collections.Counter[str],
    got: collections.Counter[str],
    outage: int,
    forfeited: bool,
    table: FaultTable,
) -> list[str]:
    need = _expected(kinds)
    need["TIMEOUT_FALLBACK"] += outage
    where = f"{match_id} seat {seat} (injected {dict(kinds) or 'nothing'}, recorded {dict(got) or 'nothing'})"
    problems = []
    for reason in EXACT:
        if got[reason] > need[reason]:
            problems.append(f"{where}: {got[reason]} {reason}, {need[reason]} injected")
    for reason in AT_LEAST:
        extra = max(0, got[reason] - need[reason])
        table.unexplained[reason] += extra
        if extra:
            table.unexplained_faults.append(f"{where}: {extra} {reason} more than injected")
    for reason in (*EXACT, *AT_LEAST):
        short = need[reason] - got[reason]
        if short > 0:
            if forfeited:  # injected after the forfeit had ended the match: nothing to record it in
                table.after_forfeit += short
            else:
                problems.append(f"{where}: {got[reason]} {reason}, at least {need[reason]} expected")
    if got["RESUMED"] > got["DISCONNECT"]:
        problems.append(f"{where}: more RESUMED than DISCONNECT")
    if got["FORFEIT"] > 1:
        problems.append(f"{where}: {got['FORFEIT']} FORFEIT")
    return problems


def audit_crashes(
    injections: list[dict[str, Any]], starts: list[dict[str, Any]], events: list[dict[str, Any]], audit: Audit
) -> dict[str, int]:
    """Every injected crash is one restart by the arena; counts resumes through the resume file."""
    from gaigel_harness.chaos import CRASH_EXIT_CODE

    crashes = sum(1 for e in injections if e["kind"] == "crash")
    restarts = [e for e in events if e.get("event") == "bot_restarted"]
    ours = sum(1 for e in restarts if e.get("exit_code") == CRASH_EXIT_CODE)
    others = [
        f"{e.get('bot')} exited with {e.get('exit_code')}" for e in restarts if e.get("exit_code") != CRASH_EXIT_CODE
    ]
    audit.check(
        "every injected crash was restarted by the arena, no other exit",
        ours == crashes and not others,
        [f"{crashes} crashes injected, {ours} restarts with exit code {CRASH_EXIT_CODE}", *others],
    )
    claimed = sum(1 for e in starts if e.get("resumed_from") is not None)
    return {"crashes": crashes, "restarts": ours, "resume_files_claimed": claimed}


def audit_report(out: Path, rows: list[Any], bootstrap: int, audit: Audit) -> dict[str, Any] | None:
    """``gaigel arena report OUT --json``: every bot rated with the games it played."""
    proc = subprocess.run(
        [sys.executable, "-m", "gaigel.cli", "arena", "report", str(out), "--json", "--bootstrap", str(bootstrap)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        audit.check("ratings computed (gaigel arena report --json)", False, [proc.stderr.strip()[-500:]])
        return None
    report: dict[str, Any] = json.loads(proc.stdout)
    games: collections.Counter[str] = collections.Counter()
    for row in rows:
        for bot in set(row.sides):
            games[bot] += 1
    rated = {b["name"]: b for b in report["bots"]}
    wrong = [
        f"{name}: {rated.get(name, {}).get('games')} games rated, {n} played"
        for name, n in games.items()
        if rated.get(name, {}).get("games") != n
    ]
    wrong += [f"{b['name']}: Elo {b['elo']}" for b in report["bots"] if not math.isfinite(b["elo"])]
    if report["matches_done"] != len(rows):
        wrong.append(f"report has {report['matches_done']} matches done, journal {len(rows)}")
    score = sum(b["score"] for b in report["bots"])
    if abs(score - report["games_rated"]) > 1e-6:
        wrong.append(f"scores add up to {score}, {report['games_rated']} games rated")
    audit.check("ratings computed for every bot with the games it played", not wrong, wrong)
    return report


# --- output -----------------------------------------------------------------------------------


def rerun_command(args: argparse.Namespace) -> str:
    parts = ["python", "bench/soak.py", "--matches", str(args.matches)]
    if Path(args.config).resolve() != DEFAULT_CONFIG:
        parts += ["--config", str(args.config)]
    for flag in ("chaos", "seed", "workers"):
        if getattr(args, flag) is not None:
            parts += [f"--{flag}", str(getattr(args, flag))]
    if args.audit:
        parts = ["python", "bench/soak.py", "--audit", str(args.audit)]
    if args.json:
        parts.append("--json")
    return shlex.join(parts)


def memory(samples: list[tuple[float, int, int, int]], total: int) -> dict[str, Any]:
    """Runner and bot RSS (MiB) after the first 10 % of matches, at the peak and at the end."""
    if not samples:
        return {}
    warm = next((s for s in samples if s[1] >= total * 0.1), samples[-1])

    def figures(i: int) -> dict[str, float]:
        end = next((s[i] for s in reversed(samples) if s[1] >= total and s[i] > 0), None)
        end = end if end is not None else next((s[i] for s in reversed(samples) if s[i] > 0), 0)
        return {
            "at_10pct": round(warm[i] / 1024, 1),
            "peak": round(max(s[i] for s in samples) / 1024, 1),
            "end": round(end / 1024, 1),
        }

    return {"runner_rss_mib": figures(2), "bots_rss_mib": figures(3)}


def fault_rows(table: FaultTable) -> list[dict[str, Any]]:
    """One row per reason code that was expected or recorded."""
    rows = []
    for reason in REASONS:
        if not (table.expected[reason] or table.recorded[reason] or table.others[reason]):
            continue
        rows.append(
            {
                "reason": reason,
                "expected_from_injections": table.expected[reason],
                "while_away": table.outage_timeouts if reason == "TIMEOUT_FALLBACK" else 0,
                "recorded": table.recorded[reason],
                "unexplained": table.unexplained[reason],
                "recorded_other_bots": table.others[reason],
            }
        )
    return rows


def print_text(doc: dict[str, Any]) -> None:
    run = doc["run"]
    print(
        f"# Python {platform.python_version()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end"
    )
    print(
        f"{run['matches']} matches ({run['hands']} hands each, {run['decisions']} decisions) in {run['wall_s']:.1f} s: "
        f"{run['matches_per_s']:.2f} matches/s, {run['decisions_per_s']:.0f} decisions/s"
    )
    mem = doc["memory"]
    if mem:
        r, b = mem["runner_rss_mib"], mem["bots_rss_mib"]
        print(
            f"RSS MiB (after 10 % / peak / end): runner with server {r['at_10pct']} / {r['peak']} / {r['end']}; "
            f"bot processes {b['at_10pct']} / {b['peak']} / {b['end']}"
        )
    inj = doc["faults"]["injected"]
    print("injected: " + (", ".join(f"{k} {v}" for k, v in sorted(inj.items())) or "nothing"))
    crash = doc["faults"]["crashes"]
    print(
        f"crashes {crash['crashes']}, arena restarts {crash['restarts']}, restarted processes that took over a "
        f"resume file {crash['resume_files_claimed']}; forfeits by cause {doc['faults']['forfeits_by_cause']}"
    )
    header = f"{'reason code':<18} | {'injected':>8} | {'+ away':>6} | {'recorded':>8} | {'unexplained':>11} | {'other bots':>10}"
    print(header)
    print("-" * len(header))
    for row in doc["faults"]["table"]:
        print(
            f"{row['reason']:<18} | {row['expected_from_injections']:>8} | {row['while_away']:>6} | "
            f"{row['recorded']:>8} | {row['unexplained']:>11} | {row['recorded_other_bots']:>10}"
        )
    f = doc["faults"]
    print(
        "(injected: the reason codes the injected faults must leave; + away: timeouts while the bot was "
        f"disconnected or restarting; {f['after_forfeit']} faults injected after a forfeit had ended the match)"
    )
    for line in f["unexplained"][:10]:
        print(f"  unexplained: {line}")
    if len(f["unexplained"]) > 10:
        print(f"  ... {len(f['unexplained']) - 10} more in {doc['out']}/soak.json")
    if doc["ratings"]:
        print("ratings: " + ", ".join(f"{b['name']} {b['elo']:.0f} ({b['games']} games)" for b in doc["ratings"]))
    for name, ok in doc["checks"].items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    for p in doc["problems"]:
        print(f"  {p}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=str(DEFAULT_CONFIG), help="arena config (default examples/soak.toml)")
    parser.add_argument(
        "--matches", type=int, default=2000, help="schedule size (rounded up to whole sets; default 2000)"
    )
    parser.add_argument(
        "--chaos", help="fault spec of the chaos bots, e.g. timeout=0.05,crash=0.01 (default: the config's)"
    )
    parser.add_argument("--seed", type=int, help="arena seed (default: the config's)")
    parser.add_argument("--workers", type=int, help="matches at a time (default: the config's)")
    parser.add_argument("--out", help="output folder, must not exist yet (default: a new temporary folder, kept)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="stop the arena after this many seconds (a hang)")
    parser.add_argument("--bootstrap", type=int, default=200, help="bootstrap samples for the ratings (default 200)")
    parser.add_argument("--json", action="store_true", help="print one JSON object after the command line")
    parser.add_argument(
        "--audit", metavar="DIR", help="audit the output folder of an earlier run again (plays nothing)"
    )
    args = parser.parse_args(argv)
    if args.matches < 1:
        parser.error("--matches must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = rerun_command(args)
    print(f"# rerun: {command}", flush=True)
    from gaigel_arena.config import parse_config
    from gaigel_arena.records import configured_bot
    from gaigel_arena.schedule import build_schedule

    if args.audit:  # a folder of an earlier run: audit it again, play nothing
        out = Path(args.audit)
        with (out / "soak.toml").open("rb") as f:
            data = tomllib.load(f)
        earlier = json.loads((out / "soak.json").read_text()) if (out / "soak.json").exists() else {}
        run = Run(0, float(earlier.get("run", {}).get("wall_s", 0.0)), False, [])
    else:
        data, total = effective_config(args)
        out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="gaigel-soak-"))
        if args.out:
            out.mkdir(parents=True, exist_ok=False)
        (out / "soak.toml").write_text(dump_toml(data), encoding="utf-8")
    config = parse_config(data)
    schedule = build_schedule(config.bot_names, config.ruleset, config.sets_per_pairing, config.seed)
    total = len(schedule)
    if not args.json:
        print(f"# {total} matches ({config.sets_per_pairing} sets), output in {out}", flush=True)
    if not args.audit:
        run = run_arena(out, out / "soak.toml", args.bootstrap, args.timeout)
    audit = Audit()
    audit.check(
        "the arena finished (exit 0, no hang)",
        run.returncode == 0 and not run.timed_out,
        [f"exit {run.returncode}" + (f", stopped after --timeout {args.timeout:g} s" if run.timed_out else "")],
    )
    events = json_lines(out / "arena.log")
    log_lines = json_lines(out / FAULT_LOG)
    for e in log_lines:  # per-match bot processes log under a one-match alias of their bot
        if "bot" in e:
            e["bot"] = configured_bot(str(e["bot"]), config.bot_names)
    injections = [e for e in log_lines if e.get("event") == "fault"]
    starts = [e for e in log_lines if e.get("event") == "start"]
    rows = (
        audit_accounting(out / "arena.sqlite", [m.match_id for m in schedule], events, audit)
        if (out / "arena.sqlite").exists()
        else []
    )
    records = audit_records(rows, audit)
    table = audit_faults(records, injections, audit)
    crashes = audit_crashes(injections, starts, events, audit)
    kinds_missing = [
        k
        for k, n in table.injected.items()
        if n and not all(table.recorded[r] for r in _expected(collections.Counter({k: 1})))
    ]
    audit.check("every injected fault kind shows up with its reason codes", not kinds_missing, kinds_missing)
    report = audit_report(out, rows, args.bootstrap, audit) if rows else None
    decisions = sum(len(h["actions"]) for r in records.values() for h in r["hands"])
    doc = {
        "command": command,
        "out": str(out),
        "run": {
            "matches": total,
            "hands": config.hands,
            "bots": list(config.bot_names),
            "decisions": decisions,
            "wall_s": round(run.wall_s, 2),
            "matches_per_s": round(len(rows) / run.wall_s, 3) if run.wall_s else 0.0,
            "decisions_per_s": round(decisions / run.wall_s, 1) if run.wall_s else 0.0,
            "returncode": run.returncode,
            "timed_out": run.timed_out,
        },
        "memory": memory(run.samples, total),
        "faults": {
            "injected": dict(table.injected),
            "table": fault_rows(table),
            "outage_timeouts": table.outage_timeouts,
            "after_forfeit": table.after_forfeit,
            "forfeits_by_cause": dict(table.forfeits_by_reason),
            "unexplained": table.unexplained_faults,
            "crashes": crashes,
            "crashes_suppressed": sum(1 for e in log_lines if e.get("event") == "suppressed"),
        },
        "ratings": [{k: b[k] for k in ("name", "elo", "bt", "games", "score")} for b in (report or {}).get("bots", [])],
        "checks": audit.checks,
        "problems": audit.problems,
        "ok": not audit.problems,
    }
    (out / ("soak-audit.json" if args.audit else "soak.json")).write_text(
        json.dumps(doc, indent=2) + "\n", encoding="utf-8"
    )
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print_text(doc)
    if run.timed_out or run.returncode != 0:
        return 2
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
