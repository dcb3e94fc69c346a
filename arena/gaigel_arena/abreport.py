"""Reports of an A/B test or gauntlet (``gaigel arena test``): text, JSON and one HTML page.

Like the arena's reports they compute nothing of their own: :func:`gaigel_arena.abtest.evaluate`
gives the state from the journal, :mod:`gaigel_arena.sprt` the numbers.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gaigel_arena.abtest import ABKind, ABPlan, ABState
from gaigel_arena.sprt import Estimate, StandardErrors, Verdict, controlled_scores, set_histogram, standard_errors

__all__ = ["AB_REPORT_FORMAT", "ab_report_dict", "format_ab", "render_ab_html", "write_ab_html"]

AB_REPORT_FORMAT = "gaigel.arena.test.v1"


def _num(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, digits)


def _estimate_dict(est: Estimate | None) -> dict[str, Any] | None:
    if est is None:
        return None
    return {
        "score": _num(est.score),
        "score_ci95": [_num(est.score_ci95[0]), _num(est.score_ci95[1])],
        "nelo": _num(est.nelo, 2),
        "nelo_ci95": [_num(est.nelo_ci95[0], 2), _num(est.nelo_ci95[1], 2)],
        "elo": _num(est.elo, 2),
        "elo_ci95": [_num(est.elo_ci95[0], 2), _num(est.elo_ci95[1], 2)],
    }


def _errors(state: ABState) -> StandardErrors | None:
    if state.sets < 2:
        return None
    cv = None
    if state.baselines is not None and state.baseline_mean is not None:
        cv = list(controlled_scores(state.set_scores, state.baselines, state.baseline_mean))
    return standard_errors([list(g) for g in state.game_scores], cv)


def _who(plan: ABPlan) -> str:
    t = plan.test
    return f"{t.candidate} vs {t.baseline}" if t.kind is ABKind.AB else f"{t.candidate} vs {', '.join(t.field)}"


def ab_report_dict(plan: ABPlan, state: ABState, counts: Mapping[str, int], control_hash: str | None) -> dict[str, Any]:
    """The JSON export of a test."""
    test = plan.sprt()
    t = plan.test
    h0, h1 = test.expected_sets()
    se = _errors(state)
    return {
        "format": AB_REPORT_FORMAT,
        "kind": t.kind.value,
        "candidate": t.candidate,
        "baseline": t.baseline,
        "field": list(t.field),
        "players": plan.arena.players,
        "score": t.score.value,
        "verdict": state.verdict.value,
        "llr": state.llr,  # unrounded: a resumed test's LLR equals the uninterrupted one bit for bit
        "bounds": [_num(test.lower), _num(test.upper)],
        "elo0": t.elo0,
        "elo1": t.elo1,
        "alpha": t.alpha,
        "beta": t.beta,
        "sets": state.sets,
        "games": state.sets * plan.games_per_set,
        "games_per_set": plan.games_per_set,
        "max_sets": t.max_sets,
        "expected_sets": {"h0": round(h0, 1), "h1": round(h1, 1), "midpoint": round(test.expected_sets_midpoint(), 1)},
        "estimate": _estimate_dict(state.estimate),
        "estimate_without_control_variate": _estimate_dict(state.estimate_x),
        "set_histogram": set_histogram(state.set_scores, plan.games_per_set),
        "llr_path": list(state.llr_path),
        "without_control_variate": {"verdict": state.x_verdict[0].value, "sets": state.x_verdict[1]},
        "with_control_variate": None
        if state.y_verdict is None
        else {"verdict": state.y_verdict[0].value, "sets": state.y_verdict[1]},
        "control_variate": None
        if t.control == "none"
        else {
            "reference": t.control,
            "playouts": t.control_playouts,
            "against": t.control_opponent,
            "sha256": control_hash,
            "baseline_mean": _num(state.baseline_mean, 6),
        },
        "standard_errors": None
        if se is None
        else {
            "per_game": _num(se.per_game, 6),
            "per_set": _num(se.per_set, 6),
            "per_set_cv": _num(se.per_set_cv, 6),
            "half_width": _num(se.half_width, 6),
            "games_needed": {k: round(v, 1) for k, v in se.games_needed.items()},
        },
        "matches": dict(counts),
    }


def _verdict_text(plan: ABPlan, state: ABState) -> str:
    t = plan.test
    test = plan.sprt()
    other = t.baseline if t.kind is ABKind.AB else "the field"
    if state.verdict is Verdict.H1:
        return (
            f"H1: {t.candidate} is better than {other} (nElo >= {t.elo1:g}; LLR {state.llr:+.3f} >= {test.upper:.3f})"
        )
    if state.verdict is Verdict.H0:
        return f"H0: {t.candidate} is not better than {other} by {t.elo1:g} nElo (LLR {state.llr:+.3f} <= {test.lower:.3f})"
    if state.verdict is Verdict.INCONCLUSIVE:
        return f"inconclusive at the cap of {t.max_sets} sets (LLR {state.llr:+.3f}); see the interval"
    return f"running: LLR {state.llr:+.3f} between {test.lower:.3f} and {test.upper:.3f}"


def _sets_text(v: tuple[Verdict, int]) -> str:
    return f"{v[0].value} after {v[1]} sets"


def _ci(pair: tuple[float, float], form: str = "{:+.1f}") -> str:
    return (
        "["
        + ", ".join("inf" if math.isinf(v) and v > 0 else "-inf" if math.isinf(v) else form.format(v) for v in pair)
        + "]"
    )


def format_ab(plan: ABPlan, state: ABState, counts: Mapping[str, int] | None = None) -> str:
    """The test's report as text lines."""
    t = plan.test
    test = plan.sprt()
    h0, h1 = test.expected_sets()
    lines = [
        f"{_who(plan)} ({plan.arena.players} players, score = {t.score.value})",
        f"verdict: {_verdict_text(plan, state)}",
        f"sets {state.sets} ({state.sets * plan.games_per_set} games, {plan.games_per_set} per set); "
        f"expected {h0:.0f} under H0, {h1:.0f} under H1",
    ]
    est, est_x = state.estimate, state.estimate_x
    if est is not None and est_x is not None:
        label = "with the control variate" if state.baselines is not None else "per set"
        lines.append(
            f"nElo {est.nelo:+.1f} {_ci(est.nelo_ci95)} ({label}); Elo {est.elo:+.1f} {_ci(est.elo_ci95)}; "
            f"score {100 * est.score:.1f}% {_ci((100 * est.score_ci95[0], 100 * est.score_ci95[1]), '{:.1f}')}"
        )
        if state.baselines is not None:
            lines.append(
                f"without the control variate: nElo {est_x.nelo:+.1f} {_ci(est_x.nelo_ci95)}, Elo {est_x.elo:+.1f}"
            )
    line = f"sets to the verdict: without the control variate {_sets_text(state.x_verdict)}"
    if state.y_verdict is not None:
        line += f"; with it {_sets_text(state.y_verdict)}"
    lines.append(line + f" (of {state.prefix} complete sets)")
    hist = set_histogram(state.set_scores, plan.games_per_set)
    lines.append(
        f"set histogram (candidate's points out of {plan.games_per_set}): "
        + ", ".join(f"{k}: {v}" for k, v in hist.items())
    )
    se = _errors(state)
    if se is not None:
        parts = [
            f"per game {se.per_game:.4f} ({se.games_needed['per_game']:.0f} games)",
            f"per set {se.per_set:.4f} ({se.games_needed['per_set']:.0f} games, {se.ratio('per_set'):.2f}x)",
        ]
        if se.per_set_cv is not None:
            parts.append(
                f"per set + control variate {se.per_set_cv:.4f} "
                f"({se.games_needed['per_set_cv']:.0f} games, {se.ratio('per_set_cv'):.2f}x)"
            )
        lines.append(f"standard error of the score (games for a ±{se.half_width:.4f} interval): " + "; ".join(parts))
    if counts is not None:
        lines.append(f"matches: {counts.get('done', 0)} done, {counts.get('total', 0)} scheduled up to the cap")
    return "\n".join(lines)


# --- HTML ---------------------------------------------------------------------------------


def _svg_llr(path: Sequence[float], lower: float, upper: float, width: int = 900, height: int = 320) -> str:
    """The LLR after each set with the two bounds as dashed lines."""
    ml, mr, mt, mb = 80, 20, 14, 44
    pw, ph = width - ml - mr, height - mt - mb
    lo = min([lower * 1.15, *path]) if path else lower * 1.15
    hi = max([upper * 1.15, *path]) if path else upper * 1.15
    n = max(1, len(path))

    def x(i: float) -> float:
        return ml + pw * i / n

    def y(v: float) -> float:
        return mt + ph * (1 - (v - lo) / (hi - lo))

    parts = [
        f'<svg id="llr-plot" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="LLR after each set" '
        'font-family="system-ui, sans-serif" style="max-width:100%;height:auto">',
        f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="#fcfcfc" stroke="#888"/>',
    ]
    for v, colour, label in ((upper, "#2ca02c", "H1"), (0.0, "#bbb", "0"), (lower, "#d62728", "H0")):
        parts.append(
            f'<line x1="{ml}" x2="{ml + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="{colour}" stroke-dasharray="5 4"/>'
            f'<text x="{ml - 6}" y="{y(v) + 4:.1f}" font-size="12" text-anchor="end">{label} {v:+.2f}</text>'
        )
    if path:
        step = max(1, len(path) // 1000)
        points = " ".join(
            f"{x(i + 1):.1f},{y(v):.1f}" for i, v in enumerate(path) if i % step == 0 or i == len(path) - 1
        )
        parts.append(
            f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.8" points="{x(0):.1f},{y(0):.1f} {points}"/>'
        )
    parts.append(
        f'<text x="{ml + pw / 2:.0f}" y="{height - 10}" font-size="13" text-anchor="middle">sets ({len(path)})</text></svg>'
    )
    return "".join(parts)


def render_ab_html(plan: ABPlan, state: ABState, data: Mapping[str, Any]) -> str:
    """One self-contained page: verdict, estimates, the LLR plot, the set histogram, the standard errors."""
    esc = html.escape
    test = plan.sprt()
    hist = data["set_histogram"]
    hist_rows = "".join(f"<tr><td>{esc(k)}</td><td>{v}</td></tr>" for k, v in hist.items())
    se = data["standard_errors"]
    se_rows = ""
    if se is not None:
        need = se["games_needed"]
        for key, label in (
            ("per_game", "per game"),
            ("per_set", "per duplicate set"),
            ("per_set_cv", "per set + control variate"),
        ):
            if se.get(key) is not None and key in need:
                ratio = need[key] / need["per_game"] if need["per_game"] else math.nan
                se_rows += f"<tr><td class='name'>{label}</td><td>{se[key]:.5f}</td><td>{need[key]:.0f}</td><td>{ratio:.2f}x</td></tr>"
    text = format_ab(plan, state, data.get("matches"))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(_who(plan))}: Gaigel A/B test</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1100px; line-height: 1.4; }}
table {{ border-collapse: collapse; margin: 0.8em 0; font-variant-numeric: tabular-nums; }}
th, td {{ border: 1px solid #ccc; padding: 4px 10px; text-align: right; }}
th {{ background: #f0f0f0; }} .name {{ text-align: left; }}
pre {{ background: #f7f7f7; padding: 0.8em; white-space: pre-wrap; }}
</style></head><body>
<h1>{esc(_who(plan))}</h1>
<p id="verdict"><b>Verdict: {esc(state.verdict.value)}</b>. {esc(_verdict_text(plan, state))}</p>
<pre id="summary">{esc(text)}</pre>
<h2>LLR over sets</h2>
<p>Bounds [{test.lower:.3f}, {test.upper:.3f}] from alpha {plan.test.alpha:g} and beta {plan.test.beta:g};
no verdict before {test.min_sets} sets.</p>
{_svg_llr(state.llr_path, test.lower, test.upper)}
<h2>Set histogram</h2>
<p>Sets by the candidate's points out of {plan.games_per_set} games (the card-game analogue of pentanomial counts).</p>
<table id="set-histogram"><tr><th>points</th><th>sets</th></tr>{hist_rows}</table>
<h2>Standard errors</h2>
<p>Of the mean score three ways, and the games each needs for the same 95 % interval.</p>
<table id="standard-errors"><tr><th class="name">statistic</th><th>standard error</th><th>games needed</th><th>vs per game</th></tr>
{se_rows}</table>
</body></html>
"""


def write_ab_html(plan: ABPlan, state: ABState, data: Mapping[str, Any], page: Path) -> None:
    """Writes the page atomically.

    :raises OSError: if it cannot be written.
    """
    tmp = page.with_name(page.name + ".tmp")
    tmp.write_text(render_ab_html(plan, state, data), encoding="utf-8")
    tmp.replace(page)
