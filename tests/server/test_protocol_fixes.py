"""Default first dealer, events at the deal, the resent answer after a Resume, observation fields."""

from __future__ import annotations

import asyncio

from srvkit import Admin, ScriptedBot, admin_md, run, running_server

from gaigel.replay import replay
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import match_service_pb2 as ms

FIVE_SEVENS_SEED = 2108  # 2 players, hand 0 with seat 0 forehand: seat 1 is dealt five Sevens


def messages(bot: ScriptedBot, kind: str) -> list[bs.PlayResponse]:
    return [m for m in bot.received if m.WhichOneof("message") == kind]


def test_default_first_dealer_is_the_last_seat() -> None:
    """Without first_dealer_seat the last seat deals hand 0, so seat 0 leads it (as MatchSpec)."""

    async def scenario() -> None:
        async with running_server() as (_s, port):
            admin = Admin(port)
            bot = ScriptedBot(port, "alpha")
            task = asyncio.create_task(bot.run())
            m = await admin.create(3, ["alpha", "house:random", "house:first"], hands=2, seed=77)
            assert m.first_dealer_seat == 2
            await task
            await admin.wait_ended(m.match_id)
            record = await admin.record(m.match_id)
            assert [h["dealer"] for h in record["hands"]] == [2, 0]
            assert replay(record).ok
            [start, *_] = messages(bot, "match_start")
            assert start.match_start.first_dealer_seat == 2
            hs = [m.hand_start for m in messages(bot, "hand_start")]
            assert [(h.dealer_seat, h.forehand_seat) for h in hs] == [(2, 0), (0, 1)]
            for msg in messages(bot, "decision_request"):
                obs = msg.decision_request.observation
                assert obs.players == 3
                assert obs.forehand_seat == hs[obs.hand_index].forehand_seat
            explicit = await admin.create(3, ["alpha", "house:random", "house:first"], first_dealer_seat=0)
            assert explicit.first_dealer_seat == 0
            await admin.stub.CancelMatch(ms.CancelMatchRequest(match_id=explicit.match_id), metadata=admin_md())
            await admin.close()
            await bot.close()

    run(scenario())


def test_hand_ending_at_the_deal_reports_the_deciding_seat() -> None:
    """Five Sevens dealt: the hand ends before any decision; HandEnd names the seat that held them."""

    async def scenario() -> None:
        async with running_server() as (_s, port):
            admin = Admin(port)
            bot = ScriptedBot(port, "alpha")
            task = asyncio.create_task(bot.run())
            m = await admin.create(2, ["alpha", "house:random"], hands=1, seed=FIVE_SEVENS_SEED)
            await task
            end = await admin.wait_ended(m.match_id)
            assert end.termination == cm.MATCH_TERMINATION_COMPLETED
            [he] = [x.hand_end for x in messages(bot, "hand_end")]
            assert he.termination == cm.HAND_TERMINATION_FIVE_SEVENS
            assert he.HasField("deciding_seat") and he.deciding_seat == 1
            assert list(he.winner_sides) == [1]
            assert bot.decisions == 0
            record = await admin.record(m.match_id)
            assert record["hands"][0]["actions"] == [] and replay(record).ok
            await admin.close()
            await bot.close()

    run(scenario())


def test_resent_answer_after_resume_is_not_a_strike() -> None:
    """After a Resume, the same decision id and action id again is a no-op; another action id still strikes."""

    async def scenario() -> None:
        async with running_server() as (_s, port):
            admin = Admin(port)
            bot = ScriptedBot(port, "alpha")
            await bot.open()
            m = await admin.create(2, ["alpha", "house:random"], hands=1, seed=9)
            seen: list[bs.DecisionRequest] = []

            def stop(msg: bs.PlayResponse) -> bool:
                if msg.WhichOneof("message") == "decision_request":
                    seen.append(msg.decision_request)
                return len(seen) == 3

            await bot.play(stop_after=stop)
            req = seen[-1]
            answer = req.legal_actions[0].id
            await bot.act(req.decision_id, answer)
            # wait until the server has taken the answer (the next decision or event arrives)
            while True:
                msg = await bot.call.read()
                bot.received.append(msg)
                if msg.WhichOneof("message") in ("decision_request", "event", "hand_end"):
                    break
            last = bot.received[-2].sequence
            bot.call.cancel()
            await asyncio.sleep(0.1)
            assert bot.match_start is not None
            again = ScriptedBot(port, "alpha")
            await again.open(
                bs.PlayRequest(
                    resume=bs.Resume(
                        match_id=m.match_id,
                        seat=bot.match_start.seat,
                        resume_token=bot.match_start.resume_token,
                        last_sequence=last,
                    )
                )
            )
            await again.act(req.decision_id, answer)  # the SDK's resend: identical, already accepted
            await again.play()
            assert not messages(again, "action_rejected")
            end = await admin.wait_ended(m.match_id)
            assert end.termination == cm.MATCH_TERMINATION_COMPLETED
            record = await admin.record(m.match_id)
            assert [f["reason"] for f in record["faults"]] == ["DISCONNECT", "RESUMED"], record["faults"]
            assert replay(record).ok
            await admin.close()
            await bot.close()
            await again.close()

    run(scenario())


def test_different_answer_to_an_accepted_decision_after_resume_strikes() -> None:
    """Only the identical repeat is forgiven: another action id for the closed decision is STALE_DECISION."""

    async def scenario() -> None:
        async with running_server() as (_s, port):
            admin = Admin(port)
            bot = ScriptedBot(port, "alpha")
            await bot.open()
            m = await admin.create(2, ["alpha", "house:first"], hands=1, seed=9)
            seen: list[bs.DecisionRequest] = []

            def stop(msg: bs.PlayResponse) -> bool:
                if msg.WhichOneof("message") == "decision_request":
                    seen.append(msg.decision_request)
                return len(seen) >= 2 and len(msg.decision_request.legal_actions) > 1

            await bot.play(stop_after=stop)
            req = seen[-1]
            await bot.act(req.decision_id, req.legal_actions[0].id)
            while True:
                msg = await bot.call.read()
                bot.received.append(msg)
                if msg.WhichOneof("message") in ("decision_request", "event", "hand_end"):
                    break
            last = bot.received[-2].sequence
            bot.call.cancel()
            await asyncio.sleep(0.1)
            assert bot.match_start is not None
            again = ScriptedBot(port, "alpha")
            await again.open(
                bs.PlayRequest(
                    resume=bs.Resume(
                        match_id=m.match_id,
                        seat=bot.match_start.seat,
                        resume_token=bot.match_start.resume_token,
                        last_sequence=last,
                    )
                )
            )
            await again.act(req.decision_id, req.legal_actions[1].id)
            await again.play()
            [rej] = [x.action_rejected for x in messages(again, "action_rejected")]
            assert rej.reason == bs.REJECT_REASON_STALE_DECISION
            await admin.wait_ended(m.match_id)
            record = await admin.record(m.match_id)
            assert [f["reason"] for f in record["faults"]] == ["DISCONNECT", "RESUMED", "STALE_DECISION"]
            await admin.close()
            await bot.close()
            await again.close()

    run(scenario())


def test_observation_tricks_cache_gives_the_same_message() -> None:
    """The observation written with the per-hand tricks cache (one for all seats: tricks are public)
    equals the one written from scratch, for every seat."""
    import random

    from gaigel.match import MatchSpec, hand_setup
    from gaigel.ruleset import preset
    from gaigel.state import GaigelState
    from gaigel_server import codec, wire

    for name, players in (("default", 2), ("parlett", 4), ("default", 3)):
        rules = preset(name, players)
        spec = MatchSpec(ruleset=rules, seed=players, hands=4, bots=("x",) * players)
        rng = random.Random(players)
        for k in range(4):
            d, _dealer, forehand = hand_setup(spec, k)
            state = GaigelState(rules, d, forehand)
            cache = wire.TrickCache()
            while not state.is_terminal():
                for seat in range(players):
                    obs = state.observation(seat)
                    assert wire.observation(obs, k, cache) == wire.observation(obs, k)
                    assert codec.observation(obs, k).forehand_seat == forehand
                state.apply(rng.choice(state.legal_actions()))
