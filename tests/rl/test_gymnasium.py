"""Gymnasium's environment checker on the single-agent environment, and what the house bots do."""

from __future__ import annotations

import numpy as np
import pytest

from tests.rl.rlkit import need


@pytest.fixture(autouse=True)
def _gymnasium() -> None:
    need("gymnasium")
    need("pettingzoo")


@pytest.mark.parametrize(("players", "opponents"), [(2, "random"), (3, "first"), (4, "heuristic")])
def test_the_environment_checker_passes(players: int, opponents: str) -> None:
    from gymnasium.utils.env_checker import check_env

    from gaigel_rl.gymnasium_env import GaigelSingleEnv

    check_env(GaigelSingleEnv(players=players, opponents=opponents, hands=2), skip_render_check=True)


def _episode(seed: int) -> tuple[list[int], float]:
    from gaigel_rl.gymnasium_env import GaigelSingleEnv

    e = GaigelSingleEnv(players=4, opponents=["random", "heuristic", "random"], hands=3)
    obs, _ = e.reset(seed=seed)
    total, actions, done = 0.0, [], False
    while not done:
        a = int(np.flatnonzero(obs["action_mask"])[-1])
        actions.append(a)
        obs, reward, done, truncated, _ = e.step(a)
        assert not truncated
        total += reward
    assert e.legal_mask().sum() == 0
    return actions, total


def test_one_seed_one_episode_and_rewards_per_hand() -> None:
    a, ra = _episode(11)
    assert (a, ra) == _episode(11)
    assert -3 <= ra <= 3 and ra == int(ra)  # one of win +1 / loss -1 / void 0 per hand


def test_bad_settings_and_actions_are_refused() -> None:
    from gaigel_rl.gymnasium_env import GaigelSingleEnv

    with pytest.raises(ValueError, match="3 players need 2 opponents"):
        GaigelSingleEnv(players=3, opponents=["random"])
    with pytest.raises(ValueError, match="unknown bot 'nobody'"):
        GaigelSingleEnv(players=2, opponents="nobody")
    with pytest.raises(ValueError, match="on_illegal must be"):
        GaigelSingleEnv(on_illegal="ignore")
    e = GaigelSingleEnv(players=2, on_illegal="raise")
    obs, _ = e.reset(seed=0)
    illegal = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    with pytest.raises(ValueError, match="illegal action"):
        e.step(illegal)
    e = GaigelSingleEnv(players=2, illegal_reward=-5.0)
    e.reset(seed=0)
    obs, reward, done, _, info = e.step(illegal)
    assert (reward, done, info["illegal"], obs["action_mask"].sum()) == (-5.0, True, True, 0)
    with pytest.raises(RuntimeError, match="reset"):
        e.step(0)
