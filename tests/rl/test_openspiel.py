"""The OpenSpiel game: OpenSpiel's own random_sim_test, golden playthroughs, IS-MCTS and resampling."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.rl.rlkit import need

sys.path.insert(0, str(Path(__file__).parent / "golden"))
import regenerate


@pytest.fixture(autouse=True)
def pyspiel() -> ModuleType:
    module = need("pyspiel")
    need("gaigel_rl.openspiel_game")  # registers python_gaigel
    return module


@pytest.mark.parametrize("game", [*regenerate.GAMES.values(), "python_gaigel(players=4,preset=parlett)"])
def test_random_sim_test_passes(pyspiel: ModuleType, game: str) -> None:
    pyspiel.random_sim_test(pyspiel.load_game(game), num_sims=3, serialize=False, verbose=False)


@pytest.mark.parametrize("players", list(regenerate.GAMES))
def test_the_playthrough_matches_its_golden_file(players: int) -> None:
    golden = regenerate.path(players).read_text(encoding="utf-8")
    assert regenerate.playthrough(players) == golden, (
        f"{regenerate.path(players).name} differs (if the change is intended: python tests/rl/golden/regenerate.py)"
    )


def test_bad_parameters_are_refused(pyspiel: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"players must be 2, 3, 4 or 6"):
        pyspiel.load_game("python_gaigel(players=5)")
    with pytest.raises(ValueError, match=r"option target must be an integer in 1\.\.1000, got 0"):
        pyspiel.load_game('python_gaigel(options={"target":0})')
    assert pyspiel.load_game('python_gaigel(options={"target":61})').rules.target == 61
    with pytest.raises(ValueError, match="unknown ruleset preset 'house'"):
        pyspiel.load_game("python_gaigel(preset=house)")


def _dealt(pyspiel: ModuleType, game: object, rng: np.random.RandomState) -> object:
    state = game.new_initial_state()  # type: ignore[attr-defined]
    while state.is_chance_node():
        outcomes, probs = zip(*state.chance_outcomes(), strict=True)
        state.apply_action(int(rng.choice(outcomes, p=probs)))
    return state


@pytest.mark.parametrize("players", [2, 3, 4, 6])
def test_resample_from_infostate_keeps_everything_the_player_knows(pyspiel: ModuleType, players: int) -> None:
    game = pyspiel.load_game(f"python_gaigel(players={players})")
    rng = np.random.RandomState(players)
    sampler = pyspiel.UniformProbabilitySampler(0.0, 1.0)
    checked = changed = 0
    for _ in range(2):
        state = _dealt(pyspiel, game, rng)
        while not state.is_terminal():
            p = state.current_player()
            other = state.resample_from_infostate(p, sampler)
            assert other.information_state_string(p) == state.information_state_string(p)
            assert other.observation_string(p) == state.observation_string(p)
            np.testing.assert_array_equal(other.observation_tensor(p), state.observation_tensor(p))
            assert other.legal_actions(p) == state.legal_actions(p)
            held = [other.gs.hands[s] for s in range(players)]
            assert held[p] == state.gs.hands[p]
            changed += held != [state.gs.hands[s] for s in range(players)]
            checked += 1
            state.apply_action(int(rng.choice(state.legal_actions())))
    assert changed > checked // 2  # the unseen cards really were redrawn


def test_ismcts_plays_hands_without_an_illegal_action(pyspiel: ModuleType) -> None:
    from open_spiel.python.algorithms import ismcts, mcts

    for players, searching in ((2, (0, 1)), (4, (0, 3))):
        game = pyspiel.load_game(f"python_gaigel(players={players})")
        rng = np.random.RandomState(players)
        bots = {
            p: ismcts.ISMCTSBot(
                game,
                mcts.RandomRolloutEvaluator(1, rng),
                uct_c=2.0,
                max_simulations=8,
                random_state=rng,
                allow_inconsistent_action_sets=True,
            )
            for p in searching
        }
        for _ in range(2 if players == 2 else 1):
            state = _dealt(pyspiel, game, rng)
            for bot in bots.values():
                bot.reset()
            while not state.is_terminal():
                p = state.current_player()
                legal = state.legal_actions()
                action = bots[p].step(state) if p in bots else int(rng.choice(legal))
                assert action in legal
                state.apply_action(action)
            returns = state.returns()
            assert sorted(set(returns)) in ([-1.0, 1.0], [0.0])
