"""The sequential test's statistics: simulated error rates and lengths, and the formulas
recomputed here by other means (plain arithmetic, a constrained maximum likelihood fit)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gaigel_arena.sprt import (
    NELO_C,
    Sprt,
    Verdict,
    controlled_scores,
    elo_from_score,
    estimate,
    first_crossing,
    llr,
    llr_path,
    set_histogram,
    simulate,
    standard_errors,
    trinomial_set_model,
)

RUNS = 1000


@pytest.mark.parametrize("games_per_set", [2, 3])
def test_simulated_error_rates_and_lengths(games_per_set: int) -> None:
    """1,000 tests with the true value at elo0 and 1,000 at elo1: errors at most 5 % + 1.5 points,
    mean length within 20 % of the printed expectation."""
    test = Sprt(elo0=0.0, elo1=30.0, games_per_set=games_per_set)
    expected_h0, expected_h1 = test.expected_sets()
    for true, wrong, expected in ((test.elo0, Verdict.H1, expected_h0), (test.elo1, Verdict.H0, expected_h1)):
        # A 2-game set model with nElo `true` per game; with k games per set the same
        # set model has nElo true * sqrt(2 / k) in this test's units, so rescale.
        model = trinomial_set_model(true * math.sqrt(games_per_set / 2.0))
        counts, lengths = simulate(model, test, RUNS, cap=int(8 * expected), seed=11 + games_per_set)
        assert counts[Verdict.INCONCLUSIVE] <= 2
        assert counts[wrong] / RUNS <= 0.05 + 0.015, (true, counts)
        assert abs(lengths.mean() / expected - 1.0) <= 0.20, (true, lengths.mean(), expected)


def test_the_model_has_the_nelo_it_claims() -> None:
    for target in (-40.0, 0.0, 12.5, 80.0):
        model = trinomial_set_model(target, draw_share=0.3)
        assert math.isclose(sum(model.values()), 1.0)
        mean = sum(x * p for x, p in model.items())
        var = sum((x - mean) ** 2 * p for x, p in model.items())
        assert math.isclose(NELO_C * (mean - 0.5) / math.sqrt(2 * var), target, abs_tol=1e-9)


def _hand_llr(scores: list[float], k: int, elo0: float, elo1: float) -> float:
    """The normal-approximation LLR with the documented pseudo-sets, by plain arithmetic."""
    n = len(scores)
    m = sum(scores) / n
    v = (sum((x - m) ** 2 for x in scores) + 2 * 0.25) / (n + 2)
    c = 800 / math.log(10)
    sigma = math.sqrt(k * v)
    mu0, mu1 = 0.5 + elo0 * sigma / c, 0.5 + elo1 * sigma / c
    # log-likelihood ratio of two normals with the same variance v, summed over the sets
    return sum(((x - mu0) ** 2 - (x - mu1) ** 2) / (2 * v) for x in scores)


def test_llr_and_estimate_of_a_fixed_histogram() -> None:
    scores = [1.0] * 31 + [0.5] * 52 + [0.0] * 17 + [0.75] * 6
    test = Sprt(elo0=-5.0, elo1=15.0, games_per_set=2)
    assert llr(scores, test) == pytest.approx(_hand_llr(scores, 2, -5.0, 15.0), rel=1e-12)
    path = llr_path(scores, test)
    assert path[9] == pytest.approx(_hand_llr(scores[:10], 2, -5.0, 15.0), rel=1e-12)

    est = estimate(scores, 2)
    n = len(scores)
    m = statistics.fmean(scores)
    v = (sum((x - m) ** 2 for x in scores) + 0.5) / (n + 2)
    half = 1.959963984540054 * math.sqrt(v / n)
    assert est.score == pytest.approx(m)
    assert est.score_ci95 == pytest.approx((m - half, m + half))
    assert est.nelo == pytest.approx(347.4355855226 * (m - 0.5) / math.sqrt(2 * v))
    assert est.elo == pytest.approx(-400 * math.log10(1 / m - 1))
    assert est.elo_ci95[0] < est.elo < est.elo_ci95[1]
    assert est.games == 2 * n
    assert elo_from_score(0.75) == pytest.approx(190.848501887865)
    assert elo_from_score(0.0) == -math.inf


def test_bounds_and_expected_lengths() -> None:
    test = Sprt(elo0=0.0, elo1=3.0, games_per_set=2)
    assert test.lower == pytest.approx(-2.944438979)
    assert test.upper == pytest.approx(2.944438979)
    h0, h1 = test.expected_sets()
    assert h0 == pytest.approx(h1)
    # EVALUATION.md: about 640,000 / Delta^2 games under either hypothesis, 1,046,535 / Delta^2 at the midpoint
    assert 2 * h0 == pytest.approx(640_000 / 9, rel=0.01)
    assert 2 * test.expected_sets_midpoint() == pytest.approx(1_046_535 / 9, rel=0.001)
    asym = Sprt(elo0=0.0, elo1=3.0, alpha=0.05, beta=0.1, games_per_set=2)
    assert asym.expected_sets()[0] != pytest.approx(asym.expected_sets()[1])


def _constrained_mle(values: np.ndarray, counts: np.ndarray, k: int, nelo: float) -> np.ndarray:
    """The multinomial on *values* of largest likelihood for *counts* whose nElo is exactly *nelo*
    (scipy's SLSQP: an independent route to the exact GSPRT)."""
    from scipy.optimize import minimize

    n = counts.sum()

    def negloglik(p: np.ndarray) -> float:
        return -float(np.sum(counts * np.log(np.maximum(p, 1e-300))))

    def constraint(p: np.ndarray) -> float:
        mean = float(p @ values)
        var = float(p @ (values - mean) ** 2)
        return NELO_C * (mean - 0.5) - nelo * math.sqrt(k * var)

    result = minimize(
        negloglik,
        counts / n,
        method="SLSQP",
        bounds=[(1e-12, 1.0)] * len(values),
        constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1.0}, {"type": "eq", "fun": constraint}],
        options={"ftol": 1e-14, "maxiter": 500},
    )
    assert result.success, result.message
    return np.asarray(result.x)


@pytest.mark.parametrize(
    ("counts", "elo0", "elo1"),
    [
        ([400, 1500, 2600, 1650, 550], 0.0, 5.0),  # a pentanomial-like 2-game histogram, slightly in favour
        ([800, 1200, 2000, 1350, 950], -2.0, 3.0),
        ([900, 2300, 1100], 0.0, 10.0),  # win/loss only: 0, 1/2, 1
    ],
)
def test_normal_approximation_is_close_to_the_exact_gsprt(counts: list[int], elo0: float, elo1: float) -> None:
    """The exact GSPRT (maximum likelihood of the histogram under each nElo constraint) and the
    implemented normal approximation agree within a few percent for practical bounds."""
    values = np.linspace(0.0, 1.0, len(counts))
    c = np.asarray(counts, dtype=np.float64)
    p0 = _constrained_mle(values, c, 2, elo0)
    p1 = _constrained_mle(values, c, 2, elo1)
    exact = float(np.sum(c * np.log(p1 / p0)))
    scores = np.repeat(values, counts)
    approx = llr(scores, Sprt(elo0=elo0, elo1=elo1, games_per_set=2))
    assert abs(exact) > 5.0  # a histogram with something to say (beyond the bounds)
    assert approx == pytest.approx(exact, rel=0.02)


def test_two_player_sets_reduce_to_the_pentanomial_case() -> None:
    """Game pairs with win, draw or loss: the set histogram is the pentanomial count, the nElo the
    pentanomial nElo (800 / ln 10 / sqrt 2 times the pair t-value), and without duplicate (k = 1)
    the game-level trinomial formulas."""
    rng = np.random.default_rng(3)
    games = rng.choice([0.0, 0.5, 1.0], size=(500, 2), p=[0.3, 0.3, 0.4])
    pair_points = games.sum(axis=1)
    penta = [int(np.sum(pair_points == p)) for p in (0.0, 0.5, 1.0, 1.5, 2.0)]
    hist = set_histogram(list(games.mean(axis=1)), 2)
    assert [hist.get(key, 0) for key in ("0", "0.5", "1", "1.5", "2")] == penta

    n = 500
    probs = np.array(penta) / n
    avg = float(probs @ np.array([0, 0.25, 0.5, 0.75, 1.0]))
    squares = float(np.array(penta) @ (np.array([0, 0.25, 0.5, 0.75, 1.0]) - avg) ** 2)
    var = (squares + 0.5) / (n + 2)  # the documented pseudo-sets
    nelo5 = 800 / math.log(10) / math.sqrt(2) * (avg - 0.5) / math.sqrt(var)
    assert estimate(games.mean(axis=1), 2).nelo == pytest.approx(nelo5)

    # k = 1: trinomial W/D/L counts, per-game variance w + d/4 - m^2 (plus the pseudo-sets)
    flat = games.ravel()
    w, d = float(np.mean(flat == 1.0)), float(np.mean(flat == 0.5))
    m = w + d / 2
    var1 = ((w + d / 4 - m * m) * flat.size + 0.5) / (flat.size + 2)
    assert estimate(flat, 1).nelo == pytest.approx(NELO_C * (m - 0.5) / math.sqrt(var1))
    assert llr(flat, Sprt(0, 10, games_per_set=1)) == pytest.approx(_hand_llr(list(flat), 1, 0, 10))


def test_first_crossing_waits_for_min_sets_and_names_the_bound() -> None:
    test = Sprt(elo0=0.0, elo1=50.0, games_per_set=2, min_sets=20)
    winning = [1.0] * 40
    path = llr_path(winning, test)
    assert path[12] > test.upper  # crossed early ...
    assert first_crossing(path, test) == (Verdict.H1, 20)  # ... but judged only from set 20
    assert first_crossing(llr_path([0.0] * 40, test), test) == (Verdict.H0, 20)
    assert first_crossing(llr_path([0.5] * 10, test), test) == (Verdict.CONTINUE, 10)
    assert test.verdict(0.0, 10, cap=10) is Verdict.INCONCLUSIVE
    assert test.verdict(99.0, 19) is Verdict.CONTINUE


def test_identical_sets_do_not_divide_by_zero_and_drift_to_h0() -> None:
    test = Sprt(elo0=0.0, elo1=20.0, games_per_set=2)
    path = llr_path([0.5] * 200, test)
    assert np.all(np.isfinite(path))
    # zero variance in the data: the drift is exactly -k Delta^2 / (2 C^2) per set
    assert path[-1] == pytest.approx(-200 * 2 * 400 / (2 * NELO_C**2))


def test_control_variate_keeps_the_mean_and_removes_shared_luck() -> None:
    rng = np.random.default_rng(5)
    luck = rng.normal(0.0, 0.15, size=2000)
    x = np.clip(0.55 + luck + rng.normal(0, 0.05, size=2000), 0, 1)
    b = np.clip(0.5 + luck, 0, 1)
    y = controlled_scores(list(x), list(b))
    assert y.mean() == pytest.approx(x.mean())
    assert y.var() < 0.3 * x.var()
    games = np.column_stack([x, x])  # two identical "games" per set
    se = standard_errors(games.tolist(), list(y))
    assert se.per_set_cv is not None and se.per_set_cv < se.per_set
    assert se.ratio("per_set_cv") < 0.3
    with pytest.raises(ValueError):
        controlled_scores([0.5], [0.5, 0.5])


def test_standard_errors_of_independent_and_of_anticorrelated_games() -> None:
    rng = np.random.default_rng(9)
    independent = rng.choice([0.0, 1.0], size=(4000, 2))
    se = standard_errors(independent.tolist())
    assert se.ratio("per_set") == pytest.approx(1.0, abs=0.1)
    assert se.per_set == pytest.approx(se.per_game, rel=0.1)
    first = rng.choice([0.0, 1.0], size=4000)
    mirrored = np.column_stack([first, 1.0 - first])  # duplicate cancels everything: sets are all 1/2
    se2 = standard_errors(mirrored.tolist(), half_width=0.01)
    assert se2.per_set == 0.0 and se2.games_needed["per_set"] == 0.0
    assert se2.games_needed["per_game"] == pytest.approx(1.959963984540054**2 * 0.25 / 0.0001, rel=0.01)
    with pytest.raises(ValueError):
        standard_errors([[1.0]])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), min_size=1, max_size=60), st.integers(0, 40))
def test_llr_is_antisymmetric_and_its_path_ends_at_the_total(scores: list[float], lo: int) -> None:
    """Swapping candidate and baseline (x -> 1 - x) and mirroring the bounds negates the LLR."""
    test = Sprt(elo0=float(lo), elo1=float(lo + 10), games_per_set=2)
    mirror = Sprt(elo0=-float(lo + 10), elo1=-float(lo), games_per_set=2)
    value = llr(scores, test)
    assert llr_path(scores, test)[-1] == value
    assert llr([1.0 - x for x in scores], mirror) == pytest.approx(-value, rel=1e-9, abs=1e-9)


def test_invalid_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="elo1"):
        Sprt(elo0=5.0, elo1=5.0)
    with pytest.raises(ValueError, match="alpha"):
        Sprt(alpha=0.0)
    with pytest.raises(ValueError, match="no sets"):
        estimate([], 2)
