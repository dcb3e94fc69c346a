"""PettingZoo's own api_test and seed_test on the AEC environment, and duplicate evaluation."""

from __future__ import annotations

import numpy as np
import pytest

from tests.rl.rlkit import need


@pytest.fixture(autouse=True)
def _pettingzoo() -> None:
    need("pettingzoo")


@pytest.mark.parametrize(("players", "preset"), [(2, "default"), (3, "parlett"), (4, "default"), (6, "parlett")])
def test_api_test_passes(players: int, preset: str) -> None:
    from pettingzoo.test import api_test

    from gaigel_rl.pettingzoo_env import env

    api_test(env(players=players, preset=preset, hands=2), num_cycles=200)


def test_seed_test_passes() -> None:
    from pettingzoo.test import seed_test

    from gaigel_rl.pettingzoo_env import env

    seed_test(lambda: env(players=4, hands=2), num_cycles=300)


def _play(
    e: object, seed: int | None, options: dict[str, int] | None, policy_seed: int
) -> tuple[list[int], dict[str, float]]:
    """Plays one episode by always choosing the lowest legal id: (actions, total rewards)."""
    from gaigel_rl.pettingzoo_env import GaigelEnv

    assert isinstance(e, GaigelEnv)
    e.reset(seed=seed, options=options)
    rng = np.random.default_rng(policy_seed)
    actions, totals = [], dict.fromkeys(e.possible_agents, 0.0)
    for agent in e.agent_iter():
        obs, reward, term, trunc, _ = e.last()
        totals[agent] += reward
        if term or trunc:
            e.step(None)
            continue
        legal = np.flatnonzero(obs["action_mask"])
        a = int(rng.choice(legal))
        actions.append(a)
        e.step(a)
    return actions, totals


def test_a_seating_replays_the_same_deal_with_the_cards_at_other_agents() -> None:
    from gaigel_rl.pettingzoo_env import env

    e = env(players=2)
    e.reset(options={"deal_seed": 42, "seating": 0})
    hand0 = e.episode.state.hand(e.episode.seat_of(0)) if e.episode else None
    e.reset(options={"deal_seed": 42, "seating": 1})
    assert e.episode is not None
    assert e.episode.state.hand(e.episode.seat_of(1)) == hand0  # agent 1 now holds agent 0's cards
    a, ra = _play(env(players=2, hands=3), None, {"deal_seed": 7, "seating": 1}, 3)
    b, rb = _play(env(players=2, hands=3), None, {"deal_seed": 7, "seating": 1}, 3)
    assert (a, ra) == (b, rb)
    assert sum(ra.values()) == pytest.approx(0.0)  # two sides: one wins what the other loses (or a void hand)


def test_teams_share_rewards_and_bad_input_is_refused() -> None:
    from gaigel_rl.pettingzoo_env import env

    _, totals = _play(env(players=4, hands=2), 5, None, 1)
    assert totals["player_0"] == totals["player_2"] and totals["player_1"] == totals["player_3"]
    e = env(players=4)
    with pytest.raises(ValueError, match=r"seating must be 0\.\.3"):
        e.reset(options={"seating": 4})
    e.reset(seed=1)
    obs, *_ = e.last()
    illegal = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    with pytest.raises(ValueError, match="illegal action"):
        e.step(illegal)
