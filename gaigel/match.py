"""Matches: a fixed series of hands with the deal rotating, scored in dashes (RULES.md §11).

:class:`MatchSpec` fixes everything a match needs to be reproduced; :class:`MatchScore`
adds up hand outcomes; :func:`hand_setup` says which deal and forehand hand *k* uses. The
in-process runner :func:`play_match` drives bots that live in this process; the server
and the arena reuse the same pieces with their own clocks and transports.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

from gaigel.actions import action_label
from gaigel.deal import Deal, check_seed, deal
from gaigel.observation import Observation
from gaigel.record import RecordError, RecordWriter
from gaigel.ruleset import Ruleset
from gaigel.state import GaigelState, HandOutcome


class MatchTermination(enum.Enum):
    """Why a match ended."""

    COMPLETED = "completed"
    FORFEIT = "forfeit"
    ABORTED = "aborted"
    CANCELLED = "cancelled"


MATCH_TERMINATIONS: tuple[str, ...] = tuple(t.value for t in MatchTermination)
"""The termination names of records, protocol, metrics and arena outcomes: the one list every layer derives from."""


@dataclasses.dataclass(frozen=True)
class MatchSpec:
    """Everything that fixes a match: rules, seed, number of hands and who sits where."""

    ruleset: Ruleset
    seed: int
    hands: int
    bots: tuple[str, ...]
    first_dealer: int = -1
    """Dealer of hand 0; -1 means the last seat, so that seat 0 is forehand of hand 0."""

    def __post_init__(self) -> None:
        check_seed(self.seed)
        n = self.ruleset.players
        if len(self.bots) != n:
            raise ValueError(f"{n} players need {n} bots (one per seat), got {len(self.bots)}")
        if self.hands < 1:
            raise ValueError(f"a match needs at least one hand, got {self.hands}")
        if self.ruleset.match_format == "duplicate" and self.hands % self.ruleset.num_sides:
            raise ValueError(
                f"match.format = duplicate plays each deal once per side rotation: hands must be a multiple of {self.ruleset.num_sides}"
            )
        if not -1 <= self.first_dealer < n:
            raise ValueError(f"first_dealer must be a seat 0..{n - 1} (or -1), got {self.first_dealer}")

    @property
    def players(self) -> int:
        """Number of seats."""
        return self.ruleset.players

    def side_bots(self) -> list[list[str]]:
        """Bot names per side, in seat order."""
        rules = self.ruleset
        return [[self.bots[s] for s in rules.seats_of(x)] for x in range(rules.num_sides)]


def hand_setup(spec: MatchSpec, k: int) -> tuple[Deal, int, int]:
    """The deal, dealer and forehand of hand *k* (0-based).

    The dealer moves one seat after every hand. With ``match.format = duplicate`` each
    deal is played once per rotation of the sides over the seats: hand k uses deal
    ``k // sides`` and shifts the forehand by ``k % sides`` so the same cards go to
    another side.
    """
    rules = spec.ruleset
    n = rules.players
    d0 = spec.first_dealer % n
    if rules.match_format == "duplicate":
        sides = rules.num_sides
        deal_index, rotation = divmod(k, sides)
        dealer = (d0 + deal_index + rotation) % n
    else:
        deal_index, dealer = k, (d0 + k) % n
    return deal(spec.seed, deal_index, n, rules.deal_packets), dealer, (dealer + 1) % n


def spec_from_record(data: dict[str, Any]) -> MatchSpec:
    """The match spec a record was played from."""
    try:
        return MatchSpec(
            ruleset=Ruleset.from_dict(data["ruleset"]),
            seed=data["seed"],
            hands=data["hands_planned"],
            bots=tuple(str(s["bot"]) for s in data["seats"]),
            first_dealer=int(data.get("first_dealer", -1)),
        )
    except (ValueError, KeyError, TypeError) as e:
        raise RecordError(f"record does not describe a valid match: {e}") from None


class MatchScore:
    """Running score of a match: hands won and dashes per side, and when it is over."""

    def __init__(self, spec: MatchSpec) -> None:
        self.spec = spec
        sides = spec.ruleset.num_sides
        self.hands_won = [0] * sides
        self.dashes = [0] * sides
        self.hands_played = 0

    def add(self, outcome: HandOutcome) -> None:
        """Counts one finished hand."""
        putzen = self.spec.ruleset.match_format == "putzen" and self.hands_played >= self.spec.hands
        for side in outcome.winners:
            self.hands_won[side] += 1
            if putzen:
                self.dashes[side] = max(0, self.dashes[side] - 1)  # a won Putzen hand wipes one dash
        if not putzen:
            for side, d in enumerate(outcome.dashes):
                self.dashes[side] += d
        self.hands_played += 1

    def finished(self) -> bool:
        """True once no more hands are due."""
        if self.hands_played < self.spec.hands:
            return False
        if self.spec.ruleset.match_format != "putzen":
            return True
        return 0 in self.dashes or self.hands_played >= self.spec.hands + self.spec.ruleset.putzen_max_hands

    def winners(self) -> list[int]:
        """Sides with the fewest dashes (all of them on a tie)."""
        best = min(self.dashes)
        return [side for side, d in enumerate(self.dashes) if d == best]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready per-side result."""
        rules = self.spec.ruleset
        return {
            "winners": self.winners(),
            "sides": [
                {
                    "side": x,
                    "seats": list(rules.seats_of(x)),
                    "bots": [self.spec.bots[s] for s in rules.seats_of(x)],
                    "hands_won": self.hands_won[x],
                    "dashes": self.dashes[x],
                }
                for x in range(rules.num_sides)
            ],
        }


class DecisionRequest:
    """What an in-process bot gets: the legal actions and its seat's observation, nothing more.

    The observation is built on first access, so bots that ignore it (``random``,
    ``first``) cost nothing extra in self-play.
    """

    __slots__ = ("_obs", "_observe", "hand_index", "legal_actions", "ruleset", "seat")

    def __init__(
        self,
        seat: int,
        hand_index: int,
        legal_actions: tuple[int, ...],
        observe: Callable[[], Observation],
        ruleset: Ruleset,
    ) -> None:
        self.seat = seat
        self.hand_index = hand_index
        self.legal_actions = legal_actions
        self.ruleset = ruleset
        self._observe = observe
        self._obs: Observation | None = None

    @property
    def observation(self) -> Observation:
        """What this seat may know (RULES.md §3.5)."""
        if self._obs is None:
            self._obs = self._observe()
        return self._obs

    def labels(self) -> list[str]:
        """The labels of the legal actions."""
        return [action_label(a) for a in self.legal_actions]


class Bot:
    """An in-process bot: override :meth:`decide`. House bots and Python search bots use this."""

    name = "bot"
    version = "1"

    def start_match(self, spec: MatchSpec, seat: int) -> None:
        """Called once before the first hand (seed your randomness from ``spec.seed`` here)."""

    def decide(self, request: DecisionRequest) -> int:
        """Returns one of ``request.legal_actions``."""
        raise NotImplementedError


def play_match(
    spec: MatchSpec,
    bots: Sequence[Bot],
    on_hand: Callable[[int, HandOutcome], None] | None = None,
    record: bool = True,
) -> tuple[MatchScore, dict[str, Any] | None]:
    """Plays *spec* with in-process *bots* (one per seat).

    Returns the score and, when *record* is true, the match record (see :mod:`gaigel.record`).

    :raises ValueError: when a bot answers an illegal action (in-process bots must be correct).
    """
    if len(bots) != spec.players:
        raise ValueError(f"{spec.players} seats need {spec.players} bots, got {len(bots)}")
    for seat, bot in enumerate(bots):
        bot.start_match(spec, seat)
    writer = RecordWriter(spec, versions=[getattr(b, "version", "1") for b in bots]) if record else None
    score = MatchScore(spec)
    k = 0
    while not score.finished():
        d, dealer, forehand = hand_setup(spec, k)
        state = GaigelState(spec.ruleset, d, forehand)
        if writer:
            writer.begin_hand(k, dealer, forehand, d)
        while not state.is_terminal():
            seat = state.to_act
            legal = tuple(state.legal_actions())
            request = DecisionRequest(seat, k, legal, functools.partial(state.observation, seat), spec.ruleset)
            started = time.perf_counter()
            action = bots[seat].decide(request)
            used = time.perf_counter() - started
            state.apply_checked(action)
            if writer:
                writer.action(seat, action, used, state.state_hash())
        outcome = state.outcome()
        assert outcome is not None
        score.add(outcome)
        if writer:
            writer.end_hand(outcome)
        if on_hand:
            on_hand(k, outcome)
        k += 1
    result = writer.finish(score, MatchTermination.COMPLETED.value) if writer else None
    return score, result
