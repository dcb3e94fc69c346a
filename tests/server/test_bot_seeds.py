"""Bot seeds over a real server: MatchStart.bot_seed, CreateMatchRequest.match_key, the record."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from srvkit import Admin, ScriptedBot, run, running_server

from gaigel.botseed import bot_seed
from gaigel_api.v1 import bot_service_pb2 as bs

HOUSE = ["house:random", "house:search"]


def test_each_seat_gets_its_bot_seed_and_the_record_keeps_key_and_seeds() -> None:
    """Two bots see bot_seed = HMAC(seed; seat, match_key) in MatchStart; the record has both."""

    async def scenario() -> None:
        async with running_server() as (_, port):
            admin = Admin(port)
            alpha, beta = ScriptedBot(port, "alpha"), ScriptedBot(port, "beta")

            tasks = [asyncio.create_task(b.run()) for b in (alpha, beta)]
            m = await admin.create(2, ["alpha", "beta"], seed=9, match_key="arena:s1-r0")
            await asyncio.gather(*tasks)
            record = await admin.record(m.match_id)
            for seat, bot in enumerate((alpha, beta)):
                assert bot.match_start is not None
                assert bot.match_start.bot_seed == bot_seed(9, seat, "arena:s1-r0")
            assert record["match_key"] == "arena:s1-r0"
            assert [s["bot_seed"] for s in record["seats"]] == [bot_seed(9, s, "arena:s1-r0") for s in (0, 1)]
            await admin.close()
            for bot in (alpha, beta):
                await bot.close()

    run(scenario())


def test_without_a_key_the_match_id_is_the_key_and_house_seats_replay() -> None:
    """No match_key: the record's key is the match id. The same seed and key replay the
    server's house bots (random, search) action for action; another key changes their play."""

    async def scenario() -> None:
        async with running_server() as (_, port):
            admin = Admin(port)
            first = await admin.create(2, HOUSE, seed=5)
            await admin.wait_ended(first.match_id)
            rec = await admin.record(first.match_id)
            assert rec["match_key"] == first.match_id
            assert [s["bot_seed"] for s in rec["seats"]] == [bot_seed(5, s, first.match_id) for s in (0, 1)]
            again = await admin.create(2, HOUSE, seed=5, match_key=first.match_id)
            other = await admin.create(2, HOUSE, seed=5, match_key="another key")
            await admin.wait_ended(again.match_id)
            await admin.wait_ended(other.match_id)
            actions = [
                [a["action"] for h in r["hands"] for a in h["actions"]]
                for r in (rec, await admin.record(again.match_id), await admin.record(other.match_id))
            ]
            assert actions[0] == actions[1]
            assert actions[0] != actions[2]
            await admin.close()

    run(scenario())


def test_a_time_capped_answer_is_recorded_as_such() -> None:
    """An Action with time_capped set is recorded with the flag TIME_CAPPED, the others without."""

    async def capped_first(bot: ScriptedBot, req: bs.DecisionRequest) -> None:
        action = bs.Action(
            decision_id=req.decision_id, action_id=req.legal_actions[0].id, time_capped=bot.decisions == 1
        )
        await bot.call.write(bs.PlayRequest(action=action))

    async def scenario() -> None:
        async with running_server() as (_, port):
            admin = Admin(port)
            alpha = ScriptedBot(port, "alpha", policy=capped_first)

            task = asyncio.create_task(alpha.run())
            m = await admin.create(2, ["alpha", "house:first"], seed=3)
            await task
            rec = await admin.record(m.match_id)
            flagged = [a.get("flags", []) for h in rec["hands"] for a in h["actions"] if a["seat"] == 0]
            assert flagged[0] == ["TIME_CAPPED"]
            assert all("TIME_CAPPED" not in f for f in flagged[1:])
            await admin.close()
            await alpha.close()

    run(scenario())


def test_an_overlong_match_key_is_invalid_argument() -> None:
    async def scenario() -> None:
        async with running_server() as (_, port):
            admin = Admin(port)
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await admin.create(2, HOUSE, match_key="k" * 513)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "match_key" in (info.value.details() or "")
            await admin.close()

    run(scenario())
