"""The async match runner: one :class:`Table` per match, with clocks and fault policies.

A table steps the engine's :class:`~gaigel.match.MatchDriver` (the one match loop of every
runner: deals, score, record), asks each seat for its decisions (a bot session over gRPC,
or an in-process house bot), applies the policies of DESIGN.md (strikes, timeouts with
bank, disconnect and resume, forfeit) and tells seats and spectators what happened.

It delegates by responsibility: each seat's :class:`~gaigel_server.ledger.SeatLedger` judges
its answers, its :class:`~gaigel_server.clock.SeatClock` keeps its time, and the
:class:`~gaigel_server.broadcast.Broadcast` tells seats and spectators. What the table needs
from the server around it comes in :class:`TableHooks`; the lobby lives in
:mod:`gaigel_server.lobby`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import time
import zlib
from collections.abc import Callable
from typing import Any

from google.protobuf import timestamp_pb2

from gaigel import actions as A
from gaigel.botseed import bot_seeds
from gaigel.match import (
    Bot,
    DecisionFlag,
    DecisionRequest,
    FaultReason,
    HandEnded,
    HandStarted,
    MatchDriver,
    MatchScore,
    MatchSpec,
    MatchTermination,
)
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_server import codec, views, wire
from gaigel_server.broadcast import Broadcast, SpectatorQueue
from gaigel_server.clock import Clock, SeatClock
from gaigel_server.ledger import Accept, Ignore, Reject, SeatLedger, decision_id
from gaigel_server.logging import get_logger
from gaigel_server.metrics import LoopHistogram, ServerMetrics
from gaigel_server.seat import Seat
from gaigel_server.session import Answer, BotSession, Outgoing
from gaigel_server.states import TableState

Decided = tuple[int, float, tuple[DecisionFlag, ...]]
"""A decision taken: the action id, the seconds it took, the record flags."""


@dataclasses.dataclass(frozen=True)
class TableHooks:
    """What a table needs from the server around it, given explicitly: it holds no lobby."""

    metrics: ServerMetrics
    save_record: Callable[[str, dict[str, Any]], None]
    """Keeps the record of an ended match, by match id."""
    on_ended: Callable[[Table], None]
    """Called last once the match has ended: the sessions go back to their pools."""


@dataclasses.dataclass(frozen=True)
class Forfeit:
    """Why a side forfeited: the seat whose fault it was, the reason code of that fault (the strike over
    the limit, or the DISCONNECT not resumed in time) and the server's FORFEIT message."""

    side: int
    seat: int
    bot: str
    reason: FaultReason
    message: str


@dataclasses.dataclass(frozen=True)
class Forfeited:
    """The outcome of an open decision when a side forfeits: the seat stops waiting."""

    side: int


HOUSE_RUN = 16
"""House decisions a table takes in a row before it lets other tables and streams run: a yield
after each one cost a loop turn per decision of every match with a remote seat, which waits for
its answer anyway (16 decisions of the house bots take well under a millisecond)."""

WRITE_WAIT = 1.0
"""Seconds a decision's clock waits for its request's write to begin; after that it runs from
when the request was queued (a stream whose writer is stuck must not stop the clock)."""


Outcome = Answer | Forfeited | None
"""How an open decision ends: the accepted Answer, None at the deadline, or Forfeited."""


class _Alarm:
    """The one timer of a table's successive decisions.

    A decision settled in time leaves the timer set: the next one's deadline is nearly always
    later, so the timer rings early and its decision sets it again (:meth:`_Pending.ring`). A
    timer made and cancelled per decision (a TimerHandle in the loop's heap, cancelled ones
    swept from it) took 4-5 % of a busy server's samples (py-spy, 64 compact streams); one per
    table costs about one set per decision time. An earlier deadline (a bank nearly spent)
    replaces the timer."""

    __slots__ = ("_at", "_handle", "loop", "pending")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._handle: asyncio.TimerHandle | None = None
        self._at = math.inf  # the loop time it rings at
        self.pending: _Pending | None = None  # whose deadline it keeps (None: it rings for nothing)

    def set(self, when: float, pending: _Pending) -> None:
        """Rings for *pending* at *when* (loop time) or earlier."""
        self.pending = pending
        if when < self._at:
            if self._handle is not None:
                self._handle.cancel()
            self._handle, self._at = self.loop.call_at(when, self._ring), when

    def clear(self, pending: _Pending) -> None:
        """*pending* needs no ringing any more (the timer itself stays for the next decision)."""
        if self.pending is pending:
            self.pending = None

    def close(self) -> None:
        """Cancels the timer (the table has ended)."""
        self.pending = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle, self._at = None, math.inf

    def _ring(self) -> None:
        self._handle, self._at = None, math.inf
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.ring()


class _Pending:
    """The open decision of a remote seat: what the table asked (to judge the outcome by), the
    deadline it keeps on its table's timer (:class:`_Alarm`), and whom to tell its outcome
    (:meth:`settle`, once).

    The deadline runs from when the request's write began, which the writer notes on the queued
    message; the table does not wait for that write (one hand-off fewer per decision): the timer
    is armed from the time the request was queued and, when it fires early, set again from the
    write's start. At the deadline the seat's ledger closes the decision at once, so an answer
    read later is judged late by the ledger, never taken for the next decision."""

    def __init__(
        self,
        alarm: _Alarm,
        ledger: SeatLedger,
        clock: SeatClock,
        queued: float,
        on_outcome: Callable[[Outcome], None],
    ) -> None:
        self.alarm = alarm
        self.ledger = ledger
        self.clock = clock
        self.queued = queued
        self.request: Outgoing | None = None  # None when no stream was attached
        self.settled = False
        self.outcome: Outcome = None
        self._on_outcome = on_outcome
        # What the table asked, set by Table._ask: the seat, the decision id and legal actions,
        # and the seat's strikes, connection and request's sequence number when it was asked.
        self.seat = 0
        self.hand = 0
        self.decision_id = ""
        self.legal: list[int] = []
        self.strikes_before = 0
        self.was_connected = True
        self.request_sequence = 0

    def start(self) -> float:
        """When the decision's clock started: the write's start, or the queueing (see WRITE_WAIT)."""
        began = self.request.began if self.request is not None else None
        return began if began is not None and began - self.queued <= WRITE_WAIT else self.queued

    def arm(self) -> None:
        self.alarm.set(self._when(time.monotonic()), self)

    def disarm(self) -> None:
        self.alarm.clear(self)

    def settle(self, outcome: Outcome) -> None:
        """Ends the decision with *outcome* (the first one counts) and tells the table."""
        if self.settled:
            return
        self.settled, self.outcome = True, outcome
        self.disarm()
        self._on_outcome(outcome)

    def _write_awaited(self, now: float) -> bool:
        """The request is queued but its write has not begun, and WRITE_WAIT has not run out."""
        return self.request is not None and self.request.began is None and now < self.queued + WRITE_WAIT

    def _when(self, now: float) -> float:
        """The loop time of the deadline, or of the next look at a write that has not begun yet."""
        deadline = self.clock.deadline(self.start())
        if self._write_awaited(now):
            deadline = min(max(deadline, now + 0.01), self.queued + WRITE_WAIT)
        return self.alarm.loop.time() + (deadline - now)

    def ring(self) -> None:
        """The alarm rang for this decision: at its deadline, or before it (set again then)."""
        now = time.monotonic()
        if self.settled:
            return
        if now < self.clock.deadline(self.start()) or self._write_awaited(now):
            self.alarm.set(self._when(now), self)
            return
        self.ledger.close()  # from now on an answer is late: judged by the ledger, never applied
        self.settle(None)


def _now_ts() -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromNanoseconds(time.time_ns())
    return ts


class Table:
    """One match: its seats, record and the steps that play it."""

    def __init__(
        self,
        match_id: str,
        spec: MatchSpec,
        clock: Clock,
        preset: str,
        house: dict[int, Bot],
        hooks: TableHooks,
        request_id: str = "",
    ) -> None:
        self.match_id = match_id
        self.spec = spec
        self.rules = spec.ruleset
        self.clock = clock
        self.preset = preset
        self.request_id = request_id
        self.withhold_seed = False  # never reveal the seed to bots and spectators (CreateMatch)
        self.match_key = match_id  # derives the bot seeds with the seed (CreateMatch's match_key)
        self.house = house
        self.hooks = hooks
        self.metrics = hooks.metrics
        n = spec.players
        self.versions = ["" if s not in house else getattr(house[s], "version", "1") for s in range(n)]
        self.state = TableState.WAITING
        self.termination: MatchTermination | None = None
        self.create_time = _now_ts()
        self.start_time: timestamp_pb2.Timestamp | None = None
        self.end_time: timestamp_pb2.Timestamp | None = None
        self.score = MatchScore(spec)  # the driver's score once the match has started
        self._record_z: bytes | None = None  # the record as compressed JSON once the match has ended
        self.driver: MatchDriver | None = None
        """Steps the match and writes its record, from the start (or a cancel while waiting) to the end."""
        self.over = asyncio.Event()
        """Set once the match has ended, its record kept (see :meth:`gaigel_server.lobby.Lobby.play`)."""
        self.cancel_reason = ""
        self.seats = [Seat(self, s, clock) for s in range(n)]
        self.faults: list[list[cm.Fault]] = [[] for _ in range(n)]
        self.broadcast = Broadcast(self.seats)
        self._pending: _Pending | None = None  # the open decision of a remote seat
        self._alarm: _Alarm | None = None  # the deadlines' timer (made at the first decision, in the loop)
        self._stepping = False  # _advance is running (an outcome or cancel it causes waits for it)
        self._cancelled: MatchTermination | None = None  # a cancel asked for during a step
        self._later: asyncio.Handle | None = None  # the next step, scheduled (the start, after a house run)
        self._house_run = 0  # house decisions since the table last let others run
        self.forfeit_side: int | None = None
        self.forfeit: Forfeit | None = None
        self.hand_events: codec.HandEvents | None = None  # routes the engine events of the hand in play
        self.tricks = wire.TrickCache()  # completed tricks of the current hand, as sent in observations
        self._latencies: dict[int, LoopHistogram] = {}  # seat -> its bot's decision_seconds child, see _latency
        self.log = get_logger(match_id=match_id)
        self._log_decisions = self.log.is_enabled_for(logging.DEBUG)  # (its arguments cost 1 us a decision)

    # --- views -----------------------------------------------------------------------

    @property
    def sessions(self) -> list[BotSession | None]:
        """The session of each seat (None for house seats, and once the match has ended)."""
        return [seat.session for seat in self.seats]

    @property
    def modes(self) -> list[str]:
        """How each seat's session joined: "compact" or "plain" ("" for house seats)."""
        return [seat.mode for seat in self.seats]

    def bot_seeds(self) -> list[int]:
        """Each seat's MatchStart.bot_seed: from the seed, the seat and the match key."""
        return bot_seeds(self.spec.seed, self.spec.players, self.match_key)

    def seat_bot(self, seat: int) -> str:
        """The bot name of *seat*."""
        return self.spec.bots[seat]

    def to_proto(self, admin: bool) -> ms.Match:
        """The Match message (with the seed only once ended, see :func:`views.match`)."""
        return views.match(self, admin)

    def winner_sides(self) -> list[int]:
        """The sides that won an ended match (none when it was cancelled or aborted)."""
        if self.termination is MatchTermination.FORFEIT and self.forfeit_side is not None:
            return [x for x in range(self.rules.num_sides) if x != self.forfeit_side]
        if self.termination is MatchTermination.COMPLETED:
            return self.score.winners()
        return []

    def watch(self, from_start: bool) -> SpectatorQueue:
        """A spectator queue: the match, then the public messages (all, or of the current hand)."""
        return self.broadcast.watch(self.to_proto(admin=False), from_start, ended=self.state is TableState.ENDED)

    def unwatch(self, q: SpectatorQueue) -> None:
        """Forgets the queue of a WatchMatch stream that has ended."""
        self.broadcast.unwatch(q)

    @property
    def record_json(self) -> str | None:
        """The match record (with the seed) as JSON once the match has ended, else None."""
        return None if self._record_z is None else zlib.decompress(self._record_z).decode()

    @property
    def record(self) -> dict[str, Any] | None:
        """The match record as a dict (a fresh copy) once the match has ended, else None."""
        text = self.record_json
        return None if text is None else json.loads(text)

    # --- faults ----------------------------------------------------------------------

    def fault(self, seat: int, reason: FaultReason, message: str, strike: bool, decision_id: str = "") -> None:
        """Charges a fault to *seat*: record, metrics, a Fault event; forfeits over the strikes limit."""
        if self.state is not TableState.RUNNING:
            return
        ledger = self.seats[seat].ledger
        over_limit = strike and ledger.strike()
        driver = self.driver
        assert driver is not None
        driver.fault(seat, reason, message)
        hand_index = driver.hand_index if driver.hand_open else None
        own = codec.fault(seat, reason, message, hand_index, decision_id, strike, ledger.strikes)
        self.faults[seat].append(own)
        self.metrics.faults.labels(reason).inc()
        self.log.info(
            "fault", seat=seat, bot=self.seat_bot(seat), reason=reason, strikes=ledger.strikes, detail=message
        )
        summary = f"seat {seat}: {reason.value.lower().replace('_', ' ')}"
        public = codec.fault(seat, reason, summary, hand_index, "", strike, ledger.strikes)
        self.broadcast.fault(seat, max(driver.hand_index, 0), own, public)
        if over_limit:
            why = f"seat {seat} has {ledger.strikes} strikes, over the limit of {ledger.strikes_limit}"
            self._forfeit(seat, reason, why)

    def _forfeit(self, seat: int, cause: FaultReason, why: str) -> None:
        if self.forfeit_side is not None or self.state is not TableState.RUNNING:
            return
        side = self.forfeit_side = self.rules.side_of(seat)
        message = f"side {side} forfeits: {why}"
        self.forfeit = Forfeit(side, seat, self.seat_bot(seat), cause, message)
        self.fault(seat, FaultReason.FORFEIT, message, strike=False)
        if self._pending is not None:
            self._pending.settle(Forfeited(side))

    # --- input from sessions ---------------------------------------------------------

    def on_action(self, seat: int, answer: Answer) -> None:
        """An Action from the session of *seat*: its ledger judges it, the table carries the verdict out."""
        if self.seats[seat].session is None:
            return
        match self.seats[seat].ledger.judge(answer.decision_id, answer.action_id):
            case Accept():
                if self._pending is not None:  # (the ledger opens a decision only while it is pending)
                    self._pending.settle(answer)
            case Ignore():
                self.log.debug("repeated_answer_ignored", seat=seat, decision_id=answer.decision_id)
            case Reject() as verdict:
                self._reject(seat, answer, verdict)

    def _reject(self, seat: int, answer: Answer, verdict: Reject) -> None:
        """Sends ActionRejected; a rejection with a fault code is also a fault and a strike."""
        sess = self.seats[seat].session
        assert sess is not None
        sess.send(
            action_rejected=codec.rejection(
                answer.decision_id,
                answer.action_id,
                verdict.reason,
                verdict.message,
                verdict.decision_open,
                verdict.strikes,
                self.clock.strikes_limit,
            )
        )
        if verdict.fault is not None:
            self.fault(seat, verdict.fault, verdict.message, strike=True, decision_id=answer.decision_id)

    def on_disconnect(self, seat: int, session: BotSession) -> None:
        """The stream of *seat* broke: the match goes on, the clock runs, Resume is possible for a while."""
        if self.state is not TableState.RUNNING or self.seats[seat].session is not session:
            return
        self.fault(
            seat,
            FaultReason.DISCONNECT,
            f"the stream of seat {seat} ended; resume within {self.clock.resume_grace:g} s",
            strike=False,
        )
        loop = asyncio.get_running_loop()
        loop.call_later(self.clock.resume_grace, self._grace_over, seat, session, session.disconnected_at)

    def _grace_over(self, seat: int, session: BotSession, since: float | None) -> None:
        # Only the disconnection that armed this timer counts: a seat that resumed and broke again has a new grace.
        if (
            self.state is TableState.RUNNING
            and self.seats[seat].session is session
            and not session.connected
            and session.disconnected_at == since
        ):
            why = f"seat {seat} did not resume within {self.clock.resume_grace:g} s"
            self._forfeit(seat, FaultReason.DISCONNECT, why)

    def on_resume(self, seat: int, last_sequence: int) -> None:
        """A disconnected seat came back, having seen its messages up to *last_sequence*."""
        self.seats[seat].ledger.resumed(last_sequence)
        self.fault(seat, FaultReason.RESUMED, f"seat {seat} resumed", strike=False)

    # --- life cycle ------------------------------------------------------------------

    def start(self, sessions: dict[int, BotSession]) -> None:
        """Binds *sessions* to their seats and starts the match at the loop's next turn."""
        for seat, sess in sessions.items():
            self.seats[seat].bind(sess)
            self.versions[seat] = sess.bot_version
        self.state = TableState.RUNNING
        self.start_time = _now_ts()
        self._open_driver()
        self._later = asyncio.get_running_loop().call_soon(self._advance, True)

    def _open_driver(self) -> MatchDriver:
        """Starts the match's driver and record (also of a match cancelled while waiting) and counts
        the match active."""
        driver = MatchDriver(
            self.spec, versions=self.versions, match_id=self.match_id, events=True, match_key=self.match_key
        )
        writer = driver.writer
        assert writer is not None
        writer.data["clock"] = self.clock.to_dict()
        writer.data["ruleset_preset"] = self.preset
        self.driver, self.score = driver, driver.score
        self.metrics.active_matches.inc()
        return driver

    def cancel(self, termination: MatchTermination, reason: str = "") -> None:
        """Ends a waiting or running match as *termination* (cancelled or aborted), at once (or, when
        asked from within a step of this table, as soon as that step returns)."""
        self.cancel_reason = reason
        if self.state is TableState.WAITING:
            self._open_driver()  # a match that never started still gets its record
            self.state = TableState.RUNNING
            self._finish(termination)
        elif self.state is TableState.RUNNING:
            if self._stepping:
                self._cancelled = termination
                return
            self._halt()
            self._finish(termination)

    def release_sessions(self) -> list[BotSession]:
        """The sessions that played this ended match, unbound from it (for their pools)."""
        released = [seat.release() for seat in self.seats]
        return [s for s in released if s is not None]

    # --- the match loop ------------------------------------------------------------------
    # A table has no task of its own: _advance steps the driver in whatever brought the match
    # forward (the reader task of the stream whose answer was accepted, the deadline's timer, the
    # loop's turn after a run of house decisions), until a remote seat must answer or the match is
    # over. So the task that read an answer also writes the next request to the writer's queue: one
    # hand-off per decision (reader -> writer), not two (reader -> table -> writer).
    # A house bot decides in process (_house_decide); a remote seat is asked through its ledger
    # (issue, verdicts) and clock (deadline, bank) (_ask) and its outcome judged (_answered).

    def _advance(self, begin: bool = False) -> None:
        """Steps the match from where it stands; finishes it when it is over."""
        if self.state is not TableState.RUNNING or self._stepping:
            return
        self._later = None
        self._stepping = True
        try:
            termination = self._steps(begin)
        except Exception:
            self.log.exception("match_error")
            termination = MatchTermination.ABORTED
        finally:
            self._stepping = False
        if self._cancelled is not None:
            termination = self._cancelled
        if termination is not None:
            self._halt()
            self._finish(termination)

    def _halt(self) -> None:
        """Stops what would step the match again: the open decision's timer, a scheduled step."""
        if self._pending is not None:
            self._pending.disarm()
            self._pending = None
        if self._alarm is not None:
            self._alarm.close()
        if self._later is not None:
            self._later.cancel()
            self._later = None

    def _steps(self, begin: bool) -> MatchTermination | None:
        """The steps up to the next wait: None while the match waits for a remote seat (or lets
        others run after a run of house decisions), else how it ended."""
        driver = self.driver
        assert driver is not None
        if begin:
            for seat, bot in self.house.items():
                bot.start_match(driver.bot_spec(seat), seat)
            for seat, start in enumerate(views.match_starts(self)):
                self.broadcast.send(seat, match_start=start)
            self.log.info("match_start", players=self.spec.players, hands=self.spec.hands, bots=list(self.spec.bots))
        while True:
            pending = self._pending
            if pending is not None:  # a remote seat was asked: its outcome, or the wait for it
                if not pending.settled:
                    return None
                self._pending = None
                decided = self._answered(pending)
                if decided is None:
                    return self._ended()
                driver.decide(*decided)
                self._tell_events(driver)
            if self._cancelled is not None or self._forfeited(driver):
                break
            step = driver.next()
            if type(step) is DecisionRequest:
                if self.forfeit_side is not None:
                    return self._ended()  # a side forfeited: _finish aborts the hand
                house_bot = self.house.get(step.seat)
                if house_bot is None:
                    self._house_run = 0  # a remote decision waits for its answer: others run meanwhile
                    self._pending = self._ask(step)  # (settled at once when the seat forfeited meanwhile)
                    continue
                self._house_run += 1
                if self._house_run >= HOUSE_RUN:
                    self._house_run = 0
                    # let other tables and streams run; driver.next() gives this request again then
                    self._later = asyncio.get_running_loop().call_soon(self._advance)
                    return None
                driver.decide(*self._house_decide(house_bot, step))
                self._tell_events(driver)
            elif isinstance(step, HandStarted):
                self._hand_started(step, driver)
            elif isinstance(step, HandEnded):
                self._hand_ended(step)
            else:
                return self._ended()  # MatchOver: every hand is played
        return self._cancelled if self._cancelled is not None else self._ended()

    def _ended(self) -> MatchTermination:
        return MatchTermination.FORFEIT if self.forfeit_side is not None else MatchTermination.COMPLETED

    def _on_outcome(self, outcome: Outcome) -> None:
        """The open decision has its outcome: step on, unless a step of this table is what settled it
        (that step goes on itself)."""
        if not self._stepping:
            self._advance()

    def _forfeited(self, driver: MatchDriver) -> bool:
        """A side has forfeited and no hand is left to count (a hand whose last card fell still counts)."""
        if self.forfeit_side is None:
            return False
        return not (driver.hand_open and driver.state is not None and driver.state.is_terminal())

    def _hand_started(self, step: HandStarted, driver: MatchDriver) -> None:
        state, k = step.state, step.hand_index
        self.hand_events = codec.HandEvents(self.rules, k, state.talon_size)
        self.tricks = wire.TrickCache()
        for seat in range(self.spec.players):
            self.broadcast.send(seat, hand_start=codec.hand_start(state, k, step.dealer, seat))
        self.broadcast.publish("hand_start", codec.hand_start(state, k, step.dealer, None).SerializeToString())
        self._tell_events(driver)  # what happened at the deal (a hand can end there: five Sevens)

    def _tell_events(self, driver: MatchDriver) -> None:
        hev = self.hand_events
        assert hev is not None
        for ev in driver.take_events():
            for routed in hev.feed(ev):
                self.broadcast.event(routed)

    def _hand_ended(self, step: HandEnded) -> None:
        hev = self.hand_events
        assert hev is not None
        self.broadcast.announce("hand_end", codec.hand_end(step.state, step.hand_index, hev.deciding_seat, self.rules))
        outcome = step.outcome
        self.log.info(
            "hand_end",
            hand=step.hand_index,
            termination=outcome.termination.value,
            winners=list(outcome.winners),
            points=list(outcome.points),
        )

    def _house_decide(self, bot: Bot, request: DecisionRequest) -> Decided:
        """A house bot decides in process (no coroutine: most decisions of a match with house seats are theirs)."""
        started = time.perf_counter()
        action = bot.decide(request)
        used = time.perf_counter() - started
        if action not in request.legal_actions:
            raise RuntimeError(f"house bot {self.seat_bot(request.seat)} chose illegal action {action}")
        self.metrics.decided["house"].inc()
        return action, used, (DecisionFlag.TIME_CAPPED,) if getattr(bot, "time_capped", False) else ()

    def _ask(self, req: DecisionRequest) -> _Pending:
        """Posts a remote seat's DecisionRequest, opens the decision in its ledger and arms its deadline."""
        seat, k, legal = req.seat, req.hand_index, list(req.legal_actions)
        driver = self.driver
        assert driver is not None and driver.state is not None
        place = self.seats[seat]
        sess = place.session
        assert sess is not None
        ledger, seat_clock = place.ledger, place.clock
        did = decision_id()
        observation = wire.observation(req.observation, k, self.tricks)
        request = wire.decision_request(
            did, wire.legal_actions(legal), observation, seat_clock.decision_time, seat_clock.bank
        )
        alarm = self._alarm
        if alarm is None:
            alarm = self._alarm = _Alarm(asyncio.get_running_loop())
        pending = _Pending(alarm, ledger, seat_clock, time.monotonic(), self._on_outcome)
        pending.seat, pending.hand, pending.decision_id, pending.legal = seat, k, did, legal
        pending.strikes_before, pending.was_connected = ledger.strikes, sess.connected
        ledger.issue(did, legal, driver.state.why_illegal)
        pending.request = sess.post_request(request)
        pending.request_sequence = sess.sequence
        pending.arm()
        return pending

    def _answered(self, pending: _Pending) -> Decided | None:
        """The decision taken from a settled remote decision (None once a side has forfeited)."""
        seat, did, legal, item = pending.seat, pending.decision_id, pending.legal, pending.outcome
        place = self.seats[seat]
        ledger, seat_clock, sess = place.ledger, place.clock, place.session
        start = pending.start()
        # The server's own lag: from queueing the request to beginning its write. (An answer is
        # stepped in the task that read it, so reading adds none.)
        self.metrics.server_lag.observe(max(0.0, start - pending.queued))
        if isinstance(item, Forfeited):
            ledger.close()
            return None
        flags: list[DecisionFlag] = []
        if ledger.strikes > pending.strikes_before:
            flags.append(DecisionFlag.REJECTED_ANSWERS)
        if not pending.was_connected or sess is None or not sess.connected:
            flags.append(DecisionFlag.DISCONNECTED)
        if item is None:
            decision_time, bank = seat_clock.decision_time, seat_clock.bank
            ledger.timed_out(did, pending.request_sequence)
            used = seat_clock.run_out()
            self.metrics.decided["timeout_fallback"].inc()
            self.fault(
                seat,
                FaultReason.TIMEOUT_FALLBACK,
                f"no answer within {decision_time:g} s and the bank of {bank:.3f} s: falls back to the first legal action, {A.action_label(legal[0])}",
                strike=True,
                decision_id=did,
            )
            if self.forfeit_side is not None:
                return None
            return legal[0], used, (DecisionFlag.TIMEOUT_FALLBACK, *flags)
        used = max(0.0, item.received - start)
        seat_clock.charge(used)
        self.metrics.decided["answered"].inc()
        self._latency(seat).observe(used)
        if self._log_decisions:
            self.log.debug(
                "decision",
                seat=seat,
                bot=self.seat_bot(seat),
                hand=pending.hand,
                step=self.driver.step if self.driver is not None else -1,
                action=item.action_id,
                seconds=round(used, 6),
            )
        if item.time_capped:
            flags.append(DecisionFlag.TIME_CAPPED)
        return item.action_id, used, tuple(flags)

    def _latency(self, seat: int) -> LoopHistogram:
        """The decision-latency histogram child of *seat*'s bot (its own or ``_other``, see
        ServerMetrics.bot), looked up once per match (its series cannot be removed meanwhile:
        a seated bot cannot be unregistered)."""
        child = self._latencies.get(seat)
        if child is None:
            child = self._latencies[seat] = self.metrics.bot(self.seat_bot(seat))
        return child

    # --- the end ---------------------------------------------------------------------

    def _finish(self, termination: MatchTermination) -> None:
        driver = self.driver
        assert driver is not None
        self.termination = termination
        for place in self.seats:
            place.ledger.close()
        if driver.over is None:  # ended early: a forfeit, an abort or a cancel
            forfeit = (
                (self.forfeit_side,)
                if termination is MatchTermination.FORFEIT and self.forfeit_side is not None
                else ()
            )
            over = driver.end(termination, forfeit)
            if over.aborted_hand is not None:
                self.broadcast.announce("hand_end", codec.hand_end(None, over.aborted_hand, None, self.rules))
        assert driver.over is not None and driver.over.record is not None
        record = driver.over.record
        if self.cancel_reason:
            record["cancel_reason"] = self.cancel_reason
        self._record_z = zlib.compress(json.dumps(record).encode())
        self.state = TableState.ENDED
        self.end_time = _now_ts()
        self.hooks.save_record(self.match_id, record)
        self._send_match_end()
        self.metrics.matches.labels(termination.value).inc()
        self.metrics.active_matches.dec()
        self.log.info(
            "match_end",
            termination=termination.value,
            hands_played=self.score.hands_played,
            winners=self.winner_sides(),
            dashes=list(self.score.dashes),
        )
        self._compact()
        self.over.set()
        self.hooks.on_ended(self)

    def _send_match_end(self) -> None:
        """Each seat reads its own faults, the public all of them; spectator streams end."""
        end = views.match_end(self)
        for seat in range(self.spec.players):
            self.broadcast.send(seat, match_end=views.with_faults(end, self.faults[seat]))
        self.broadcast.publish(
            "match_end", views.with_faults(end, (f for fs in self.faults for f in fs)).SerializeToString()
        )
        self.broadcast.end()

    def _compact(self) -> None:
        """Drops what only a running match needs: the lobby keeps ended tables for a long time
        (GetMatch, GetMatchRecord, WatchMatch)."""
        self.driver = None
        self.hand_events = None
        self.house = {}
        self.tricks = wire.TrickCache()
        for place in self.seats:
            place.ledger.compact()


__all__ = ["Forfeit", "Forfeited", "Table", "TableHooks"]
