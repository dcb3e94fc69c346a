"""The observation tensor: the same from the engine and from the protocol, and blind to hidden cards."""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
import pytest

from gaigel.deal import deal
from gaigel.determinize import determinize
from gaigel.observation import Observation
from gaigel.ruleset import Ruleset, preset
from gaigel.state import GaigelState
from gaigel_rl.tensor import CARD_BLOCKS, FEATURES, encode, encode_proto, encode_state, layout, tensor_size
from gaigel_server import codec

GAMES = [(n, p) for n in (2, 3, 4, 6) for p in ("default", "parlett")]


def decisions(rules: Ruleset, seed: int, hands: int) -> Iterator[tuple[int, GaigelState, Observation]]:
    """Every decision of *hands* seeded hands played by a seeded random policy: (hand, state, observation)."""
    rng = random.Random(seed)
    n = rules.players
    for k in range(hands):
        state = GaigelState(rules, deal(seed, k, n, rules.deal_packets), forehand=k % n)
        while not state.is_terminal():
            seat = state.to_act
            yield k, state, state.observation(seat)
            state.apply(rng.choice(state.legal_actions()))


@pytest.mark.parametrize(("players", "name"), GAMES)
def test_tensor_from_the_protocol_equals_the_tensor_from_the_engine(players: int, name: str) -> None:
    rules = preset(name, players)
    sides = [rules.seats_of(x) for x in range(rules.num_sides)]
    count = 0
    for k, state, obs in decisions(rules, seed=players * 7 + len(name), hands=8):
        mine = encode(obs)
        theirs = encode_proto(codec.observation(obs, k), sides)
        assert mine.shape == (tensor_size(players, rules.num_sides),)
        where = f"hand {k}, seat {obs.seat}, phase {obs.phase}"
        np.testing.assert_array_equal(mine, theirs, err_msg=where)
        for seat in range(players):  # the fast path from the state, for the one to act and the others
            np.testing.assert_array_equal(encode_state(state, seat), encode(state.observation(seat)), err_msg=where)
        count += 1
    assert count >= 16  # (random Aus calls end many parlett hands early)


@pytest.mark.parametrize(("players", "name"), GAMES)
def test_tensor_never_depends_on_hidden_cards(players: int, name: str) -> None:
    """The hidden cards (other hands, the talon order, face-down cards) swapped: the same tensor."""
    rules = preset(name, players)
    rng = random.Random(players)
    swapped = total = 0
    for _, state, obs in decisions(rules, seed=100 + players, hands=6):
        total += 1
        other = determinize(obs, rules, rng)
        seat = obs.seat
        if (
            any(other.hands[s] != state.hands[s] for s in range(players) if s != seat)
            or other.talon[other.tpos :] != state.talon[state.tpos :]
        ):
            swapped += 1
        np.testing.assert_array_equal(encode(other.observation(seat)), encode(obs))
        np.testing.assert_array_equal(encode_state(other, seat), encode_state(state, seat))
    assert swapped > total // 2  # the hidden cards really were different


def test_blocks_cover_the_tensor_and_each_bit_comes_from_its_block() -> None:
    rules = Ruleset(players=4)
    lay = layout(4, 2)
    assert sum(size for _, size in lay.values()) == tensor_size(4, 2)
    assert [name for name, _, _ in FEATURES] == list(lay)
    assert list(lay)[: len(CARD_BLOCKS)] == list(CARD_BLOCKS)
    _, state, obs = next(decisions(rules, seed=1, hands=1))
    v = encode(obs)
    start, size = lay["hand"]
    assert sorted(np.flatnonzero(v[start : start + size]).tolist()) == sorted(obs.hand)
    start, _ = lay["to_act"]
    assert v[start] == 1.0  # relative seat 0: the observer is the one to act
    start, _ = lay["partners"]
    assert v[start : start + 4].tolist() == [1.0, 0.0, 1.0, 0.0]
    start, _ = lay["trump_card"]
    assert v[start + state.trump_card] == 1.0


def test_a_seat_sees_itself_at_relative_seat_zero() -> None:
    """Every seat's tensor puts its own hand and its own plays at entry 0: one policy plays every seat."""
    rules = Ruleset(players=3)
    lay = layout(3, 3)
    start, _ = lay["played"]
    for _, state, obs in decisions(rules, seed=5, hands=1):
        if not obs.tricks:
            continue
        v = encode(obs)
        mine = {c for t in obs.tricks for j, c in enumerate(t.cards) if (t.leader + j) % 3 == obs.seat}
        assert set(np.flatnonzero(v[start : start + 48]).tolist()) == mine
        _ = state


def test_docs_list_every_block_with_its_size_and_meaning() -> None:
    """docs/rl.md's table of blocks is FEATURES: same order, sizes and meanings."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "rl.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \| ([^|]+) \|$", text, flags=re.M)
    assert [name for name, _, _ in rows] == [name for name, _, _ in FEATURES]
    for (name, size, meaning), (_, width, doc) in zip(rows, FEATURES, strict=True):
        assert meaning.strip() == doc, name
        for n, k in ((2, 2), (3, 3), (4, 2), (6, 3)):
            assert eval(size, {"n": n, "k": k}) == width(n, k), name
    sizes = re.search(r"489 at 2 players, 653 at 3, 809 at 4, 1129 at 6 \(2x3 teams\), 1133 at 6", text)
    assert sizes and [
        tensor_size(2, 2),
        tensor_size(3, 3),
        tensor_size(4, 2),
        tensor_size(6, 2),
        tensor_size(6, 3),
    ] == [
        489,
        653,
        809,
        1129,
        1133,
    ]
