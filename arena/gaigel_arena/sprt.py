"""Pure statistics of a sequential A/B test on duplicate sets (docs/testing-bots.md).

No I/O, no clock, randomness only from a seed passed in. The unit is the **duplicate
set**: one deal seed played under every seating, ``k`` pairwise games whose mean score
``X_s`` in [0, 1] is the candidate's set score. Sets are independent, games inside a set
are not, so every variance here is a variance of set scores.

* **Normalized Elo** (fishtest's nElo, per game): ``C * (m - 1/2) / sigma`` with
  ``C = 800 / ln 10``, ``m`` the mean set score and ``sigma = sqrt(k * v)`` the per-game
  standard deviation estimated from the set variance ``v``.
* **GSPRT, normal approximation** (the one implemented): hypotheses ``mu_j = 1/2 +
  nElo_j * sigma / C``; after ``n`` sets ``LLR = n (mu1 - mu0)(2m - mu0 - mu1) / (2v)``;
  Wald's bounds ``ln(beta / (1 - alpha))`` and ``ln((1 - beta) / alpha)``. The exact GSPRT
  (constrained maximum likelihood of the set histogram) differs by a few percent for the
  bounds used in practice; tests/arena/test_sprt.py checks that.
* **Regularisation**: the variance gets two pseudo-sets, one at 0 and one at 1, each 1/2
  from the middle (the mean gets none), so a run of identical sets cannot divide by zero;
  and no verdict is given before :data:`MIN_SETS` sets.
* **Control variate**: ``Y_s = X_s - (B_s - mean B)``, with ``B_s`` a baseline fixed before
  any game (its mean over the run's sets is known in advance), so ``E[Y] = E[X]``; the
  test runs on ``Y`` unchanged otherwise.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping, Sequence
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

from gaigel_arena.ratings import GameResult

__all__ = [
    "MIN_SETS",
    "NELO_C",
    "Estimate",
    "Sprt",
    "StandardErrors",
    "Verdict",
    "controlled_scores",
    "elo_from_score",
    "estimate",
    "first_crossing",
    "llr",
    "llr_path",
    "pair_set_histograms",
    "set_histogram",
    "simulate",
    "standard_errors",
    "trinomial_set_model",
]

FloatArray: TypeAlias = NDArray[np.float64]

NELO_C = 800.0 / math.log(10.0)
"""Normalized-Elo scale: about 347.44 (twice the Elo scale, since nElo uses a standard deviation)."""

MIN_SETS = 20
"""No verdict before this many sets: the variance of fewer sets is too rough to trust."""

PSEUDO_SETS = 2
"""Pseudo-sets added to the variance (one at score 0, one at 1; squared deviation 1/4 each)."""

Z95 = 1.959963984540054
"""The two-sided 95 % normal quantile."""


class Verdict(enum.Enum):
    """How a sequential test ended (or that it has not)."""

    H1 = "H1"
    """The candidate is better by at least elo1 (accepted at the upper bound)."""
    H0 = "H0"
    """The candidate is not better than elo0 (accepted at the lower bound)."""
    CONTINUE = "continue"
    """Between the bounds, sets left to play."""
    INCONCLUSIVE = "inconclusive"
    """Between the bounds at the set cap: only the interval is reported."""


@dataclasses.dataclass(frozen=True)
class Sprt:
    """The test's parameters: bounds in normalized Elo, error rates, games per set."""

    elo0: float = 0.0
    elo1: float = 10.0
    alpha: float = 0.05
    beta: float = 0.05
    games_per_set: int = 2
    min_sets: int = MIN_SETS

    def __post_init__(self) -> None:
        if not self.elo1 > self.elo0:
            raise ValueError(f"elo1 must be above elo0, got elo0={self.elo0}, elo1={self.elo1}")
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if not 0.0 < value < 0.5:
                raise ValueError(f"{name} must be between 0 and 0.5, got {value}")
        if self.games_per_set < 1:
            raise ValueError(f"games_per_set must be at least 1, got {self.games_per_set}")
        if self.min_sets < 1:
            raise ValueError(f"min_sets must be at least 1, got {self.min_sets}")

    @property
    def lower(self) -> float:
        """Accept H0 at or below this LLR: ln(beta / (1 - alpha))."""
        return math.log(self.beta / (1.0 - self.alpha))

    @property
    def upper(self) -> float:
        """Accept H1 at or above this LLR: ln((1 - beta) / alpha)."""
        return math.log((1.0 - self.beta) / self.alpha)

    def _drift_sets(self) -> float:
        """|E[LLR increment per set]| under H0 or H1: k * Delta^2 / (2 C^2), whatever the variance."""
        delta = self.elo1 - self.elo0
        return self.games_per_set * delta * delta / (2.0 * NELO_C * NELO_C)

    def expected_sets(self) -> tuple[float, float]:
        """Wald's expected number of sets under H0 and under H1 (overshoot and min_sets ignored)."""
        a, b = self.lower, self.upper
        under_h0 = ((1.0 - self.alpha) * -a - self.alpha * b) / self._drift_sets()
        under_h1 = ((1.0 - self.beta) * b - self.beta * -a) / self._drift_sets()
        return under_h0, under_h1

    def expected_sets_midpoint(self) -> float:
        """Expected sets at the midpoint of the bounds, where the test is longest (zero drift:
        |lower| * upper over the per-set variance of the increment, k Delta^2 / C^2)."""
        return -self.lower * self.upper / (2.0 * self._drift_sets())

    def verdict(self, value: float, sets: int, cap: int | None = None) -> Verdict:
        """The state after *sets* sets with LLR *value* (at most *cap* sets in all)."""
        if sets >= self.min_sets:
            if value >= self.upper:
                return Verdict.H1
            if value <= self.lower:
                return Verdict.H0
        if cap is not None and sets >= cap:
            return Verdict.INCONCLUSIVE
        return Verdict.CONTINUE


def _moments(scores: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Running (n, mean, regularised variance) along the last axis."""
    n = np.arange(1, scores.shape[-1] + 1, dtype=np.float64)
    s1 = np.cumsum(scores, axis=-1)
    s2 = np.cumsum(scores * scores, axis=-1)
    mean = s1 / n
    squares = np.maximum(s2 - n * mean * mean, 0.0)
    var = (squares + PSEUDO_SETS * 0.25) / (n + PSEUDO_SETS)
    return n, mean, var


def llr_path(scores: Sequence[float] | FloatArray, test: Sprt) -> FloatArray:
    """The LLR after each set: entry ``i`` uses sets ``0..i`` (works on a batch in the last axis)."""
    x = np.asarray(scores, dtype=np.float64)
    if x.shape[-1] == 0:
        return np.zeros(x.shape, dtype=np.float64)
    n, mean, var = _moments(x)
    sigma = np.sqrt(test.games_per_set * var)
    mu0 = 0.5 + test.elo0 * sigma / NELO_C
    mu1 = 0.5 + test.elo1 * sigma / NELO_C
    path: FloatArray = n * (mu1 - mu0) * (2.0 * mean - mu0 - mu1) / (2.0 * var)
    return path


def llr(scores: Sequence[float] | FloatArray, test: Sprt) -> float:
    """The LLR of all *scores* (0 for none)."""
    path = llr_path(scores, test)
    return float(path[-1]) if path.size else 0.0


def first_crossing(path: FloatArray, test: Sprt) -> tuple[Verdict, int]:
    """The verdict of an LLR path and the number of sets it took (the path's length when no
    bound was crossed: CONTINUE; the caller decides whether that is the cap)."""
    sets = np.arange(1, path.shape[-1] + 1)
    hit = (sets >= test.min_sets) & ((path >= test.upper) | (path <= test.lower))
    if not hit.any():
        return Verdict.CONTINUE, int(path.shape[-1])
    i = int(np.argmax(hit))
    return (Verdict.H1 if path[i] >= test.upper else Verdict.H0), i + 1


def elo_from_score(score: float) -> float:
    """Logistic Elo of a mean score (±inf at 0 and 1)."""
    if score <= 0.0:
        return -math.inf
    if score >= 1.0:
        return math.inf
    return -400.0 * math.log10(1.0 / score - 1.0)


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Point values and 95 % intervals from set scores (normal approximation on the sets)."""

    sets: int
    games: int
    score: float
    score_ci95: tuple[float, float]
    nelo: float
    nelo_ci95: tuple[float, float]
    elo: float
    elo_ci95: tuple[float, float]


def estimate(scores: Sequence[float] | FloatArray, games_per_set: int) -> Estimate:
    """Mean score, nElo and Elo with 95 % intervals; the interval of the mean is
    ``m ± z sqrt(v / n)`` and nElo and Elo are mapped from its ends (nElo with the same sigma).

    :raises ValueError: for no sets.
    """
    x = np.asarray(scores, dtype=np.float64)
    if x.size == 0:
        raise ValueError("no sets to estimate from")
    n, mean, var = (float(a[-1]) for a in _moments(x))
    half = Z95 * math.sqrt(var / n)
    lo, hi = mean - half, mean + half
    sigma = math.sqrt(games_per_set * var)

    def nelo(m: float) -> float:
        return NELO_C * (m - 0.5) / sigma

    return Estimate(
        sets=int(n),
        games=int(n) * games_per_set,
        score=mean,
        score_ci95=(lo, hi),
        nelo=nelo(mean),
        nelo_ci95=(nelo(lo), nelo(hi)),
        elo=elo_from_score(mean),
        elo_ci95=(elo_from_score(lo), elo_from_score(hi)),
    )


def set_histogram(scores: Sequence[float], games_per_set: int) -> dict[str, int]:
    """How many sets had each score, keyed by the candidate's points in the set (a string such as
    ``"1.5"`` out of ``games_per_set``), in score order: the card-game analogue of the
    pentanomial counts (2 games with win, draw or loss: keys 0, 0.5, 1, 1.5, 2). Finer scores
    (hands, points) are binned to the nearest half point."""
    counts: dict[float, int] = {}
    for x in scores:
        points = round(2.0 * games_per_set * x) / 2.0
        counts[points] = counts.get(points, 0) + 1
    return {f"{p:g}": counts[p] for p in sorted(counts)}


def controlled_scores(scores: Sequence[float], baselines: Sequence[float], mean: float | None = None) -> FloatArray:
    """``Y_s = X_s - (B_s - mean)`` for set scores *scores* and the baseline set means *baselines*.

    *mean* is the mean of B over every set the run may play, fixed before the games (default:
    the mean of *baselines*). It must not be the mean over the sets played so far: then the
    mean of Y would equal the mean of X and only the variance would shrink.

    :raises ValueError: for lengths that differ.
    """
    x = np.asarray(scores, dtype=np.float64)
    b = np.asarray(baselines, dtype=np.float64)
    if x.shape != b.shape:
        raise ValueError(f"{x.size} set scores but {b.size} baseline values")
    if x.size == 0:
        return x
    centre = float(b.mean()) if mean is None else mean
    y: FloatArray = x - (b - centre)
    return y


@dataclasses.dataclass(frozen=True)
class StandardErrors:
    """The standard error of the mean score three ways, and the games each needs for one interval.

    ``games_needed`` is for a 95 % interval of half-width :attr:`half_width` on the mean score
    (default: the per-set interval of this run), so the three numbers compare directly.
    """

    games: int
    sets: int
    per_game: float
    per_set: float
    per_set_cv: float | None
    half_width: float
    games_needed: Mapping[str, float]

    def ratio(self, key: str) -> float:
        """Games needed by *key* (``per_set`` or ``per_set_cv``) over those needed per game."""
        base = self.games_needed["per_game"]
        return self.games_needed[key] / base if base > 0 else math.nan


def standard_errors(
    game_scores: Sequence[Sequence[float]],
    cv_scores: Sequence[float] | None = None,
    half_width: float | None = None,
) -> StandardErrors:
    """Per game (the games treated as independent, as if there were no sets), per duplicate set,
    and per set with the control variate (*cv_scores*, the Y of each set), from the pairwise game
    scores of each set (*game_scores*: one list per set, all of the same length k).

    :raises ValueError: for fewer than 2 sets or sets of different sizes.
    """
    sizes = {len(g) for g in game_scores}
    if len(game_scores) < 2 or len(sizes) != 1 or 0 in sizes:
        raise ValueError("need at least 2 sets of the same (non-zero) number of games")
    k = sizes.pop()
    g = np.asarray(game_scores, dtype=np.float64)
    n = g.shape[0]
    x = g.mean(axis=1)
    var_game = float(g.var(ddof=1))
    var_set = float(x.var(ddof=1))
    se_game = math.sqrt(var_game / (n * k))
    se_set = math.sqrt(var_set / n)
    var_cv: float | None = None
    if cv_scores is not None:
        y = np.asarray(cv_scores, dtype=np.float64)
        if y.shape != x.shape:
            raise ValueError(f"{y.size} control-variate scores for {n} sets")
        var_cv = float(y.var(ddof=1))
    h = half_width if half_width is not None else Z95 * se_set
    if h <= 0:
        h = Z95 * se_game if se_game > 0 else 1.0

    def needed(per_game_variance: float) -> float:
        return (Z95 * Z95 * per_game_variance) / (h * h)

    games_needed = {"per_game": needed(var_game), "per_set": needed(k * var_set)}
    if var_cv is not None:
        games_needed["per_set_cv"] = needed(k * var_cv)
    return StandardErrors(
        games=n * k,
        sets=n,
        per_game=se_game,
        per_set=se_set,
        per_set_cv=None if var_cv is None else math.sqrt(var_cv / n),
        half_width=h,
        games_needed=games_needed,
    )


# --- simulation ------------------------------------------------------------------------------


def trinomial_set_model(nelo: float, draw_share: float = 0.4) -> dict[float, float]:
    """Probabilities of a 2-game set score 0, 1/2, 1 with exactly the normalized Elo *nelo*
    (per game, sigma = sqrt(2 v)) and *draw_share* of the sets at 1/2.

    With ``d = p(1) - p(0)``: mean ``1/2 + d/2``, set variance ``((1 - draw) - d^2) / 4``, so
    ``nelo = C d / sqrt(2 ((1 - draw) - d^2))``, solved for d.
    """
    if not 0.0 <= draw_share < 1.0:
        raise ValueError(f"draw_share must be in [0, 1), got {draw_share}")
    d = nelo * math.sqrt(2.0 * (1.0 - draw_share)) / math.sqrt(NELO_C * NELO_C + 2.0 * nelo * nelo)
    win = (1.0 - draw_share + d) / 2.0
    return {0.0: 1.0 - draw_share - win, 0.5: draw_share, 1.0: win}


def simulate(
    model: Mapping[float, float], test: Sprt, runs: int, cap: int, seed: int
) -> tuple[dict[Verdict, int], FloatArray]:
    """Runs *runs* sequential tests on sets drawn from *model* (set score -> probability) with at
    most *cap* sets each; returns the verdict counts and the number of sets each test took."""
    rng = np.random.default_rng(seed)
    values = np.array(list(model), dtype=np.float64)
    probs = np.array(list(model.values()), dtype=np.float64)
    counts = dict.fromkeys(Verdict, 0)
    lengths = np.zeros(runs)
    batch = 200  # tests at a time: bounds the memory to batch * cap floats
    for start in range(0, runs, batch):
        m = min(batch, runs - start)
        draws = values[rng.choice(len(values), size=(m, cap), p=probs)]
        paths = llr_path(draws, test)
        for row in range(m):
            verdict, length = first_crossing(paths[row], test)
            if verdict is Verdict.CONTINUE:
                verdict = Verdict.INCONCLUSIVE
            counts[verdict] += 1
            lengths[start + row] = length
    return counts, lengths


def pair_set_histograms(results: Sequence[GameResult]) -> dict[tuple[str, str], dict[str, int]]:
    """Per pair of bots (in name order), how many duplicate sets ended with each number of points
    for the first bot: the set-outcome histogram (pentanomial counts at 2 games per set) that the
    arena's intervals rest on. Keys are points such as ``"1.5"`` out of the pair's games in the set."""
    per_set: dict[tuple[str, str, str], list[float]] = {}
    for r in results:
        a, b, score = (r.a, r.b, r.score) if r.a <= r.b else (r.b, r.a, 1.0 - r.score)
        per_set.setdefault((a, b, r.set_id), []).append(score)
    out: dict[tuple[str, str], dict[float, int]] = {}
    for (a, b, _), scores in per_set.items():
        points = round(2.0 * sum(scores)) / 2.0
        counts = out.setdefault((a, b), {})
        counts[points] = counts.get(points, 0) + 1
    return {pair: {f"{p:g}": counts[p] for p in sorted(counts)} for pair, counts in sorted(out.items())}
