"""Gaigel as a Gymnasium single-agent environment: one seat learns, house bots play the others.

>>> from gaigel_rl.gymnasium_env import GaigelSingleEnv
>>> e = GaigelSingleEnv(players=2, opponents="random")
>>> obs, info = e.reset(seed=3)
>>> obs["observation"].shape == e.observation_space["observation"].shape
True

The observation and action spaces are the PettingZoo environment's; mask with
``obs["action_mask"]``. An illegal action ends the episode with reward ``illegal_reward``
and ``info["illegal"]`` set (``on_illegal="raise"`` raises ``ValueError`` instead). The
house bots (``random``, ``first``, ``heuristic``, ``search``: gaigel.bots) are seeded
from the episode's deal seed, so ``reset(seed=S)`` replays the same episode.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gaigel.actions import NUM_ACTIONS
from gaigel.bots import make_bot
from gaigel.botseed import bot_seed, spec_for_bot
from gaigel.deal import MAX_SEED
from gaigel.match import Bot, DecisionRequest
from gaigel_rl.core import Episode, Rewards, make_rules
from gaigel_rl.pettingzoo_env import observation_space
from gaigel_rl.tensor import action_mask, encode_state


class GaigelSingleEnv(gym.Env[dict[str, Any], np.int64]):
    """The learner is agent 0; *opponents* names one house bot for every other seat, or one per seat."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (the Env base declares it an instance variable)

    def __init__(
        self,
        players: int = 2,
        opponents: str | Sequence[str] = "random",
        preset: str = "default",
        options: Mapping[str, Any] | None = None,
        hands: int = 1,
        rewards: Rewards | None = None,
        on_illegal: str = "lose",
        illegal_reward: float = -1.0,
    ) -> None:
        if on_illegal not in ("lose", "raise"):
            raise ValueError(f"on_illegal must be 'lose' or 'raise', got {on_illegal!r}")
        self.on_illegal = on_illegal
        self.illegal_reward = illegal_reward
        self._ended = False
        self.rules = make_rules(players, preset, options)
        names = [opponents] * (players - 1) if isinstance(opponents, str) else list(opponents)
        if len(names) != players - 1:
            raise ValueError(f"{players} players need {players - 1} opponents, got {len(names)}")
        self.opponents: list[Bot] = [make_bot(name) for name in names]
        self.hands = hands
        self.reward_config = rewards or Rewards()
        self.observation_space = observation_space(players, self.rules.num_sides)
        self.action_space = spaces.Discrete(NUM_ACTIONS)
        self._rng = random.Random()
        self.episode: Episode | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._rng = random.Random(seed)
        opts = options or {}
        given = opts.get("deal_seed")
        while True:
            deal_seed = self._rng.randint(0, MAX_SEED) if given is None else int(given)
            ep = self.episode = Episode(
                self.rules, self.hands, deal_seed, int(opts.get("seating", 0)), self.reward_config
            )
            for i, bot in enumerate(self.opponents, start=1):
                seat = ep.seat_of(i)
                bot.start_match(spec_for_bot(ep.spec, bot_seed(ep.spec.seed, seat, "gymnasium")), seat)
            self._reward = 0.0
            self._ended = False
            self._advance()
            # An episode over before the learner's first decision (five Sevens dealt, a redeal)
            # is dealt again from the next seed; with a given deal seed it is returned as it is,
            # with an empty action mask and info["over"] set.
            if not ep.over or given is not None:
                break
        return self._obs(), self._info()

    def step(self, action: np.int64 | int) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        ep = self.episode
        assert ep is not None, "reset() first"
        if ep.over or self._ended:
            raise RuntimeError("the episode is over: reset() first")
        self._reward = 0.0
        action = int(action)
        if self.on_illegal == "lose" and action not in ep.legal():
            self._ended = True
            return self._obs(), self.illegal_reward, True, False, {**self._info(), "illegal": True}
        self._add(ep.apply(action))
        self._advance()
        return self._obs(), self._reward, ep.over, False, self._info()

    def _add(self, paid: list[float] | None) -> None:
        if paid is not None:
            self._reward += paid[0]

    def _advance(self) -> None:
        """Lets the house bots play until the learner is to act or the episode is over."""
        ep = self.episode
        assert ep is not None
        while not ep.over and (agent := ep.to_act()) != 0:
            state = ep.state
            seat = state.to_act
            request = DecisionRequest(
                seat, ep.hand_index, tuple(ep.legal()), partial(state.observation, seat), self.rules
            )
            self._add(ep.apply(self.opponents[agent - 1].decide(request)))

    def _obs(self) -> dict[str, Any]:
        ep = self.episode
        assert ep is not None
        legal = [] if ep.over or self._ended else ep.legal()
        return {"observation": encode_state(ep.state, ep.seat_of(0)), "action_mask": action_mask(legal)}

    def _info(self) -> dict[str, Any]:
        ep = self.episode
        assert ep is not None
        return {"seat": ep.seat_of(0), "hand_index": ep.hand_index, "over": ep.over or self._ended}

    def legal_mask(self) -> np.ndarray[Any, np.dtype[np.int8]]:
        """The learner's action mask now (all zero once the episode is over)."""
        return self._obs()["action_mask"]  # type: ignore[no-any-return]
