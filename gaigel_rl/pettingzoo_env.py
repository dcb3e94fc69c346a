"""Gaigel as a PettingZoo ``AECEnv``: agents ``player_0..``, Dict observations with an action mask.

>>> from gaigel_rl.pettingzoo_env import env
>>> e = env(players=2)
>>> e.reset(seed=1)
>>> obs, reward, termination, truncation, info = e.last()
>>> sorted(obs)
['action_mask', 'observation']

Actions are the protocol's ids 0..164 (:mod:`gaigel.actions`); ``action_mask`` marks the
legal ones of the agent to act (all zero for the others). ``reset(seed=S)`` draws the deal
seed from *S* (so two environments reset with one seed play identically);
``reset(options={"deal_seed": D, "seating": k})`` plays the deals of match seed *D*
with agent *a* at seat ``(a + k) % players`` (duplicate evaluation, docs/rl.md).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from gaigel.actions import NUM_ACTIONS, action_label
from gaigel.deal import MAX_SEED
from gaigel_rl.core import Episode, Rewards, make_rules
from gaigel_rl.tensor import action_mask, encode_state, tensor_size


def observation_space(players: int, sides: int) -> spaces.Dict:
    """The Dict space of one agent's observation."""
    return spaces.Dict(
        {
            "observation": spaces.Box(0.0, np.inf, (tensor_size(players, sides),), np.float32),
            "action_mask": spaces.MultiBinary(NUM_ACTIONS),
        }
    )


class GaigelEnv(AECEnv[str, dict[str, Any], int]):
    """Gaigel for 2, 3, 4 or 6 players (teams at 4 and 6 share rewards), *hands* hands an episode."""

    metadata: ClassVar[dict[str, Any]] = {"name": "gaigel_v0", "render_modes": ["ansi"], "is_parallelizable": False}

    def __init__(
        self,
        players: int = 2,
        preset: str = "default",
        options: Mapping[str, Any] | None = None,
        hands: int = 1,
        rewards: Rewards | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        self.rules = make_rules(players, preset, options)
        if hands < 1:
            raise ValueError(f"an episode needs at least one hand, got {hands}")
        self.hands = hands
        self.reward_config = rewards or Rewards()
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {render_mode!r}")
        self.render_mode = render_mode
        self.possible_agents = [f"player_{i}" for i in range(players)]
        self._index = {a: i for i, a in enumerate(self.possible_agents)}
        space = observation_space(players, self.rules.num_sides)
        self.observation_spaces = dict.fromkeys(self.possible_agents, space)
        self.action_spaces = {a: spaces.Discrete(NUM_ACTIONS) for a in self.possible_agents}
        self._rng = random.Random()
        self.episode: Episode | None = None

    def observation_space(self, agent: str) -> spaces.Space[Any]:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space[Any]:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        if seed is not None:
            self._rng = random.Random(seed)
        opts = options or {}  # other keys are ignored: PettingZoo's api_test passes some
        deal_seed = opts.get("deal_seed")
        seating = opts.get("seating", 0)
        if deal_seed is None:
            deal_seed = self._rng.randint(0, MAX_SEED)
        self.episode = Episode(self.rules, self.hands, int(deal_seed), int(seating), self.reward_config)
        self.agents = self.possible_agents[:]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        self._paid = False
        if self.episode.over:  # every hand ended at the deal
            self._pay(self.episode.carry)
            self._accumulate_rewards()
            self.terminations = dict.fromkeys(self.agents, True)
        self.agent_selection = self.possible_agents[self.episode.to_act() if not self.episode.over else 0]
        self._set_infos()

    def observe(self, agent: str) -> dict[str, Any]:
        ep = self.episode
        assert ep is not None, "reset() first"
        i = self._index[agent]
        legal = ep.legal() if not ep.over and ep.to_act() == i else []
        return {"observation": encode_state(ep.state, ep.seat_of(i)), "action_mask": action_mask(legal)}

    def step(self, action: int | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        ep = self.episode
        assert ep is not None and action is not None
        self._cumulative_rewards[agent] = 0.0
        if self._paid:  # (most steps pay nothing: reset the dicts only after a payout)
            self.rewards = dict.fromkeys(self.agents, 0.0)
            self._paid = False
        paid = ep.apply(int(action))
        if paid is not None:
            self._pay(paid)
            self._set_infos()  # a new hand: the infos' hand index changed
            self._accumulate_rewards()
        if ep.over:
            self.terminations = dict.fromkeys(self.agents, True)
        else:
            self.agent_selection = self.possible_agents[ep.to_act()]

    def _pay(self, paid: list[float]) -> None:
        self.rewards = {a: paid[i] for i, a in enumerate(self.possible_agents)}
        self._paid = True

    def _set_infos(self) -> None:
        ep = self.episode
        assert ep is not None
        for i, a in enumerate(self.possible_agents):
            self.infos[a] = {"seat": ep.seat_of(i), "hand_index": ep.hand_index}

    def render(self) -> str | None:
        if self.render_mode != "ansi" or self.episode is None:
            return None
        ep = self.episode
        legal = ", ".join(action_label(a) for a in ep.state.legal_actions()) if not ep.over else "-"
        return f"hand {ep.hand_index}\n{ep.state}\nlegal: {legal}"

    def close(self) -> None:
        pass


def env(**kwargs: Any) -> GaigelEnv:
    """A new :class:`GaigelEnv` (the PettingZoo ``env()`` convention)."""
    return GaigelEnv(**kwargs)
