"""The in-process front door (gaigel_server.matches + Lobby.open/play): the one validation of a
match request, shared by CreateMatch over gRPC and by callers in the server's process."""

from __future__ import annotations

import json

import grpc
import pytest
from srvkit import ADMIN, FAST, Admin, run, running_server

from gaigel.match import MatchTermination
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_server import matches
from gaigel_server.states import TableState
from gaigel_server.table import Table

BAD_REQUESTS = [
    ms.CreateMatchRequest(players=5, seat_bots=["house:first"] * 5, hands=1),
    ms.CreateMatchRequest(players=2, seat_bots=["house:first"] * 2, hands=0),
    ms.CreateMatchRequest(players=2, seat_bots=["house:first"], hands=1),
    ms.CreateMatchRequest(players=2, side_bots=["house:first"] * 3, hands=1),
    ms.CreateMatchRequest(players=2, seat_bots=["house:first"] * 2, side_bots=["alpha"] * 2, hands=1),
    ms.CreateMatchRequest(players=2, seat_bots=["house:nosuch", "alpha"], hands=1),
    ms.CreateMatchRequest(players=2, seat_bots=["stranger", "alpha"], hands=1),
    ms.CreateMatchRequest(players=2, seat_bots=["alpha"] * 2, hands=1, ruleset_preset="nosuch"),
    ms.CreateMatchRequest(players=2, seat_bots=["alpha"] * 2, hands=1, ruleset_overrides_json="[1]"),
    ms.CreateMatchRequest(players=2, seat_bots=["alpha"] * 2, hands=1, ruleset_overrides_json="{"),
    ms.CreateMatchRequest(players=2, seat_bots=["alpha"] * 2, hands=1, ruleset_overrides_json='{"nosuch": 1}'),
    ms.CreateMatchRequest(players=2, seat_bots=["alpha"] * 2, hands=1, first_dealer_seat=2),
    ms.CreateMatchRequest(players=2, seat_bots=["alpha"] * 2, hands=1, match_key="k" * 10_000),
    ms.CreateMatchRequest(players=2, seat_bots=["alpha"] * 2, hands=1, request_id="r" * 129),
]


def test_create_match_refuses_exactly_what_validate_refuses() -> None:
    """Every invalid request gets INVALID_ARGUMENT over gRPC with the message validate() raises in
    process, and lists no table: one validation, not two that drift."""

    async def scenario() -> None:
        async with running_server() as (server, port):
            admin = Admin(port)
            for request in BAD_REQUESTS:
                with pytest.raises(matches.InvalidMatch) as in_process:
                    matches.validate(request, server.bots, FAST)
                with pytest.raises(grpc.aio.AioRpcError) as remote:
                    await admin.stub.CreateMatch(request, metadata=(("authorization", f"Bearer {ADMIN}"),))
                assert remote.value.code() == grpc.StatusCode.INVALID_ARGUMENT, request
                assert remote.value.details() == str(in_process.value), request
            assert server.lobby.tables == {}
            await admin.close()

    run(scenario())


def test_play_in_process_gives_the_record_create_match_gives() -> None:
    """A house-bot match opened in process and awaited with Lobby.play ends with the same actions as
    the same request sent through CreateMatch (no polling: play returns when the table ends)."""

    async def scenario() -> None:
        request = ms.CreateMatchRequest(players=3, seat_bots=["house:random"] * 3, hands=2, seed=77, match_key="k")
        async with running_server() as (server, port):
            table = await server.lobby.play(server.lobby.open(matches.validate(request, server.bots, FAST)))
            assert table.state is TableState.ENDED and table.termination is MatchTermination.COMPLETED
            assert table.record is not None
            admin = Admin(port)
            remote = (await admin.stub.CreateMatch(request, metadata=(("authorization", f"Bearer {ADMIN}"),))).match
            await admin.wait_ended(remote.match_id)
            other = await admin.record(remote.match_id)
            await admin.close()

        def actions(record: dict[str, object]) -> list[list[int]]:
            return [[a["action"] for a in h["actions"]] for h in record["hands"]]  # type: ignore[attr-defined, index]

        assert actions(table.record) == actions(other) and len(actions(other)) == 2

    run(scenario())


def test_play_cancels_with_the_watchs_reason_and_stops_asking() -> None:
    """A watch that names a reason cancels the match with it (first line into the record); it is not
    asked again once the match has ended, and a waiting match gets its record too."""

    async def scenario() -> None:
        async with running_server() as (server, _):
            request = ms.CreateMatchRequest(players=2, seat_bots=["alpha", "beta"], hands=1, seed=1)
            table = server.lobby.open(matches.validate(request, server.bots, FAST))
            asked: list[str] = []

            async def watch(t: Table) -> str:
                asked.append(t.state)
                return "the bots never came\nsecond line" if len(asked) == 3 else ""

            ended = await server.lobby.play(table, watch, every=0.01)
            assert ended is table and table.termination is MatchTermination.CANCELLED
            assert asked == ["waiting"] * 3
            record = table.record
            assert record is not None and record["cancel_reason"] == "the bots never came"
            assert json.loads(table.record_json or "{}")["result"]["termination"] == "cancelled"

    run(scenario())


def test_open_returns_the_table_of_a_repeated_request_id() -> None:
    """A plan whose request id opened a table gets that table, in process as over gRPC."""

    async def scenario() -> None:
        async with running_server() as (server, port):
            request = ms.CreateMatchRequest(players=2, seat_bots=["alpha", "beta"], hands=1, request_id="night-1")
            first = server.lobby.open(matches.validate(request, server.bots, FAST))
            again = server.lobby.open(matches.validate(request, server.bots, FAST))
            assert again is first and len(server.lobby.tables) == 1
            admin = Admin(port)
            remote = (await admin.stub.CreateMatch(request, metadata=(("authorization", f"Bearer {ADMIN}"),))).match
            assert remote.match_id == first.match_id
            await admin.close()

    run(scenario())
