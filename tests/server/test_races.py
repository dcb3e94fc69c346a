"""Answers that race with a deadline or with the end of a match (found by the soak run).

* An answer accepted in the same loop turn as its decision's timeout stayed in the table's
  inbox, and the next decision of any seat took it: a seat played another seat's card and
  the record stopped replaying.
* An answer in flight when a match ended was charged as a strike in the session's next match.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time

from srvkit import FAST, Admin, ScriptedBot, run, running_server

from gaigel.replay import replay
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import common_pb2 as cm


async def resumed(bot: ScriptedBot, match_id: str, last_sequence: int) -> ScriptedBot:
    """A new stream that resumes *bot*'s seat, having seen its messages up to *last_sequence*."""
    assert bot.match_start is not None
    again = ScriptedBot(bot.port, bot.name)
    resume = bs.Resume(
        match_id=match_id,
        seat=bot.match_start.seat,
        resume_token=bot.match_start.resume_token,
        last_sequence=last_sequence,
    )
    await again.open(bs.PlayRequest(resume=resume))
    return again


def test_answers_at_the_deadline_never_reach_another_decision() -> None:
    """Both bots answer within a few ms of a 50 ms deadline (and then hold the loop a little,
    so answers and timeouts land in the same turn): every record still replays hash for hash."""
    clock = dataclasses.replace(FAST, decision_time=0.05, bank=0.0, strikes_limit=1000)

    async def scenario() -> list[str]:
        problems: list[str] = []
        async with running_server(clock=clock) as (_server, port):
            admin = Admin(port)
            rng = random.Random(1)

            async def near_deadline(bot: ScriptedBot, req: bs.DecisionRequest) -> None:
                await asyncio.sleep(0.05 + rng.uniform(-0.004, 0.002))
                await bot.act(req.decision_id, req.legal_actions[-1].id)
                time.sleep(rng.uniform(0, 0.004))  # blocks the shared loop: the timeout fires late

            for i in range(12):
                match = await admin.create(2, ["alpha", "beta"], hands=1, seed=i)
                a = ScriptedBot(port, "alpha", policy=near_deadline, seed=i)
                b = ScriptedBot(port, "beta", policy=near_deadline, seed=i + 1000)
                await asyncio.gather(a.run(), b.run())
                record = await admin.record(match.match_id)
                result = replay(record)
                if not result.ok:
                    problems.append(f"seed {i}: {result.mismatch}")
                answered = {a.decisions, b.decisions}
                assert answered and max(answered) > 0
                await a.close()
                await b.close()
            await admin.close()
        return problems

    assert run(scenario(), timeout=300) == []


def test_an_answer_in_flight_at_the_end_of_a_match_is_not_a_fault_in_the_next() -> None:
    """Strikes limit 0: an illegal answer forfeits match 1 while the bot's corrected answer is on
    its way; match 2 of the same session starts clean and stays clean."""

    async def scenario() -> tuple[dict[str, object], dict[str, object], ScriptedBot]:
        async with running_server() as (_server, port):
            admin = Admin(port)
            strict = dataclasses.replace(FAST, strikes_limit=0)
            m1 = await admin.create(2, ["alpha", "house:first"], hands=1, seed=1, clock=strict)
            m2 = await admin.create(2, ["alpha", "house:first"], hands=1, seed=2)  # waits for alpha
            first = True

            async def policy(bot: ScriptedBot, req: bs.DecisionRequest) -> None:
                nonlocal first
                if first:
                    first = False
                    await bot.act(req.decision_id, 999)  # one strike over the limit: forfeit
                await bot.act(req.decision_id, req.legal_actions[0].id)

            bot = ScriptedBot(port, "alpha", policy=policy, matches=2)
            await bot.run()
            r1, r2 = await admin.record(m1.match_id), await admin.record(m2.match_id)
            await bot.close()
            await admin.close()
            return r1, r2, bot

    r1, r2, bot = run(scenario())
    assert r1["result"]["termination"] == "forfeit"  # type: ignore[index]
    assert [f["reason"] for f in r1["faults"]] == ["ILLEGAL_ACTION", "FORFEIT"]  # type: ignore[attr-defined]
    assert r2["result"]["termination"] == "completed" and r2["faults"] == []  # type: ignore[index]
    # The late answer was answered with a rejection that names the ended match, not a strike.
    late = [m.action_rejected for m in bot.received if m.WhichOneof("message") == "action_rejected"]
    assert any("belongs to a match that has ended" in r.message and r.strikes == 0 for r in late), late


def test_answering_a_request_that_timed_out_while_away_is_not_a_second_strike() -> None:
    """A seat drops at a decision and resumes after the fallback decided it: the resent request
    is answered (the bot cannot know it is closed); the rejection costs no strike."""
    clock = dataclasses.replace(FAST, decision_time=0.3, bank=0.0, resume_grace=5.0, strikes_limit=100)

    async def scenario() -> tuple[dict[str, object], ScriptedBot]:
        async with running_server(clock=clock) as (_server, port):
            admin = Admin(port)
            bot = ScriptedBot(port, "alpha")
            await bot.open()
            match = await admin.create(2, ["alpha", "house:first"], hands=1, seed=3)
            await bot.play(stop_after=lambda m: m.WhichOneof("message") == "decision_request")
            assert bot.match_start is not None
            last = bot.received[-2].sequence  # as if the request itself never arrived
            bot.call.cancel()
            await asyncio.sleep(1.0)  # the fallback decides meanwhile (about three times)
            again = await resumed(bot, match.match_id, last)
            await again.play()  # answers every DecisionRequest it gets, the resent one first
            await admin.wait_ended(match.match_id)
            record = await admin.record(match.match_id)
            for b in (bot, again):
                await b.close()
            await admin.close()
            return record, again

    record, again = run(scenario())
    reasons = [f["reason"] for f in record["faults"]]  # type: ignore[attr-defined]
    away = reasons[: reasons.index("RESUMED")]
    assert away[0] == "DISCONNECT" and away.count("TIMEOUT_FALLBACK") == len(away) - 1 >= 1, reasons
    assert "STALE_DECISION" not in reasons, reasons
    rejected = [m.action_rejected for m in again.received if m.WhichOneof("message") == "action_rejected"]
    assert len(rejected) == len(away) - 1  # one per request that timed out while away, each without a strike
    assert all("while this seat was away" in r.message and r.strikes == len(away) - 1 for r in rejected), rejected
    assert replay(record).ok  # type: ignore[arg-type]


def test_a_late_answer_to_a_fallback_seen_live_is_still_a_strike_after_a_resume() -> None:
    """The excuse above is only for requests resent by the Resume: a bot that saw its request
    and the fallback live, then resumed, and answers the old decision is charged as usual."""
    clock = dataclasses.replace(FAST, decision_time=0.3, bank=0.0, resume_grace=5.0, strikes_limit=100)

    async def never(bot: ScriptedBot, req: bs.DecisionRequest) -> None:
        return None

    def fallback_seen(m: bs.PlayResponse) -> bool:
        return (
            m.WhichOneof("message") == "event"
            and m.event.WhichOneof("kind") == "fault"
            and m.event.fault.reason == cm.FAULT_REASON_TIMEOUT_FALLBACK
        )

    async def scenario() -> tuple[dict[str, object], ScriptedBot]:
        async with running_server(clock=clock) as (_server, port):
            admin = Admin(port)
            bot = ScriptedBot(port, "alpha", policy=never)
            await bot.open()
            match = await admin.create(2, ["alpha", "house:first"], hands=1, seed=3)
            await bot.play(stop_after=fallback_seen)  # the request and its fallback, both seen live
            assert bot.match_start is not None
            first = next(m.decision_request for m in bot.received if m.WhichOneof("message") == "decision_request")
            bot.call.cancel()
            await asyncio.sleep(0.1)
            again = await resumed(bot, match.match_id, bot.received[-1].sequence)
            await again.act(first.decision_id, first.legal_actions[0].id)  # late, after the Resume
            await again.play()
            await admin.wait_ended(match.match_id)
            record = await admin.record(match.match_id)
            for b in (bot, again):
                await b.close()
            await admin.close()
            return record, again

    record, again = run(scenario())
    reasons = [f["reason"] for f in record["faults"]]  # type: ignore[attr-defined]
    assert reasons[:4] == ["TIMEOUT_FALLBACK", "DISCONNECT", "RESUMED", "STALE_DECISION"], reasons
    rejected = [m.action_rejected for m in again.received if m.WhichOneof("message") == "action_rejected"]
    assert rejected[0].strikes == 2 and "while this seat was away" not in rejected[0].message
