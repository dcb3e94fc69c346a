"""Gaigel as an OpenSpiel Python game, registered with pyspiel as ``python_gaigel``.

>>> import pyspiel
>>> import gaigel_rl.openspiel_game  # registers the game
>>> game = pyspiel.load_game("python_gaigel(players=4,preset=default)")
>>> game.num_players(), game.num_distinct_actions()
(4, 165)

One game is one hand. Chance deals it: 47 explicit chance nodes shuffle the deck one card
at a time (uniform over the cards left; the 48th follows), then the cards go out as in
DEALS.md (packets 3-T-2 or 5-T) with player 0 as forehand. Players act with the
protocol's action ids; the returns at the end are the hand's result per player (win +1,
loss -1, void 0; partners share). Two sides (2 players, 4, 6 as 2x3) make it zero-sum,
otherwise general-sum. Parameters: ``players`` (2, 3, 4, 6), ``preset``
(``default``, ``parlett``) and ``options``, a JSON object of RULES.md §14 options.

The observer gives the seat's observation as a string and as the tensor of
:mod:`gaigel_rl.tensor`; with perfect recall the string also lists the seat's history
(its dealt hand, what it drew, every action with face-down cards of others hidden).
:meth:`GaigelOSState.resample_from_infostate` draws a full state consistent with one
player's observation (:mod:`gaigel.determinize`), which OpenSpiel's IS-MCTS needs.
"""

from __future__ import annotations

import enum
import json
import random
from typing import Any

import numpy as np
import numpy.typing as npt
import pyspiel

from gaigel.actions import NUM_ACTIONS, action_label, played_card
from gaigel.cards import card_code, cards_of
from gaigel.deal import Deal
from gaigel.determinize import determinize
from gaigel.observation import Observation
from gaigel.ruleset import Opening, Ruleset
from gaigel.state import GaigelState
from gaigel_rl.core import Rewards, make_rules
from gaigel_rl.tensor import SCALARS, encode_state, layout, tensor_size

SHORT_NAME = "python_gaigel"
_FACE_DOWN_OPENINGS = (Opening.ANDERE_ALTE, Opening.HOEHER_HAT, Opening.TRUMPF_HOEHER)
"""Openings whose trick 1 is played face down (RULES.md §4)."""
_DEFAULTS: dict[str, Any] = {"players": 2, "preset": "default", "options": ""}
_MAX_GAME_LENGTH = 47 + 48 * 5 + 16
"""The deal's chance nodes, then at most the 48 plays with an Aus window answer per seat after each and the rest."""


def _rules(params: dict[str, Any]) -> Ruleset:
    text = str(params.get("options", "") or "")
    options = json.loads(text) if text else None
    if options is not None and not isinstance(options, dict):
        raise ValueError(f"options must be a JSON object of ruleset options, got {text!r}")
    return make_rules(int(params.get("players", 2)), str(params.get("preset", "default")), options)


def _game_type(rules_two_sided: bool) -> pyspiel.GameType:
    return pyspiel.GameType(
        short_name=SHORT_NAME,
        long_name="Gaigel (Python, gaigel_rl)",
        dynamics=pyspiel.GameType.Dynamics.SEQUENTIAL,
        chance_mode=pyspiel.GameType.ChanceMode.EXPLICIT_STOCHASTIC,
        information=pyspiel.GameType.Information.IMPERFECT_INFORMATION,
        utility=pyspiel.GameType.Utility.ZERO_SUM if rules_two_sided else pyspiel.GameType.Utility.GENERAL_SUM,
        reward_model=pyspiel.GameType.RewardModel.TERMINAL,
        max_num_players=6,
        min_num_players=2,
        provides_information_state_string=True,
        provides_information_state_tensor=False,
        provides_observation_string=True,
        provides_observation_tensor=True,
        parameter_specification=_DEFAULTS,
    )


_REGISTERED_TYPE = _game_type(True)


class GaigelOSGame(pyspiel.Game):
    """The game: rules from the parameters, one hand per episode."""

    def __init__(self, params: dict[str, Any] | None = None) -> None:
        merged = {**_DEFAULTS, **(params or {})}
        self.rules = _rules(merged)
        self.rewards = Rewards()
        two = self.rules.num_sides == 2
        info = pyspiel.GameInfo(
            num_distinct_actions=NUM_ACTIONS,
            max_chance_outcomes=48,
            num_players=self.rules.players,
            min_utility=-1.0,
            max_utility=1.0,
            utility_sum=0.0 if two else None,
            max_game_length=_MAX_GAME_LENGTH,
        )
        super().__init__(_game_type(two), info, merged)

    def new_initial_state(self) -> GaigelOSState:
        return GaigelOSState(self)

    def make_py_observer(self, iig_obs_type: Any = None, params: Any = None) -> GaigelObserver:
        if iig_obs_type is None:
            return GaigelObserver(self.rules, ObsKind.SEAT, params)
        private = iig_obs_type.private_info == pyspiel.PrivateInfoType.SINGLE_PLAYER
        if iig_obs_type.perfect_recall:
            kind = ObsKind.HISTORY
        elif iig_obs_type.public_info and private:
            kind = ObsKind.SEAT
        elif iig_obs_type.public_info:
            kind = ObsKind.PUBLIC
        else:
            kind = ObsKind.PRIVATE
        return GaigelObserver(self.rules, kind, params)


class GaigelOSState(pyspiel.State):
    """A hand: the chance nodes of the deal, then the engine's :class:`GaigelState`."""

    def __init__(self, game: GaigelOSGame) -> None:
        super().__init__(game)
        self.rules = game.rules
        self.reward_config = game.rewards
        self.deck: list[int] = []
        self.gs: GaigelState | None = None
        self.logs: list[list[str]] = [[] for _ in range(game.rules.players)]
        """Per player, its private history for the information state string."""

    # --- pyspiel API ---

    def current_player(self) -> int:
        gs = self.gs
        if gs is None:
            return int(pyspiel.PlayerId.CHANCE)
        if gs.is_terminal():
            return int(pyspiel.PlayerId.TERMINAL)
        return gs.to_act

    def _legal_actions(self, player: int) -> list[int]:
        assert self.gs is not None
        return self.gs.legal_actions()

    def chance_outcomes(self) -> list[tuple[int, float]]:
        left = sorted(set(range(48)) - set(self.deck))
        p = 1.0 / len(left)
        return [(c, p) for c in left]

    def _apply_action(self, action: int) -> None:
        gs = self.gs
        if gs is None:
            self.deck.append(action)
            if len(self.deck) == 47:
                self.deck.extend(set(range(48)) - set(self.deck))
                self._deal()
            return
        seat = gs.to_act
        before = list(gs.hands)
        hidden = gs.face_down and played_card(action) is not None
        gs.apply(action)
        for p, log in enumerate(self.logs):
            log.append(f"{seat}:{'play ?' if hidden and p != seat else action_label(action)}")
            gained = gs.hands[p] & ~before[p]
            if gained:
                log.append("got " + " ".join(map(card_code, cards_of(gained))))

    def _deal(self) -> None:
        d = Deal.from_deck(self.deck, self.rules.players, self.rules.deal_packets)
        self.gs = GaigelState(self.rules, d, forehand=0)
        for p, log in enumerate(self.logs):
            log.append("hand " + " ".join(map(card_code, self.gs.hand(p))))

    def _action_to_string(self, player: int, action: int) -> str:
        if player == pyspiel.PlayerId.CHANCE:
            return f"deal {card_code(action)}"
        return action_label(action)

    def is_terminal(self) -> bool:
        return self.gs is not None and self.gs.is_terminal()

    def returns(self) -> list[float]:
        n = self.rules.players
        outcome = None if self.gs is None else self.gs.outcome()
        if outcome is None:
            return [0.0] * n
        return [self.reward_config.of(outcome, self.rules.side_of(p)) for p in range(n)]

    def resample_from_infostate(self, player_id: int, probability_sampler: Any) -> GaigelOSState:
        """A state drawn from those *player_id* cannot tell from this one (its observation equal)."""
        gs = self.gs
        if gs is None:
            raise pyspiel.SpielError("resample_from_infostate before the deal is complete")
        rng = random.Random(int(probability_sampler() * (1 << 53)))
        out = GaigelOSState(self.get_game())
        out.deck = []  # the deck order is hidden: the sampled state has none
        out.logs = [log[:] for log in self.logs]
        if gs.is_terminal():
            out.gs = gs.clone()
        else:
            out.gs = determinize(gs.observation(player_id), self.rules, rng)
        return out

    def __str__(self) -> str:
        if self.gs is None:
            return "dealing: " + " ".join(map(card_code, self.deck))
        return str(self.gs)

    def observation_of(self, player: int) -> Observation | None:
        """*player*'s observation (None while dealing)."""
        return None if self.gs is None else self.gs.observation(player)


class ObsKind(enum.Enum):
    """What an observer shows (OpenSpiel's IIGObservationType, as far as Gaigel has it)."""

    SEAT = "seat"
    """The seat's observation: the tensor of :mod:`gaigel_rl.tensor` and its text."""
    HISTORY = "history"
    """Perfect recall: the observation's text and the seat's history (information state; no tensor)."""
    PUBLIC = "public"
    """Only what every seat sees: the observation's text without the hand (no tensor)."""
    PRIVATE = "private"
    """Only the seat's own cards (no tensor)."""


class GaigelObserver:
    """The PyObserver of the game (see :class:`ObsKind`)."""

    def __init__(self, rules: Ruleset, kind: ObsKind, params: Any) -> None:
        if params:
            raise ValueError(f"observation parameters are not supported, got {params}")
        self.kind = kind
        n, k = rules.players, rules.num_sides
        self.tensor: npt.NDArray[np.float32] | None = None
        self.dict: dict[str, npt.NDArray[np.float32]] = {}
        if kind is ObsKind.SEAT:
            self.tensor = np.zeros(tensor_size(n, k), np.float32)
            # Two views, the 0/1 blocks and the fractions, so that a playthrough prints the
            # first compactly (binvec); gaigel_rl.tensor.layout names every block.
            bits = layout(n, k)[min(SCALARS, key=lambda name: layout(n, k)[name][0])][0]
            self.dict = {"bits": self.tensor[:bits], "fractions": self.tensor[bits:]}

    def set_from(self, state: GaigelOSState, player: int) -> None:
        if self.tensor is None:
            return
        if state.gs is None:
            self.tensor.fill(0.0)
        else:
            encode_state(state.gs, player, self.tensor)

    def string_from(self, state: GaigelOSState, player: int) -> str:
        obs = state.observation_of(player)
        kind = self.kind
        if obs is None:
            return "dealing" if kind is ObsKind.PUBLIC else f"p{player} dealing"
        if kind is ObsKind.PRIVATE:
            return f"p{player} hand " + " ".join(map(card_code, obs.hand))
        text = describe(obs, hand=kind is not ObsKind.PUBLIC)
        if kind is ObsKind.HISTORY:
            text += " | history " + ", ".join(state.logs[player])
        return text


def describe(obs: Observation, hand: bool = True) -> str:
    """A compact one-line text of an observation (without the hand and the seat for *hand* false:
    the public part; the current trick then hides the seat's own face-down card too)."""
    c = card_code
    hidden = not hand and not obs.tricks and obs.opening in _FACE_DOWN_OPENINGS  # face down to the public
    parts = [
        f"p{obs.seat} {obs.phase}" if hand else obs.phase,
        f"to_act {obs.to_act}",
        *(["hand " + " ".join(map(c, obs.hand))] if hand else []),
        f"trump {c(obs.trump_card)}",
        f"up {c(obs.face_up_card) if obs.face_up_card is not None else '-'}",
        f"talon {obs.talon_size}",
        "trick " + " ".join(f"{s}:{'?' if x is None or hidden else c(x)}" for s, x in obs.current_trick),
        "tricks " + ";".join(f"{t.leader}>{' '.join(map(c, t.cards))}>{t.winner}" for t in obs.tricks),
    ]
    if obs.opening is not None:
        parts.append(f"opening {obs.opening.name.lower()}")
    if obs.melds:
        parts.append("melds " + ";".join(f"{m.seat}:{' '.join(map(c, m.cards))}" for m in obs.melds))
    if obs.robbed_by is not None:
        parts.append(f"robbed {obs.robbed_by}")
    if obs.scores is not None:
        parts.append("totals " + " ".join(str(s.total) for s in obs.scores))
    return " | ".join(parts)


pyspiel.register_game(_REGISTERED_TYPE, GaigelOSGame)
