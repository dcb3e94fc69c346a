"""Every row of the DESIGN.md policy table, triggered by a misbehaving scripted bot."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
from srvkit import Admin, ScriptedBot, run, running_server

from gaigel.replay import replay
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import common_pb2 as cm
from gaigel_server.clock import Clock


def illegal_id(req: bs.DecisionRequest) -> int:
    legal = {a.id for a in req.legal_actions}
    return next(a for a in range(165) if a not in legal)


def reasons(record: dict[str, Any]) -> list[str]:
    return [f["reason"] for f in record["faults"]]


async def play_one(
    port: int, bot: ScriptedBot, others: list[str], clock: Clock | None = None, hands: int = 1, seed: int = 5
) -> tuple[dict[str, Any], Admin]:
    admin = Admin(port)
    task = asyncio.create_task(bot.run())
    m = await admin.create(1 + len(others), [bot.name, *others], hands=hands, seed=seed, clock=clock)
    await task
    await admin.wait_ended(m.match_id)
    return await admin.record(m.match_id), admin


def rejections(bot: ScriptedBot) -> list[bs.ActionRejected]:
    return [r.action_rejected for r in bot.received if r.WhichOneof("message") == "action_rejected"]


class TestStrikes:
    """Illegal and stale answers: ActionRejected, one strike, the decision stays open."""

    def test_illegal_action_is_rejected_and_may_be_corrected(self) -> None:
        """An illegal id gets ILLEGAL_ACTION with the engine's reason; the corrected answer is played."""
        done: list[int] = []

        async def policy(bot: ScriptedBot, req: bs.DecisionRequest) -> None:
            if not done:
                done.append(1)
                await bot.act(req.decision_id, illegal_id(req))
            await bot.act(req.decision_id, req.legal_actions[0].id)

        async def scenario() -> None:
            async with running_server() as (_s, port):
                bot = ScriptedBot(port, "alpha", policy=policy)
                record, _ = await play_one(port, bot, ["house:random"])
                [rej] = rejections(bot)
                assert rej.reason == bs.REJECT_REASON_ILLEGAL_ACTION
                assert "illegal action" in rej.message and rej.decision_open
                assert (rej.strikes, rej.strikes_limit) == (1, 3)
                assert reasons(record) == ["ILLEGAL_ACTION"]
                step = record["faults"][0]["step"]
                assert record["faults"][0]["hand"] == 0 and record["hands"][0]["actions"][step]["seat"] == 0
                assert record["hands"][0]["actions"][step]["flags"] == ["REJECTED_ANSWERS"]
                assert record["result"]["termination"] == "completed" and replay(record).ok
                end = bot.received[-1].match_end
                assert [f.reason for f in end.faults] == [cm.FAULT_REASON_ILLEGAL_ACTION]

        run(scenario())

    def test_stale_and_unknown_decision_ids(self) -> None:
        """Answering a closed decision again, or an id never issued, is STALE_DECISION with one strike each."""
        first: list[str] = []

        async def policy(bot: ScriptedBot, req: bs.DecisionRequest) -> None:
            await bot.act(req.decision_id, req.legal_actions[0].id)
            if not first:
                first.append(req.decision_id)
                await bot.act(req.decision_id, req.legal_actions[0].id)  # stale: already answered
                await bot.act("never-issued", 0)

        async def scenario() -> None:
            async with running_server() as (_s, port):
                bot = ScriptedBot(port, "alpha", policy=policy)
                record, _ = await play_one(port, bot, ["house:first"])
                rej = rejections(bot)
                assert [r.reason for r in rej] == [bs.REJECT_REASON_STALE_DECISION, bs.REJECT_REASON_NOT_YOUR_TURN] or [
                    r.reason for r in rej
                ] == [
                    bs.REJECT_REASON_STALE_DECISION,
                    bs.REJECT_REASON_UNKNOWN_DECISION,
                ]
                assert "closed" in rej[0].message and "never issued" in rej[1].message
                assert reasons(record) == ["STALE_DECISION", "STALE_DECISION"]
                assert record["result"]["termination"] == "completed"

        run(scenario())

    def test_strikes_over_the_limit_forfeit(self) -> None:
        """A fourth strike (limit 3) forfeits the bot's side; the match ends FORFEIT."""

        async def policy(bot: ScriptedBot, req: bs.DecisionRequest) -> None:
            for _ in range(4):
                await bot.act(req.decision_id, illegal_id(req))

        async def scenario() -> None:
            async with running_server() as (_s, port):
                bot = ScriptedBot(port, "alpha", policy=policy)
                record, _ = await play_one(port, bot, ["house:random"], hands=3)
                assert reasons(record) == ["ILLEGAL_ACTION"] * 4 + ["FORFEIT"]
                assert record["result"]["termination"] == "forfeit"
                assert record["result"]["forfeit_sides"] == [0] and record["result"]["winners"] == [1]
                assert record["hands"][-1].get("aborted") is True
                end = bot.received[-1].match_end
                assert end.termination == cm.MATCH_TERMINATION_FORFEIT and end.forfeiting_side == 0
                assert list(end.winner_sides) == [1]
                assert replay(record).ok
                assert rejections(bot)[-1].strikes == 4 and not rejections(bot)[-1].decision_open

        run(scenario())


class TestClock:
    """Deadlines, the bank and the timeout fallback."""

    def test_timeout_plays_the_first_legal_action(self) -> None:
        """No answer within decision time and bank: the first legal id is played (TIMEOUT_FALLBACK, one strike)."""
        ignored: list[bs.DecisionRequest] = []

        async def policy(bot: ScriptedBot, req: bs.DecisionRequest) -> None:
            if not ignored:
                ignored.append(req)
                return
            if len(ignored) == 1:
                ignored.append(req)
                await bot.act(ignored[0].decision_id, ignored[0].legal_actions[0].id)  # too late: stale
            await bot.act(req.decision_id, req.legal_actions[-1].id)

        async def scenario() -> None:
            async with running_server() as (_s, port):
                bot = ScriptedBot(port, "alpha", policy=policy)
                clock = Clock(decision_time=0.05, bank=0.1, strikes_limit=3, resume_grace=5)
                record, _ = await play_one(port, bot, ["house:random"], clock=clock)
                assert reasons(record)[:2] == ["TIMEOUT_FALLBACK", "STALE_DECISION"]
                first = record["hands"][0]["actions"][record["faults"][0]["step"]]
                assert first["action"] == ignored[0].legal_actions[0].id
                assert "TIMEOUT_FALLBACK" in first["flags"] and first["ms"] >= 150
                faults = [
                    r.event.fault
                    for r in bot.received
                    if r.WhichOneof("message") == "event" and r.event.WhichOneof("kind") == "fault"
                ]
                assert (
                    faults[0].reason == cm.FAULT_REASON_TIMEOUT_FALLBACK and faults[0].strike and faults[0].strikes == 1
                )
                assert ignored[1].bank_left.ToNanoseconds() == 0  # the bank was spent by the timeout

        run(scenario())

    def test_slow_answer_draws_on_the_bank(self) -> None:
        """An answer after the decision time but within the bank is accepted and costs bank time."""
        banks: list[float] = []

        async def policy(bot: ScriptedBot, req: bs.DecisionRequest) -> None:
            banks.append(req.bank_left.ToNanoseconds() / 1e9)
            if len(banks) == 1:
                await asyncio.sleep(0.25)
            await bot.act(req.decision_id, req.legal_actions[0].id)

        async def scenario() -> None:
            async with running_server() as (_s, port):
                bot = ScriptedBot(port, "alpha", policy=policy)
                clock = Clock(decision_time=0.1, bank=1.0, strikes_limit=3, resume_grace=5)
                record, _ = await play_one(port, bot, ["house:random"], clock=clock)
                assert not record["faults"]
                assert banks[0] == 1.0 and 0.7 < banks[1] < 0.9

        run(scenario())


class TestDisconnect:
    """A broken stream: the match goes on, the seat may Resume and gets what it missed."""

    def test_resume_receives_missed_messages(self) -> None:
        """After a disconnect, Resume replays the buffered messages above last_sequence and play continues."""

        async def scenario() -> None:
            async with running_server() as (_s, port):
                admin = Admin(port)
                bot = ScriptedBot(port, "alpha")
                await bot.open()
                m = await admin.create(2, ["alpha", "house:random"], hands=2, seed=9)
                seen = {"decisions": 0}

                def stop(msg: bs.PlayResponse) -> bool:
                    if msg.WhichOneof("message") == "decision_request":
                        seen["decisions"] += 1
                    return seen["decisions"] == 3

                await bot.play(stop_after=stop)
                bot.call.cancel()  # the stream breaks mid-hand
                before = list(bot.received)
                assert bot.match_start is not None
                last = before[-3].sequence
                await asyncio.sleep(0.2)
                again = ScriptedBot(port, "alpha")
                again.received = []
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
                await again.play()
                assert again.received[0].welcome.resumed
                resent = [r.sequence for r in again.received[1:4]]
                assert resent == [last + 1, last + 2, last + 3]
                assert again.received[1:3] == before[-2:]
                end = await admin.wait_ended(m.match_id)
                assert end.termination == cm.MATCH_TERMINATION_COMPLETED
                record = await admin.record(m.match_id)
                assert reasons(record) == ["DISCONNECT", "RESUMED"], record["faults"]
                assert replay(record).ok
                await bot.close()
                await again.close()

        run(scenario())

    def test_no_resume_within_grace_forfeits(self) -> None:
        """A seat that does not come back within the grace period forfeits."""

        async def scenario() -> None:
            async with running_server() as (_s, port):
                admin = Admin(port)
                bot = ScriptedBot(port, "alpha")
                await bot.open()
                m = await admin.create(2, ["alpha", "house:random"], hands=1, seed=9, clock=Clock(2.0, 5.0, 3, 0.3))
                await bot.play(stop_after=lambda msg: msg.WhichOneof("message") == "decision_request")
                bot.call.cancel()
                end = await admin.wait_ended(m.match_id, timeout=10)
                record = await admin.record(m.match_id)
                assert end.termination == cm.MATCH_TERMINATION_FORFEIT
                assert (
                    reasons(record) == ["DISCONNECT", "FORFEIT"] and "did not resume" in record["faults"][-1]["message"]
                )
                await bot.close()

        run(scenario())

    def test_resume_with_wrong_token_or_unknown_match(self) -> None:
        """Resume checks the match (NOT_FOUND) and the resume token (UNAUTHENTICATED)."""

        async def scenario() -> None:
            async with running_server() as (_s, port):
                admin = Admin(port)
                bot = ScriptedBot(port, "alpha")
                await bot.open()
                m = await admin.create(2, ["alpha", "house:random"], hands=1, seed=9)
                await bot.play(stop_after=lambda msg: msg.WhichOneof("message") == "decision_request")
                for match_id, token, code, text in [
                    ("nope", "x", grpc.StatusCode.NOT_FOUND, "no match"),
                    (m.match_id, "wrong", grpc.StatusCode.UNAUTHENTICATED, "wrong resume token"),
                ]:
                    other = ScriptedBot(port, "alpha")
                    await other.open(bs.PlayRequest(resume=bs.Resume(match_id=match_id, seat=0, resume_token=token)))
                    await other.play()
                    assert other.status == code and text in other.details
                    await other.close()
                bot.call.cancel()
                await bot.close()

        run(scenario())


async def raw_play(
    port: int, chunks: list[bytes], read_until_close: bool = True
) -> tuple[grpc.StatusCode, str, list[bytes]]:
    """Sends raw byte messages on BotService/Play (identity serializers) and reads to the end."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        call = ch.stream_stream("/gaigel.v1.BotService/Play", request_serializer=None, response_deserializer=None)()
        got: list[bytes] = []
        for c in chunks:
            await call.write(c)
        try:
            while True:
                msg = await call.read()
                if msg is grpc.aio.EOF:
                    break
                got.append(msg)
                if not read_until_close:
                    break
        except grpc.aio.AioRpcError as e:
            return e.code(), e.details() or "", got
        return await call.code(), await call.details() or "", got


def join_bytes(name: str = "alpha", token: str = "alpha-token-123", version: int = 1, bot_version: str = "t") -> bytes:
    return bs.PlayRequest(
        join=bs.Join(bot_token=token, bot_name=name, bot_version=bot_version, protocol_version=version)
    ).SerializeToString()


class TestStreamErrors:
    """Protocol errors end the stream with a clear status while other tables play on."""

    def test_errors_do_not_disturb_another_table(self) -> None:
        """Bad token, missing Join, non-protobuf bytes, oversized message, bad version, Join timeout, too many sessions."""

        async def scenario() -> None:
            async with running_server(join_timeout=0.3, max_sessions_per_bot=2) as (_s, port):
                admin = Admin(port)
                good = ScriptedBot(port, "beta")
                task = asyncio.create_task(good.run())
                m = await admin.create(2, ["beta", "house:random"], hands=3, seed=4)
                action = bs.PlayRequest(action=bs.Action(decision_id="x", action_id=1)).SerializeToString()
                cases = [
                    (
                        [join_bytes(token="wrong-token")],
                        grpc.StatusCode.UNAUTHENTICATED,
                        "unknown or revoked bot token",
                    ),
                    ([join_bytes(name="nobody")], grpc.StatusCode.UNAUTHENTICATED, "unknown or revoked bot token"),
                    ([action], grpc.StatusCode.FAILED_PRECONDITION, "MISSING_JOIN"),
                    ([b"\xff\xff\xff\xff"], grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED_MESSAGE"),
                    ([b""], grpc.StatusCode.INVALID_ARGUMENT, "no message set"),
                    ([join_bytes(bot_version="x" * 70000)], grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than max"),
                    ([join_bytes(version=2)], grpc.StatusCode.FAILED_PRECONDITION, "protocol_version"),
                    ([], grpc.StatusCode.DEADLINE_EXCEEDED, "Join timeout"),
                    ([join_bytes(), join_bytes()], grpc.StatusCode.FAILED_PRECONDITION, "MISSING_JOIN"),
                    ([join_bytes(), b"\x08\x01\xff"], grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED_MESSAGE"),
                ]
                results = await asyncio.gather(*(raw_play(port, chunks) for chunks, _, _ in cases))
                for (chunks, code, text), (got_code, details, _) in zip(cases, results, strict=True):
                    assert got_code == code, (chunks[:1], got_code, details)
                    assert text in details, (code, details)
                # Sessions per token: two gamma sessions are fine, a third is refused.
                gammas = [ScriptedBot(port, "gamma") for _ in range(3)]
                for g in gammas:
                    await g.open()
                await asyncio.sleep(0.1)
                third = gammas[2]
                await third.play()
                assert third.status == grpc.StatusCode.RESOURCE_EXHAUSTED and "too many sessions" in third.details
                await task
                end = await admin.wait_ended(m.match_id)
                assert end.termination == cm.MATCH_TERMINATION_COMPLETED
                assert not (await admin.record(m.match_id))["faults"]
                for g in gammas:
                    g.call.cancel()
                    await g.close()

        run(scenario())

    def test_malformed_message_mid_match_ends_stream_and_match_goes_on(self) -> None:
        """Bytes that are not protobuf mid-match: INVALID_ARGUMENT for the stream, MALFORMED_MESSAGE in the record."""

        async def scenario() -> None:
            async with running_server() as (_s, port):
                admin = Admin(port)
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
                    call = ch.stream_stream(
                        "/gaigel.v1.BotService/Play", request_serializer=None, response_deserializer=None
                    )()
                    await call.write(join_bytes())
                    m = await admin.create(
                        2, ["alpha", "house:random"], hands=1, seed=2, clock=Clock(0.05, 0.05, 3, 0.3)
                    )
                    while True:
                        msg = bs.PlayResponse.FromString(await call.read())
                        if msg.WhichOneof("message") == "decision_request":
                            break
                    await call.write(b"\xff\xfe\xfd")
                    try:
                        while await call.read() is not grpc.aio.EOF:
                            pass
                    except grpc.aio.AioRpcError as e:
                        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "MALFORMED_MESSAGE" in (
                            e.details() or ""
                        )
                    else:
                        raise AssertionError("the stream should have failed")
                end = await admin.wait_ended(m.match_id, timeout=10)
                record = await admin.record(m.match_id)
                assert reasons(record)[:2] == ["MALFORMED_MESSAGE", "DISCONNECT"]
                assert end.termination in (cm.MATCH_TERMINATION_FORFEIT, cm.MATCH_TERMINATION_COMPLETED)
                assert replay(record).ok

        run(scenario())
