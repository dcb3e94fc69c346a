"""The async match runner: one :class:`Table` per match, with clocks and fault policies.

A table plays a :class:`~gaigel.match.MatchSpec` hand by hand on the engine, asks each
seat for its decisions (a bot session over gRPC, or an in-process house bot), applies the
policies of DESIGN.md (strikes, timeouts with bank, disconnect and resume, forfeit) and
writes a :class:`~gaigel.record.RecordWriter` record. The :class:`Lobby` keeps the tables,
the pools of idle sessions per bot name, and starts a table once every seat has a session.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import secrets
import time
import zlib
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import timestamp_pb2

from gaigel import actions as A
from gaigel.match import Bot, DecisionRequest, MatchScore, MatchSpec, hand_setup
from gaigel.record import RecordWriter, dump_record
from gaigel.state import GaigelState, IllegalActionError
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import game_pb2 as gm
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_server import codec
from gaigel_server.clock import Clock
from gaigel_server.logging import get_logger
from gaigel_server.metrics import ServerMetrics
from gaigel_server.session import Abort, Answer, BotSession

WAITING, RUNNING, ENDED = "waiting", "running", "ended"
_STATE = {WAITING: ms.MATCH_STATE_WAITING, RUNNING: ms.MATCH_STATE_RUNNING, ENDED: ms.MATCH_STATE_ENDED}


class ServiceError(Exception):
    """An RPC failure with its status code and a message that says what to fix."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _now_ts() -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromNanoseconds(time.time_ns())
    return ts


class Table:
    """One match: its seats, clocks, record, spectators and the task that plays it."""

    def __init__(
        self,
        lobby: Lobby,
        match_id: str,
        spec: MatchSpec,
        clock: Clock,
        preset: str,
        house: dict[int, Bot],
        request_id: str = "",
    ) -> None:
        self.lobby = lobby
        self.match_id = match_id
        self.spec = spec
        self.rules = spec.ruleset
        self.clock = clock
        self.preset = preset
        self.request_id = request_id
        self.withhold_seed = False  # never reveal the seed to bots and spectators (CreateMatch)
        self.house = house
        n = spec.players
        self.sessions: list[BotSession | None] = [None] * n
        self.versions = ["" if s not in house else getattr(house[s], "version", "1") for s in range(n)]
        self.resume_tokens = [secrets.token_urlsafe(24) for _ in range(n)]
        self.state = WAITING
        self.termination = ""
        self.create_time = _now_ts()
        self.start_time: timestamp_pb2.Timestamp | None = None
        self.end_time: timestamp_pb2.Timestamp | None = None
        self.score = MatchScore(spec)
        self._record_z: bytes | None = None  # the record as compressed JSON once the match has ended
        self.writer: RecordWriter | None = None
        self.task: asyncio.Task[None] | None = None
        self.cancel_termination = "cancelled"
        self.cancel_reason = ""
        self.strikes = [0] * n
        self.bank = [clock.bank] * n
        self.faults: list[list[cm.Fault]] = [[] for _ in range(n)]
        self.open: list[str | None] = [None] * n
        self.legal: list[list[int]] = [[] for _ in range(n)]
        self.resumes = [0] * n
        # Per seat: decision ids decided by the timeout fallback -> the sequence number of their
        # request; and those whose request was then resent by a Resume (the bot could not know).
        self.fallbacks: list[dict[str, int]] = [{} for _ in range(n)]
        self.resent_after_fallback: list[set[str]] = [set() for _ in range(n)]
        # Per seat: the last accepted (decision id, action id) and the resume count when it was accepted.
        self.accepted: list[tuple[str, int, int] | None] = [None] * n
        self.state_ref: GaigelState | None = None
        self.inbox: asyncio.Queue[Answer | str] = asyncio.Queue()
        self.forfeit_side: int | None = None
        self.hand_index: int | None = None
        self.step = 0
        self.hand_open = False
        self.tricks_cache: list[gm.Trick] = []  # completed tricks of the current hand, as sent in observations
        self.public: list[tuple[str, Any]] = []
        self.public_packed = b""  # the public messages of an ended table, compressed by _compact
        self.hand_public_start = 0
        self.spectators: list[asyncio.Queue[tuple[str, Any] | None]] = []
        self.log = get_logger(match_id=match_id)

    # --- views -----------------------------------------------------------------------

    @property
    def metrics(self) -> ServerMetrics:
        return self.lobby.metrics

    def seat_bot(self, seat: int) -> str:
        """The bot name of *seat*."""
        return self.spec.bots[seat]

    def to_proto(self, admin: bool) -> ms.Match:
        """The Match message. The seed reveals every hidden card: only once the match has ended,
        and with ``withhold_seed`` only to the *admin* (who may replay the same seed)."""
        rules = self.rules
        out = ms.Match(
            match_id=self.match_id,
            state=_STATE[self.state],
            players=rules.players,
            ruleset_preset=self.preset,
            ruleset_json=_json(rules.to_dict()),
            hands=self.spec.hands,
            first_dealer_seat=self.spec.first_dealer % rules.players,
            clock=codec.clock(self.clock),
            hands_played=self.score.hands_played,
            request_id=self.request_id,
            create_time=self.create_time,
        )
        for x in range(rules.num_sides):
            side = out.sides.add(side=x)
            for s in rules.seats_of(x):
                side.seats.add(seat=s, bot_name=self.spec.bots[s], bot_version=self.versions[s])
        out.sides_standing.extend(codec.side_results(self.score.hands_won, self.score.dashes))
        if self.state == ENDED and (admin or not self.withhold_seed):
            out.seed = self.spec.seed
        if self.state == ENDED:
            out.termination = codec.MATCH_TERMINATION[self.termination]
            out.winner_sides.extend(self._winner_sides())
        if self.start_time is not None:
            out.start_time.CopyFrom(self.start_time)
        if self.end_time is not None:
            out.end_time.CopyFrom(self.end_time)
        return out

    def _winner_sides(self) -> list[int]:
        if self.termination == "forfeit" and self.forfeit_side is not None:
            return [x for x in range(self.rules.num_sides) if x != self.forfeit_side]
        if self.termination == "completed":
            return self.score.winners()
        return []

    # --- sending ---------------------------------------------------------------------

    def _send(self, seat: int, **message: Any) -> None:
        sess = self.sessions[seat]
        if sess is not None and sess.table is self:
            sess.send(**message)

    def _publish(self, kind: str, msg: Any) -> None:
        if kind == "hand_start":
            self.hand_public_start = len(self.public)
        self.public.append((kind, msg))
        for q in self.spectators:
            q.put_nowait((kind, msg))

    def _broadcast(self, routed: codec.Routed) -> None:
        for s in range(self.spec.players):
            self._send(s, event=routed.for_viewer(s))
        self._publish("event", routed.for_viewer(None))

    def watch(self, from_start: bool) -> asyncio.Queue[tuple[str, Any] | None]:
        """A spectator queue: the match, then the public messages (all, or of the current hand)."""
        q: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue()
        q.put_nowait(("match", self.to_proto(admin=False)))
        for item in self._public_messages()[0 if from_start else self.hand_public_start :]:
            q.put_nowait(item)
        if self.state == ENDED:
            q.put_nowait(None)
        else:
            self.spectators.append(q)
        return q

    # --- faults ----------------------------------------------------------------------

    def fault(self, seat: int, reason: str, message: str, strike: bool, decision_id: str = "") -> None:
        """Charges a fault to *seat*: record, metrics, a Fault event; forfeits over the strikes limit."""
        if self.state != RUNNING:
            return
        if strike:
            self.strikes[seat] += 1
        if self.writer is not None:
            self.writer.fault(seat, reason, message, self.hand_index, self.step if self.hand_open else None)
        f = codec.fault(
            seat, reason, message, self.hand_index if self.hand_open else None, decision_id, strike, self.strikes[seat]
        )
        self.faults[seat].append(f)
        self.metrics.faults.labels(reason).inc()
        self.log.info(
            "fault", seat=seat, bot=self.seat_bot(seat), reason=reason, strikes=self.strikes[seat], detail=message
        )
        hand = self.hand_index if self.hand_index is not None else 0
        public = codec.fault(
            seat,
            reason,
            f"seat {seat}: {reason.lower().replace('_', ' ')}",
            f.hand_index if f.HasField("hand_index") else None,
            "",
            strike,
            self.strikes[seat],
        )
        for s in range(self.spec.players):
            self._send(s, event=gm.Event(hand_index=hand, fault=f if s == seat else public))
        self._publish("event", gm.Event(hand_index=hand, fault=public))
        if strike and self.strikes[seat] > self.clock.strikes_limit:
            self._forfeit(
                seat, f"seat {seat} has {self.strikes[seat]} strikes, over the limit of {self.clock.strikes_limit}"
            )

    def _forfeit(self, seat: int, why: str) -> None:
        if self.forfeit_side is not None or self.state != RUNNING:
            return
        self.forfeit_side = self.rules.side_of(seat)
        self.fault(seat, "FORFEIT", f"side {self.forfeit_side} forfeits: {why}", strike=False)
        self.inbox.put_nowait("forfeit")

    # --- input from sessions ---------------------------------------------------------

    def on_action(self, seat: int, answer: Answer) -> None:
        """An Action from the session of *seat*: accepted into the inbox, or rejected with a strike."""
        sess = self.sessions[seat]
        if sess is None:
            return
        did = self.open[seat]
        if did is not None and hmac.compare_digest(answer.decision_id.encode(), did.encode()):
            legal = self.legal[seat]
            if answer.action_id in legal:
                self.open[seat] = None
                self.accepted[seat] = (answer.decision_id, answer.action_id, self.resumes[seat])
                self.inbox.put_nowait(answer)
                return
            reason, code = bs.REJECT_REASON_ILLEGAL_ACTION, "ILLEGAL_ACTION"
            state = self.state_ref
            why = state.why_illegal(answer.action_id) if state is not None else "not legal now"
            message = str(IllegalActionError(answer.action_id, why))
        elif self._is_resent(seat, answer):
            # After a Resume the bot cannot know whether its last answer arrived, so it sends it
            # again: an identical repeat of an accepted answer is a no-op, not a strike.
            self.log.debug("repeated_answer_ignored", seat=seat, decision_id=answer.decision_id)
            return
        elif answer.decision_id in sess.earlier:
            # An answer that was in flight when the session's previous match ended: that match is
            # over and this one has nothing to do with it. Rejected, without a fault or strike.
            message = f"decision {answer.decision_id} belongs to a match that has ended"
            self._reject(seat, answer, bs.REJECT_REASON_STALE_DECISION, message, code=None)
            return
        elif self._missed_while_away(seat, answer):
            # The request reached the bot only with the messages it missed (a Resume), after the
            # fallback had decided it: the bot could not know. The fallback's strike is enough.
            message = (
                f"decision {answer.decision_id} was decided by the timeout fallback while this seat was away "
                "(no strike: the request was among the messages resent after Resume)"
            )
            self._reject(seat, answer, bs.REJECT_REASON_STALE_DECISION, message, code=None)
            return
        elif answer.decision_id in sess.issued:
            reason, code = bs.REJECT_REASON_STALE_DECISION, "STALE_DECISION"
            message = f"decision {answer.decision_id} is closed (already answered, or decided by a timeout fallback)"
        elif did is None:
            reason, code = bs.REJECT_REASON_NOT_YOUR_TURN, "STALE_DECISION"
            message = (
                f"no decision is open for seat {seat}; decision {answer.decision_id!r} was never issued to this session"
            )
        else:
            reason, code = bs.REJECT_REASON_UNKNOWN_DECISION, "STALE_DECISION"
            message = (
                f"decision {answer.decision_id!r} was never issued to this session (the open decision has another id)"
            )
        self._reject(seat, answer, reason, message, code)

    def _reject(self, seat: int, answer: Answer, reason: int, message: str, code: str | None) -> None:
        """Sends ActionRejected; with a fault *code* it is also a fault and a strike, without one
        neither (a rejection the bot could not have avoided)."""
        sess = self.sessions[seat]
        assert sess is not None
        strikes = self.strikes[seat] + (code is not None)
        sess.send(
            action_rejected=bs.ActionRejected(
                decision_id=answer.decision_id,
                action_id=answer.action_id,
                reason=reason,  # type: ignore[arg-type]
                message=message,
                decision_open=self.open[seat] is not None and strikes <= self.clock.strikes_limit,
                strikes=strikes,
                strikes_limit=self.clock.strikes_limit,
            )
        )
        if code is not None:
            self.fault(seat, code, message, strike=True, decision_id=answer.decision_id)

    def _missed_while_away(self, seat: int, answer: Answer) -> bool:
        return answer.decision_id in self.resent_after_fallback[seat]

    def _is_resent(self, seat: int, answer: Answer) -> bool:
        last = self.accepted[seat]
        return (
            last is not None
            and last[2] < self.resumes[seat]
            and last[1] == answer.action_id
            and hmac.compare_digest(last[0].encode(), answer.decision_id.encode())
        )

    def on_disconnect(self, seat: int, session: BotSession) -> None:
        """The stream of *seat* broke: the match goes on, the clock runs, Resume is possible for a while."""
        if self.state != RUNNING or self.sessions[seat] is not session:
            return
        self.fault(
            seat,
            "DISCONNECT",
            f"the stream of seat {seat} ended; resume within {self.clock.resume_grace:g} s",
            strike=False,
        )
        loop = asyncio.get_running_loop()
        loop.call_later(self.clock.resume_grace, self._grace_over, seat, session, session.disconnected_at)

    def _grace_over(self, seat: int, session: BotSession, since: float | None) -> None:
        # Only the disconnection that armed this timer counts: a seat that resumed and broke again has a new grace.
        if (
            self.state == RUNNING
            and self.sessions[seat] is session
            and not session.connected
            and session.disconnected_at == since
        ):
            self._forfeit(seat, f"seat {seat} did not resume within {self.clock.resume_grace:g} s")

    def on_resume(self, seat: int, last_sequence: int) -> None:
        """A disconnected seat came back, having seen its messages up to *last_sequence*."""
        self.resumes[seat] += 1
        for did, sequence in self.fallbacks[seat].items():
            if sequence > last_sequence:  # resent now, after the fallback decided it
                self.resent_after_fallback[seat].add(did)
        self.fault(seat, "RESUMED", f"seat {seat} resumed", strike=False)

    # --- the runner ------------------------------------------------------------------

    async def run(self) -> None:
        """Plays the match to its end, whatever happens, and always writes the record."""
        termination = "aborted"
        try:
            await self._play()
            termination = "forfeit" if self.forfeit_side is not None else "completed"
        except asyncio.CancelledError:
            termination = self.cancel_termination
        except Exception:
            self.log.exception("match_error")
            termination = "aborted"
        self._finish(termination)

    def start(self, sessions: dict[int, BotSession]) -> None:
        """Binds *sessions* to their seats and starts the runner task."""
        for seat, sess in sessions.items():
            self.sessions[seat] = sess
            sess.table, sess.seat = self, seat
            sess.resume_token = self.resume_tokens[seat]
            sess.earlier = sess.issued  # answers to these may still be in flight: not this match's faults
            sess.issued = set()  # decision ids of this match only
            self.versions[seat] = sess.bot_version
        self.state = RUNNING
        self.start_time = _now_ts()
        self.writer = RecordWriter(self.spec, versions=list(self.versions), match_id=self.match_id)
        self.writer.data["clock"] = self.clock.to_dict()
        self.writer.data["ruleset_preset"] = self.preset
        self.metrics.active_matches.inc()
        self.task = asyncio.get_running_loop().create_task(self.run(), name=f"match-{self.match_id}")

    async def _play(self) -> None:
        spec, rules = self.spec, self.rules
        writer = self.writer
        assert writer is not None
        for seat, bot in self.house.items():
            bot.start_match(spec, seat)
        sides = self.to_proto(admin=False).sides
        for seat in range(spec.players):
            self._send(
                seat,
                match_start=bs.MatchStart(
                    match_id=self.match_id,
                    seat=seat,
                    side=rules.side_of(seat),
                    players=spec.players,
                    sides=sides,
                    ruleset_preset=self.preset,
                    ruleset_json=_json(rules.to_dict()),
                    hands=spec.hands,
                    first_dealer_seat=spec.first_dealer % spec.players,
                    clock=codec.clock(self.clock),
                    resume_token=self.resume_tokens[seat],
                ),
            )
        self.log.info("match_start", players=spec.players, hands=spec.hands, bots=list(spec.bots))
        k = 0
        while not self.score.finished() and self.forfeit_side is None:
            d, dealer, forehand = hand_setup(spec, k)
            # record_events=True also captures what happens at the deal (a hand can end there: five Sevens).
            state = GaigelState(rules, d, forehand, record_events=True)
            events = state.events
            assert events is not None
            self.state_ref = state
            self.hand_index, self.step = k, 0
            writer.begin_hand(k, dealer, forehand, d)
            self.hand_open = True
            hev = codec.HandEvents(rules, k, state.talon_size)
            self.tricks_cache = []
            for seat in range(spec.players):
                self._send(seat, hand_start=codec.hand_start(state, k, dealer, seat))
            self._publish("hand_start", codec.hand_start(state, k, dealer, None))
            for ev in events:
                for routed in hev.feed(ev):
                    self._broadcast(routed)
            events.clear()
            while not state.is_terminal():
                seat = state.to_act
                legal = state.legal_actions()
                decided = await self._decide(seat, state, k, legal)
                if decided is None:
                    break
                action, used, flags = decided
                state.apply(action)
                writer.action(seat, action, used, state.state_hash(), flags)
                self.step += 1
                for ev in events:
                    for routed in hev.feed(ev):
                        self._broadcast(routed)
                events.clear()
            if not state.is_terminal():
                break  # forfeit: the hand is aborted in _finish
            outcome = state.outcome()
            assert outcome is not None
            self.score.add(outcome)
            writer.end_hand(outcome)
            self.hand_open = False
            end = codec.hand_end(state, k, hev.deciding_seat, rules)
            for seat in range(spec.players):
                self._send(seat, hand_end=end)
            self._publish("hand_end", end)
            self.log.info(
                "hand_end",
                hand=k,
                termination=outcome.termination.value,
                winners=list(outcome.winners),
                points=list(outcome.points),
            )
            k += 1

    async def _decide(
        self, seat: int, state: GaigelState, k: int, legal: list[int]
    ) -> tuple[int, float, tuple[str, ...]] | None:
        if self.forfeit_side is not None:
            return None
        bot = self.house.get(seat)
        if bot is not None:
            await asyncio.sleep(0)  # let other tables and streams run
            started = time.perf_counter()
            request = DecisionRequest(seat, k, tuple(legal), functools.partial(state.observation, seat), self.rules)
            action = bot.decide(request)
            used = time.perf_counter() - started
            if action not in legal:
                raise RuntimeError(f"house bot {self.seat_bot(seat)} chose illegal action {action}")
            self.metrics.decisions.labels("house").inc()
            return action, used, ()
        return await self._remote_decide(seat, state, k, legal)

    async def _remote_decide(
        self, seat: int, state: GaigelState, k: int, legal: list[int]
    ) -> tuple[int, float, tuple[str, ...]] | None:
        sess = self.sessions[seat]
        assert sess is not None
        did = secrets.token_urlsafe(16)
        sess.issued.add(did)
        decision_time, bank = self.clock.decision_time, self.bank[seat]
        request = bs.DecisionRequest(
            decision_id=did,
            legal_actions=[codec.legal_action(a) for a in legal],
            observation=codec.observation(state.observation(seat), k, self.tricks_cache),
            time_left=codec.duration(decision_time),
            bank_left=codec.duration(bank),
        )
        strikes_before = self.strikes[seat]
        was_connected = sess.connected
        queued = time.monotonic()
        self.legal[seat] = legal
        self.open[seat] = did
        sent = sess.send_tracked(decision_request=request)
        request_sequence = sess.sequence
        start = queued
        if sent is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):  # no extra task per decision, unlike wait_for
                    start = await asyncio.shield(sent)
        self.metrics.server_lag.observe(max(0.0, start - queued))
        deadline = start + decision_time + bank
        while True:
            if self.forfeit_side is not None:
                self.open[seat] = None
                return None
            remaining = deadline - time.monotonic()
            item: Answer | str | None = None
            if remaining > 0:
                if not self.inbox.empty():
                    item = self.inbox.get_nowait()
                else:
                    try:
                        async with asyncio.timeout(remaining):
                            item = await self.inbox.get()
                    except TimeoutError:
                        item = None
            if isinstance(item, str):
                continue
            if item is not None and not hmac.compare_digest(item.decision_id.encode(), did.encode()):
                continue  # an answer to another decision left in the inbox: never applied to this one
            if item is None:
                item = self._take_answer(did)  # accepted while the timeout fired: it counts, not the fallback
            flags: list[str] = []
            if self.strikes[seat] > strikes_before:
                flags.append("REJECTED_ANSWERS")
            if not was_connected or not sess.connected:
                flags.append("DISCONNECTED")
            if item is None:
                self.open[seat] = None
                self.fallbacks[seat][did] = request_sequence
                self.bank[seat] = 0.0
                used = decision_time + bank
                self.metrics.decisions.labels("timeout_fallback").inc()
                self.fault(
                    seat,
                    "TIMEOUT_FALLBACK",
                    f"no answer within {decision_time:g} s and the bank of {bank:.3f} s: falls back to the first legal action, {A.action_label(legal[0])}",
                    strike=True,
                    decision_id=did,
                )
                if self.forfeit_side is not None:
                    return None
                return legal[0], used, ("TIMEOUT_FALLBACK", *flags)
            used = max(0.0, item.received - start)
            lag = time.monotonic() - item.received
            self.metrics.server_lag.observe(max(0.0, lag))
            if used > decision_time:
                self.bank[seat] = max(0.0, bank - (used - decision_time))
            self.metrics.decisions.labels("answered").inc()
            self.metrics.decision_seconds.labels(self.seat_bot(seat)).observe(used)
            self.log.debug(
                "decision",
                seat=seat,
                bot=self.seat_bot(seat),
                hand=k,
                step=self.step,
                action=item.action_id,
                seconds=round(used, 6),
            )
            return item.action_id, used, tuple(flags)

    def _take_answer(self, did: str) -> Answer | None:
        """The accepted answer to *did* still in the inbox, if any; other answers there are dropped."""
        found: Answer | None = None
        keep: list[str] = []
        while not self.inbox.empty():
            x = self.inbox.get_nowait()
            if isinstance(x, str):
                keep.append(x)
            elif hmac.compare_digest(x.decision_id.encode(), did.encode()):
                found = x
        for x in keep:
            self.inbox.put_nowait(x)
        return found

    def _finish(self, termination: str) -> None:
        writer = self.writer
        assert writer is not None
        self.termination = termination
        for seat in range(self.spec.players):
            self.open[seat] = None
        if self.hand_open:
            writer.end_hand(None, aborted=True)
            self.hand_open = False
            end = codec.hand_end(None, self.hand_index or 0, None, self.rules)
            for seat in range(self.spec.players):
                self._send(seat, hand_end=end)
            self._publish("hand_end", end)
        forfeit = [self.forfeit_side] if termination == "forfeit" and self.forfeit_side is not None else None
        record = writer.finish(self.score, termination, forfeit_sides=forfeit)
        if self.cancel_reason:
            record["cancel_reason"] = self.cancel_reason
        self._record_z = zlib.compress(json.dumps(record).encode())
        self.state = ENDED
        self.end_time = _now_ts()
        self.lobby.write_record(self)
        winners = self._winner_sides()
        base = gm.MatchEnd(
            match_id=self.match_id,
            termination=codec.MATCH_TERMINATION[termination],
            winner_sides=winners,
            sides=codec.side_results(self.score.hands_won, self.score.dashes),
            hands_played=self.score.hands_played,
        )
        if self.withhold_seed:
            base.seed_withheld = True
        else:
            base.seed = self.spec.seed
        if forfeit:
            base.forfeiting_side = forfeit[0]
        for seat in range(self.spec.players):
            mine = gm.MatchEnd()
            mine.CopyFrom(base)
            mine.faults.extend(self.faults[seat])
            self._send(seat, match_end=mine)
        public = gm.MatchEnd()
        public.CopyFrom(base)
        for fs in self.faults:
            public.faults.extend(fs)
        self._publish("match_end", public)
        for q in self.spectators:
            q.put_nowait(None)
        self.spectators.clear()
        self.metrics.matches.labels(termination).inc()
        self.metrics.active_matches.dec()
        self.log.info(
            "match_end",
            termination=termination,
            hands_played=self.score.hands_played,
            winners=winners,
            dashes=list(self.score.dashes),
        )
        self._compact()
        self.lobby.release(self)

    def _compact(self) -> None:
        """Drops what only a running match needs and packs the public messages: the lobby keeps
        ended tables for a long time (GetMatch, GetMatchRecord, WatchMatch)."""
        self.state_ref = None
        self.writer = None
        self.house = {}
        self.tricks_cache = []
        self.legal = [[] for _ in self.legal]
        packed = bytearray()
        for kind, msg in self.public:
            data = ms.WatchMatchResponse(**{kind: msg}).SerializeToString()
            packed += len(data).to_bytes(4, "big") + data
        self.public_packed = zlib.compress(packed)
        self.public = []

    def _public_messages(self) -> list[tuple[str, Any]]:
        if not self.public_packed:
            return self.public
        out: list[tuple[str, Any]] = []
        data, i = zlib.decompress(self.public_packed), 0
        while i < len(data):
            size = int.from_bytes(data[i : i + 4], "big")
            resp = ms.WatchMatchResponse.FromString(data[i + 4 : i + 4 + size])
            kind = resp.WhichOneof("message")
            assert kind is not None
            out.append((kind, getattr(resp, kind)))
            i += 4 + size
        return out

    @property
    def record_json(self) -> str | None:
        """The match record (with the seed) as JSON once the match has ended, else None."""
        return None if self._record_z is None else zlib.decompress(self._record_z).decode()

    @property
    def record(self) -> dict[str, Any] | None:
        """The match record as a dict (a fresh copy) once the match has ended, else None."""
        text = self.record_json
        return None if text is None else json.loads(text)

    def end_waiting(self, termination: str) -> None:
        """Ends a match that never started (cancelled or aborted while waiting)."""
        self.writer = RecordWriter(self.spec, versions=list(self.versions), match_id=self.match_id)
        self.writer.data["clock"] = self.clock.to_dict()
        self.state = RUNNING
        self.metrics.active_matches.inc()
        self._finish(termination)


def _json(data: Any) -> str:
    return json.dumps(data, sort_keys=True)


class Lobby:
    """All tables and the pools of idle sessions per bot name."""

    def __init__(
        self, metrics: ServerMetrics, records_dir: Path | None, max_sessions_per_bot: int, keep_ended: int = 5000
    ) -> None:
        self.metrics = metrics
        self.records_dir = records_dir
        self.max_sessions_per_bot = max_sessions_per_bot
        self.keep_ended = keep_ended
        self.tables: dict[str, Table] = {}  # in creation order
        self.waiting: dict[str, Table] = {}  # the tables try_start looks at, oldest first
        self.ended: deque[str] = deque()  # ended tables still kept, oldest first
        self.evicted = 0
        self.by_request: dict[str, str] = {}
        self.idle: dict[str, list[BotSession]] = {}
        self.sessions: dict[str, set[BotSession]] = {}
        self.log = get_logger()
        self.on_end: list[Callable[[Table], None]] = []
        self.closing = False

    # --- sessions --------------------------------------------------------------------

    def add_session(self, session: BotSession) -> None:
        """Counts a new session against its bot's limit.

        :raises ServiceError: RESOURCE_EXHAUSTED when the bot has too many sessions.
        """
        live = self.sessions.setdefault(session.bot_name, set())
        if len(live) >= self.max_sessions_per_bot:
            raise ServiceError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"too many sessions for bot {session.bot_name!r}: at most {self.max_sessions_per_bot} at once; close one first",
            )
        live.add(session)

    def make_idle(self, session: BotSession) -> None:
        """Puts *session* in its bot's pool and starts any table that can start now."""
        session.table, session.seat = None, -1
        self.idle.setdefault(session.bot_name, []).append(session)
        self.try_start()

    def drop(self, session: BotSession) -> None:
        """Forgets a closed session."""
        session.closed = True
        pool = self.idle.get(session.bot_name, [])
        if session in pool:
            pool.remove(session)
        self.sessions.get(session.bot_name, set()).discard(session)

    def stream_closed(self, session: BotSession) -> None:
        """The stream of *session* ended: in a match the disconnect policy applies, else the session ends."""
        table = session.table
        if table is not None and table.state == RUNNING and not session.closed:
            table.on_disconnect(session.seat, session)
        else:
            self.drop(session)

    def leave(self, session: BotSession) -> None:
        """A Leave: end now if idle, else after the current match."""
        session.leaving = True
        if session.table is None:
            self.drop(session)
            session.close()

    def resume(self, match_id: str, seat: int, token: str) -> tuple[Table, BotSession]:
        """Finds the session of a seat for Resume.

        :raises ServiceError: NOT_FOUND, UNAUTHENTICATED or FAILED_PRECONDITION with the reason.
        """
        table = self.tables.get(match_id)
        if table is None:
            raise ServiceError(grpc.StatusCode.NOT_FOUND, f"Resume: no match {match_id!r} on this server")
        if not 0 <= seat < table.spec.players:
            raise ServiceError(
                grpc.StatusCode.INVALID_ARGUMENT, f"Resume: seat must be 0..{table.spec.players - 1}, got {seat}"
            )
        if not hmac.compare_digest(token.encode(), table.resume_tokens[seat].encode()):
            raise ServiceError(
                grpc.StatusCode.UNAUTHENTICATED, f"Resume: wrong resume token for match {match_id} seat {seat}"
            )
        session = table.sessions[seat]
        if table.state != RUNNING or session is None or session.table is not table:
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"Resume: match {match_id} is over (or seat {seat} is not played over a stream)",
            )
        if (
            session.disconnected_at is not None
            and time.monotonic() - session.disconnected_at > table.clock.resume_grace
        ):
            raise ServiceError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"Resume: the grace period of {table.clock.resume_grace:g} s has expired",
            )
        if session.connected and session.stream is not None:
            old = session.stream
            session.detach(old)
            old.queue.put_nowait(
                Abort(grpc.StatusCode.ABORTED, "this session was taken over by a Resume on another stream")
            )
            table.on_disconnect(seat, session)
        return table, session

    # --- tables ----------------------------------------------------------------------

    def add_table(self, table: Table) -> None:
        """Registers a new waiting table and starts it if its sessions are there."""
        self.tables[table.match_id] = table
        self.waiting[table.match_id] = table
        if table.request_id:
            self.by_request[table.request_id] = table.match_id
        self.try_start()

    def try_start(self) -> None:
        """Starts every waiting table (oldest first) whose remote seats all have idle sessions."""
        if self.closing:
            return
        for table in list(self.waiting.values()):
            if table.state != WAITING:
                self.waiting.pop(table.match_id, None)
                continue
            remote = [s for s in range(table.spec.players) if s not in table.house]
            need = Counter(table.seat_bot(s) for s in remote)
            if any(len([x for x in self.idle.get(b, []) if x.connected]) < c for b, c in need.items()):
                continue
            chosen: dict[int, BotSession] = {}
            for s in remote:
                pool = self.idle[table.seat_bot(s)]
                sess = next(x for x in pool if x.connected)
                pool.remove(sess)
                chosen[s] = sess
            del self.waiting[table.match_id]
            table.start(chosen)

    def release(self, table: Table) -> None:
        """Returns the sessions of an ended table to their pools (or ends them)."""
        for sess in table.sessions:
            if sess is None or sess.table is not table:
                continue
            sess.table, sess.seat = None, -1
            sess.buffer = []  # the resume buffer: no Resume into an ended match
            if sess.leaving:
                self.drop(sess)
                sess.close()
            elif sess.connected:
                self.make_idle(sess)
            else:
                self.drop(sess)
        table.sessions = [None] * len(table.sessions)  # an ended table must not keep sessions alive
        for cb in self.on_end:
            cb(table)
        self._retain(table)
        self.try_start()

    def _retain(self, table: Table) -> None:
        """Keeps *table* for GetMatch/GetMatchRecord/WatchMatch, forgetting the oldest ended table
        beyond ``keep_ended``: a server that runs for days must not grow with every match."""
        self.waiting.pop(table.match_id, None)
        self.ended.append(table.match_id)
        while len(self.ended) > self.keep_ended:
            old = self.tables.pop(self.ended.popleft(), None)
            if old is not None:
                self.evicted += 1
                if old.request_id and self.by_request.get(old.request_id) == old.match_id:
                    del self.by_request[old.request_id]

    def write_record(self, table: Table) -> None:
        """Writes the record of *table* atomically to the records directory, if any."""
        if self.records_dir is None or table.record is None:
            return
        try:
            self.records_dir.mkdir(parents=True, exist_ok=True)
            dump_record(table.record, self.records_dir / f"{table.match_id}.json")
        except OSError as e:
            self.log.error("record_write_failed", match_id=table.match_id, error=str(e))

    def cancel(self, table: Table, termination: str, reason: str = "") -> None:
        """Ends a waiting or running table as *termination* (cancelled or aborted)."""
        table.cancel_termination = termination
        table.cancel_reason = reason
        if table.state == WAITING:
            table.end_waiting(termination)
        elif table.task is not None and not table.task.done():
            table.task.cancel()

    async def shutdown(self) -> None:
        """Aborts every table (records written), then ends every session."""
        self.closing = True
        tasks = []
        for table in list(self.tables.values()):
            if table.state != ENDED:
                self.cancel(table, "aborted", "server shutdown")
                if table.task is not None:
                    tasks.append(table.task)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for live in list(self.sessions.values()):
            for sess in list(live):
                sess.close()


__all__ = ["Clock", "Lobby", "ServiceError", "Table"]
