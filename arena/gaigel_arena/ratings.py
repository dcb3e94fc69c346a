"""Pure rating functions: game results in, Elo, Bradley-Terry, intervals and tables out.

Nothing here does I/O, reads a clock or draws unseeded randomness; the bootstrap takes a
seed. Every function takes :class:`GameResult` values in schedule order and returns plain
values, so the runner, the live progress table and the HTML report all compute the same
numbers from the same journal.

Conventions used throughout:

* A result is pairwise: bot ``a``'s side against bot ``b``'s side, ``score`` 1 (a won),
  0 (a lost) or 0.5 (draw). Three-player matches reach this module already split into
  pairwise results derived from the placing.
* Ratings are on the Elo scale: a difference of 400 points means odds of 10 to 1.
* Bots are the names that appear in the results; a bot without games has no rating.
* Dictionaries are keyed in name order, so output is stable and independent of the order
  in which bots first appear.
* A *duplicate set* (``set_id``) is one deal seed played once per rotation of the sides
  over the seats. Its games are correlated (the card luck cancels inside the set), so the
  bootstrap resamples whole sets, the way fastchess treats a game pair as one pentanomial
  outcome.
"""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "ELO_SCALE",
    "BotName",
    "BotStanding",
    "GameResult",
    "SetId",
    "Standings",
    "bootstrap_bt",
    "bradley_terry",
    "build_standings",
    "components",
    "cross_table",
    "elo",
    "elo_history",
    "games_per_pair",
    "has_finite_mle",
    "is_connected",
    "likelihood_of_superiority",
]

BotName: TypeAlias = str
"""A bot's name as configured in the arena."""

SetId: TypeAlias = str
"""Identifies one duplicate set: a deal seed played once per rotation of the sides."""

FloatArray: TypeAlias = NDArray[np.float64]

ELO_SCALE = 400.0 / math.log(10.0)
"""Elo points per unit of natural-log strength (about 173.7)."""

STANDINGS_FORMAT = "gaigel.arena.standings.v1"
"""Format tag written into :meth:`Standings.to_json` output."""

_VALID_SCORES = frozenset({0.0, 0.5, 1.0})
_NEWTON_MAX_ITER = 200
_NEWTON_STEP_TOL = 1e-11  # natural-log units; about 2e-9 Elo points
_NEWTON_MAX_HALVINGS = 60


@dataclass(frozen=True, slots=True)
class GameResult:
    """One pairwise game result: ``score`` is what bot ``a`` scored against bot ``b``.

    Raises:
        ValueError: if ``a == b``, a name is empty, or ``score`` is not 0, 0.5 or 1.
    """

    set_id: SetId
    a: BotName
    b: BotName
    score: float

    def __post_init__(self) -> None:
        if not self.a or not self.b:
            raise ValueError(f"bot names must not be empty: {self.a!r} vs {self.b!r}")
        if self.a == self.b:
            raise ValueError(f"a bot cannot play itself: {self.a!r}")
        if self.score not in _VALID_SCORES:
            raise ValueError(f"score must be 0, 0.5 or 1 (result for {self.a!r}), got {self.score!r}")
        object.__setattr__(self, "score", float(self.score))

    def swapped(self) -> GameResult:
        """Return the same game seen from ``b``'s side."""
        return GameResult(self.set_id, self.b, self.a, 1.0 - self.score)


# --------------------------------------------------------------------------- Elo


def _expected(rating: float, opponent: float) -> float:
    """Return the Elo expectation of ``rating`` against ``opponent`` (logistic, 400 scale)."""
    return 1.0 / (1.0 + math.pow(10.0, (opponent - rating) / 400.0))


def _names(results: Sequence[GameResult]) -> list[BotName]:
    """Return every bot that appears in ``results``, in name order."""
    return sorted({r.a for r in results} | {r.b for r in results})


def elo_history(results: Iterable[GameResult], k: float = 16.0, initial: float = 1500.0) -> list[dict[BotName, float]]:
    """Return the sequential Elo ratings after each game, in the given order.

    Each game moves ``a`` by ``k * (score - E)`` and ``b`` by the opposite amount, where
    ``E = 1 / (1 + 10 ** ((R_b - R_a) / 400))``, so the total is conserved. Every entry
    holds every bot of ``results``; a bot that has not played yet is at ``initial``.

    Raises:
        ValueError: if ``k`` is negative.
    """
    if k < 0:
        raise ValueError(f"k must not be negative, got {k}")
    games = tuple(results)
    ratings = dict.fromkeys(_names(games), initial)
    history: list[dict[BotName, float]] = []
    for game in games:
        delta = k * (game.score - _expected(ratings[game.a], ratings[game.b]))
        ratings[game.a] += delta
        ratings[game.b] -= delta
        history.append(dict(ratings))
    return history


def elo(results: Iterable[GameResult], k: float = 16.0, initial: float = 1500.0) -> dict[BotName, float]:
    """Return the sequential Elo ratings after all games (see :func:`elo_history`).

    Raises:
        ValueError: if ``k`` is negative.
    """
    games = tuple(results)
    history = elo_history(games, k=k, initial=initial)
    return history[-1] if history else {}


# ----------------------------------------------------------------- tallies


@dataclass(frozen=True, slots=True)
class _Tally:
    """Results summed per ordered pair, bots indexed in name order."""

    names: tuple[BotName, ...]
    score: FloatArray  # score[i, j]: points bot i took from bot j
    games: FloatArray  # games[i, j] == games[j, i]: games between i and j


def _tally(results: Sequence[GameResult]) -> _Tally:
    names = _names(results)
    index = {name: i for i, name in enumerate(names)}
    n = len(names)
    score = np.zeros((n, n))
    games = np.zeros((n, n))
    for r in results:
        i, j = index[r.a], index[r.b]
        score[i, j] += r.score
        score[j, i] += 1.0 - r.score
        games[i, j] += 1.0
        games[j, i] += 1.0
    return _Tally(tuple(names), score, games)


def _reachable(adjacency: NDArray[np.bool_], start: int) -> NDArray[np.bool_]:
    """Return which nodes can be reached from ``start`` along ``adjacency[i, j]`` edges."""
    seen = np.zeros(adjacency.shape[0], dtype=bool)
    seen[start] = True
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in np.flatnonzero(adjacency[node] & ~seen):
            seen[nxt] = True
            queue.append(int(nxt))
    return seen


def _strongly_connected(score: FloatArray) -> bool:
    """Return whether "i scored against j" edges make a strongly connected graph.

    This is Zermelo's condition: the Bradley-Terry likelihood has a finite maximiser,
    unique up to a common shift, exactly when it holds.
    """
    if score.shape[0] <= 1:
        return True
    edges = score > 0.0
    return bool(_reachable(edges, 0).all() and _reachable(edges.T, 0).all())


# ---------------------------------------------------------------- Bradley-Terry


def _log_likelihood(theta: FloatArray, score: FloatArray) -> float:
    diff = theta[:, None] - theta[None, :]
    return -float(np.sum(score * np.logaddexp(0.0, -diff)))


def _newton(score: FloatArray, games: FloatArray, theta0: FloatArray | None = None) -> FloatArray:
    """Maximise the Bradley-Terry log-likelihood; return natural-log strengths, mean 0.

    The model is ``P(i beats j) = 1 / (1 + exp(theta_j - theta_i))`` and ``score[i, j]``
    counts i's points against j (a draw is half a point each way). The log-likelihood is
    concave; its Hessian is minus a weighted graph Laplacian, singular only along the
    common shift, so each step solves ``(L + J / n) step = gradient`` (``J`` all ones),
    which yields the mean-zero Newton step. Steps are halved until the likelihood does
    not fall.

    Raises:
        RuntimeError: if the iteration does not converge; this cannot happen when
            :func:`_strongly_connected` holds for ``score``.
    """
    n = score.shape[0]
    theta = np.zeros(n) if theta0 is None else theta0 - theta0.mean()
    if n <= 1:
        return np.zeros(n)
    wins = score.sum(axis=1)
    current = _log_likelihood(theta, score)
    for _ in range(_NEWTON_MAX_ITER):
        p = 0.5 * (1.0 + np.tanh(0.5 * (theta[:, None] - theta[None, :])))  # overflow-free logistic
        gradient = wins - np.sum(games * p, axis=1)
        weight = games * p * p.T
        laplacian = np.diag(weight.sum(axis=1)) - weight
        step = np.linalg.solve(laplacian + 1.0 / n, gradient)
        if float(np.max(np.abs(step))) < _NEWTON_STEP_TOL:
            converged: FloatArray = theta + step
            converged -= converged.mean()
            return converged
        t = 1.0
        for _ in range(_NEWTON_MAX_HALVINGS):
            candidate = theta + t * step
            value = _log_likelihood(candidate, score)
            if value >= current - 1e-12 * (1.0 + abs(current)):
                theta, current = candidate - candidate.mean(), value
                break
            t *= 0.5
        else:
            break  # no ascent along the Newton direction: only rounding noise is left, or a bug
    raise RuntimeError("Bradley-Terry fit did not converge")


def _fit(tally: _Tally, prior_draws: float, theta0: FloatArray | None = None) -> tuple[FloatArray, bool]:
    """Return (natural-log strengths, whether the prior was applied) for ``tally``.

    When the plain maximum-likelihood estimate does not exist or is not unique (see
    :func:`has_finite_mle`), every bot gets ``prior_draws`` virtual draws against a
    virtual opponent held at strength 0; the virtual opponent is then dropped.
    """
    if _strongly_connected(tally.score):
        return _newton(tally.score, tally.games, theta0), False
    n = len(tally.names)
    score = np.zeros((n + 1, n + 1))
    games = np.zeros((n + 1, n + 1))
    score[:n, :n] = tally.score
    games[:n, :n] = tally.games
    score[:n, n] = score[n, :n] = prior_draws / 2.0
    games[:n, n] = games[n, :n] = prior_draws
    start = None if theta0 is None else np.append(theta0, 0.0)
    theta = _newton(score, games, start)
    return theta[:n] - theta[n], True


def _centre(elo_points: FloatArray, names: Sequence[BotName], anchor: BotName | None) -> FloatArray:
    origin = float(elo_points.mean()) if anchor is None else float(elo_points[list(names).index(anchor)])
    centred: FloatArray = elo_points - origin
    return centred


def _check_bt_args(names: Sequence[BotName], prior_draws: float, anchor: BotName | None) -> None:
    if not prior_draws > 0.0:
        raise ValueError(f"prior_draws must be positive, got {prior_draws}")
    if anchor is not None and names and anchor not in names:
        raise ValueError(f"anchor {anchor!r} has no games")


def has_finite_mle(results: Iterable[GameResult]) -> bool:
    """Return whether the unregularised Bradley-Terry fit exists and is unique.

    It does exactly when, for every split of the bots into two groups, each group has
    scored at least half a point against the other (so the pairing graph is connected
    and no group won or lost every game against the rest). When this is false,
    :func:`bradley_terry` applies its prior.
    """
    return _strongly_connected(_tally(tuple(results)).score)


def bradley_terry(
    results: Iterable[GameResult], *, prior_draws: float = 1.0, anchor: BotName | None = None
) -> dict[BotName, float]:
    """Return the batch maximum-likelihood Bradley-Terry ratings on the Elo scale.

    The model is ``P(a beats b) = 1 / (1 + 10 ** ((R_b - R_a) / 400))``; a draw counts as
    half a win each way. The fit is Newton's method on the concave log-likelihood, run to
    about 1e-9 Elo points; it does not depend on the order of ``results``.

    Prior: only when the plain estimate does not exist or is not unique (some group of
    bots won or lost every game against the rest, or the pairing graph is not connected;
    see :func:`has_finite_mle`), each bot gets ``prior_draws`` virtual draws against a
    virtual opponent rated 0. This keeps every rating finite, is symmetric (it favours
    nobody), and pulls unconnected components towards a common level; ratings in
    different components are still not comparable.

    Centring: the ratings have mean 0 over all bots, or, when ``anchor`` is given, the
    anchor bot is rated 0.

    Raises:
        ValueError: if ``prior_draws`` is not positive or ``anchor`` has no games.
    """
    games = tuple(results)
    tally = _tally(games)
    _check_bt_args(tally.names, prior_draws, anchor)
    if not tally.names:
        return {}
    theta, _ = _fit(tally, prior_draws)
    ratings = _centre(ELO_SCALE * theta, tally.names, anchor)
    return {name: float(r) for name, r in zip(tally.names, ratings, strict=True)}


def _pair_sums(pair: NDArray[np.intp], weights: FloatArray, n: int) -> FloatArray:
    """Return an n-by-n matrix summing ``weights`` at the flat indices ``pair`` (``i * n + j``)."""
    return np.asarray(np.bincount(pair, weights=weights, minlength=n * n), dtype=np.float64).reshape(n, n)


MIN_SETS_FOR_INTERVAL = 2
"""A bot seen in fewer duplicate sets gets the interval ``(-inf, inf)``: resampling a
single set only ever redraws that set, so the bootstrap would show a false zero width."""


def interval_known(interval: tuple[float, float]) -> bool:
    """False for an interval that is unknown (infinite) or was not computed (NaN)."""
    return math.isfinite(interval[0]) and math.isfinite(interval[1])


def bootstrap_bt(
    results: Iterable[GameResult],
    samples: int = 1000,
    seed: int = 0,
    *,
    prior_draws: float = 1.0,
    anchor: BotName | None = None,
) -> dict[BotName, tuple[float, float]]:
    """Return 95% percentile intervals of the Bradley-Terry ratings per bot.

    Each bootstrap sample draws as many duplicate sets as there are, with replacement,
    and always keeps all games of a drawn set together; it then refits exactly as
    :func:`bradley_terry` does (same prior rule, same centring, over the bots present in
    that sample). A bot missing from a sample is left out of that sample's percentiles
    (a sample missing the anchor is skipped); a bot missing from every sample gets
    ``(nan, nan)``. A bot that played in fewer than :data:`MIN_SETS_FOR_INTERVAL` duplicate
    sets gets ``(-inf, inf)`` (unknown; the anchor keeps its fixed value). Sets are numbered
    in ``set_id`` order and the sampler is
    ``numpy.random.default_rng(seed)``, so the answer depends only on the results and
    the seed, never on their order.

    Raises:
        ValueError: if ``samples`` < 1, ``prior_draws`` is not positive or ``anchor``
            has no games.
    """
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    games = tuple(results)
    tally = _tally(games)
    _check_bt_args(tally.names, prior_draws, anchor)
    if not tally.names:
        return {}
    names = tally.names
    n = len(names)
    index = {name: i for i, name in enumerate(names)}
    set_ids = sorted({g.set_id for g in games})
    set_index = {s: i for i, s in enumerate(set_ids)}
    game_set = np.array([set_index[g.set_id] for g in games])
    forward = np.array([index[g.a] * n + index[g.b] for g in games])
    backward = np.array([index[g.b] * n + index[g.a] for g in games])
    points = np.array([g.score for g in games])
    anchor_index = None if anchor is None else index[anchor]

    full_theta, _ = _fit(tally, prior_draws)
    rng = np.random.default_rng(seed)
    draws = np.full((samples, n), np.nan)
    for row in range(samples):
        counts = np.bincount(rng.integers(0, len(set_ids), size=len(set_ids)), minlength=len(set_ids))
        weight = counts[game_set].astype(np.float64)
        score = _pair_sums(forward, weight * points, n) + _pair_sums(backward, weight * (1.0 - points), n)
        played_matrix = _pair_sums(forward, weight, n) + _pair_sums(backward, weight, n)
        present = np.flatnonzero(played_matrix.sum(axis=1) > 0.0)
        if anchor_index is not None and anchor_index not in present:
            continue
        sub = np.ix_(present, present)
        sample_tally = _Tally(tuple(names[i] for i in present), score[sub], played_matrix[sub])
        theta, _ = _fit(sample_tally, prior_draws, full_theta[present])
        draws[row, present] = _centre(ELO_SCALE * theta, sample_tally.names, anchor)

    sets_of: dict[BotName, set[SetId]] = {name: set() for name in names}
    for g in games:
        sets_of[g.a].add(g.set_id)
        sets_of[g.b].add(g.set_id)
    intervals: dict[BotName, tuple[float, float]] = {}
    for i, name in enumerate(names):
        column = draws[:, i][~np.isnan(draws[:, i])]
        if len(sets_of[name]) < MIN_SETS_FOR_INTERVAL and name != anchor:
            intervals[name] = (-math.inf, math.inf)
        elif column.size == 0:
            intervals[name] = (math.nan, math.nan)
        else:
            low, high = np.percentile(column, [2.5, 97.5])
            intervals[name] = (float(low), float(high))
    return intervals


# ------------------------------------------------------------------- tables


def likelihood_of_superiority(results: Iterable[GameResult]) -> dict[BotName, dict[BotName, float]]:
    """Return ``los[a][b]``, the likelihood that bot a is stronger than bot b.

    Computed from a's wins ``w`` and losses ``l`` against b (draws do not count) as
    ``0.5 * (1 + erf((w - l) / sqrt(2 * (w + l))))``, and 0.5 when all their games were
    drawn. Inner dictionaries hold only opponents actually met;
    ``los[a][b] + los[b][a] == 1``.
    """
    wins: dict[BotName, dict[BotName, int]] = {}
    for r in tuple(results):
        wins.setdefault(r.a, {}).setdefault(r.b, 0)
        wins.setdefault(r.b, {}).setdefault(r.a, 0)
        if r.score == 1.0:
            wins[r.a][r.b] += 1
        elif r.score == 0.0:
            wins[r.b][r.a] += 1
    los: dict[BotName, dict[BotName, float]] = {}
    for a in sorted(wins):
        los[a] = {}
        for b in sorted(wins[a]):
            w, lost = wins[a][b], wins[b][a]
            los[a][b] = 0.5 if w + lost == 0 else 0.5 * (1.0 + math.erf((w - lost) / math.sqrt(2.0 * (w + lost))))
    return los


def cross_table(results: Iterable[GameResult]) -> dict[BotName, dict[BotName, tuple[float, int]]]:
    """Return ``table[a][b] == (points a scored against b, games between them)``.

    Inner dictionaries hold only opponents actually met.
    """
    table: dict[BotName, dict[BotName, tuple[float, int]]] = {}
    for r in tuple(results):
        for me, other, points in ((r.a, r.b, r.score), (r.b, r.a, 1.0 - r.score)):
            old_points, old_games = table.setdefault(me, {}).get(other, (0.0, 0))
            table[me][other] = (old_points + points, old_games + 1)
    return {a: dict(sorted(table[a].items())) for a in sorted(table)}


def games_per_pair(results: Iterable[GameResult]) -> dict[tuple[BotName, BotName], int]:
    """Return the number of games per unordered pair, keyed ``(first, second)`` in name order."""
    counts: dict[tuple[BotName, BotName], int] = {}
    for r in tuple(results):
        pair = (min(r.a, r.b), max(r.a, r.b))
        counts[pair] = counts.get(pair, 0) + 1
    return dict(sorted(counts.items()))


def components(results: Iterable[GameResult]) -> list[list[BotName]]:
    """Return the connected components of the pairing graph (who has played whom).

    Each component is in name order, and components are ordered by their first name.
    Ratings of bots in different components are not comparable.
    """
    tally = _tally(tuple(results))
    met = tally.games > 0.0
    unseen = np.ones(len(tally.names), dtype=bool)
    found: list[list[BotName]] = []
    for start in range(len(tally.names)):
        if unseen[start]:
            members = _reachable(met, start)
            unseen &= ~members
            found.append([tally.names[i] for i in np.flatnonzero(members)])
    return found


def is_connected(results: Iterable[GameResult]) -> bool:
    """Return whether every bot is linked to every other through games played.

    An empty result list counts as connected (there is nothing to compare).
    """
    return len(components(results)) <= 1


# ---------------------------------------------------------------- standings


@dataclass(frozen=True, slots=True)
class BotStanding:
    """One row of the rating table."""

    name: BotName
    elo: float
    bt: float
    bt_ci95: tuple[float, float]
    games: int
    score: float


@dataclass(frozen=True, slots=True)
class Standings:
    """The rating table plus what a report needs to judge it, rows by ``bt`` descending."""

    rows: tuple[BotStanding, ...]
    connected: bool
    components: tuple[tuple[BotName, ...], ...]
    bt_prior_used: bool
    bootstrap_samples: int
    bootstrap_seed: int
    cross_table: Mapping[BotName, Mapping[BotName, tuple[float, int]]]
    los: Mapping[BotName, Mapping[BotName, float]]

    def to_dict(self) -> dict[str, object]:
        """Return a JSON-ready dictionary; an interval bound that is NaN (not computed) or
        infinite (unknown: too few duplicate sets) becomes ``None``."""

        def number(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "format": STANDINGS_FORMAT,
            "connected": self.connected,
            "components": [list(c) for c in self.components],
            "bt_prior_used": self.bt_prior_used,
            "bootstrap_samples": self.bootstrap_samples,
            "bootstrap_seed": self.bootstrap_seed,
            "rows": [
                {
                    "name": row.name,
                    "elo": row.elo,
                    "bt": row.bt,
                    "bt_ci95": [number(row.bt_ci95[0]), number(row.bt_ci95[1])],
                    "games": row.games,
                    "score": row.score,
                }
                for row in self.rows
            ],
            "cross_table": {
                a: {b: {"score": s, "games": g} for b, (s, g) in inner.items()} for a, inner in self.cross_table.items()
            },
            "los": {a: dict(inner) for a, inner in self.los.items()},
        }

    def to_json(self, indent: int | None = 2) -> str:
        """Return the standings as strict JSON (see :meth:`to_dict`)."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)


def build_standings(
    results: Iterable[GameResult],
    *,
    k: float = 16.0,
    initial: float = 1500.0,
    samples: int = 1000,
    seed: int = 0,
    prior_draws: float = 1.0,
    anchor: BotName | None = None,
) -> Standings:
    """Combine Elo, Bradley-Terry, bootstrap intervals and the tables into :class:`Standings`.

    ``samples=0`` skips the bootstrap (the intervals are NaN), which suits a live table
    refreshed after every game. Ties in ``bt`` are ordered by name.

    Raises:
        ValueError: for a negative ``k`` or ``samples``, a non-positive ``prior_draws``,
            or an ``anchor`` without games.
    """
    if samples < 0:
        raise ValueError(f"samples must not be negative, got {samples}")
    games = tuple(results)
    elo_ratings = elo(games, k=k, initial=initial)
    bt = bradley_terry(games, prior_draws=prior_draws, anchor=anchor)
    if samples > 0:
        intervals = bootstrap_bt(games, samples, seed, prior_draws=prior_draws, anchor=anchor)
    else:
        intervals = dict.fromkeys(bt, (math.nan, math.nan))
    table = cross_table(games)
    rows = tuple(
        sorted(
            (
                BotStanding(
                    name=name,
                    elo=elo_ratings[name],
                    bt=bt[name],
                    bt_ci95=intervals[name],
                    games=sum(g for _, g in table[name].values()),
                    score=sum(s for s, _ in table[name].values()),
                )
                for name in bt
            ),
            key=lambda row: (-row.bt, row.name),
        )
    )
    parts = components(games)
    return Standings(
        rows=rows,
        connected=len(parts) <= 1,
        components=tuple(tuple(c) for c in parts),
        bt_prior_used=bool(games) and not has_finite_mle(games),
        bootstrap_samples=samples,
        bootstrap_seed=seed,
        cross_table=table,
        los=likelihood_of_superiority(games),
    )
