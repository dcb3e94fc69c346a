"""MatchService, health, reflection and metrics."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from srvkit import Admin, ScriptedBot, admin_md, run, running_server

from gaigel.replay import replay
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc


class TestMatchService:
    """Admin RPCs and their status codes."""

    def test_admin_token_is_required(self) -> None:
        """Without the token, or with a wrong or a bot token, every RPC fails UNAUTHENTICATED."""

        async def scenario() -> None:
            async with running_server() as (server, port):
                admin = Admin(port)
                for md in [(), admin_md("wrong"), admin_md("alpha-token-123")]:
                    try:
                        await admin.stub.ListMatches(ms.ListMatchesRequest(), metadata=md)
                    except grpc.aio.AioRpcError as e:
                        assert e.code() == grpc.StatusCode.UNAUTHENTICATED and "admin token" in (e.details() or "")
                    else:
                        raise AssertionError("expected UNAUTHENTICATED")
                try:
                    async for _ in admin.stub.WatchMatch(ms.WatchMatchRequest(match_id="x")):
                        pass
                except grpc.aio.AioRpcError as e:
                    assert e.code() == grpc.StatusCode.UNAUTHENTICATED
                # Refusals are counted, so token guessing shows on the dashboard.
                assert server.metrics.registry.get_sample_value("gaigel_admin_refused_total") == 4
                await admin.close()

        run(scenario())

    def test_register_create_list_get_cancel(self) -> None:
        """A registered bot can join; invalid requests name the field; cancel writes a cancelled record."""

        async def scenario() -> None:
            async with running_server() as (_s, port):
                admin = Admin(port)
                reg = await admin.stub.RegisterBot(ms.RegisterBotRequest(bot_name="delta"), metadata=admin_md())
                assert reg.bot_name == "delta" and len(reg.bot_token) >= 20
                for req, code, text in [
                    (ms.RegisterBotRequest(bot_name="delta"), grpc.StatusCode.ALREADY_EXISTS, "already registered"),
                    (ms.RegisterBotRequest(bot_name="bad name!"), grpc.StatusCode.INVALID_ARGUMENT, "bot name"),
                ]:
                    try:
                        await admin.stub.RegisterBot(req, metadata=admin_md())
                    except grpc.aio.AioRpcError as e:
                        assert e.code() == code and text in (e.details() or "")
                for kwargs, text in [
                    ({"players": 5, "seat_bots": ["a"] * 5}, "players must be"),
                    ({"players": 2, "seat_bots": ["delta", "nobody"]}, "not registered"),
                    ({"players": 2, "seat_bots": ["delta", "house:nope"]}, "unknown house bot"),
                    ({"players": 2, "seat_bots": ["delta", "delta"], "hands": 0}, "hands must be"),
                    (
                        {"players": 2, "seat_bots": ["delta", "delta"], "ruleset_overrides_json": '{"target": -4}'},
                        "target",
                    ),
                    ({"players": 2, "seat_bots": ["delta", "delta"], "side_bots": ["delta", "delta"]}, "exactly one"),
                ]:
                    try:
                        await admin.stub.CreateMatch(
                            ms.CreateMatchRequest(**{"hands": 1, **kwargs}), metadata=admin_md()
                        )  # type: ignore[arg-type]
                    except grpc.aio.AioRpcError as e:
                        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and text in (e.details() or ""), e.details()
                    else:
                        raise AssertionError(kwargs)
                m = await admin.create(2, ["delta", "house:random"], hands=1, request_id="r1")
                again = await admin.create(2, ["delta", "house:random"], hands=1, request_id="r1")
                assert again.match_id == m.match_id and m.state == ms.MATCH_STATE_WAITING
                listed = await admin.stub.ListMatches(ms.ListMatchesRequest(bot_name="delta"), metadata=admin_md())
                assert [x.match_id for x in listed.matches] == [m.match_id]
                try:
                    await admin.stub.GetMatchRecord(ms.GetMatchRecordRequest(match_id=m.match_id), metadata=admin_md())
                except grpc.aio.AioRpcError as e:
                    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION
                cancelled = (
                    await admin.stub.CancelMatch(
                        ms.CancelMatchRequest(match_id=m.match_id, reason="test"), metadata=admin_md()
                    )
                ).match
                assert (
                    cancelled.termination == cm.MATCH_TERMINATION_CANCELLED and cancelled.state == ms.MATCH_STATE_ENDED
                )
                rec = await admin.record(m.match_id)
                assert rec["result"]["termination"] == "cancelled" and rec["cancel_reason"] == "test"
                try:
                    await admin.stub.CancelMatch(ms.CancelMatchRequest(match_id=m.match_id), metadata=admin_md())
                except grpc.aio.AioRpcError as e:
                    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION and "already ended" in (e.details() or "")
                try:
                    await admin.get("unknown")
                except grpc.aio.AioRpcError as e:
                    assert e.code() == grpc.StatusCode.NOT_FOUND
                page = await admin.stub.ListMatches(
                    ms.ListMatchesRequest(page_size=1, state=ms.MATCH_STATE_ENDED), metadata=admin_md()
                )
                assert len(page.matches) == 1 and page.next_page_token == ""
                for bad, why in (
                    (ms.ListMatchesRequest(page_size=-1), "page_size must not be negative, got -1"),
                    (ms.ListMatchesRequest(page_token="-1"), "page_token is not one this server issued"),
                    (ms.ListMatchesRequest(page_token="x"), "page_token is not one this server issued"),
                ):
                    with pytest.raises(grpc.aio.AioRpcError) as e:
                        await admin.stub.ListMatches(bad, metadata=admin_md())
                    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and why in (e.value.details() or "")
                await admin.close()

        run(scenario())

    def test_cancel_a_running_match(self) -> None:
        """Cancelling a running match ends it CANCELLED for the bots too."""

        async def scenario() -> None:
            async with running_server() as (_s, port):
                admin = Admin(port)

                async def slow(bot: ScriptedBot, req: object) -> None:
                    return None  # never answers

                bot = ScriptedBot(port, "alpha", policy=slow)  # type: ignore[arg-type]
                task = asyncio.create_task(bot.run())
                m = await admin.create(2, ["alpha", "house:random"], hands=2)
                await asyncio.sleep(0.2)
                assert (await admin.get(m.match_id)).state == ms.MATCH_STATE_RUNNING
                await admin.stub.CancelMatch(ms.CancelMatchRequest(match_id=m.match_id), metadata=admin_md())
                await task
                assert bot.received[-1].match_end.termination == cm.MATCH_TERMINATION_CANCELLED
                assert replay(await admin.record(m.match_id)).ok
                await admin.close()

        run(scenario())


class TestInfrastructure:
    """Health, reflection and Prometheus metrics."""

    def test_health_and_reflection(self) -> None:
        """Health reports SERVING; reflection lists the gaigel services."""

        async def scenario() -> None:
            async with running_server() as (_s, port), grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
                health = health_pb2_grpc.HealthStub(ch)
                for name in ("", "gaigel.v1.BotService", "gaigel.v1.MatchService"):
                    resp = await health.Check(health_pb2.HealthCheckRequest(service=name))
                    assert resp.status == health_pb2.HealthCheckResponse.SERVING
                refl = reflection_pb2_grpc.ServerReflectionStub(ch)
                call = refl.ServerReflectionInfo()
                await call.write(reflection_pb2.ServerReflectionRequest(list_services=""))
                resp = await call.read()
                names = {s.name for s in resp.list_services_response.service}
                assert {"gaigel.v1.BotService", "gaigel.v1.MatchService", "grpc.health.v1.Health"} <= names
                await call.done_writing()

        run(scenario())

    def test_metrics_scraped_over_http(self) -> None:
        """Metrics are served on their own port with pre-initialised zeros and counted decisions."""

        async def scenario() -> None:
            async with running_server(metrics_port=0) as (server, port):
                assert server.metrics_port

                def scrape() -> str:
                    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=5) as r:
                        return r.read().decode()  # type: ignore[no-any-return]

                text = await asyncio.to_thread(scrape)
                assert 'gaigel_matches_total{termination="forfeit"} 0.0' in text
                assert 'gaigel_decisions_total{outcome="timeout_fallback"} 0.0' in text
                assert "gaigel_active_sessions 0.0" in text
                admin = Admin(port)
                bot = ScriptedBot(port, "alpha")
                task = asyncio.create_task(bot.run())
                m = await admin.create(2, ["alpha", "house:random"], hands=1, seed=987654321987)
                await task
                await admin.wait_ended(m.match_id)
                text = await asyncio.to_thread(scrape)
                assert 'gaigel_matches_total{termination="completed"} 1.0' in text
                reg = server.metrics.registry
                answered = reg.get_sample_value("gaigel_decisions_total", {"outcome": "answered"})
                assert answered == bot.decisions > 0
                assert reg.get_sample_value("gaigel_decision_duration_seconds_count", {"bot": "alpha"}) == bot.decisions
                assert reg.get_sample_value("gaigel_server_lag_seconds_count") == bot.decisions  # one each
                assert reg.get_sample_value("gaigel_active_matches") == 0
                assert m.match_id not in text and "987654321987" not in text and "alpha-token" not in text
                await admin.close()

        run(scenario())

    def test_record_written_to_records_dir(self, tmp_path: object) -> None:
        """With records_dir set, each ended match is written as <match id>.json and replays."""
        from pathlib import Path

        async def scenario() -> None:
            async with running_server(records_dir=str(tmp_path)) as (_s, port):
                admin = Admin(port)
                bot = ScriptedBot(port, "alpha")
                task = asyncio.create_task(bot.run())
                m = await admin.create(3, ["alpha", "house:first", "house:random"], hands=2)
                await task
                await admin.wait_ended(m.match_id)
                data = json.loads((Path(str(tmp_path)) / f"{m.match_id}.json").read_text())
                assert replay(data).ok and data["result"]["termination"] == "completed"
                await admin.close()

        run(scenario())


def test_tls(tmp_path: object) -> None:
    """With a certificate and key the server speaks TLS only."""
    import shutil
    import subprocess
    from pathlib import Path

    import pytest

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = Path(str(tmp_path))
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(d / "key.pem"),
            "-out",
            str(d / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )

    async def scenario() -> None:
        async with running_server(tls_cert=str(d / "cert.pem"), tls_key=str(d / "key.pem")) as (_s, port):
            creds = grpc.ssl_channel_credentials(root_certificates=(d / "cert.pem").read_bytes())
            async with grpc.aio.secure_channel(f"127.0.0.1:{port}", creds) as ch:
                stub = ms_grpc.MatchServiceStub(ch)
                resp = await stub.ListMatches(ms.ListMatchesRequest(), metadata=admin_md())
                assert list(resp.matches) == []
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
                try:
                    await ms_grpc.MatchServiceStub(ch).ListMatches(
                        ms.ListMatchesRequest(), metadata=admin_md(), timeout=2
                    )
                except grpc.aio.AioRpcError as e:
                    assert e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
                else:
                    raise AssertionError("plaintext must fail against a TLS server")

    run(scenario())


class TestUnregisterBot:
    """UnregisterBot removes a bot name for good: token, idle sessions, metric series."""

    def test_unregister_ends_idle_sessions_revokes_the_token_and_drops_the_series(self) -> None:
        """An idle session ends with OK, the token no longer joins, the per-bot histogram is gone."""

        async def scenario() -> None:
            async with running_server() as (server, port):
                admin = Admin(port)
                reg = await admin.stub.RegisterBot(ms.RegisterBotRequest(bot_name="try-1234"), metadata=admin_md())
                series = {"bot": "try-1234", "le": "+Inf"}
                bucket = "gaigel_decision_duration_seconds_bucket"
                assert server.metrics.registry.get_sample_value(bucket, series) == 0
                bot = ScriptedBot(port, "try-1234", token=reg.bot_token)
                await bot.open()
                task = asyncio.create_task(bot.play())
                while not bot.received:  # Welcome: the session is idle in the lobby
                    await asyncio.sleep(0.01)
                resp = await admin.stub.UnregisterBot(ms.UnregisterBotRequest(bot_name="try-1234"), metadata=admin_md())
                assert resp.bot_name == "try-1234" and resp.sessions_ended == 1
                await asyncio.wait_for(task, 5)
                assert bot.status == grpc.StatusCode.OK
                assert server.metrics.registry.get_sample_value(bucket, series) is None
                assert "try-1234" not in server.lobby.sessions and "try-1234" not in server.lobby.idle
                again = ScriptedBot(port, "try-1234", token=reg.bot_token)
                await again.run()
                assert again.status == grpc.StatusCode.UNAUTHENTICATED
                try:
                    await admin.stub.UnregisterBot(ms.UnregisterBotRequest(bot_name="try-1234"), metadata=admin_md())
                except grpc.aio.AioRpcError as e:
                    assert e.code() == grpc.StatusCode.NOT_FOUND and "not registered" in (e.details() or "")
                else:
                    raise AssertionError("expected NOT_FOUND")
                await bot.close()
                await again.close()
                await admin.close()

        run(scenario())

    def test_a_seated_bot_is_refused_until_its_match_ends(self) -> None:
        """FAILED_PRECONDITION names the waiting match; after CancelMatch the bot can be removed."""

        async def scenario() -> None:
            async with running_server() as (_server, port):
                admin = Admin(port)
                await admin.stub.RegisterBot(ms.RegisterBotRequest(bot_name="seated"), metadata=admin_md())
                match = await admin.create(2, ["seated", "house:random"])
                request = ms.UnregisterBotRequest(bot_name="seated")
                try:
                    await admin.stub.UnregisterBot(request, metadata=admin_md())
                except grpc.aio.AioRpcError as e:
                    assert e.code() == grpc.StatusCode.FAILED_PRECONDITION and match.match_id in (e.details() or "")
                else:
                    raise AssertionError("expected FAILED_PRECONDITION")
                await admin.stub.CancelMatch(ms.CancelMatchRequest(match_id=match.match_id), metadata=admin_md())
                resp = await admin.stub.UnregisterBot(request, metadata=admin_md())
                assert resp.sessions_ended == 0
                await admin.close()

        run(scenario())
