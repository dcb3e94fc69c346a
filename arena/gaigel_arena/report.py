"""Reports: a read-only view of a journal as a terminal table, JSON or one HTML file.

Reports never compute results of their own: they read the done matches from the journal
and pass them through :mod:`gaigel_arena.ratings`, exactly as the runner does.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import html
import json
import math
import os
import shutil
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gaigel.match import MatchTermination
from gaigel_arena.journal import DEFAULT_DB_NAME, DbTarget, Journal, JournalError, JournalRow, is_url
from gaigel_arena.ratings import (
    MIN_SETS_FOR_INTERVAL,
    GameResult,
    Standings,
    build_standings,
    elo_history,
    interval_known,
)
from gaigel_arena.runner import journal_results
from gaigel_arena.sprt import pair_set_histograms

__all__ = [
    "ArenaReport",
    "BotFate",
    "MatchEntry",
    "MatchFile",
    "RecordFacts",
    "bot_fates",
    "format_fates",
    "format_presence",
    "format_set_histograms",
    "format_table",
    "load_report",
    "match_files",
    "render_html",
    "report_dict",
    "sandbox_texts",
    "write_html_report",
]

REPORT_FORMAT = "gaigel.arena.report.v1"
_COLOURS = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)


@dataclasses.dataclass(frozen=True)
class MatchEntry:
    """One scheduled match as the report lists it."""

    index: int
    match_id: str
    sides: tuple[str, ...]
    seats: tuple[str, ...]
    seed: int
    status: str
    result: dict[str, Any] | None
    duration_s: float | None
    record: Path | None
    """The match record on disk, when it was kept and is found."""
    faults: tuple[dict[str, Any], ...] | None
    """The record's faults (``seat``, ``reason``, ...), None when not read or no record."""
    attempts: int = 0
    """How often the match was handed to a worker: every attempt but the one that counted was void."""
    revealed: bool = True
    """Whether every match that plays this deal seed is done: only then are the seed and the
    viewer page (the deal, card by card) shown; before, *record* is None and the seed hidden."""
    sandboxes: dict[str, dict[str, Any]] | None = None
    """The record's ``sandboxes``: per command bot, the sandbox that ran it and its limits."""
    logs: tuple[tuple[int, str], ...] = ()
    """Seat and file name (in ``logs/<match id>/``) of each seat's captured output; empty
    until the match is revealed (a bot's log shows its hand)."""


@dataclasses.dataclass(frozen=True)
class ArenaReport:
    """Everything a report shows, read from one journal."""

    name: str
    config: dict[str, Any]
    counts: dict[str, int]
    results: tuple[GameResult, ...]
    standings: Standings
    bots: tuple[str, ...]
    matches: tuple[MatchEntry, ...] = ()
    presence: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    """Remote bots: connected and absent seconds over all runs, and the matches forfeited as absent."""


@dataclasses.dataclass(frozen=True)
class RecordFacts:
    """What a report reads from a match record besides the journal."""

    faults: tuple[dict[str, Any], ...] | None
    sandboxes: dict[str, dict[str, Any]] | None = None
    logs: tuple[tuple[int, str], ...] = ()


FaultCache = dict[str, RecordFacts]
"""Facts read from records by match id: a done match's record never changes."""

LOG_FOLDER = "logs"
"""The arena folder's (and the published report's) folder of the bots' captured output."""
BUNDLE_FOLDER = "bundles"
"""The folder next to the report page with each match's debug bundle per bot."""


def _find_record(row: JournalRow, folder: Path | None) -> Path | None:
    """The record of *row*: its stored path, else ``records/<id>.json`` in the arena folder (moved folders)."""
    candidates = [Path(row.record_path)] if row.record_path else []
    if folder is not None:
        candidates.append(folder / "records" / f"{row.match_id}.json")
    return next((c for c in candidates if c.is_file()), None)


def _read_facts(record: Path, match_id: str) -> RecordFacts:
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return RecordFacts(None)
    if not isinstance(data, dict):
        return RecordFacts(None)
    faults = data.get("faults")
    sandboxes = data.get("sandboxes")
    logs = []
    for seat, name in (data.get("bot_logs") or {}).items() if isinstance(data.get("bot_logs"), dict) else ():
        parts = Path(str(name)).parts
        # only the form the runner writes, logs/<this match>/<file>: a link never names another folder
        if str(seat).isdigit() and len(parts) == 3 and parts[:2] == (LOG_FOLDER, match_id) and _plain(parts[2]):
            logs.append((int(seat), parts[2]))
    return RecordFacts(
        tuple(f for f in faults if isinstance(f, dict)) if isinstance(faults, list) else None,
        {str(k): v for k, v in sandboxes.items() if isinstance(v, dict)} if isinstance(sandboxes, dict) else None,
        tuple(sorted(logs)),
    )


def _plain(name: str) -> bool:
    """A file name that is one path component and not hidden (no '..', no '/')."""
    return bool(name) and not name.startswith(".") and "/" not in name and "\\" not in name and "\0" not in name


def revealed_seeds(rows: list[JournalRow]) -> set[int]:
    """The deal seeds every match of which is done. A seed is shared by all seatings of a duplicate
    set and by every group of the same set number, so the deal of one match tells those still to come."""
    seeds = {row.seed for row in rows}
    return seeds - {row.seed for row in rows if row.status != "done"}


def _entries(rows: list[JournalRow], folder: Path | None, cache: FaultCache | None) -> tuple[MatchEntry, ...]:
    out = []
    shown = revealed_seeds(rows)
    for row in rows:
        record = _find_record(row, folder) if row.status == "done" else None
        facts = RecordFacts(None)
        if record is not None and cache is not None:
            if row.match_id not in cache:
                cache[row.match_id] = _read_facts(record, row.match_id)
            facts = cache[row.match_id]
        out.append(
            MatchEntry(
                row.index,
                row.match_id,
                row.sides,
                row.seats,
                row.seed,
                row.status,
                row.result,
                row.duration_s,
                record if row.seed in shown else None,
                facts.faults,
                row.attempts,
                row.seed in shown,
                facts.sandboxes,
                facts.logs if row.seed in shown else (),
            )
        )
    return tuple(out)


def _house_bots(report: ArenaReport) -> set[str]:
    return {str(b.get("name")) for b in report.config.get("bots", []) if b.get("kind") == "house"}


def _log_source(entry: MatchEntry, name: str) -> Path | None:
    """The captured output *name* of revealed *entry* in its arena's ``logs/<match id>/``, resolved;
    None when missing, not a regular file, or (by a symlink) anywhere else."""
    if entry.record is None or not _plain(name):
        return None
    root = entry.record.parent.parent / LOG_FOLDER  # records/<id>.json sits in the arena folder
    try:
        real = (root / entry.match_id / name).resolve(strict=True)
        real.relative_to((root / entry.match_id).resolve(strict=True))
    except (OSError, ValueError):
        return None
    return real if real.is_file() else None


@dataclasses.dataclass(frozen=True)
class MatchFile:
    """One file a report links for a match: a seat's captured output or a bot's debug bundle."""

    label: str
    href: str
    """Relative to the report page, and the live server's path."""
    bot: str
    source: Path | None
    """The log file on disk; None for a bundle (made from the record and the logs)."""


def match_files(entry: MatchEntry, house: set[str]) -> list[MatchFile]:
    """The logs (those on disk) and the bundles (one per bot not a house bot) of a revealed match;
    nothing before it is revealed, by the rule of the viewer pages."""
    if entry.record is None:
        return []
    quoted = urllib.parse.quote(entry.match_id)
    out = []
    for seat, name in entry.logs:
        source = _log_source(entry, name)
        bot = entry.seats[seat] if seat < len(entry.seats) else "?"
        if source is not None:
            href = f"{LOG_FOLDER}/{quoted}/{urllib.parse.quote(name)}"
            out.append(MatchFile(f"seat {seat} log", href, bot, source))
    for bot in sorted(set(entry.seats) - house):
        href = f"{BUNDLE_FOLDER}/{quoted}/{urllib.parse.quote(bot)}.zip"
        out.append(MatchFile(f"{bot}.zip", href, bot, None))
    return out


def sandbox_texts(report: ArenaReport) -> dict[str, list[dict[str, Any]]]:
    """Per bot, every distinct sandbox it ran in (with the limits that held), from the records read;
    ``{"sandbox": "house"}`` / ``"remote"`` for bots the arena does not start."""
    kinds = {str(b.get("name")): str(b.get("kind")) for b in report.config.get("bots", [])}
    out: dict[str, list[dict[str, Any]]] = {}
    for bot in report.bots:
        if kinds.get(bot) in ("house", "remote"):
            out[bot] = [{"sandbox": kinds[bot]}]
            continue
        seen: list[dict[str, Any]] = []
        for e in report.matches:
            info = (e.sandboxes or {}).get(bot)
            if info is not None and info not in seen:
                seen.append(info)
        out[bot] = seen
    return out


def _sandbox_cell(infos: list[dict[str, Any]]) -> str:
    esc = html.escape
    if not infos:
        return '<td class="name muted" title="no record of a match of this bot read">?</td>'
    parts = []
    for info in infos:
        name = str(info.get("sandbox", "?"))
        if name == "house":
            parts.append('none <span class="muted">(house bot: the arena\'s own code)</span>')
            continue
        if name == "remote":
            parts.append('remote <span class="muted">(its own machine)</span>')
            continue
        limits = [
            k if v is True else f"{k} {v}" for k, v in info.items() if k != "sandbox" and v not in (None, False, "")
        ]
        cls = ' class="faulty"' if name in ("process", "none") else ""  # not confined: said in red
        detail = f' <span class="muted">({esc("; ".join(limits))})</span>' if limits else ""
        parts.append(f"<b{cls}>{esc(name)}</b>{detail}")
    kinds = " ".join(dict.fromkeys(str(i.get("sandbox", "?")) for i in infos))
    return f'<td class="name sandbox" data-sandbox="{esc(kinds)}">{"<br>".join(parts)}</td>'


def _load_presence(folder: Path | None, matches: tuple[MatchEntry, ...]) -> dict[str, dict[str, float]]:
    """Each remote bot's time from the arena's presence.json (summed over runs) and its ABSENT forfeits
    from the journal (a forfeit replayed after a crash counts once)."""
    if folder is None:
        return {}
    try:
        runs = json.loads((folder / "presence.json").read_text(encoding="utf-8"))["runs"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    out: dict[str, dict[str, float]] = {}
    for run in runs if isinstance(runs, list) else []:
        for bot, times in (run.get("bots") or {}).items() if isinstance(run, dict) else ():
            row = out.setdefault(str(bot), {"connected_s": 0.0, "absent_s": 0.0, "absent_forfeits": 0})
            for key in ("connected_s", "absent_s"):
                value = times.get(key) if isinstance(times, dict) else None
                row[key] += float(value) if isinstance(value, (int, float)) else 0.0
    for entry in matches:
        forfeit = (entry.result or {}).get("forfeit") or {}
        if entry.status == "done" and forfeit.get("reason") == "ABSENT" and forfeit.get("bot") in out:
            out[forfeit["bot"]]["absent_forfeits"] += 1
    return {bot: {k: round(v, 3) for k, v in row.items()} for bot, row in out.items()}


@dataclasses.dataclass(frozen=True)
class BotFate:
    """What became of one bot's scheduled matches, from the journal (and its faults from the records)."""

    name: str
    scheduled: int
    played: int
    """Done matches its side did not forfeit."""
    forfeits: dict[str, int]
    """Done matches its side forfeited, by reason code (``ABSENT``, ``DISQUALIFIED``, a fault's code)."""
    voids: int
    """Attempts at its matches that did not count (void: a failure, or cut off by a crash or Ctrl-C)."""
    disqualified: str | None
    """Why it was disqualified, None if it was not."""
    rated: bool
    """False for a bot without a done match its side did not forfeit: it is listed apart, not rated."""
    faults: int | None
    """Faults charged to it in the kept records; None when no record was read."""

    @property
    def fate(self) -> str:
        """In a few words: disqualified, not rated (and why) or rated."""
        if self.disqualified is not None:
            return f"disqualified: {self.disqualified.removeprefix('disqualified: ')}"
        if not self.rated:
            return "not rated: only forfeits" if self.forfeits else "not rated: no game played"
        return "rated"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {**dataclasses.asdict(self), "fate": self.fate}


def bot_fates(report: ArenaReport) -> tuple[BotFate, ...]:
    """One :class:`BotFate` per configured bot, in config order."""
    from gaigel_arena.executors import DISQUALIFIED

    rated = {row.name for row in report.standings.rows}
    faults = _faults_per_bot(report)
    read = any(e.faults is not None for e in report.matches)
    out = []
    for bot in report.bots:
        scheduled = played = voids = 0
        forfeits: collections.Counter[str] = collections.Counter()
        why: str | None = None
        for e in report.matches:
            mine = {x for x, name in enumerate(e.sides) if name == bot}
            if not mine:
                continue
            scheduled += 1
            voids += max(0, e.attempts - (0 if e.status == "pending" else 1))
            if e.status != "done" or e.result is None:
                continue
            if not mine & set(e.result.get("forfeit_sides") or ()):
                played += 1
                continue
            forfeit = e.result.get("forfeit") or {}
            reason = str(forfeit.get("reason") or MatchTermination.FORFEIT.value)
            forfeits[reason] += 1
            if reason == DISQUALIFIED and why is None:
                why = str(forfeit.get("message", ""))
        total = sum(faults.get(bot, {}).values()) if read else None
        out.append(BotFate(bot, scheduled, played, dict(forfeits.most_common()), voids, why, bot in rated, total))
    return tuple(out)


def format_fates(report: ArenaReport) -> str:
    """Every bot's matches played, forfeited (by reason) and void, and its fate, as fixed-width text."""
    fates = bot_fates(report)
    header = f"{'bot':<20} {'matches':>7} {'played':>6} {'forfeits':>8} {'voids':>5} {'faults':>6}  fate"
    lines = ["what became of every bot:", header, "-" * len(header)]
    for f in fates:
        n = sum(f.forfeits.values())
        reasons = f" ({', '.join(f'{r} {k}' for r, k in f.forfeits.items())})" if n else ""
        faults = "?" if f.faults is None else str(f.faults)
        lines.append(f"{f.name:<20} {f.scheduled:>7} {f.played:>6} {n:>8} {f.voids:>5} {faults:>6}  {f.fate}{reasons}")
    return "\n".join(lines)


def load_report(
    path: DbTarget, samples: int = 1000, details: bool = False, fault_cache: FaultCache | None = None
) -> ArenaReport:
    """Reads the journal in folder *path* (or the database file, or the PostgreSQL URL) and rates it.

    With *details* every kept match record is read for its faults (*fault_cache*, if
    given, keeps them between calls, as the live report does).

    :raises JournalError: if there is no journal there.
    """
    db: DbTarget
    folder: Path | None = None
    if is_url(path):
        db = path
    else:
        path = Path(path)
        db = path / DEFAULT_DB_NAME if path.is_dir() else path
        folder = path if path.is_dir() else path.parent
        if not db.exists():
            where = f"{path} (no folder or file of that name)" if not path.exists() else f"{path} (no {db.name} there)"
            raise JournalError(f"no arena journal in {where}; give the --out folder of `gaigel arena run`")
    with Journal.open_existing(db) as journal:
        config = journal.config()
        counts = journal.counts()
        results = tuple(journal_results(journal))
        rows = journal.rows()
    seed = int(config.get("arena", {}).get("seed", 0))
    standings = build_standings(results, samples=samples, seed=seed)
    bots = tuple(str(b["name"]) for b in config.get("bots", []))
    cache = (fault_cache if fault_cache is not None else {}) if details else None
    entries = _entries(rows, folder, cache)
    return ArenaReport(
        str(config.get("arena", {}).get("name", "arena")),
        config,
        counts,
        results,
        standings,
        bots,
        entries,
        _load_presence(folder, entries),
    )


def _num(x: float) -> float | None:
    """JSON-safe: NaN (not computed) and infinite bounds (unknown interval) become null."""
    return round(x, 3) if math.isfinite(x) else None


def report_dict(report: ArenaReport) -> dict[str, Any]:
    """The JSON export: progress counts, one entry per bot, and the full standings."""
    played = {row.name for row in report.standings.rows}
    bots: list[dict[str, Any]] = [
        {
            "name": row.name,
            "elo": round(row.elo, 3),
            "bt": round(row.bt, 3),
            "bt_ci95": [_num(row.bt_ci95[0]), _num(row.bt_ci95[1])],
            "games": row.games,
            "score": row.score,
        }
        for row in report.standings.rows
    ]
    bots += [
        {"name": name, "elo": None, "bt": None, "bt_ci95": [None, None], "games": 0, "score": 0.0}
        for name in report.bots
        if name not in played
    ]
    return {
        "format": REPORT_FORMAT,
        "arena": report.name,
        "matches_scheduled": report.counts["total"],
        "matches_done": report.counts["done"],
        "matches_pending": report.counts["pending"] + report.counts["started"],
        "games_rated": len(report.results),
        "connected": report.standings.connected,
        "bots": bots,
        "presence": report.presence,
        "set_histograms": [
            {"a": a, "b": b, "points_of_a": hist} for (a, b), hist in pair_set_histograms(report.results).items()
        ],
        "fates": [f.to_dict() for f in bot_fates(report)],
        "sandboxes": sandbox_texts(report),
        "standings": report.standings.to_dict(),
        "config": _published_config(report),
    }


def _published_config(report: ArenaReport) -> dict[str, Any]:
    """The config as published: the arena seed (from which every deal seed follows) is null until
    every match is done."""
    if all(e.revealed for e in report.matches):
        return report.config
    arena = {**report.config.get("arena", {}), "seed": None}
    return {**report.config, "arena": arena}


UNKNOWN_INTERVAL_NOTE = (
    f"note: an interval is unknown for a bot with fewer than {MIN_SETS_FOR_INTERVAL} duplicate sets "
    "(one set cannot show its spread); raise sets_per_pairing"
)


def _interval_text(interval: tuple[float, float], form: str) -> str:
    """A 95% interval for a table: blank when not computed, "unknown" when infinite."""
    lo, hi = interval
    if math.isnan(lo):
        return ""
    return form.format(lo, hi) if interval_known(interval) else "unknown"


def format_table(standings: Standings, done: int | None = None, total: int | None = None) -> str:
    """The rating table as fixed-width text."""
    lines = []
    if done is not None and total is not None:
        lines.append(f"{done}/{total} matches done")
    header = f"{'#':>3}  {'bot':<20} {'Elo':>7} {'BT':>7} {'BT 95% interval':>17} {'games':>6} {'score':>7}"
    lines += [header, "-" * len(header)]
    for rank, row in enumerate(standings.rows, 1):
        ci = _interval_text(row.bt_ci95, "[{:+.0f}, {:+.0f}]")
        pct = 100.0 * row.score / row.games if row.games else 0.0
        lines.append(f"{rank:>3}  {row.name:<20} {row.elo:>7.0f} {row.bt:>+7.0f} {ci:>17} {row.games:>6} {pct:>6.1f}%")
    if any(math.isinf(row.bt_ci95[1]) for row in standings.rows):
        lines.append(UNKNOWN_INTERVAL_NOTE)
    if not standings.connected:
        lines.append("note: not every bot has met every other; ratings of separate groups are not comparable")
    return "\n".join(lines)


def format_set_histograms(report: ArenaReport) -> str:
    """Per pair, the duplicate sets by the first bot's points in the set (the set is the unit the
    intervals resample; 2 games per set give the pentanomial counts)."""
    lines = ["duplicate sets by points of the first bot (0 .. games per set):"]
    for (a, b), hist in pair_set_histograms(report.results).items():
        lines.append(f"  {a} vs {b}: " + ", ".join(f"{k}: {v}" for k, v in hist.items()))
    return "\n".join(lines) if len(lines) > 1 else ""


def _span_text(seconds: float) -> str:
    """A connected or absent time: ``42 s``, ``3 min 05 s``, ``2 h 03 min``."""
    whole = round(seconds)
    if whole >= 3600:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
    if whole >= 60:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{seconds:.1f} s"


def format_presence(report: ArenaReport) -> str:
    """Remote bots' connected and absent time as text lines ("" without remote bots)."""
    if not report.presence:
        return ""
    lines = ["remote bots:"]
    for bot, row in report.presence.items():
        lines.append(
            f"  {bot:<20} connected {_span_text(row['connected_s'])}, absent {_span_text(row['absent_s'])}, "
            f"{int(row['absent_forfeits'])} absent forfeits"
        )
    return "\n".join(lines)


def _unrated_note(report: ArenaReport) -> str:
    apart = [f for f in bot_fates(report) if not f.rated]
    if not apart:
        return ""
    items = "; ".join(f"<b>{html.escape(f.name)}</b> ({html.escape(f.fate)})" for f in apart)
    return f'<p id="unrated"><b>Not rated</b> (see what became of every bot below): {items}.</p>\n'


def _fate_rows(report: ArenaReport) -> str:
    """The section "What became of every bot": matches played, forfeited, void, and the fate."""
    esc = html.escape
    rows = []
    sandboxes = sandbox_texts(report)
    for f in bot_fates(report):
        n = sum(f.forfeits.values())
        reasons = ", ".join(f"<code>{esc(r)}</code> {k}" for r, k in f.forfeits.items())
        cls = "" if f.rated and f.disqualified is None else ' class="faulty"'
        rows.append(
            f'<tr data-bot="{esc(f.name)}" data-rated="{str(f.rated).lower()}"><td class="name">{esc(f.name)}</td>'
            f'<td>{f.scheduled}</td><td>{f.played}</td><td>{n}</td><td class="name">{reasons}</td>'
            f"<td>{f.voids}</td><td>{'?' if f.faults is None else f.faults}</td>"
            f'<td{cls}><span class="name">{esc(f.fate)}</span></td>{_sandbox_cell(sandboxes.get(f.name, []))}</tr>'
        )
    return f"""<h2>What became of every bot</h2>
<p class="caption">Scheduled matches of each bot; those played, those its side forfeited by reason code (ABSENT: a
remote bot that stayed away, DISQUALIFIED: not played after the bot kept failing, else the fault that ended it),
attempts that were void (a failure, or cut off by a crash or Ctrl-C; counted for every bot of the match) and its
faults. A bot that only forfeited is not rated: it is listed here, not in the ratings. Sandbox: where the arena
ran it and the limits that really held, from the match records (<b>process</b> and <b>none</b> confine nothing).</p>
<table id="fates"><tr><th class="name">bot</th><th>matches</th><th>played</th><th>forfeits</th>
<th class="name">by reason</th><th>voids</th><th>faults</th><th class="name">fate</th><th class="name">sandbox</th></tr>
{"".join(rows)}</table>
"""


def _presence_rows(report: ArenaReport) -> str:
    if not report.presence:
        return ""
    rows = "".join(
        f'<tr><td class="name">{html.escape(bot)}</td><td>{_span_text(row["connected_s"])}</td>'
        f"<td>{_span_text(row['absent_s'])}</td><td>{int(row['absent_forfeits'])}</td></tr>"
        for bot, row in report.presence.items()
    )
    return f"""<h2>Remote bots</h2>
<p class="caption">Time each remote bot was connected to the arena's server and absent from it (all runs), and the
matches its side forfeited because it stayed away longer than connect_wait_ms (reason ABSENT).</p>
<table id="presence"><tr><th class="name">bot</th><th>connected</th><th>absent</th><th>absent forfeits</th></tr>
{rows}</table>
"""


# --- HTML ----------------------------------------------------------------------------------


def _nice_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart) covering [lo, hi]."""
    span = hi - lo if hi > lo else 1.0
    raw = span / max(1, target)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1.0, 2.0, 5.0, 10.0) if m * power >= raw)
    first = math.floor(lo / step) * step
    ticks: list[float] = []
    k = 0
    while first + k * step <= hi + step * 1e-9 or len(ticks) < 2:
        ticks.append(first + k * step)
        k += 1
    if ticks[-1] < hi:
        ticks.append(ticks[-1] + step)
    return ticks


def _colours(order: list[str]) -> dict[str, str]:
    return {name: _COLOURS[i % len(_COLOURS)] for i, name in enumerate(order)}


def _short(name: str, limit: int = 24) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _svg_history(
    results: tuple[GameResult, ...], order: list[str], colours: dict[str, str], width: int = 960, height: int = 400
) -> str:
    """An inline SVG line plot of the sequential Elo of each bot after every game.

    *order* is the legend order (the rating table's); *colours* the colour of each bot.
    """
    history = elo_history(results)
    esc = html.escape
    final = history[-1] if history else {}
    labels = [f"{_short(name)}  {final.get(name, 1500.0):.0f}" for name in order]
    legend_w = int(28 + 7.4 * max((len(label) for label in labels), default=8))
    margin_l, margin_r, margin_t, margin_b = 64, legend_w + 16, 14, 50
    plot_w, plot_h = width - margin_l - margin_r, height - margin_t - margin_b
    parts = [
        f'<svg id="rating-history" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="Sequential Elo rating of every bot after each game" '
        'font-family="system-ui, sans-serif" style="max-width:100%;height:auto">',
        f'<rect x="{margin_l}" y="{margin_t}" width="{plot_w}" height="{plot_h}" fill="#fcfcfc" stroke="#888"/>',
    ]
    if not history:
        parts.append(f'<text x="{margin_l + 12}" y="{margin_t + 26}" font-size="14">no games yet</text></svg>')
        return "".join(parts)
    values = [v for point in history for v in point.values()] + [1500.0]
    ticks = _nice_ticks(min(values), max(values))
    lo, hi = ticks[0], ticks[-1]
    n = len(history)
    step = max(1, n // 800)  # at most about 800 points per line
    indices = list(range(0, n, step))
    if indices[-1] != n - 1:
        indices.append(n - 1)

    def x(games: float) -> float:  # games played so far: 0 .. n
        return margin_l + plot_w * games / n

    def y(v: float) -> float:
        return margin_t + plot_h * (1 - (v - lo) / (hi - lo))

    for v in ticks:  # horizontal grid with Elo labels
        parts.append(
            f'<line x1="{margin_l}" x2="{margin_l + plot_w}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e3e3e3"/>'
            f'<text x="{margin_l - 8}" y="{y(v) + 4:.1f}" font-size="12" text-anchor="end" fill="#333">{v:.0f}</text>'
        )
    if lo < 1500.0 < hi:
        parts.append(
            f'<line x1="{margin_l}" x2="{margin_l + plot_w}" y1="{y(1500.0):.1f}" y2="{y(1500.0):.1f}" '
            'stroke="#999" stroke-dasharray="4 3"/>'
        )
    for g in _nice_ticks(0, n, 8):  # game ticks (whole games only)
        if g > n:
            break
        if g != int(g):
            continue
        parts.append(
            f'<line x1="{x(g):.1f}" x2="{x(g):.1f}" y1="{margin_t + plot_h}" y2="{margin_t + plot_h + 5}" stroke="#888"/>'
            f'<text x="{x(g):.1f}" y="{margin_t + plot_h + 19}" font-size="12" text-anchor="middle" fill="#333">{g:.0f}</text>'
        )
    parts.append(
        f'<text x="{margin_l + plot_w / 2:.0f}" y="{height - 8}" font-size="13" text-anchor="middle">'
        f"pairwise games rated, in schedule order ({n})</text>"
        f'<text transform="translate(16 {margin_t + plot_h / 2:.0f}) rotate(-90)" font-size="13" '
        'text-anchor="middle">Elo (start 1500)</text>'
    )
    for name in reversed(order):  # the leader is drawn last, on top
        points = " ".join(f"{x(i + 1):.1f},{y(history[i].get(name, 1500.0)):.1f}" for i in indices)
        start = f"{x(0):.1f},{y(1500.0):.1f} "
        parts.append(
            f'<polyline fill="none" stroke="{colours[name]}" stroke-width="1.8" stroke-linejoin="round" '
            f'points="{start}{points}"><title>{esc(name)}</title></polyline>'
        )
    lx = margin_l + plot_w + 16
    for b, (name, label) in enumerate(zip(order, labels, strict=True)):
        ly = margin_t + 16 + 20 * b
        parts.append(
            f'<g class="legend"><title>{esc(name)}</title>'
            f'<rect x="{lx}" y="{ly - 6}" width="16" height="4" fill="{colours[name]}"/>'
            f'<text x="{lx + 22}" y="{ly}" font-size="13">{esc(label)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _result_text(entry: MatchEntry) -> tuple[str, set[int]]:
    """The match result in a few words, and the winning sides."""
    if entry.status != "done" or entry.result is None:
        return entry.status, set()
    result = entry.result
    dashes = ":".join(str(side.get("dashes", "?")) for side in result.get("sides", []))
    winners = set(int(w) for w in result.get("winners", []))
    return f"{result.get('termination', 'completed')}, dashes {dashes}", winners


def _files_cell(files: Sequence[MatchFile]) -> str:
    """Links only: a log is written by an untrusted bot, none of it is put into the page."""
    esc = html.escape
    links = []
    for f in files:
        what = f"captured stdout and stderr of {f.bot}" if f.source is not None else f"debug bundle of {f.bot}"
        links.append(f'<a href="{esc(f.href)}" title="{esc(what)}">{esc(f.label)}</a>')
    return f'<td class="name files">{" · ".join(links)}</td>'


def _match_rows(report: ArenaReport, pages: Mapping[str, str], files: Mapping[str, Sequence[MatchFile]]) -> list[str]:
    esc = html.escape
    rows = []
    for e in report.matches:
        text, winners = _result_text(e)
        bots = " vs ".join(
            f"<b>{esc(name)}</b>" if x in winners and len(winners) < len(e.sides) else esc(name)
            for x, name in enumerate(e.sides)
        )
        href = pages.get(e.match_id)
        name = f'<a href="{esc(href)}">{esc(e.match_id)}</a>' if href else esc(e.match_id)
        hands = "" if e.result is None else str(e.result.get("hands_played", ""))
        if e.faults is None:
            faults = '<td class="muted">?</td>' if e.status == "done" else "<td></td>"
        elif e.faults:
            reasons = ", ".join(f"seat {f.get('seat')}: {f.get('reason')}" for f in e.faults)
            faults = f'<td class="faulty" title="{esc(reasons)}">{len(e.faults)}</td>'
        else:
            faults = "<td>0</td>"
        duration = _duration_text(e.duration_s)
        seed = (
            e.seed
            if e.revealed
            else '<span class="muted" title="shown once every match of this deal is done">hidden</span>'
        )
        rows.append(
            f'<tr data-match="{esc(e.match_id)}" data-status="{esc(e.status)}"><td>{e.index}</td>'
            f'<td class="name">{name}</td><td class="name">{bots}</td><td>{seed}</td>'
            f'<td class="name result">{esc(text)}</td><td>{hands}</td>{faults}<td>{duration}</td>'
            f"{_files_cell(files.get(e.match_id, ()))}</tr>"
        )
    return rows


def _duration_text(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def _faults_per_bot(
    report: ArenaReport, matches: dict[str, set[str]] | None = None
) -> dict[str, collections.Counter[str]]:
    """Each bot's faults in the records read, by reason code (and into *matches* the matches with them)."""
    per_bot: dict[str, collections.Counter[str]] = {name: collections.Counter() for name in report.bots}
    for e in report.matches:
        for f in e.faults or ():
            seat = f.get("seat")
            if isinstance(seat, int) and 0 <= seat < len(e.seats):
                bot = e.seats[seat]
                per_bot.setdefault(bot, collections.Counter())[str(f.get("reason", "?"))] += 1
                if matches is not None:
                    matches.setdefault(bot, set()).add(e.match_id)
    return per_bot


def _fault_rows(report: ArenaReport) -> tuple[list[str], bool]:
    """One row per bot with its faults by reason code; False when no record was read."""
    esc = html.escape
    read = [e for e in report.matches if e.faults is not None]
    matches: dict[str, set[str]] = {name: set() for name in report.bots}
    per_bot = _faults_per_bot(report, matches)
    rows = []
    for bot, reasons in sorted(per_bot.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])):
        total = sum(reasons.values())
        detail = ", ".join(f"<code>{esc(r)}</code> {n}" for r, n in reasons.most_common())
        rows.append(
            f'<tr data-bot="{esc(bot)}"><td class="name">{esc(bot)}</td>'
            f'<td class="{"faulty" if total else ""}">{total}</td><td>{len(matches.get(bot, ()))}</td>'
            f'<td class="name">{detail}</td></tr>'
        )
    return rows, bool(read)


def _set_histogram_rows(report: ArenaReport) -> list[str]:
    esc = html.escape
    return [
        f'<tr><td class="name">{esc(a)}</td><td class="name">{esc(b)}</td><td class="name">'
        + ", ".join(f"{esc(k)}: {v}" for k, v in hist.items())
        + "</td></tr>"
        for (a, b), hist in pair_set_histograms(report.results).items()
    ]


def _pair_rows(report: ArenaReport) -> list[str]:
    """Games per pair of bots: how many, and who won them."""
    esc = html.escape
    pairs: dict[tuple[str, str], list[float]] = {}
    for r in report.results:
        a, b, score = (r.a, r.b, r.score) if r.a <= r.b else (r.b, r.a, 1.0 - r.score)
        pairs.setdefault((a, b), []).append(score)
    rows = []
    for (a, b), scores in sorted(pairs.items()):
        wins, draws = sum(1 for x in scores if x == 1.0), sum(1 for x in scores if x == 0.5)
        rows.append(
            f'<tr data-pair="{esc(a)}|{esc(b)}" data-games="{len(scores)}"><td class="name">{esc(a)}</td>'
            f'<td class="name">{esc(b)}</td>'
            f"<td>{len(scores)}</td><td>{wins}</td><td>{draws}</td><td>{len(scores) - wins - draws}</td></tr>"
        )
    return rows


def render_html(
    report: ArenaReport,
    pages: Mapping[str, str] | None = None,
    refresh_s: int | None = None,
    files: Mapping[str, Sequence[MatchFile]] | None = None,
) -> str:
    """One self-contained HTML page: table, rating history (inline SVG), cross table, games per pair,
    faults per bot and the list of matches.

    *pages* maps a match id to the address of its viewer page (the match list links it), *files*
    to its bot logs and bundles (:func:`match_files`, linked only: none of their content is put in);
    *refresh_s* makes the browser reload the page that often (the live report).
    """
    st = report.standings
    names = [row.name for row in st.rows]
    order = names  # a bot without rated games has no line: it is listed under the ratings instead
    colours = _colours(order)
    esc = html.escape
    rows_html = []
    for rank, row in enumerate(st.rows, 1):
        ci = _interval_text(row.bt_ci95, "{:+.0f} … {:+.0f}")
        pct = 100.0 * row.score / row.games if row.games else 0.0
        rows_html.append(
            f'<tr><td>{rank}</td><td class="name"><span class="swatch" style="background:{colours[row.name]}"></span>'
            f"{esc(row.name)}</td><td>{row.elo:.0f}</td><td>{row.bt:+.0f}</td>"
            f"<td>{ci}</td><td>{row.games}</td><td>{row.score:g} ({pct:.1f}%)</td></tr>"
        )
    cross = [
        '<tr><th class="name">row \\ column</th>'
        + "".join(f'<th title="{esc(n)}">{esc(_short(n, 16))}</th>' for n in names)
        + "<th>total</th></tr>"
    ]
    for a in names:
        cells = []
        total_score, total_games = 0.0, 0
        for b in names:
            if a == b:
                cells.append('<td class="self">—</td>')
                continue
            score, games = st.cross_table.get(a, {}).get(b, (0.0, 0))
            total_score += score
            total_games += games
            if not games:
                cells.append('<td class="none"></td>')
                continue
            share = score / games
            # green for a winning record, red for a losing one, white for even
            tint = f"hsl({120 if share >= 0.5 else 0}, 60%, {100 - 36 * abs(share - 0.5):.0f}%)"
            los = st.los.get(a, {}).get(b)
            title = f"{a} against {b}: {score:g} points in {games} games ({100 * share:.0f}%)"
            if los is not None:
                title += f"; likelihood of superiority {los:.3f}"
            cells.append(f'<td style="background:{tint}" title="{esc(title)}">{score:g}/{games}</td>')
        share_text = f" ({100 * total_score / total_games:.0f}%)" if total_games else ""
        cross.append(
            f'<tr><th class="name">{esc(a)}</th>{"".join(cells)}'
            f'<td class="total">{total_score:g}/{total_games}{share_text}</td></tr>'
        )
    done, total = report.counts["done"], report.counts["total"]
    fault_rows, faults_read = _fault_rows(report)
    fault_note = "" if faults_read else "No match record was read (records not kept, or none yet)."
    refresh = f'<meta http-equiv="refresh" content="{refresh_s}">' if refresh_s else ""
    note = (
        ""
        if st.connected
        else "<p><b>Note:</b> not every bot has met every other; separate groups are not comparable.</p>"
    )
    if any(math.isinf(row.bt_ci95[1]) for row in st.rows):
        note += f"<p><b>Note:</b> {esc(UNKNOWN_INTERVAL_NOTE.removeprefix('note: '))}.</p>"
    loose = [
        f"{bot} ({info.get('sandbox')})"
        for bot, infos in sandbox_texts(report).items()
        for info in infos
        if info.get("sandbox") in ("process", "none")
    ]
    if loose:
        note += (
            f'<p id="unconfined"><b>Note:</b> not confined by a sandbox: {esc(", ".join(loose))}; such a bot could '
            "read what the organiser can read (see the sandboxes in the operator guide).</p>"
        )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(report.name)}: Gaigel arena report</title>
<meta name="viewport" content="width=device-width, initial-scale=1">{refresh}
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1200px; line-height: 1.4; }}
h2 {{ margin-top: 1.6em; }}
table {{ border-collapse: collapse; margin: 0.8em 0; font-variant-numeric: tabular-nums; }}
th, td {{ border: 1px solid #ccc; padding: 4px 10px; text-align: right; }}
th {{ background: #f0f0f0; }}
.name {{ text-align: left; }}
td.self {{ background: #e8e8e8; text-align: center; color: #888; }}
td.total {{ font-weight: 600; background: #f7f7f7; }}
.swatch {{ display: inline-block; width: 0.8em; height: 0.8em; margin-right: 0.5em; border-radius: 2px; }}
.caption {{ color: #555; font-size: 0.92em; }}
td.faulty {{ background: #fde0dc; color: #a01818; font-weight: 600; }}
.muted {{ color: #888; }}
#matches {{ font-size: 0.92em; }}
#matches td {{ white-space: nowrap; }}
#matches td.result {{ white-space: normal; }}
td.sandbox {{ font-size: 0.9em; }}
b.faulty {{ color: #a01818; }}
</style></head><body>
<h1>{esc(report.name)}</h1>
<p>{done} of {total} matches done, {len(report.results)} rated pairwise games. Bradley-Terry ratings (BT) are on
the Elo scale with mean 0; intervals are 95% bootstrap intervals over duplicate sets ({st.bootstrap_samples} samples).</p>
{note}
<h2>Ratings</h2>
<table id="ratings"><tr><th>#</th><th class="name">bot</th><th>Elo</th><th>BT</th><th>BT 95%</th><th>games</th><th>score</th></tr>
{"".join(rows_html)}</table>
{_unrated_note(report)}<h2>Rating history</h2>
<p class="caption">Sequential Elo (K = 16) of every bot after each pairwise game; the dashed line is the start, 1500.</p>
{_svg_history(report.results, order, colours)}
<h2>Cross table</h2>
<p class="caption">Points of the row's bot against the column's bot / games between them (a win 1, a draw ½);
green: the row's bot scored more, red: less. Hover a cell for the likelihood of superiority.</p>
<table id="cross-table">{"".join(cross)}</table>
<h2>Games per pair</h2>
<p class="caption">Pairwise games between two bots (one per match they both played) and their results.</p>
<table id="pairs"><tr><th class="name">bot A</th><th class="name">bot B</th><th>games</th><th>A won</th>
<th>drawn</th><th>B won</th></tr>
{"".join(_pair_rows(report)) or '<tr><td colspan="6" class="name muted">no games yet</td></tr>'}</table>
<h2>Duplicate sets per pair</h2>
<p class="caption">Sets of each pair by bot A's points in the set (one deal under every seating; the unit of
independence of the intervals). With two games per set these are the pentanomial counts.</p>
<table id="set-histograms"><tr><th class="name">bot A</th><th class="name">bot B</th><th class="name">sets by A's points</th></tr>
{"".join(_set_histogram_rows(report))}</table>
<h2>Faults per bot</h2>
<p class="caption">Faults charged to each bot in the kept match records, by reason code (see the bot guide).
{fault_note}</p>
<table id="faults-per-bot"><tr><th class="name">bot</th><th>faults</th><th>matches with faults</th>
<th class="name">by reason</th></tr>
{"".join(fault_rows)}</table>
{_presence_rows(report)}{_fate_rows(report)}<h2>Matches</h2>
<p class="caption">Every scheduled match in schedule order; the bold bot's side won. Follow a match id to step
through the match in the viewer. Bot output: what each seat's bot process wrote to stdout and stderr (plain text,
capped), and per bot a zip with the record, every decision's time and that bot's own output; like the viewer
page, shown once every match of the deal is done.</p>
<table id="matches"><tr><th>#</th><th class="name">match</th><th class="name">sides</th><th>seed</th>
<th class="name">result</th><th>hands</th><th>faults</th><th>duration</th><th class="name">bot output</th></tr>
{"".join(_match_rows(report, pages or {}, files or {}))}</table>
</body></html>
"""


MATCH_PAGES = "matches"
"""The folder (next to the report page) that holds the viewer page of every match."""


def write_html_report(report: ArenaReport, page: Path, jobs: int | None = None) -> int:
    """Writes *page* and a viewer page per kept match record into ``matches/`` next to it.

    The viewer pages hold a compact view of their match and share one ``viewer.js`` and
    ``viewer.css`` in that folder; they are built in *jobs* processes (default: one per core),
    since replaying every record is most of the work. A viewer page newer than its record is
    kept as it is (a rerun writes only new matches). Returns how many viewer pages were written.

    :raises OSError: if the page or the folder cannot be written.
    """
    from gaigel_harness.viewer import viewer_assets

    folder = page.parent / MATCH_PAGES
    todo: list[tuple[str, str]] = []
    kept: set[str] = set()
    for entry in report.matches:
        if entry.record is None:
            continue
        target = folder / f"{entry.match_id}.html"
        if target.is_file() and target.stat().st_mtime >= entry.record.stat().st_mtime:
            kept.add(entry.match_id)
        else:
            todo.append((str(entry.record), str(target)))
    written: set[str] = set()
    if todo:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in viewer_assets().items():  # the current script, for the old pages too
            _write_atomic(folder / name, text)
        workers = min(jobs or os.cpu_count() or 1, max(1, len(todo) // 20))  # a process for 20 pages at least
        if workers > 1:
            with concurrent.futures.ProcessPoolExecutor(workers) as pool:
                done = list(pool.map(_write_viewer_page, todo, chunksize=max(1, len(todo) // (4 * workers))))
        else:
            done = [_write_viewer_page(job) for job in todo]
        written = {Path(target).stem for (_, target), ok in zip(todo, done, strict=True) if ok}
    pages = {m: f"{MATCH_PAGES}/{m}.html" for m in kept | written}
    files = _publish_files(report, page.parent)
    _write_atomic(page, render_html(report, pages, files=files))
    return len(written)


def _publish_files(report: ArenaReport, site: Path) -> dict[str, list[MatchFile]]:
    """Puts each revealed match's logs and bundles at their links relative to *site* (the page's
    folder): a log is copied there unless *site* is the arena folder itself, a bundle is written
    unless one newer than its record and logs is there. Returns the files linked per match."""
    from gaigel_arena.bundle import bundle_bytes

    house = _house_bots(report)
    out: dict[str, list[MatchFile]] = {}
    for entry in report.matches:
        files = match_files(entry, house)
        if not files or entry.record is None:
            continue
        newest = max([entry.record.stat().st_mtime] + [f.source.stat().st_mtime for f in files if f.source])
        record: dict[str, Any] | None = None
        linked = []
        for f in files:
            target = site / urllib.parse.unquote(f.href)
            if target.is_file() and target.stat().st_mtime >= (f.source.stat().st_mtime if f.source else newest):
                linked.append(f)  # up to date (or the log itself, when the page is in the arena folder)
                continue
            if f.source is None and record is None:
                try:
                    record = json.loads(entry.record.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue  # a record that cannot be read gets no bundle (nor a viewer page)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp")
            if f.source is not None:
                shutil.copyfile(f.source, tmp)
            elif record is not None:
                tmp.write_bytes(bundle_bytes(record, f.bot, entry.record.parent.parent))
            tmp.replace(target)
            linked.append(f)
        out[entry.match_id] = linked
    return out


def _write_viewer_page(job: tuple[str, str]) -> bool:
    """Writes the shared-script viewer page of one record; False for a record that does not replay
    (it gets no link; ``gaigel replay`` says why)."""
    from gaigel.record import RecordError, load_record
    from gaigel_harness.viewer import ViewerError, build_view, render_viewer

    record, target = job
    try:
        view = build_view(load_record(record), compact=True)
    except (RecordError, ViewerError):
        return False
    _write_atomic(Path(target), render_viewer(view, shared=True))
    return True


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
