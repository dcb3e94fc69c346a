"""Tests for the pure rating functions of the arena (gaigel_arena.ratings)."""

from __future__ import annotations

import json
import math
import random
from typing import ClassVar

import choix
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gaigel_arena.ratings import (
    ELO_SCALE,
    GameResult,
    bootstrap_bt,
    bradley_terry,
    build_standings,
    components,
    cross_table,
    elo,
    elo_history,
    games_per_pair,
    has_finite_mle,
    interval_known,
    is_connected,
    likelihood_of_superiority,
)
from gaigel_arena.report import format_table

NAMES = ("ann", "bob", "cat", "dan")
NEW_NAMES = ("zed", "yul", "xia", "wim")


def simulate(strengths: dict[str, float], sets: int, seed: int, draw_rate: float = 0.2) -> list[GameResult]:
    """Return a round-robin of duplicate sets (each pair twice per set, sides swapped) from Elo strengths."""
    rng = np.random.default_rng(seed)
    names = sorted(strengths)
    results = []
    for s in range(sets):
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                for x, y in ((a, b), (b, a)):
                    p_win = 1.0 / (1.0 + 10.0 ** ((strengths[y] - strengths[x]) / 400.0))
                    u = rng.random()
                    decisive = 1.0 - draw_rate
                    score = 1.0 if u < p_win * decisive else 0.5 if u < p_win * decisive + draw_rate else 0.0
                    results.append(GameResult(f"set{s:03d}", x, y, score))
    return results


def to_choix(results: list[GameResult], names: list[str]) -> list[tuple[int, int]]:
    """Return choix (winner, loser) pairs, every game doubled so a draw becomes one win each way."""
    index = {name: i for i, name in enumerate(names)}
    data: list[tuple[int, int]] = []
    for r in results:
        a, b = index[r.a], index[r.b]
        data += {1.0: [(a, b), (a, b)], 0.5: [(a, b), (b, a)], 0.0: [(b, a), (b, a)]}[r.score]
    return data


results_strategy = st.lists(
    st.builds(
        lambda set_id, pair, score: GameResult(set_id, pair[0], pair[1], score),
        st.sampled_from(["s0", "s1", "s2"]),
        st.permutations(NAMES).map(lambda p: (p[0], p[1])),
        st.sampled_from([0.0, 0.5, 1.0]),
    ),
    min_size=1,
    max_size=30,
)


class TestGameResult:
    """GameResult validates its fields and can be seen from the other side."""

    @pytest.mark.parametrize("score", [0.25, -1.0, 2.0, math.nan])
    def test_rejects_scores_other_than_win_draw_loss(self, score: float) -> None:
        """Only 0, 0.5 and 1 are valid scores."""
        with pytest.raises(ValueError, match="score"):
            GameResult("s", "ann", "bob", score)

    def test_rejects_self_play_and_empty_names(self) -> None:
        """A bot cannot play itself and names must not be empty."""
        with pytest.raises(ValueError, match="itself"):
            GameResult("s", "ann", "ann", 1.0)
        with pytest.raises(ValueError, match="empty"):
            GameResult("s", "", "ann", 1.0)

    def test_integer_scores_become_floats_and_swap(self) -> None:
        """An int score is stored as float and swapped() gives the opponent's view."""
        result = GameResult("s", "ann", "bob", 1)
        assert isinstance(result.score, float)
        assert result.swapped() == GameResult("s", "bob", "ann", 0.0)


class TestElo:
    """Sequential Elo follows the textbook update in schedule order."""

    def test_two_wins_between_equal_players_by_hand(self) -> None:
        """Two wins from 1500/1500 with K=16 give 1508/1492 and then the formula's second step."""
        results = [GameResult("s", "ann", "bob", 1.0), GameResult("s", "ann", "bob", 1.0)]
        history = elo_history(results, k=16.0, initial=1500.0)
        assert history[0] == {"ann": 1508.0, "bob": 1492.0}
        expected_ann = 1.0 / (1.0 + 10.0 ** ((1492.0 - 1508.0) / 400.0))  # about 0.523
        gain = 16.0 * (1.0 - expected_ann)
        assert history[1]["ann"] == pytest.approx(1508.0 + gain, abs=1e-12)
        assert history[1]["bob"] == pytest.approx(1492.0 - gain, abs=1e-12)
        assert elo(results) == history[-1]

    def test_draw_moves_the_stronger_player_down(self) -> None:
        """After a win and then a draw, the draw costs the leader k * (0.5 - E)."""
        results = [GameResult("s", "ann", "bob", 1.0), GameResult("s", "bob", "ann", 0.5)]
        ratings = elo(results, k=32.0, initial=1000.0)
        expected_bob = 1.0 / (1.0 + 10.0 ** ((1016.0 - 984.0) / 400.0))
        assert ratings["bob"] == pytest.approx(984.0 + 32.0 * (0.5 - expected_bob), abs=1e-12)
        assert ratings["ann"] == pytest.approx(1016.0 - 32.0 * (0.5 - expected_bob), abs=1e-12)

    def test_order_matters_and_newcomers_start_at_initial(self) -> None:
        """Elo depends on order, and a bot not yet seen is listed at the initial rating."""
        games = [
            GameResult("s", "ann", "bob", 1.0),
            GameResult("s", "cat", "ann", 1.0),
            GameResult("s", "bob", "cat", 0.5),
        ]
        assert elo_history(games)[0]["cat"] == 1500.0
        assert elo(games) != elo(games[::-1])

    def test_empty_results_and_negative_k(self) -> None:
        """No games give no ratings, and a negative K is refused."""
        assert elo([]) == {}
        assert elo_history([]) == []
        with pytest.raises(ValueError, match="k must"):
            elo([GameResult("s", "ann", "bob", 1.0)], k=-1.0)

    @settings(max_examples=100, deadline=None)
    @given(results_strategy)
    def test_zero_sum(self, results: list[GameResult]) -> None:
        """Every history entry keeps the rating total at n times the initial rating."""
        for ratings in elo_history(results, k=24.0, initial=1200.0):
            assert sum(ratings.values()) == pytest.approx(1200.0 * len(ratings), abs=1e-8)


class TestBradleyTerry:
    """The batch Bradley-Terry fit is the maximum-likelihood estimate on the Elo scale."""

    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_matches_choix_with_draws(self, seed: int) -> None:
        """On data without perfect separation the fit equals choix's I-LSR within 1e-6 Elo."""
        strengths = {"ann": 0.0, "bob": 60.0, "cat": 150.0, "dan": -120.0, "eve": 300.0}
        results = simulate(strengths, sets=8, seed=seed)
        assert has_finite_mle(results)
        names = sorted(strengths)
        theta = choix.ilsr_pairwise(len(names), to_choix(results, names), alpha=0.0, max_iter=1000, tol=1e-13)
        reference = ELO_SCALE * theta
        reference -= reference.mean()
        ours = bradley_terry(results)
        assert list(ours) == names
        for i, name in enumerate(names):
            assert ours[name] == pytest.approx(reference[i], abs=1e-6)

    def test_matches_choix_on_an_uneven_chain_without_draws(self) -> None:
        """A sparse, uneven schedule (a chain, no draws) also agrees with choix within 1e-6."""
        spec = [("ann", "bob", 7, 3), ("bob", "cat", 2, 5), ("cat", "dan", 4, 1)]
        results = [
            GameResult(f"s{n}", a, b, score)
            for a, b, wins, losses in spec
            for n, score in enumerate([1.0] * wins + [0.0] * losses)
        ]
        names = ["ann", "bob", "cat", "dan"]
        theta = choix.ilsr_pairwise(4, to_choix(results, names), alpha=0.0, max_iter=1000, tol=1e-13)
        reference = ELO_SCALE * (theta - theta.mean())
        ours = bradley_terry(results)
        assert [ours[n] for n in names] == pytest.approx(list(reference), abs=1e-6)

    def test_two_players_closed_form(self) -> None:
        """For one pair the rating gap is 400*log10(score / (games - score)), split evenly."""
        results = [GameResult("s", "ann", "bob", x) for x in (1.0, 1.0, 1.0, 0.5, 0.0)]
        gap = 400.0 * math.log10(3.5 / 1.5)
        assert bradley_terry(results) == pytest.approx({"ann": gap / 2, "bob": -gap / 2}, abs=1e-9)

    def test_anchor_puts_the_anchor_at_zero(self) -> None:
        """With an anchor the anchor is 0 and all differences stay the same."""
        results = simulate({"ann": 0.0, "bob": 100.0, "cat": 200.0}, sets=5, seed=4)
        centred = bradley_terry(results)
        anchored = bradley_terry(results, anchor="ann")
        assert anchored["ann"] == 0.0
        for name in centred:
            assert anchored[name] - anchored["bob"] == pytest.approx(centred[name] - centred["bob"], abs=1e-9)
        with pytest.raises(ValueError, match="anchor"):
            bradley_terry(results, anchor="nobody")

    def test_prior_keeps_a_perfect_record_finite(self) -> None:
        """A bot that won every game gets a finite, top rating from the virtual-draw prior."""
        results = [GameResult("s", "ann", "bob", 1.0)] * 10 + [
            GameResult("s", "bob", "cat", 1.0),
            GameResult("s", "cat", "bob", 1.0),
        ]
        assert not has_finite_mle(results)
        ratings = bradley_terry(results)
        assert all(math.isfinite(r) for r in ratings.values())
        assert ratings["ann"] > ratings["bob"]
        assert ratings["ann"] > ratings["cat"]
        assert sum(ratings.values()) == pytest.approx(0.0, abs=1e-9)
        assert bradley_terry(results, prior_draws=0.1)["ann"] > ratings["ann"]  # a weaker prior pulls less
        with pytest.raises(ValueError, match="prior_draws"):
            bradley_terry(results, prior_draws=0.0)

    def test_single_pair_all_draws_and_empty(self) -> None:
        """Only draws rate both bots 0, and no games give no ratings."""
        assert bradley_terry([GameResult("s", "ann", "bob", 0.5)]) == {"ann": 0.0, "bob": 0.0}
        assert bradley_terry([]) == {}

    @settings(max_examples=100, deadline=None)
    @given(results_strategy, st.permutations(NEW_NAMES), st.randoms(use_true_random=False))
    def test_invariant_under_renaming_and_reordering(
        self, results: list[GameResult], new_names: list[str], rnd: random.Random
    ) -> None:
        """Renaming bots and shuffling the results only relabels the ratings."""
        rename = dict(zip(NAMES, new_names, strict=True))
        moved = [GameResult(r.set_id, rename[r.a], rename[r.b], r.score) for r in results]
        rnd.shuffle(moved)
        before = bradley_terry(results)
        after = bradley_terry(moved)
        assert set(after) == {rename[name] for name in before}
        for name, rating in before.items():
            assert after[rename[name]] == pytest.approx(rating, abs=1e-6)

    @settings(max_examples=100, deadline=None)
    @given(results_strategy)
    def test_swapping_all_results_flips_signs(self, results: list[GameResult]) -> None:
        """Turning every win into a loss negates every rating."""
        flipped = bradley_terry([GameResult(r.set_id, r.a, r.b, 1.0 - r.score) for r in results])
        for name, rating in bradley_terry(results).items():
            assert flipped[name] == pytest.approx(-rating, abs=1e-6)

    @settings(max_examples=100, deadline=None)
    @given(results_strategy)
    def test_side_of_recording_does_not_matter(self, results: list[GameResult]) -> None:
        """Recording a game from b's side instead of a's gives the same ratings, centred at 0."""
        ratings = bradley_terry(results)
        assert sum(ratings.values()) == pytest.approx(0.0, abs=1e-6)
        assert bradley_terry([r.swapped() for r in results]) == pytest.approx(ratings, abs=1e-6)


class TestBootstrap:
    """The bootstrap resamples whole duplicate sets and is deterministic per seed."""

    STRENGTHS: ClassVar[dict[str, float]] = {"ann": 0.0, "bob": 100.0, "cat": 200.0}

    def test_interval_shrinks_with_more_sets(self) -> None:
        """With the same generating strengths, 100 sets give clearly narrower intervals than 10."""
        few = bootstrap_bt(simulate(self.STRENGTHS, sets=10, seed=5), samples=300, seed=1)
        many = bootstrap_bt(simulate(self.STRENGTHS, sets=100, seed=5), samples=300, seed=1)
        for name in self.STRENGTHS:
            few_width = few[name][1] - few[name][0]
            many_width = many[name][1] - many[name][0]
            assert many_width < 0.6 * few_width, name

    def test_one_duplicate_set_gives_unknown_intervals_not_zero_width(self) -> None:
        """With a single set every resample is that set: the intervals are (-inf, inf), shown as unknown
        in the text table, as null in strict JSON and as unknown in HTML; two sets give real widths."""
        one = simulate(self.STRENGTHS, sets=1, seed=9)
        intervals = bootstrap_bt(one, samples=100)
        assert intervals and all(iv == (-math.inf, math.inf) for iv in intervals.values())
        assert not any(interval_known(iv) for iv in intervals.values())
        anchored = bootstrap_bt(one, samples=100, anchor="ann")
        assert anchored["ann"] == (0.0, 0.0) and anchored["bob"] == (-math.inf, math.inf)
        standings = build_standings(one, samples=100)
        data = json.loads(standings.to_json())  # strict JSON: no Infinity
        assert all(row["bt_ci95"] == [None, None] for row in data["rows"])
        text = format_table(standings)
        assert "unknown" in text and "raise sets_per_pairing" in text
        two = bootstrap_bt(simulate(self.STRENGTHS, sets=2, seed=9), samples=100)
        assert all(interval_known(iv) and iv[1] > iv[0] for iv in two.values())

    def test_resamples_whole_sets(self) -> None:
        """If every set splits 1-1, any resample of whole sets is level, so the interval is a point."""
        results = []
        for s in range(12):
            results += [GameResult(f"s{s}", "ann", "bob", 1.0), GameResult(f"s{s}", "bob", "ann", 1.0)]
        assert bootstrap_bt(results, samples=200) == {"ann": (0.0, 0.0), "bob": (0.0, 0.0)}
        per_game = [GameResult(f"g{i}", r.a, r.b, r.score) for i, r in enumerate(results)]
        low, high = bootstrap_bt(per_game, samples=200)["ann"]
        assert high - low > 50.0  # the same games resampled one by one do vary

    def test_deterministic_per_seed_and_order_free(self) -> None:
        """The same seed gives the same intervals whatever the result order; another seed differs."""
        results = simulate(self.STRENGTHS, sets=10, seed=6)
        first = bootstrap_bt(results, samples=200, seed=3)
        reordered = bootstrap_bt(results[::-1], samples=200, seed=3)
        assert list(reordered) == list(first)
        for name, interval in first.items():
            assert reordered[name] == pytest.approx(interval, abs=1e-6)
        assert bootstrap_bt(results, samples=200, seed=4) != first

    def test_interval_brackets_the_point_estimate(self) -> None:
        """On well-mixed data each 95% interval contains the full-data rating."""
        results = simulate(self.STRENGTHS, sets=30, seed=7)
        point = bradley_terry(results)
        for name, (low, high) in bootstrap_bt(results, samples=300).items():
            assert low < point[name] < high

    def test_bot_missing_from_samples_and_bad_arguments(self) -> None:
        """A bot found in one set of many has an unknown interval (its own spread cannot be resampled),
        the others keep theirs; samples < 1 is refused."""
        extra = [GameResult("extra", "eve", "ann", 1.0), GameResult("extra", "ann", "eve", 1.0)]
        results = [*simulate(self.STRENGTHS, sets=20, seed=8), *extra]
        intervals = bootstrap_bt(results, samples=100)
        assert intervals["eve"] == (-math.inf, math.inf)
        assert interval_known(intervals["ann"]) and intervals["ann"][0] < intervals["ann"][1]
        assert bootstrap_bt([], samples=10) == {}
        with pytest.raises(ValueError, match="samples"):
            bootstrap_bt(results, samples=0)


class TestLikelihoodOfSuperiority:
    """LOS follows the normal approximation on wins and losses per pair."""

    def test_values_by_hand(self) -> None:
        """Three wins, one loss and a draw give 0.5*(1+erf(2/sqrt(8))), and the pair sums to 1."""
        results = [GameResult("s", "ann", "bob", x) for x in (1.0, 1.0, 0.0, 0.5)] + [
            GameResult("s", "bob", "ann", 0.0)
        ]
        los = likelihood_of_superiority(results)
        assert los["ann"]["bob"] == pytest.approx(0.5 * (1.0 + math.erf(2.0 / math.sqrt(8.0))), abs=1e-15)
        assert los["ann"]["bob"] + los["bob"]["ann"] == pytest.approx(1.0, abs=1e-15)

    def test_only_draws_give_one_half_and_strangers_are_absent(self) -> None:
        """A pair that only drew is at 0.5, and bots that never met have no entry."""
        results = [GameResult("s", "ann", "bob", 0.5), GameResult("s", "cat", "dan", 1.0)]
        los = likelihood_of_superiority(results)
        assert los["ann"] == {"bob": 0.5}
        assert "cat" not in los["ann"]
        assert los["cat"]["dan"] > 0.5


class TestTables:
    """Cross table, games per pair and connectivity of the pairing graph."""

    RESULTS: ClassVar[list[GameResult]] = [
        GameResult("s0", "bob", "ann", 1.0),
        GameResult("s0", "ann", "bob", 0.5),
        GameResult("s1", "ann", "cat", 0.0),
    ]

    def test_cross_table(self) -> None:
        """Each cell holds the row bot's points and the games against the column bot."""
        table = cross_table(self.RESULTS)
        assert table == {
            "ann": {"bob": (0.5, 2), "cat": (0.0, 1)},
            "bob": {"ann": (1.5, 2)},
            "cat": {"ann": (1.0, 1)},
        }

    def test_games_per_pair(self) -> None:
        """Pairs are keyed in name order whichever side was a."""
        assert games_per_pair(self.RESULTS) == {("ann", "bob"): 2, ("ann", "cat"): 1}

    def test_two_disjoint_pairs_are_not_connected(self) -> None:
        """ann-bob and cat-dan never met, so there are two components."""
        results = [GameResult("s", "dan", "cat", 1.0), GameResult("s", "ann", "bob", 0.5)]
        assert not is_connected(results)
        assert components(results) == [["ann", "bob"], ["cat", "dan"]]
        assert not has_finite_mle(results)

    def test_a_chain_is_connected(self) -> None:
        """Bots linked through a common opponent form one component."""
        assert is_connected(self.RESULTS)
        assert components(self.RESULTS) == [["ann", "bob", "cat"]]
        assert is_connected([])


class TestStandings:
    """build_standings combines the ratings into one ordered, exportable table."""

    def test_rows_ordered_by_bt_with_all_fields(self) -> None:
        """Rows come by Bradley-Terry rating, and games and score add up per bot."""
        results = simulate({"ann": 0.0, "bob": 150.0, "cat": 300.0}, sets=10, seed=9)
        table = build_standings(results, samples=100, seed=2)
        assert [row.name for row in table.rows] == ["cat", "bob", "ann"]
        bt = bradley_terry(results)
        ci = bootstrap_bt(results, samples=100, seed=2)
        for row in table.rows:
            assert row.bt == bt[row.name]
            assert row.bt_ci95 == ci[row.name]
            assert row.elo == elo(results)[row.name]
            assert row.games == 40
        assert sum(row.score for row in table.rows) == len(results)
        assert table.connected
        assert not table.bt_prior_used

    def test_to_json_is_strict_json_with_null_for_skipped_intervals(self) -> None:
        """Without a bootstrap the intervals export as null, and the JSON round-trips."""
        results = [GameResult("s", "dan", "cat", 1.0), GameResult("s", "ann", "bob", 0.5)]
        table = build_standings(results, samples=0)
        data = json.loads(table.to_json())
        assert data["format"] == "gaigel.arena.standings.v1"
        assert data["rows"][0]["name"] == "dan"
        assert data["rows"][0]["bt_ci95"] == [None, None]
        assert data["connected"] is False
        assert data["bt_prior_used"] is True
        assert data["components"] == [["ann", "bob"], ["cat", "dan"]]
        assert data["cross_table"]["dan"]["cat"] == {"score": 1.0, "games": 1}
        assert data["los"]["ann"]["bob"] == 0.5

    def test_empty_and_bad_samples(self) -> None:
        """No results give an empty table; a negative sample count is refused."""
        empty = build_standings([])
        assert empty.rows == ()
        assert empty.connected
        with pytest.raises(ValueError, match="samples"):
            build_standings([], samples=-1)
