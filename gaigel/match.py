"""Matches: a fixed series of hands with the deal rotating, scored in dashes (RULES.md §11).

:class:`MatchSpec` fixes everything a match needs to be reproduced; :func:`hand_setup` says
which deal, dealer and forehand hand *k* uses; :class:`MatchScore` adds up hand outcomes.
:class:`MatchDriver` steps a whole match on these (hands, decisions, score, record, early
end) without I/O or a clock, so that every runner shares one loop: the in-process
:func:`play_match`, ``gaigel selfplay`` and check-bot's scripted match use it, each with its
own clock and transport around it, and it is shaped for the server's async tables too.
"""

from __future__ import annotations

import dataclasses
import enum
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeAlias

from gaigel.actions import action_label
from gaigel.botseed import LOCAL_MATCH_KEY, bot_seed, spec_for_bot
from gaigel.deal import Deal, check_seed, deal
from gaigel.events import Event
from gaigel.observation import Observation
from gaigel.phase import Phase
from gaigel.record import RecordError, RecordWriter
from gaigel.ruleset import Ruleset
from gaigel.state import GaigelState, HandOutcome, IllegalActionError


class MatchTermination(enum.Enum):
    """Why a match ended."""

    COMPLETED = "completed"
    FORFEIT = "forfeit"
    ABORTED = "aborted"
    CANCELLED = "cancelled"


MATCH_TERMINATIONS: tuple[str, ...] = tuple(t.value for t in MatchTermination)
"""The termination names of records, protocol, metrics and arena outcomes: the one list every layer derives from."""


class FaultReason(enum.StrEnum):
    """The reason code of a fault in a record (the protocol's ``FaultReason`` without its prefix;
    the server checks the two agree when it is imported)."""

    ILLEGAL_ACTION = "ILLEGAL_ACTION"
    STALE_DECISION = "STALE_DECISION"
    TIMEOUT_FALLBACK = "TIMEOUT_FALLBACK"
    FORFEIT = "FORFEIT"
    DISCONNECT = "DISCONNECT"
    RESUMED = "RESUMED"
    MALFORMED_MESSAGE = "MALFORMED_MESSAGE"
    MISSING_JOIN = "MISSING_JOIN"


class DecisionFlag(enum.StrEnum):
    """What a record notes about how one decision was taken (an action's ``flags``)."""

    TIMEOUT_FALLBACK = "TIMEOUT_FALLBACK"  # no answer in time: the first legal action was played
    REJECTED_ANSWERS = "REJECTED_ANSWERS"  # the seat had answers rejected before this one
    DISCONNECTED = "DISCONNECTED"  # the seat's stream was down during the decision
    TIME_CAPPED = "TIME_CAPPED"  # the bot's own safety time cap cut its search short


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
    """A decision that is due: the legal actions and the deciding seat's observation, nothing more.

    :meth:`MatchDriver.next` returns it and an in-process bot gets it as it is. The
    observation is built on first access, so bots that ignore it (``random``, ``first``)
    cost nothing extra in self-play.
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


# --- the driver ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class HandStarted:
    """A new hand is dealt: *state* is its fresh state (read it, never apply to it)."""

    hand_index: int
    dealer: int
    forehand: int
    deal: Deal
    state: GaigelState


@dataclasses.dataclass(frozen=True, slots=True)
class HandEnded:
    """A hand is over and counted in the score; *state* is its terminal state."""

    hand_index: int
    outcome: HandOutcome
    state: GaigelState


@dataclasses.dataclass(frozen=True, slots=True)
class MatchOver:
    """The match has ended: why, the final score and the record (None when not recording)."""

    termination: MatchTermination
    score: MatchScore
    record: dict[str, Any] | None
    forfeit_sides: tuple[int, ...] = ()
    aborted_hand: int | None = None
    """The index of the hand that was open when the match ended early (recorded as aborted)."""


_TERMINAL = Phase.TERMINAL

Step: TypeAlias = HandStarted | DecisionRequest | HandEnded | MatchOver
"""What :meth:`MatchDriver.next` returns."""


class MatchDriver:
    """Steps one match: deals every hand, applies the decisions, keeps score and writes the record.

    Sans-I/O: no clock, no bots, no asyncio. The runner asks :meth:`next` what is due and
    gets a :data:`Step`:

    * :class:`HandStarted`: a hand is dealt (its deal-time events are in :meth:`take_events`);
    * :class:`DecisionRequest`: a seat must decide; answer with :meth:`decide` (asking
      :meth:`next` again before that returns the same request);
    * :class:`HandEnded`: a hand is over and scored;
    * :class:`MatchOver`: the match has ended (every later :meth:`next` returns it again).

    :meth:`end` stops the match early (forfeit, abort, cancel); an open hand is recorded as
    aborted. With ``events=True`` every state records the engine's typed events
    (:mod:`gaigel.events`); take them with :meth:`take_events` after each :meth:`decide`
    and after a :class:`HandStarted`, before the next hand starts.
    """

    __slots__ = (
        "_events",
        "_open",
        "_request",
        "_rules",
        "hand_index",
        "match_key",
        "over",
        "score",
        "spec",
        "state",
        "step",
        "writer",
    )

    def __init__(
        self,
        spec: MatchSpec,
        *,
        record: bool = True,
        versions: Sequence[str] | None = None,
        match_id: str = "",
        events: bool = False,
        match_key: str = "",
    ) -> None:
        self.spec = spec
        self.match_key = match_key or match_id or LOCAL_MATCH_KEY
        """Derives each seat's bot seed with the match seed (:mod:`gaigel.botseed`)."""
        self._rules = spec.ruleset
        self.score = MatchScore(spec)
        self.writer = (
            RecordWriter(spec, list(versions) if versions else None, match_id, self.match_key) if record else None
        )
        """The record being written (None without *record*); a runner may add top-level fields to ``writer.data``."""
        self.state: GaigelState | None = None
        """The state of the current (or last) hand."""
        self.hand_index = -1
        """The current (or last) hand, -1 before the first."""
        self.step = 0
        """Actions applied in the current hand."""
        self.over: MatchOver | None = None
        self._events = events
        self._open: GaigelState | None = None  # the state of the hand in play, None between hands
        self._request: DecisionRequest | None = None

    def bot_spec(self, seat: int) -> MatchSpec:
        """What the bot of *seat* gets in ``start_match``: the spec with its seat's bot seed for the seed."""
        return spec_for_bot(self.spec, bot_seed(self.spec.seed, seat, self.match_key))

    @property
    def hand_open(self) -> bool:
        """True from a :class:`HandStarted` until its :class:`HandEnded` (or the end of the match)."""
        return self._open is not None

    def next(self) -> Step:
        """What is due now (see the class docstring)."""
        request = self._request
        if request is not None:
            return request
        state = self._open
        if state is not None:
            if state.phase != _TERMINAL:
                seat = state.to_act
                request = DecisionRequest(
                    seat,
                    self.hand_index,
                    tuple(state.legal_actions()),
                    partial(state.observation, seat),
                    self._rules,
                )
                self._request = request
                return request
            return self._end_hand(state)
        if self.over is not None:
            return self.over
        if self.score.finished():
            return self._finish(MatchTermination.COMPLETED, ())
        return self._start_hand()

    def decide(self, action: int, seconds: float = 0.0, flags: Sequence[str] = ()) -> None:
        """Applies *action* to the open decision; *seconds* and *flags* (reason codes) go to the record.

        :raises IllegalActionError: for an action that is not legal (the decision stays open).
        :raises RuntimeError: when no decision is open.
        """
        request = self._request
        if request is None:
            raise RuntimeError("no decision is open: ask next() first")
        if type(action) is not int or action not in request.legal_actions:
            action = self._checked(request, action)
        state = self.state
        assert state is not None
        state.apply(action)
        self._request = None
        self.step += 1
        if self.writer is not None:
            self.writer.action(
                request.seat, action, seconds, state.state_hash(), tuple([str(f) for f in flags]) if flags else ()
            )

    def _checked(self, request: DecisionRequest, action: object) -> int:
        """The plain id of a legal *action* that is an int subclass; raises for anything else (off the hot path)."""
        if isinstance(action, bool) or not isinstance(action, int):
            raise IllegalActionError(-1, f"an action must be an integer id, got {action!r}")
        if int(action) not in request.legal_actions:
            assert self.state is not None
            raise IllegalActionError(int(action), self.state.why_illegal(int(action)))
        return int(action)

    def take_events(self) -> list[Event]:
        """The engine events of the current hand since the last call (always empty without ``events=True``)."""
        state = self.state
        if state is None or not state.events:
            return []
        events = state.events
        state.events = []
        return events

    def end(self, termination: MatchTermination, forfeit_sides: Sequence[int] = ()) -> MatchOver:
        """Ends the match early: a FORFEIT (naming the sides that forfeit), ABORTED or CANCELLED.

        A hand whose last action was already applied still counts; a hand in play is recorded
        as aborted. Ending a match that is already over returns its :class:`MatchOver` unchanged.

        :raises ValueError: for COMPLETED (that is reached through :meth:`next`), or forfeit
            sides that are missing, not sides of the ruleset, or given without a forfeit.
        """
        if self.over is not None:
            return self.over
        if termination is MatchTermination.COMPLETED:
            raise ValueError("a match is completed by playing its hands, not by end()")
        sides = tuple(forfeit_sides)
        if (termination is MatchTermination.FORFEIT) != bool(sides):
            raise ValueError("a forfeit names the sides that forfeit, and only a forfeit does")
        num_sides = self.spec.ruleset.num_sides
        if any(not 0 <= x < num_sides for x in sides):
            raise ValueError(f"forfeit sides must be sides 0..{num_sides - 1}, got {list(sides)}")
        if self._open is not None and self._open.phase == _TERMINAL:
            self._end_hand(self._open)
        return self._finish(termination, sides)

    def fault(self, seat: int, reason: FaultReason, message: str) -> None:
        """Notes a fault of *seat* in the record, at the current hand and step (see :meth:`RecordWriter.fault`).

        :raises RuntimeError: once the match is over (its record is closed).
        """
        if self.over is not None:
            raise RuntimeError("the match is over: its record is closed")
        if self.writer is not None:
            hand = self.hand_index if self.hand_index >= 0 else None
            self.writer.fault(seat, str(reason), message, hand, self.step if self._open is not None else None)

    def _start_hand(self) -> HandStarted:
        k = self.hand_index + 1
        d, dealer, forehand = hand_setup(self.spec, k)
        # record_events at construction: a hand can end at the deal (five Sevens) and those events count too.
        state = GaigelState(self.spec.ruleset, d, forehand, record_events=self._events)
        self.state, self.hand_index, self.step = state, k, 0
        self._open = state
        if self.writer is not None:
            self.writer.begin_hand(k, dealer, forehand, d)
        return HandStarted(k, dealer, forehand, d, state)

    def _end_hand(self, state: GaigelState) -> HandEnded:
        outcome = state.outcome()
        assert outcome is not None
        self._open = None
        self.score.add(outcome)
        if self.writer is not None:
            self.writer.end_hand(outcome)
        return HandEnded(self.hand_index, outcome, state)

    def _finish(self, termination: MatchTermination, forfeit_sides: tuple[int, ...]) -> MatchOver:
        aborted = None
        if self._open is not None:
            aborted = self.hand_index
            self._open = None
            self._request = None
            if self.writer is not None:
                self.writer.end_hand(None, aborted=True)
        record = None
        if self.writer is not None:
            record = self.writer.finish(self.score, termination.value, list(forfeit_sides) or None)
        self.over = MatchOver(termination, self.score, record, forfeit_sides, aborted)
        return self.over


# --- in-process matches ----------------------------------------------------------------------


def play_match(
    spec: MatchSpec,
    bots: Sequence[Bot],
    on_hand: Callable[[int, HandOutcome], None] | None = None,
    record: bool = True,
    match_key: str = "",
) -> tuple[MatchScore, dict[str, Any] | None]:
    """Plays *spec* with in-process *bots* (one per seat), timing each decision.

    Returns the score and, when *record* is true, the match record (see :mod:`gaigel.record`).
    Each bot's ``start_match`` gets its seat's bot seed as the spec's seed, derived with
    *match_key* (default :data:`~gaigel.botseed.LOCAL_MATCH_KEY`), as on the server.

    :raises ValueError: when a bot answers an illegal action (in-process bots must be correct).
    """
    if len(bots) != spec.players:
        raise ValueError(f"{spec.players} seats need {spec.players} bots, got {len(bots)}")
    driver = MatchDriver(spec, record=record, versions=[getattr(b, "version", "1") for b in bots], match_key=match_key)
    for seat, bot in enumerate(bots):
        bot.start_match(driver.bot_spec(seat), seat)
    clock = time.perf_counter
    while True:
        step = driver.next()
        if type(step) is DecisionRequest:
            started = clock()
            action = bots[step.seat].decide(step)
            driver.decide(action, clock() - started)
        elif type(step) is HandEnded:
            if on_hand:
                on_hand(step.hand_index, step.outcome)
        elif type(step) is MatchOver:
            return step.score, step.record
