"""The open decision's one timer (gaigel_server.table._Pending): the clock runs from when the
request's write began, which the writer notes on the message; the table does not wait for it.
Real event loop, real ledger and seat clock; only the writer and the table (told the outcome
through a future here) are played by the test."""

from __future__ import annotations

import asyncio
import time

from gaigel_server.clock import Clock, SeatClock
from gaigel_server.ledger import SeatLedger
from gaigel_server.session import Answer, Outgoing
from gaigel_server.table import WRITE_WAIT, Forfeited, _Alarm, _Pending

ALLOWANCE = 0.05  # decision time, no bank


class Told:
    """The table's side: every outcome the decision tells, and a future for the first."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.outcomes: list[Answer | Forfeited | None] = []
        self.first: asyncio.Future[Answer | Forfeited | None] = loop.create_future()

    def __call__(self, outcome: Answer | Forfeited | None) -> None:
        self.outcomes.append(outcome)
        if not self.first.done():
            self.first.set_result(outcome)


def pending(
    loop: asyncio.AbstractEventLoop, allowance: float = ALLOWANCE, alarm: _Alarm | None = None
) -> tuple[_Pending, SeatLedger, Told]:
    ledger = SeatLedger(0, strikes_limit=3)
    ledger.issue("d1", [1, 2], lambda a: "not legal now")
    told = Told(loop)
    clock = SeatClock(Clock(decision_time=allowance, bank=0.0))
    p = _Pending(alarm if alarm is not None else _Alarm(loop), ledger, clock, time.monotonic(), told)
    p.request = Outgoing(b"")
    p.request.began = p.queued  # written at once (the tests of a late write set it later)
    p.arm()
    return p, ledger, told


def test_the_deadline_counts_from_a_late_write_and_closes_the_ledger_first() -> None:
    """A write that begins 0.2 s after the request was queued moves the deadline by 0.2 s; at the
    deadline the ledger's decision is closed before the table hears of it."""

    async def scenario() -> tuple[float, Answer | Forfeited | None, str | None]:
        p, ledger, told = pending(asyncio.get_running_loop())
        assert p.request is not None
        p.request.began = None
        await asyncio.sleep(0.2)
        p.request.began = time.monotonic()
        outcome = await told.first
        return time.monotonic() - p.queued, outcome, ledger.open

    waited, outcome, still_open = asyncio.run(scenario())
    assert outcome is None and still_open is None
    assert 0.2 + ALLOWANCE - 0.005 <= waited < 0.2 + ALLOWANCE + 0.25, waited


def test_a_write_that_never_begins_runs_the_clock_from_the_queueing_after_write_wait() -> None:
    """A stuck writer does not stop the clock: after WRITE_WAIT the decision times out (its
    allowance counted from when the request was queued, long gone by then)."""

    async def scenario() -> tuple[float, Answer | Forfeited | None]:
        p, _, told = pending(asyncio.get_running_loop())
        assert p.request is not None
        p.request.began = None
        outcome = await told.first
        return time.monotonic() - p.queued, outcome

    waited, outcome = asyncio.run(scenario())
    assert outcome is None
    assert WRITE_WAIT - 0.005 <= waited < WRITE_WAIT + 0.3, waited


def test_an_answer_before_the_deadline_wins_and_the_timer_is_gone() -> None:
    async def scenario() -> tuple[Answer | Forfeited | None, str | None, bool, int]:
        p, ledger, told = pending(asyncio.get_running_loop())
        answer = Answer("d1", 2, time.monotonic())
        p.settle(answer)
        p.settle(None)  # a late timer (or a second settle) changes nothing
        outcome = await told.first
        await asyncio.sleep(ALLOWANCE * 2)  # past the deadline: the timer is gone with the answer
        return outcome, ledger.open, p.outcome is answer, len(told.outcomes)

    outcome, still_open, kept, times = asyncio.run(scenario())
    assert isinstance(outcome, Answer) and outcome.action_id == 2 and kept
    assert times == 1  # the table is told once
    assert still_open == "d1"  # the table's ledger.judge closed it in real play; the timer did not touch it


def test_a_tables_decisions_share_one_timer_and_each_keeps_its_own_deadline() -> None:
    """One alarm for a table's successive decisions: a decision settled in time leaves the timer
    set for the next, which times out at its own deadline, whether that is later (the timer rings
    early and is set again) or earlier (the timer is replaced)."""

    async def timed_out_after(first: float, second: float) -> tuple[float, int]:
        loop = asyncio.get_running_loop()
        alarm = _Alarm(loop)
        p1, _, told1 = pending(loop, first, alarm)
        p1.settle(Answer("d1", 1, time.monotonic()))  # in time: the timer stays
        p2, _, told2 = pending(loop, second, alarm)
        outcome = await told2.first
        assert outcome is None
        return time.monotonic() - p2.queued, len(told1.outcomes)

    waited, told = asyncio.run(timed_out_after(ALLOWANCE, 0.3))  # later: the early ring sets it again
    assert told == 1 and 0.3 - 0.005 <= waited < 0.3 + 0.25, waited
    waited, told = asyncio.run(timed_out_after(1.0, ALLOWANCE))  # earlier: the timer is replaced
    assert told == 1 and ALLOWANCE - 0.005 <= waited < ALLOWANCE + 0.25, waited


def test_a_closed_alarm_rings_for_nobody() -> None:
    """The table's end closes its alarm: the open decision it kept is not timed out after that."""

    async def scenario() -> int:
        loop = asyncio.get_running_loop()
        alarm = _Alarm(loop)
        _, _, told = pending(loop, ALLOWANCE, alarm)
        alarm.close()
        await asyncio.sleep(ALLOWANCE * 4)
        return len(told.outcomes)

    assert asyncio.run(scenario()) == 0
