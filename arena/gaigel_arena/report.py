"""Reports: a read-only view of a journal as a terminal table, JSON or one HTML file.

Reports never compute results of their own: they read the done matches from the journal
and pass them through :mod:`gaigel_arena.ratings`, exactly as the runner does.
"""

from __future__ import annotations

import dataclasses
import html
import math
from pathlib import Path
from typing import Any

from gaigel_arena.journal import DEFAULT_DB_NAME, Journal, JournalError
from gaigel_arena.ratings import GameResult, Standings, build_standings, elo_history
from gaigel_arena.runner import journal_results

__all__ = ["ArenaReport", "format_table", "load_report", "render_html", "report_dict"]

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
class ArenaReport:
    """Everything a report shows, read from one journal."""

    name: str
    config: dict[str, Any]
    counts: dict[str, int]
    results: tuple[GameResult, ...]
    standings: Standings
    bots: tuple[str, ...]


def load_report(path: Path, samples: int = 1000) -> ArenaReport:
    """Reads the journal in folder *path* (or the database file *path*) and rates it.

    :raises JournalError: if there is no journal there.
    """
    db = path / DEFAULT_DB_NAME if path.is_dir() else path
    if not db.exists():
        raise JournalError(f"no arena journal in {path} (expected {db})")
    with Journal.open_existing(db) as journal:
        config = journal.config()
        counts = journal.counts()
        results = tuple(journal_results(journal))
    seed = int(config.get("arena", {}).get("seed", 0))
    standings = build_standings(results, samples=samples, seed=seed)
    bots = tuple(str(b["name"]) for b in config.get("bots", []))
    return ArenaReport(str(config.get("arena", {}).get("name", "arena")), config, counts, results, standings, bots)


def _num(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 3)


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
        "standings": report.standings.to_dict(),
        "config": report.config,
    }


def format_table(standings: Standings, done: int | None = None, total: int | None = None) -> str:
    """The rating table as fixed-width text."""
    lines = []
    if done is not None and total is not None:
        lines.append(f"{done}/{total} matches done")
    header = f"{'#':>3}  {'bot':<20} {'Elo':>7} {'BT':>7} {'BT 95% interval':>17} {'games':>6} {'score':>7}"
    lines += [header, "-" * len(header)]
    for rank, row in enumerate(standings.rows, 1):
        lo, hi = row.bt_ci95
        ci = "" if math.isnan(lo) else f"[{lo:+.0f}, {hi:+.0f}]"
        pct = 100.0 * row.score / row.games if row.games else 0.0
        lines.append(f"{rank:>3}  {row.name:<20} {row.elo:>7.0f} {row.bt:>+7.0f} {ci:>17} {row.games:>6} {pct:>6.1f}%")
    if not standings.connected:
        lines.append("note: not every bot has met every other; ratings of separate groups are not comparable")
    return "\n".join(lines)


# --- HTML ----------------------------------------------------------------------------------


def _svg_history(results: tuple[GameResult, ...], bots: list[str], width: int = 760, height: int = 320) -> str:
    """An inline SVG line plot of the sequential Elo of each bot after every game."""
    history = elo_history(results)
    margin_l, margin_r, margin_t, margin_b = 56, 140, 16, 36
    plot_w, plot_h = width - margin_l - margin_r, height - margin_t - margin_b
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img" aria-label="Elo rating history">',
        f'<rect x="{margin_l}" y="{margin_t}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#999"/>',
    ]
    if not history:
        parts.append(f'<text x="{margin_l + 10}" y="{margin_t + 24}" font-size="13">no games yet</text></svg>')
        return "".join(parts)
    values = [v for point in history for v in point.values()] + [1500.0]
    lo, hi = min(values), max(values)
    if hi - lo < 20:
        lo, hi = lo - 10, hi + 10
    n = len(history)
    step = max(1, n // 600)  # at most about 600 points per line
    indices = list(range(0, n, step))
    if indices[-1] != n - 1:
        indices.append(n - 1)

    def x(i: int) -> float:
        return margin_l + (plot_w * (i + 1) / n)

    def y(v: float) -> float:
        return margin_t + plot_h * (1 - (v - lo) / (hi - lo))

    for k in range(5):  # horizontal grid with labels
        v = lo + (hi - lo) * k / 4
        parts.append(
            f'<line x1="{margin_l}" x2="{margin_l + plot_w}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>'
            f'<text x="{margin_l - 6}" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end">{v:.0f}</text>'
        )
    parts.append(
        f'<text x="{margin_l + plot_w / 2:.0f}" y="{height - 8}" font-size="12" text-anchor="middle">games ({n})</text>'
    )
    for b, name in enumerate(bots):
        colour = _COLOURS[b % len(_COLOURS)]
        points = " ".join(f"{x(i):.1f},{y(history[i].get(name, 1500.0)):.1f}" for i in indices)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.6" points="{points}"/>')
        ly = margin_t + 14 + 18 * b
        parts.append(
            f'<rect x="{margin_l + plot_w + 12}" y="{ly - 9}" width="12" height="3" fill="{colour}"/>'
            f'<text x="{margin_l + plot_w + 30}" y="{ly - 4}" font-size="12">{html.escape(name)} '
            f"{history[-1].get(name, 1500.0):.0f}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def render_html(report: ArenaReport) -> str:
    """One self-contained HTML page: table, rating history (inline SVG) and cross table."""
    st = report.standings
    names = [row.name for row in st.rows]
    esc = html.escape
    rows_html = []
    for rank, row in enumerate(st.rows, 1):
        lo, hi = row.bt_ci95
        ci = "" if math.isnan(lo) else f"{lo:+.0f} … {hi:+.0f}"
        pct = 100.0 * row.score / row.games if row.games else 0.0
        rows_html.append(
            f"<tr><td>{rank}</td><td>{esc(row.name)}</td><td>{row.elo:.0f}</td><td>{row.bt:+.0f}</td>"
            f"<td>{ci}</td><td>{row.games}</td><td>{row.score:g} ({pct:.1f}%)</td></tr>"
        )
    cross = ["<tr><th></th>" + "".join(f"<th>{esc(n)}</th>" for n in names) + "</tr>"]
    for a in names:
        cells = []
        for b in names:
            if a == b:
                cells.append('<td class="self">—</td>')
                continue
            score, games = st.cross_table.get(a, {}).get(b, (0.0, 0))
            los = st.los.get(a, {}).get(b)
            title = f' title="likelihood of superiority {los:.3f}"' if los is not None else ""
            cells.append(f"<td{title}>{score:g}/{games}</td>" if games else "<td></td>")
        cross.append(f"<tr><th>{esc(a)}</th>{''.join(cells)}</tr>")
    done, total = report.counts["done"], report.counts["total"]
    note = (
        ""
        if st.connected
        else "<p><b>Note:</b> not every bot has met every other; separate groups are not comparable.</p>"
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(report.name)}: Gaigel arena report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 4px 10px; text-align: right; }}
th {{ background: #f0f0f0; }} td.self {{ background: #eee; text-align: center; }}
</style></head><body>
<h1>{esc(report.name)}</h1>
<p>{done} of {total} matches done, {len(report.results)} rated games. Bradley-Terry ratings are on the Elo
scale with mean 0; intervals are 95% bootstrap intervals over duplicate sets ({st.bootstrap_samples} samples).</p>
{note}
<h2>Ratings</h2>
<table><tr><th>#</th><th>bot</th><th>Elo</th><th>BT</th><th>BT 95%</th><th>games</th><th>score</th></tr>
{"".join(rows_html)}</table>
<h2>Rating history (sequential Elo)</h2>
{_svg_history(report.results, sorted(set(names) | set(report.bots)))}
<h2>Cross table (row's points / games against column)</h2>
<table>{"".join(cross)}</table>
</body></html>
"""
