"""Bot seeds (gaigel/botseed.py) and the search bot's playout budget."""

from __future__ import annotations

import hashlib
import hmac
import itertools
from typing import Any

import pytest

from gaigel.bots import SearchBot, make_bot
from gaigel.botseed import MAX_MATCH_KEY, bot_seed, bot_seeds, check_match_key
from gaigel.match import Bot, MatchSpec, play_match
from gaigel.ruleset import preset


def test_derivation_is_the_documented_hmac() -> None:
    """The value docs/bot-guide.md prints, and an HMAC-SHA256 computed here from its definition."""
    assert bot_seed(2026, 1, "s0000-r0-random-first") == 18168707402610798688
    for seed, seat, key in [(0, 0, ""), (2**64 - 1, 5, "ä-key"), (7, 3, "m:1:2")]:
        digest = hmac.new(seed.to_bytes(8, "big"), f"gaigel-bot-seed-v1:{seat}:{key}".encode(), hashlib.sha256)
        assert bot_seed(seed, seat, key) == int.from_bytes(digest.digest()[:8], "big")


def test_seeds_differ_by_seat_key_and_seed() -> None:
    """Every seat, key and seed gets its own bot seed; none is the match seed itself."""
    seen = {bot_seed(seed, seat, key) for seed, seat, key in itertools.product([1, 2], range(6), ["a", "b"])}
    assert len(seen) == 24
    assert bot_seeds(1, 4, "a") == [bot_seed(1, s, "a") for s in range(4)]
    assert 1 not in seen and 2 not in seen


@pytest.mark.parametrize(("seed", "seat"), [(-1, 0), (2**64, 0), (1, -1)])
def test_bad_seed_or_seat_is_refused(seed: int, seat: int) -> None:
    with pytest.raises(ValueError, match=r"seed|seat"):
        bot_seed(seed, seat, "k")


def test_match_key_length_is_capped() -> None:
    check_match_key("k" * MAX_MATCH_KEY)
    with pytest.raises(ValueError, match="at most 512"):
        check_match_key("k" * (MAX_MATCH_KEY + 1))


def _search_match(monkeypatch: pytest.MonkeyPatch, step: float, max_seconds: float) -> tuple[list[Any], bool]:
    """The actions of a one-hand match of the search bot whose clock advances *step* s per reading."""
    clock = itertools.count()
    monkeypatch.setattr("gaigel.bots.search.time.perf_counter", lambda: next(clock) * step)
    bot = SearchBot(samples=6, max_seconds=max_seconds)
    capped = False

    class Watch(Bot):
        def decide(self, request: Any) -> int:
            nonlocal capped
            choice = bot.decide(request)
            capped = capped or bot.time_capped
            return choice

        def start_match(self, spec: MatchSpec, seat: int) -> None:
            bot.start_match(spec, seat)

    spec = MatchSpec(ruleset=preset("default", 2), seed=11, hands=1, bots=("search", "random"))
    _, record = play_match(spec, [Watch(), make_bot("random")])
    assert record is not None
    return [(a["seat"], a["action"]) for a in record["hands"][0]["actions"]], capped


def test_search_bot_does_not_depend_on_the_machines_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fast and a slow clock (1 s per sample, under the 10 s cap) give the same choices, never capped."""
    fast, fast_capped = _search_match(monkeypatch, 1e-6, 10.0)
    slow, slow_capped = _search_match(monkeypatch, 1.0, 10.0)
    assert fast == slow
    assert not fast_capped and not slow_capped


def test_search_bot_says_when_its_safety_cap_fires(monkeypatch: pytest.MonkeyPatch) -> None:
    """A clock past the cap after every sample stops the search early and sets time_capped."""
    _, capped = _search_match(monkeypatch, 100.0, 10.0)
    assert capped
