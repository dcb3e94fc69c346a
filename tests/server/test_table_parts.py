"""The parts of a table, without gRPC or a server: the seat ledger's verdicts, a seat's clock,
the broadcast's packing, and a table that runs on its hooks alone (no lobby).

The ledger is the judge of DESIGN.md's answer policies: these tests drive it directly, one
case per test, then with hypothesis over sequences of issued, answered, timed-out and
resumed decisions against the policy table written out as a model.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from typing import Any

import grpc
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from prometheus_client import CollectorRegistry

from gaigel.bots import make_bot
from gaigel.match import FaultReason, MatchSpec, MatchTermination
from gaigel.ruleset import preset
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import game_pb2 as gm
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_server.broadcast import Broadcast, watch_response
from gaigel_server.clock import Clock, SeatClock
from gaigel_server.ledger import ID_BATCH, ID_CHARS, Accept, Ignore, Reject, SeatLedger, decision_id
from gaigel_server.metrics import ServerMetrics
from gaigel_server.seat import Seat
from gaigel_server.session import Abort, Answer, BotSession, Outgoing, Stream
from gaigel_server.states import TableState
from gaigel_server.table import Table, TableHooks
from tests.server.srvkit import queued

LIMIT = 3


def test_decision_ids_are_distinct_url_safe_and_not_shared_with_a_forked_child() -> None:
    """Ids come from the OS a batch at a time: across batches they stay distinct, and a process
    forked with a batch half dealt draws its own (the batch left would repeat the parent's)."""
    ids = [decision_id() for _ in range(3 * ID_BATCH + 5)]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(f"[A-Za-z0-9_-]{{{ID_CHARS}}}", i) for i in ids), ids[:3]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, then gone without running the parent's cleanup
        os.close(read_end)
        os.write(write_end, " ".join(decision_id() for _ in range(ID_BATCH)).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        child = set(pipe.read().decode().split())
    os.waitpid(pid, 0)
    parent = {decision_id() for _ in range(ID_BATCH)}
    assert len(child) == ID_BATCH and not child & parent


def why(action_id: int) -> str:
    return f"action {action_id} is not in the test's legal list"


def open_ledger(earlier: tuple[str, ...] = ()) -> SeatLedger:
    ledger = SeatLedger(seat=1, strikes_limit=LIMIT, earlier=set(earlier))
    ledger.issue("d1", [3, 5], why)
    return ledger


def reject(verdict: object) -> Reject:
    assert isinstance(verdict, Reject), verdict
    return verdict


class TestVerdicts:
    def test_legal_answer_to_the_open_decision_is_accepted_and_closes_it(self) -> None:
        ledger = open_ledger()
        assert ledger.judge("d1", 5) == Accept()
        assert ledger.open is None

    def test_illegal_action_is_a_strike_and_the_decision_stays_open(self) -> None:
        ledger = open_ledger()
        v = reject(ledger.judge("d1", 7))
        assert (v.reason, v.fault, v.strikes, v.decision_open) == (
            bs.REJECT_REASON_ILLEGAL_ACTION,
            "ILLEGAL_ACTION",
            1,
            True,
        )
        assert "not in the test's legal list" in v.message
        assert ledger.open == "d1" and ledger.strikes == 0  # the table charges the strike, not the judge

    def test_the_last_strike_allowed_keeps_the_decision_open_one_more_does_not(self) -> None:
        ledger = open_ledger()
        for _ in range(LIMIT - 1):
            ledger.strike()
        assert reject(ledger.judge("d1", 7)).decision_open is True
        ledger.strike()
        v = reject(ledger.judge("d1", 7))
        assert v.strikes == LIMIT + 1 and v.decision_open is False

    def test_second_answer_to_a_decision_is_a_stale_strike(self) -> None:
        ledger = open_ledger()
        ledger.judge("d1", 3)
        v = reject(ledger.judge("d1", 3))
        assert (v.reason, v.fault, v.decision_open) == (bs.REJECT_REASON_STALE_DECISION, "STALE_DECISION", False)

    def test_identical_repeat_after_a_resume_is_ignored(self) -> None:
        ledger = open_ledger()
        ledger.judge("d1", 3)
        ledger.resumed(last_sequence=10)
        assert ledger.judge("d1", 3) == Ignore()
        assert reject(ledger.judge("d1", 5)).fault == "STALE_DECISION"  # a different action is no repeat

    def test_answer_to_the_previous_match_is_rejected_without_a_strike(self) -> None:
        ledger = open_ledger(earlier=("old",))
        v = reject(ledger.judge("old", 3))
        assert (v.reason, v.fault, v.strikes) == (bs.REJECT_REASON_STALE_DECISION, None, 0)
        assert "match that has ended" in v.message

    def test_fallback_decision_resent_after_resume_is_rejected_without_a_strike(self) -> None:
        ledger = open_ledger()
        ledger.timed_out("d1", request_sequence=7)
        ledger.resumed(last_sequence=6)  # the bot had not seen the request: it came with the resent messages
        v = reject(ledger.judge("d1", 3))
        assert (v.reason, v.fault) == (bs.REJECT_REASON_STALE_DECISION, None)

    def test_fallback_decision_the_bot_had_seen_is_a_stale_strike(self) -> None:
        ledger = open_ledger()
        ledger.timed_out("d1", request_sequence=7)
        ledger.resumed(last_sequence=7)
        assert reject(ledger.judge("d1", 3)).fault == "STALE_DECISION"

    def test_unknown_id_with_nothing_open_is_not_your_turn(self) -> None:
        ledger = SeatLedger(seat=2, strikes_limit=LIMIT)
        v = reject(ledger.judge("nope", 1))
        assert (v.reason, v.fault) == (bs.REJECT_REASON_NOT_YOUR_TURN, "STALE_DECISION")
        assert "seat 2" in v.message

    def test_unknown_id_while_another_is_open_is_an_unknown_decision(self) -> None:
        v = reject(open_ledger().judge("nope", 3))
        assert (v.reason, v.fault, v.decision_open) == (bs.REJECT_REASON_UNKNOWN_DECISION, "STALE_DECISION", True)

    def test_compact_leaves_the_ids_the_next_match_needs(self) -> None:
        ledger = open_ledger()
        kept = ledger.issued  # the session's reference (Table.start shares the set)
        ledger.compact()
        assert kept == {"d1"} and ledger.issued == set()
        next_match = SeatLedger(seat=1, strikes_limit=LIMIT, earlier=kept)
        assert reject(next_match.judge("d1", 3)).fault is None

    def test_strike_reports_going_over_the_limit(self) -> None:
        ledger = SeatLedger(seat=0, strikes_limit=1)
        assert [ledger.strike(), ledger.strike()] == [False, True]


class LedgerMachine(RuleBasedStateMachine):
    """Random sequences of decisions and answers, each verdict checked against the policy table."""

    def __init__(self) -> None:
        super().__init__()
        self.earlier = {"old-1", "old-2"}
        self.ledger = SeatLedger(seat=0, strikes_limit=LIMIT, earlier=set(self.earlier))
        self.sequence = 0  # the seat's last message sequence number
        self.open: str | None = None
        self.legal: list[int] = []
        self.closed: set[str] = set()  # answered or decided by the fallback
        self.fallbacks: dict[str, int] = {}  # decision id -> sequence of its request
        self.missed: set[str] = set()  # fallback decisions whose request was resent after a Resume
        self.last: tuple[str, int, int] | None = None  # last accepted (id, action, resumes then)
        self.resumes = 0
        self.strikes = 0
        self.accepted: list[str] = []

    @precondition(lambda self: self.open is None)
    @rule(legal=st.lists(st.integers(0, 30), min_size=1, max_size=5, unique=True), gap=st.integers(1, 3))
    def issue(self, legal: list[int], gap: int) -> None:
        self.sequence += gap  # other messages (events) are numbered in between
        did = f"d{self.sequence}"
        self.ledger.issue(did, legal, why)
        self.open, self.legal = did, legal

    @precondition(lambda self: self.open is not None)
    @rule()
    def time_out(self) -> None:
        assert self.open is not None
        self.ledger.timed_out(self.open, self.sequence)
        self.fallbacks[self.open] = self.sequence
        self.closed.add(self.open)
        self.open = None
        self.charge_strike()  # the fallback costs a strike

    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        # Around each fallback's request, where seen and not seen meet, or anywhere.
        edges = sorted({max(0, s + d) for s in self.fallbacks.values() for d in (-1, 0)})
        anywhere = st.integers(0, self.sequence)
        last_sequence = data.draw(st.one_of(st.sampled_from(edges), anywhere) if edges else anywhere)
        self.ledger.resumed(last_sequence)
        self.resumes += 1
        self.missed |= {did for did, seq in self.fallbacks.items() if seq > last_sequence}

    @rule(data=st.data())
    def answer(self, data: st.DataObject) -> None:
        kinds = ["unknown", "earlier"]
        if self.open is not None:
            kinds += ["open-legal", "open-illegal"]
        if self.closed:
            kinds.append("closed")
        if self.last is not None:
            kinds.append("repeat")
        kind = data.draw(st.sampled_from(kinds), label="kind")
        did, action = self.pick(kind, data)
        verdict = self.ledger.judge(did, action)
        self.check(did, action, verdict)

    def pick(self, kind: str, data: st.DataObject) -> tuple[str, int]:
        if kind == "repeat":
            assert self.last is not None
            return self.last[0], self.last[1]
        if kind == "open-legal":
            assert self.open is not None
            return self.open, data.draw(st.sampled_from(self.legal))
        action = data.draw(st.integers(0, 30).filter(lambda a: kind != "open-illegal" or a not in self.legal))
        if kind == "open-illegal":
            assert self.open is not None
            return self.open, action
        if kind == "closed":
            return data.draw(st.sampled_from(sorted(self.closed))), action
        if kind == "earlier":
            return data.draw(st.sampled_from(sorted(self.earlier))), action
        return data.draw(st.sampled_from(["x", "d0", "zz"])), action

    def check(self, did: str, action: int, verdict: Accept | Ignore | Reject) -> None:
        """The verdict the policy table asks for, in its order of precedence."""
        if did == self.open:
            if action in self.legal:
                assert verdict == Accept()
                self.accepted.append(did)
                self.closed.add(did)
                self.last, self.open = (did, action, self.resumes), None
                return
            self.expect(verdict, bs.REJECT_REASON_ILLEGAL_ACTION, strike=True)
        elif self.last is not None and (did, action) == self.last[:2] and self.last[2] < self.resumes:
            assert verdict == Ignore()
        elif did in self.earlier or did in self.missed:
            self.expect(verdict, bs.REJECT_REASON_STALE_DECISION, strike=False)
        elif did in self.closed:
            self.expect(verdict, bs.REJECT_REASON_STALE_DECISION, strike=True)
        elif self.open is None:
            self.expect(verdict, bs.REJECT_REASON_NOT_YOUR_TURN, strike=True)
        else:
            self.expect(verdict, bs.REJECT_REASON_UNKNOWN_DECISION, strike=True)

    def expect(self, verdict: object, reason: int, strike: bool) -> None:
        v = reject(verdict)
        assert v.reason == reason and v.strike == strike
        assert v.strikes == self.strikes + strike
        assert v.decision_open == (self.open is not None and v.strikes <= LIMIT)
        if strike:
            self.charge_strike()  # what the table does with the verdict

    def charge_strike(self) -> None:
        self.strikes += 1
        assert self.ledger.strike() == (self.strikes > LIMIT)

    @invariant()
    def ledger_agrees(self) -> None:
        assert self.ledger.open == self.open
        assert self.ledger.strikes == self.strikes
        assert len(self.accepted) == len(set(self.accepted))  # never two moves for one decision


TestLedgerSequences = LedgerMachine.TestCase
TestLedgerSequences.settings = settings(max_examples=300, stateful_step_count=40, deadline=None, derandomize=True)


class TestSeatClock:
    def test_answer_within_the_decision_time_keeps_the_bank(self) -> None:
        c = SeatClock(Clock(decision_time=2.0, bank=30.0))
        c.charge(1.5)
        assert c.bank == 30.0 and c.deadline(100.0) == 132.0

    def test_overtime_comes_out_of_the_bank_and_never_below_zero(self) -> None:
        c = SeatClock(Clock(decision_time=2.0, bank=3.0))
        c.charge(4.0)
        assert c.bank == 1.0
        c.charge(10.0)
        assert c.bank == 0.0 and c.deadline(0.0) == 2.0

    def test_running_out_spends_the_bank_and_reports_the_time_used(self) -> None:
        c = SeatClock(Clock(decision_time=2.0, bank=3.0))
        assert c.run_out() == 5.0 and c.bank == 0.0

    @given(st.lists(st.floats(0, 100), max_size=20))
    def test_bank_never_grows(self, used: list[float]) -> None:
        c = SeatClock(Clock(decision_time=1.0, bank=10.0))
        before = c.bank
        for u in used:
            c.charge(u)
            assert 0.0 <= c.bank <= before
            before = c.bank


class _Host:
    """A seat's table, for the seat and broadcast tests: running, and noting what reaches it."""

    def __init__(self) -> None:
        self.state = TableState.RUNNING
        self.calls: list[tuple[str, int]] = []

    def on_action(self, seat: int, answer: Answer) -> None:
        self.calls.append(("action", seat))

    def fault(self, seat: int, reason: FaultReason, message: str, strike: bool, decision_id: str = "") -> None:
        self.calls.append((reason.value, seat))

    def on_disconnect(self, seat: int, session: BotSession) -> None:
        self.calls.append(("disconnect", seat))


def _seats(n: int = 2) -> list[Seat]:
    host = _Host()
    return [Seat(host, s, Clock()) for s in range(n)]


class TestSeat:
    def test_bind_and_release_are_the_only_writes_of_a_sessions_seat(self) -> None:
        """bind sets the session's seat, token and decision ids (the previous match's kept as
        earlier); release clears its seat and resume buffer; a session bound elsewhere since is not
        released again."""
        first, other = _seats()[0], _seats()[1]
        sess = BotSession("bot", "1", compact=True)
        sess.issued = {"old-id"}
        first.bind(sess)
        assert sess.seat is first and sess.resume_token == first.resume_token and first.mode == "compact"
        assert first.ledger.earlier == {"old-id"} and sess.issued is first.ledger.issued
        sess.send(match_start=bs.MatchStart())
        assert sess.buffer
        assert first.release() is sess and sess.seat is None and sess.buffer == [] and first.session is None
        other.bind(sess)
        assert first.release() is None and sess.seat is other

    def test_what_comes_in_reaches_the_host_as_its_seat(self) -> None:
        seats = _seats()
        host = seats[1].host
        assert isinstance(host, _Host)
        seats[1].act(Answer("d", 3, 0.0))
        seats[1].stream_fault(FaultReason.MALFORMED_MESSAGE, "bad")
        seats[1].stream_broke(BotSession("bot", "1"))
        assert host.calls == [("action", 1), ("MALFORMED_MESSAGE", 1), ("disconnect", 1)]
        assert seats[1].running
        host.state = TableState.ENDED
        assert not seats[1].running


class TestStream:
    def test_the_writer_gets_items_in_order_waiting_for_them_and_a_cancelled_wait_leaves_nothing(self) -> None:
        async def scenario() -> None:
            stream = Stream()
            first, second = Outgoing(b"a"), Outgoing(b"bc")
            waiting = asyncio.ensure_future(stream.next())
            await asyncio.sleep(0)
            assert not waiting.done()
            stream.put(first)
            stream.put(second)
            assert await asyncio.wait_for(waiting, 1) is first
            assert stream.backlogged(1, 10**6) and not stream.backlogged(2, 10**6)
            assert stream.backlogged(10, 2) and stream.queued_bytes == 3
            assert await stream.next() is second
            cancelled = asyncio.ensure_future(stream.next())
            await asyncio.sleep(0)
            cancelled.cancel()
            await asyncio.gather(cancelled, return_exceptions=True)
            stream.end(Abort(grpc.StatusCode.ABORTED, "taken over"))  # no waiter left to wake: queued
            item = await asyncio.wait_for(stream.next(), 1)
            assert isinstance(item, Abort) and item.message == "taken over"
            stream.end()
            assert await asyncio.wait_for(stream.next(), 1) is None

        asyncio.run(scenario())


class TestBroadcast:
    def test_packed_public_messages_read_back_the_same(self) -> None:
        b = Broadcast(_seats())
        b.publish("hand_start", gm.HandStart(hand_index=0).SerializeToString())
        b.publish("event", gm.Event(hand_index=0).SerializeToString())
        b.publish("hand_start", gm.HandStart(hand_index=1, talon_size=300).SerializeToString())
        b.publish("match_end", b"")
        before = b.messages()
        b.pack()
        assert b.public == [] and b.packed
        assert b.messages() == before
        assert [watch_response(i, m) for i, m in enumerate(before, 1)] == [
            ms.WatchMatchResponse(sequence=1, hand_start=gm.HandStart(hand_index=0)),
            ms.WatchMatchResponse(sequence=2, event=gm.Event(hand_index=0)),
            ms.WatchMatchResponse(sequence=3, hand_start=gm.HandStart(hand_index=1, talon_size=300)),
            ms.WatchMatchResponse(sequence=4, match_end=gm.MatchEnd()),
        ]

    def test_watch_from_the_current_hand_and_end(self) -> None:
        b = Broadcast(_seats())
        b.publish("hand_start", gm.HandStart(hand_index=0).SerializeToString())
        b.publish("hand_start", gm.HandStart(hand_index=1).SerializeToString())
        q = b.watch(match=ms.Match(match_id="m"), from_start=False, ended=False)
        assert q.get_nowait() == ("match", ms.Match(match_id="m").SerializeToString())
        assert q.get_nowait() == ("hand_start", gm.HandStart(hand_index=1).SerializeToString())
        b.publish("event", gm.Event(hand_index=1).SerializeToString())
        b.end()
        assert q.get_nowait() == ("event", gm.Event(hand_index=1).SerializeToString())
        assert q.get_nowait() is None and b.spectators == []

    def test_send_skips_a_session_that_plays_another_table(self) -> None:
        seats, elsewhere = _seats(), _seats()[0]
        b = Broadcast(seats)
        sess = BotSession("bot", "1")
        seats[1].bind(sess)
        b.send(1, match_end=gm.MatchEnd())
        seats[1].release()
        elsewhere.bind(sess)
        b.send(1, match_end=gm.MatchEnd())
        assert sess.sequence == 1


class TestTableOnItsHooks:
    """A table needs no lobby: what it needs comes in its TableHooks."""

    def table(self) -> tuple[Table, list[tuple[str, dict[str, Any]]], list[str]]:
        saved: list[tuple[str, dict[str, Any]]] = []
        ended: list[str] = []
        hooks = TableHooks(
            ServerMetrics(CollectorRegistry()),
            save_record=lambda match_id, record: saved.append((match_id, record)),
            on_ended=lambda t: ended.append(t.state),
        )
        spec = MatchSpec(ruleset=preset("default", 2), seed=7, hands=2, bots=("house:random", "house:first"))
        house = {0: make_bot("random"), 1: make_bot("first")}
        return Table("m1", spec, Clock(), "default", house, hooks), saved, ended

    def test_house_match_saves_its_record_then_reports_the_end(self) -> None:
        table, saved, ended = self.table()

        async def play() -> None:
            table.start({})  # house seats only: no session to bind
            await table.over.wait()

        asyncio.run(play())
        assert ended == ["ended"]  # called once, after the table has ended
        [(match_id, record)] = saved
        assert match_id == "m1" and json.loads(json.dumps(record)) == table.record
        assert (record["result"]["termination"], record["result"]["hands_played"]) == ("completed", 2)

    def test_cancel_while_waiting_still_saves_a_record(self) -> None:
        table, saved, ended = self.table()
        table.cancel(MatchTermination.CANCELLED, "not needed")
        assert ended == ["ended"] and table.termination is MatchTermination.CANCELLED
        assert saved[0][1]["cancel_reason"] == "not needed"

    def test_an_accepted_answer_steps_the_table_in_the_answering_call(self) -> None:
        """The table has no task: the call that hands in an accepted answer (the stream's reader, in
        the server) has queued the seat's next DecisionRequest, or its MatchEnd, when it returns,
        with no loop turn between (one hand-off per decision, reader -> writer)."""
        saved: list[tuple[str, dict[str, Any]]] = []
        hooks = TableHooks(
            ServerMetrics(CollectorRegistry()), save_record=lambda m, r: saved.append((m, r)), on_ended=lambda t: None
        )
        spec = MatchSpec(ruleset=preset("default", 2), seed=11, hands=2, bots=("alpha", "house:first"))
        table = Table("m2", spec, Clock(), "default", {1: make_bot("first")}, hooks)

        async def play() -> int:
            session = BotSession("alpha", "1", compact=True)
            stream = Stream()
            session.attach(stream)
            table.start({0: session})
            await asyncio.sleep(0)  # the match starts at the loop's next turn
            decisions = 0
            while True:
                messages = queued(stream)
                assert messages, "nothing queued by the answering call"
                last = messages[-1]
                if last.WhichOneof("message") == "match_end":
                    return decisions
                assert last.WhichOneof("message") == "decision_request", last
                req = last.decision_request
                assert session.seat is not None
                session.seat.act(Answer(req.decision_id, req.legal_actions[0].id, time.monotonic()))
                decisions += 1

        decisions = asyncio.run(play())
        assert decisions > 10 and table.state is TableState.ENDED
        assert saved[0][1]["result"]["termination"] == "completed"
