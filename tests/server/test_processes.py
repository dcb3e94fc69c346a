"""``gaigel serve --processes N``: tables in N table processes behind one front (real processes,
real sockets, the Python kit as the bot that is moved). A table's seats all reach its process,
tables spread over the processes, an idle session moves where its match is, Resume finds its
match's process, MatchService works through the front, a hostile connection without a first
call is ended, churn in a table process backs the address off at the front, and a table process
that dies is replaced (its matches lost, loudly), up to a limit past which the front stops."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from srvkit import ADMIN, BOTS, FAST, Admin, ScriptedBot, admin_md, run, running_server
from test_commands import BOT, GAIGEL, free_port, wait_serving
from test_front_door import ATTACKER, PLAY_HEADERS, _closed_within, _frame, _goaway_code, _raw, _read_until_closed

from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import common_pb2 as common
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc
from gaigel_server import cluster as cluster_module
from gaigel_server.cluster import Cluster
from gaigel_server.frontdoor import GOAWAY, PREFACE
from gaigel_server.server import ServerConfig, check_bindable

ROOT = Path(__file__).resolve().parents[2]
KIT_BOT = [sys.executable, str(ROOT / "clients" / "python" / "examples" / "random_bot.py")]
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]
"""grpc's Python channels share connections by default: each test bot gets its own (as separate bot processes would)."""


class Bot(ScriptedBot):
    def __init__(self, port: int, name: str, **kw: Any) -> None:
        super().__init__(port, name, **kw)
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=OWN_CONNECTION)


@dataclasses.dataclass
class Front:
    cluster: Cluster
    port: int


@contextlib.asynccontextmanager
async def front(processes: int = 2, **overrides: Any) -> AsyncIterator[Front]:
    config = ServerConfig(admin_token=ADMIN, bots=dict(BOTS), clock=FAST, registry=CollectorRegistry(), **overrides)
    cluster = Cluster(config, processes, log_level="warning")
    port = await cluster.start("127.0.0.1:0")
    try:
        yield Front(cluster, port)
    finally:
        await cluster.stop(2.0)


def kit_bot(port: int, name: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "GAIGEL_SERVER": f"127.0.0.1:{port}", "GAIGEL_TOKEN": BOTS[name], "GAIGEL_BOT_NAME": name}
    with log.open("w") as err:
        return subprocess.Popen(KIT_BOT, env=env, stdout=subprocess.DEVNULL, stderr=err)


async def where_idle(cluster: Cluster, bot: str, timeout: float = 20.0) -> int:
    """The process holding an idle session of *bot* (waits for it)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        await cluster.refresh()
        for w in cluster.workers:
            if w.status["idle"].get(bot):
                return w.index
        assert asyncio.get_running_loop().time() < deadline, f"no idle session of {bot}"
        await asyncio.sleep(0.1)


def _actions(record: dict[str, Any]) -> list[Any]:
    return [[(a["seat"], a["action"]) for a in hand["actions"]] for hand in record["hands"]]


@pytest.mark.parametrize("hand_over", [True, False], ids=["socket-handed-over", "relayed-by-the-front"])
def test_an_idle_session_moves_to_its_matchs_process_and_the_match_is_the_same_as_in_one_process(
    tmp_path: Path, hand_over: bool
) -> None:
    """With the socket handed over (plain TCP) and relayed by the front (as TLS connections are)."""

    async def in_one_process() -> list[Any]:
        async with running_server() as (_, port):
            bots = [kit_bot(port, n, tmp_path / f"one-{n}.log") for n in ("alpha", "beta")]
            admin = Admin(port)
            try:
                m = await admin.create(2, ["alpha", "beta"], hands=2, seed=21, match_key="repro-21")
                await admin.wait_ended(m.match_id, 60)
                return _actions(await admin.record(m.match_id))
            finally:
                await admin.close()
                for b in bots:
                    b.kill()
                    b.wait()

    async def in_two() -> tuple[list[Any], int, str]:
        async with front() as f:
            assert f.cluster.door is not None
            if not hand_over:
                f.cluster.door.hand_over = None
            alpha = kit_bot(f.port, "alpha", tmp_path / "alpha.log")
            beta = None
            admin = Admin(f.port)
            try:
                first = await where_idle(f.cluster, "alpha")
                beta = kit_bot(f.port, "beta", tmp_path / "beta.log")
                second = await where_idle(f.cluster, "beta")
                assert first != second  # the second bot went to the process with less to do
                m = await admin.create(2, ["alpha", "beta"], hands=2, seed=21, match_key="repro-21")
                ended = await admin.wait_ended(m.match_id, 60)
                assert ended.termination == common.MATCH_TERMINATION_COMPLETED
                assert f.cluster.handed_over == (3 if hand_over else 0)  # both bots, and beta again after its move
                return _actions(await admin.record(m.match_id)), f.cluster.moves, m.match_id
            finally:
                await admin.close()
                for b in (alpha, beta):
                    if b is not None:
                        b.kill()
                        b.wait()

    reference = run(in_one_process(), 120)
    actions, moves, _ = run(in_two(), 120)
    assert moves == 1
    assert actions == reference and len(actions) == 2
    moved = (tmp_path / "alpha.log").read_text() + (tmp_path / "beta.log").read_text()
    assert "MOVED" in moved and "reconnecting" in moved  # the kit was told why and joined again


def test_tables_spread_resume_finds_its_process_and_matchservice_works_through_the_front() -> None:
    async def scenario() -> None:
        async with front() as f:
            admin = Admin(f.port)
            bots = {n: Bot(f.port, n, seed=i) for i, n in enumerate(("alpha", "beta", "gamma"))}
            try:
                for bot in bots.values():
                    await bot.open()
                    await where_idle(f.cluster, bot.name)
                made = {}
                for i, name in enumerate(bots):
                    made[name] = (await admin.create(2, [name, "house:random"], hands=3, seed=40 + i)).match_id
                assert set(f.cluster.owner.values()) == {0, 1}  # both processes have tables
                door = f.cluster.door
                assert door is not None
                # each bot's connection went to its process with its socket: the front holds its
                # per-peer place, not its bytes
                assert f.cluster.handed_over == 3 and len(door.handed) == 3
                # each bot plays its first decision, then its connection breaks; Resume on a new one
                for name, bot in bots.items():
                    await bot.play(stop_after=lambda msg: msg.WhichOneof("message") == "decision_request")
                    assert bot.match_start is not None and bot.match_start.match_id == made[name]
                    bot.call.cancel()
                    await bot.close()
                resumed = {}
                for name, bot in bots.items():
                    again = Bot(f.port, name, seed=7)
                    start = bot.match_start
                    assert start is not None
                    last = max(m.sequence for m in bot.received)
                    await again.open(
                        bs.PlayRequest(
                            resume=bs.Resume(
                                match_id=start.match_id,
                                seat=start.seat,
                                resume_token=start.resume_token,
                                last_sequence=last,
                            )
                        )
                    )
                    resumed[name] = again
                await asyncio.gather(*(b.play() for b in resumed.values()))
                for name, again in resumed.items():
                    assert again.received[0].welcome.resumed, again.details
                    ended = await admin.wait_ended(made[name], 30)
                    assert ended.termination == common.MATCH_TERMINATION_COMPLETED
                # ListMatches pages over both processes: every match once
                seen, token = [], ""
                while True:
                    page = await admin.stub.ListMatches(
                        ms.ListMatchesRequest(page_size=1, page_token=token), metadata=admin_md()
                    )
                    seen += [m.match_id for m in page.matches]
                    token = page.next_page_token
                    if not token:
                        break
                assert sorted(seen) == sorted(made.values())
                # a page holds what was asked for, no more, the newest matches first over both
                pages, token = [], ""
                while True:
                    page = await admin.stub.ListMatches(
                        ms.ListMatchesRequest(page_size=2, page_token=token), metadata=admin_md()
                    )
                    pages.append(list(page.matches))
                    token = page.next_page_token
                    if not token:
                        break
                assert [len(p) for p in pages] == [2, 1]
                listed = [m for p in pages for m in p]
                created = [m.create_time.ToNanoseconds() for m in listed]
                assert created == sorted(created, reverse=True)
                assert sorted(m.match_id for m in listed) == sorted(made.values())
                for token, why in (("0", "not one this server issued"), ("0|-1", "not one this server issued")):
                    with pytest.raises(grpc.aio.AioRpcError) as e:
                        await admin.stub.ListMatches(ms.ListMatchesRequest(page_token=token), metadata=admin_md())
                    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and why in (e.value.details() or "")
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await admin.stub.GetMatch(ms.GetMatchRequest(match_id="nope"), metadata=admin_md())
                assert e.value.code() == grpc.StatusCode.NOT_FOUND and "no match 'nope'" in (e.value.details() or "")
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await admin.stub.GetMatch(ms.GetMatchRequest(match_id=made["alpha"]), metadata=admin_md("wrong"))
                assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
                # health and reflection are the front's own
                health = health_pb2_grpc.HealthStub(admin.channel)
                checked = await health.Check(health_pb2.HealthCheckRequest(service="gaigel.v1.MatchService"))
                assert checked.status == health_pb2.HealthCheckResponse.SERVING
                # a bot registered at run time plays in every process (one token for all)
                reg = await admin.stub.RegisterBot(ms.RegisterBotRequest(bot_name="delta"), metadata=admin_md())
                for w in f.cluster.workers:
                    delta = Bot(w.port, "delta", token=reg.bot_token)  # straight to each process
                    await delta.open()
                    await delta.play(stop_after=lambda msg: msg.WhichOneof("message") == "welcome")
                    assert delta.received and delta.received[0].welcome.bot_name == "delta", delta.details
                    delta.call.cancel()
                    await delta.close()
            finally:
                await admin.close()
                for bot in bots.values():
                    await bot.close()

    run(scenario(), 120)


def test_a_connection_without_a_first_call_gets_goaway() -> None:
    async def scenario() -> None:
        async with front() as f:
            door = f.cluster.door
            assert door is not None
            door.limits = dataclasses.replace(door.limits, first_call_timeout=0.5)
            reader, writer = await asyncio.open_connection("127.0.0.1", f.port)
            writer.write(PREFACE + bytes((0, 0, 0, 4, 0, 0, 0, 0, 0)))
            data = b""
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    while chunk := await reader.read(4096):
                        data += chunk
            assert data[:9] == bytes((0, 0, 0, 4, 0, 0, 0, 0, 0))  # the door's SETTINGS
            assert data[9 + 3] == GOAWAY and reader.at_eof()  # then GOAWAY and the end
            writer.close()
            # a header block that is not HPACK: closed at once
            reader, writer = await asyncio.open_connection("127.0.0.1", f.port)
            writer.write(
                PREFACE + bytes((0, 0, 0, 4, 1, 0, 0, 0, 0)) + bytes((0, 0, 3, 1, 4, 0, 0, 0, 1)) + b"\xff" * 3
            )
            async with asyncio.timeout(5):
                while await reader.read(4096):
                    pass
            writer.close()
            assert not f.cluster.failed.is_set()

    run(scenario(), 60)


async def _replaced(cluster: Cluster, k: int, old_pid: int, timeout: float = 60.0) -> None:
    async with asyncio.timeout(timeout):
        while not (cluster.workers[k].process.pid != old_pid and cluster.workers[k].alive and cluster.up.is_set()):
            await asyncio.sleep(0.05)


def test_a_table_process_that_dies_is_replaced_and_its_matches_are_lost_loudly() -> None:
    """SIGKILL to one table process (this test's own child): the front stays up and starts another
    in its place, which knows the bots registered at run time; the dead one's match answers DATA_LOSS
    with why, the per-peer places of the connections it held are free again, the other process's
    match plays on to its end, and a new match plays in the new process."""

    async def scenario() -> None:
        # One address may hold 3 connections: the admin's and two bots'. The dead process's
        # connection must give its place back, or the bot's new connection is refused at accept.
        async with front(max_connections_per_peer=3) as f:
            admin = Admin(f.port)
            alpha, beta = Bot(f.port, "alpha", seed=1), Bot(f.port, "beta", seed=2)
            try:
                reg = await admin.stub.RegisterBot(ms.RegisterBotRequest(bot_name="delta"), metadata=admin_md())
                for bot in (alpha, beta):
                    await bot.open()
                    await where_idle(f.cluster, bot.name)
                doomed_request = ms.CreateMatchRequest(
                    players=2, seat_bots=["alpha", "house:random"], hands=20, seed=5, request_id="doomed-request"
                )
                doomed = (await admin.stub.CreateMatch(doomed_request, metadata=admin_md())).match.match_id
                kept_request = ms.CreateMatchRequest(
                    players=2, seat_bots=["beta", "house:random"], hands=2, seed=6, request_id="kept-request"
                )
                kept = (await admin.stub.CreateMatch(kept_request, metadata=admin_md())).match.match_id
                k = f.cluster.owner[doomed]
                assert f.cluster.owner[kept] == 1 - k
                await alpha.play(stop_after=lambda msg: msg.WhichOneof("message") == "decision_request")
                old = f.cluster.workers[k].process.pid
                f.cluster.workers[k].process.kill()
                await alpha.play()  # its stream breaks with the process
                assert alpha.status == grpc.StatusCode.UNAVAILABLE, alpha.details
                await alpha.close()
                await _replaced(f.cluster, k, old)
                assert not f.cluster.failed.is_set()
                restarts = f.cluster.metrics.registry.get_sample_value("gaigel_table_process_restarts_total")
                assert restarts == 1
                for call in (
                    admin.stub.GetMatch(ms.GetMatchRequest(match_id=doomed), metadata=admin_md()),
                    anext(aiter(admin.stub.WatchMatch(ms.WatchMatchRequest(match_id=doomed), metadata=admin_md()))),
                ):
                    with pytest.raises(grpc.aio.AioRpcError) as e:
                        await call
                    assert e.value.code() == grpc.StatusCode.DATA_LOSS
                    assert f"its table process {k} exited with code -9 while it held the match" in str(
                        e.value.details()
                    )
                # A retry of the lost match's CreateMatch says so rather than playing it twice; a
                # retry of the other's still gets its match.
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await admin.stub.CreateMatch(doomed_request, metadata=admin_md())
                assert e.value.code() == grpc.StatusCode.DATA_LOSS
                assert f"request_id 'doomed-request' created match {doomed!r}, which is lost" in str(e.value.details())
                assert "send a new request_id" in str(e.value.details())
                retried = await admin.stub.CreateMatch(kept_request, metadata=admin_md())
                assert retried.match.match_id == kept
                # the other process's match plays on
                await beta.play()
                ended = await admin.wait_ended(kept, 30)
                assert ended.termination == common.MATCH_TERMINATION_COMPLETED
                # alpha's place at the door is free: it joins again, and plays in the new process
                again = Bot(f.port, "alpha", seed=3)
                try:
                    await again.open()
                    assert await where_idle(f.cluster, "alpha") == k
                    fresh = (await admin.create(2, ["alpha", "house:random"], hands=1, seed=7)).match_id
                    assert f.cluster.owner[fresh] == k
                    await again.play()
                    assert (await admin.wait_ended(fresh, 30)).termination == common.MATCH_TERMINATION_COMPLETED
                finally:
                    await again.close()
                # the new process knows the bot registered before it started
                delta = Bot(f.cluster.workers[k].port, "delta", token=reg.bot_token)
                try:
                    await delta.open()
                    await delta.play(stop_after=lambda msg: msg.WhichOneof("message") == "welcome")
                    assert delta.received and delta.received[0].welcome.bot_name == "delta", delta.details
                    delta.call.cancel()
                finally:
                    await delta.close()
            finally:
                await admin.close()
                await beta.close()

    run(scenario(), 120)


def test_a_kit_bot_seated_in_a_lost_match_joins_again_and_plays_on(tmp_path: Path) -> None:
    """The Python kit's bot in a match whose process dies: its Resume is refused (no such match
    in the process it reaches), it joins afresh and plays the next match."""

    async def scenario() -> None:
        async with front() as f:
            log = tmp_path / "alpha.log"
            alpha = kit_bot(f.port, "alpha", log)
            admin = Admin(f.port)
            try:
                k = await where_idle(f.cluster, "alpha")
                lost = (await admin.create(2, ["alpha", "house:random"], hands=60, seed=8)).match_id
                assert (await admin.get(lost)).state == ms.MATCH_STATE_RUNNING
                old = f.cluster.workers[k].process.pid
                f.cluster.workers[k].process.kill()
                await _replaced(f.cluster, k, old)
                await where_idle(f.cluster, "alpha", 30)
                fresh = (await admin.create(2, ["alpha", "house:random"], hands=1, seed=9)).match_id
                assert (await admin.wait_ended(fresh, 60)).termination == common.MATCH_TERMINATION_COMPLETED
                text = log.read_text()
                assert f"could not resume match {lost} (NOT_FOUND" in text and "joining afresh" in text, text[-2000:]
            finally:
                await admin.close()
                alpha.kill()
                alpha.wait()

    run(scenario(), 120)


def test_a_stuck_table_process_is_killed_and_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table process whose event loop answers nothing (stopped with SIGSTOP: its tables and
    their clocks stand still) is killed after STUCK_SECONDS without a health answer and replaced;
    its waiting match is lost, loudly."""
    monkeypatch.setattr(cluster_module, "STUCK_SECONDS", 2.0)

    async def scenario() -> None:
        async with front() as f:
            admin = Admin(f.port)
            try:
                await asyncio.sleep(3.0)  # longer than STUCK_SECONDS: healthy processes answer and are left alone
                assert f.cluster.restarts._value.get() == 0
                match = (await admin.create(2, ["alpha", "house:random"], hands=1, seed=4)).match_id
                k = f.cluster.owner[match]
                stuck = f.cluster.workers[k].process
                stuck.send_signal(signal.SIGSTOP)
                started = time.monotonic()
                await _replaced(f.cluster, k, stuck.pid, 30)
                assert time.monotonic() - started >= 2.0 - 1.0  # its last answer may be a beat before the stop
                assert stuck.returncode == -signal.SIGKILL
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await admin.get(match)
                assert e.value.code() == grpc.StatusCode.DATA_LOSS
                assert f"its table process {k} exited with code -9" in str(e.value.details())
            finally:
                await admin.close()

    run(scenario(), 90)


def test_an_idle_front_asks_its_table_processes_for_no_status(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no table waiting the front asks no status until something needs a placement (each
    question costs both processes a grpc call: once a second it was most of an idle cluster's CPU);
    a waiting table is asked about again and again until it is seated."""
    calls: list[str] = []
    real = Cluster._call

    async def counted(self: Cluster, w: Any, method: str, body: dict[str, Any]) -> Any:
        calls.append(method)
        return await real(self, w, method, body)

    monkeypatch.setattr(Cluster, "_call", counted)

    async def scenario() -> None:
        async with front() as f:
            await asyncio.sleep(3.0)
            assert calls.count("Status") == 0
            admin = Admin(f.port)
            try:
                await admin.create(2, ["alpha", "house:random"], hands=1, seed=4)  # alpha never joins
                await asyncio.sleep(2.0)
                assert calls.count("Status") >= 2 * 4  # a round every 0.2 s, each asking both processes
            finally:
                await admin.close()

    run(scenario(), 60)


def test_a_table_process_that_keeps_dying_stops_the_front(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster_module, "RESTARTS", 1)

    async def scenario() -> None:
        async with front() as f:
            old = f.cluster.workers[1].process.pid
            f.cluster.workers[1].process.kill()
            await _replaced(f.cluster, 1, old)
            assert not f.cluster.failed.is_set()
            f.cluster.workers[1].process.kill()  # the second death within the window
            async with asyncio.timeout(10):
                await f.cluster.failed.wait()
            assert f.cluster.workers[1].process.pid != old  # not replaced again

    run(scenario(), 90)


def test_churn_in_a_table_process_backs_the_address_off_at_the_front() -> None:
    """A client whose connection was handed to a table process opens streams that never Join,
    far more than are let wait: that process's door ends the connection (GOAWAY, ENHANCE_YOUR_CALM)
    and the front, which accepts, closes the address's new connections for a while."""

    async def scenario() -> None:
        async with front() as f:
            door = f.cluster.door
            assert door is not None
            reader, writer = await _raw(f.port)
            assert (await reader.readexactly(9))[3] == 0x4  # the front's SETTINGS
            join = bs.PlayRequest(join=bs.Join(bot_name="alpha", bot_token="wrong-token-123", protocol_version=1))
            body = join.SerializeToString()
            first = _frame(0x1, 0x4, 1, PLAY_HEADERS) + _frame(0x0, 0, 1, b"\x00" + len(body).to_bytes(4, "big") + body)
            writer.write(_frame(0x4, 0x1, 0) + first)  # the ACK of the front's SETTINGS, then a Join
            await writer.drain()
            for _ in range(50):
                if f.cluster.handed_over:
                    break
                await asyncio.sleep(0.05)
            assert f.cluster.handed_over == 1 and not door.links  # the connection is in a table process now
            with contextlib.suppress(ConnectionError):
                writer.write(b"".join(_frame(0x1, 0x4, s, PLAY_HEADERS) for s in range(3, 2403, 2)))
                await writer.drain()
            assert _goaway_code(await _read_until_closed(reader, 10)) == 0xB
            writer.close()
            for _ in range(50):
                if door._banned.waiting(ATTACKER) > 0:
                    break
                await asyncio.sleep(0.05)
            again, _ = await _raw(f.port)
            assert await _closed_within(again, 1.0), "the front let a backed-off address in again at once"
            assert f.cluster.metrics.connections_refused.labels("churn")._value.get() >= 1

    run(scenario(), 60)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--no-front-door"], "--processes needs the front door"),
        (["--address", "unix:/tmp/gaigel-processes-test.sock"], "--processes needs a TCP --address"),
    ],
)
def test_processes_without_a_door_to_route_is_one_line(flags: list[str], says: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gaigel.cli", "serve", "--processes", "2", "--metrics-port", "0", *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and says in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr


def _bindable(port: int) -> bool:
    try:
        check_bindable(f"127.0.0.1:{port}", "--metrics-port")
    except ValueError:
        return False
    return True


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def test_a_stuck_table_process_is_down_in_the_scrape_and_does_not_hang_it() -> None:
    """A table process that does not answer (stopped with SIGSTOP) costs the scrape at most
    METRICS_TIMEOUT: its ``gaigel_table_process_up`` is 0 and its series are missing, the
    others' are there; continued, it is back in the next scrape."""
    from gaigel_server.cluster import METRICS_TIMEOUT

    async def scenario() -> None:
        config = ServerConfig(
            admin_token=ADMIN, bots=dict(BOTS), clock=FAST, registry=CollectorRegistry(), metrics_port=0
        )
        cluster = Cluster(config, 2, log_level="warning")
        await cluster.start("127.0.0.1:0")
        try:
            port = cluster.metrics_port
            assert port is not None
            both = await asyncio.to_thread(_scrape, port)
            assert [both[("gaigel_table_process_up", (("process", k),))] for k in "01"] == [1.0, 1.0]
            stuck = cluster.workers[1].process.pid
            os.kill(stuck, signal.SIGSTOP)
            try:
                began = time.monotonic()
                one = await asyncio.to_thread(_scrape, port)
                took = time.monotonic() - began
            finally:
                os.kill(stuck, signal.SIGCONT)
            assert took < METRICS_TIMEOUT + 3, took
            assert [one[("gaigel_table_process_up", (("process", k),))] for k in "01"] == [1.0, 0.0]
            processes = {dict(labels).get("process") for name, labels in one if name != "gaigel_table_process_up"}
            assert processes == {"front", "0"}, processes
            again = await asyncio.to_thread(_scrape, port)
            assert again[("gaigel_table_process_up", (("process", "1"),))] == 1.0
            assert ("gaigel_decisions_total", (("outcome", "answered"), ("process", "1"))) in again
        finally:
            await cluster.stop(2.0)

    run(scenario(), 60)


def free_ports(n: int) -> int:
    """The first of *n* consecutive free loopback ports."""
    for _ in range(50):
        first = free_port()
        try:
            for k in range(n):
                check_bindable(f"127.0.0.1:{first + k}", "--metrics-port")
        except ValueError:
            continue
        return first
    raise AssertionError(f"no {n} consecutive free ports")


def test_gaigel_serve_processes_plays_gaigel_try_and_stops_on_sigterm(tmp_path: Path) -> None:
    """The command line: `gaigel serve --processes 2` serves a match that `gaigel try --server`
    registers a bot for and plays; its start-up line names the processes; SIGTERM: exit 0 after
    each table process stopped."""
    port, metrics = free_port(), free_ports(3)
    err = tmp_path / "serve.log"
    with err.open("w") as log:
        proc = subprocess.Popen(
            [
                *GAIGEL,
                *("serve", "--address", f"127.0.0.1:{port}", "--admin-token", ADMIN, "--processes", "2"),
                *("--metrics-port", str(metrics), "--records", str(tmp_path / "records")),
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        wait_serving(port, proc, tries=300, why=err.read_text)
        out = subprocess.run(
            [
                *GAIGEL,
                *("try", "--server", f"127.0.0.1:{port}", "--admin-token", ADMIN),
                *("--players", "4", "--hands", "2", "--seed", "11", "--", *BOT),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stdout + out.stderr + err.read_text()
        assert out.stdout.splitlines()[-1] == "ok: the bot completed the match without a fault"
        # One scrape target: the front's series and each table process's, labelled process.
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10).read().decode()
        families = list(text_string_to_metric_families(text))
        names = [f.name for f in families]
        assert len(names) == len(set(names)), "a family twice in one scrape"
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}
        assert ("gaigel_connections_open", (("process", "front"),)) in samples
        assert [samples[("gaigel_table_process_up", (("process", str(k)),))] for k in range(2)] == [1.0, 1.0]
        completed = [
            samples[("gaigel_matches_total", (("process", str(k)), ("termination", "completed")))] for k in range(2)
        ]
        assert sorted(completed) == [0.0, 1.0]  # the match played in one of them
        assert all(("process_cpu_seconds_total", (("process", str(k)),)) in samples for k in range(2))
        # The table processes have no metrics port of their own any more.
        assert all(_bindable(metrics + 1 + k) for k in range(2))
    finally:
        proc.terminate()
        proc.wait(30)
    assert proc.returncode == 0, err.read_text()
    started = next(json.loads(line) for line in err.read_text().splitlines() if '"server_started"' in line)
    assert started["processes"] == 2
    assert len(list((tmp_path / "records").glob("*.json"))) == 1  # written by the table process
    assert err.read_text().count('"worker_stopping"') == 2  # each table process stopped in order
    lines = [json.loads(line) for line in err.read_text().splitlines() if line.startswith("{")]
    # A table process's lines name it; the front's do not.
    started_in = [line.get("process") for line in lines if line["event"] == "match_start"]
    assert len(started_in) == 1 and started_in[0] in (0, 1), started_in
    assert all("process" not in line for line in lines if line["event"] == "server_started")
    assert sorted(line["process"] for line in lines if line["event"] == "worker_stopping") == [0, 1]


def test_a_join_without_the_bots_token_cannot_take_the_place_kept_for_that_bot() -> None:
    """A match waits for alpha, who is not connected: the front keeps the next Join of alpha for
    the match's process. Joins naming alpha with a wrong token (anyone can name a bot) do not
    use that place up; alpha's own Join takes it and the match plays."""

    async def scenario() -> None:
        async with front() as f:
            admin = Admin(f.port)
            try:
                m = await admin.create(2, ["alpha", "house:random"], hands=1, seed=5)
                k = f.cluster.owner[m.match_id]

                def kept() -> int:
                    return len(f.cluster.expected.get((k, "alpha"), ()))

                for _ in range(100):
                    if kept():
                        break
                    await asyncio.sleep(0.05)
                assert kept() == 1
                for i in range(5):
                    hostile = Bot(f.port, "alpha", token=f"not-alphas-token-{i}")
                    await hostile.open()
                    await hostile.play()
                    assert hostile.status == grpc.StatusCode.UNAUTHENTICATED
                    await hostile.close()
                assert kept() == 1  # still kept for alpha
                alpha = Bot(f.port, "alpha")
                await alpha.open()
                await alpha.play()
                ended = await admin.wait_ended(m.match_id, 30)
                assert ended.termination == common.MATCH_TERMINATION_COMPLETED and f.cluster.moves == 0
                await alpha.close()
            finally:
                await admin.close()

    run(scenario(), 60)


async def _knows(w: Any, bot: str) -> bool:
    """Whether table process *w* has *bot* registered: a match seating it can be created there
    (and is cancelled at once)."""
    stub = ms_grpc.MatchServiceStub(w.channel)
    try:
        made = await stub.CreateMatch(
            ms.CreateMatchRequest(players=2, hands=1, seat_bots=[bot, "house:random"]), metadata=admin_md()
        )
    except grpc.aio.AioRpcError as e:
        assert e.code() == grpc.StatusCode.INVALID_ARGUMENT and "not registered" in (e.details() or ""), e
        return False
    await stub.CancelMatch(ms.CancelMatchRequest(match_id=made.match.match_id), metadata=admin_md())
    return True


def test_unregister_racing_create_match_leaves_every_process_agreeing() -> None:
    """UnregisterBot and a CreateMatch seating that bot, sent together: one of them wins in every
    process, never a bot unregistered in one process and seated in another (each process's
    registry, and the front's, are asked afterwards)."""

    async def scenario() -> None:
        async with front() as f:
            admin = Admin(f.port)
            try:
                # Two tables waiting for alpha in process 0: the racers' matches go to process 1,
                # which UnregisterBot reaches after process 0.
                for seed in (1, 2):
                    await admin.create(2, ["alpha", "house:random"], hands=1, seed=seed)
                for i in range(40):
                    bot = f"racer{i}"
                    await admin.stub.RegisterBot(ms.RegisterBotRequest(bot_name=bot), metadata=admin_md())

                    async def unregister(delay: float, bot: str = bot) -> ms.UnregisterBotResponse:
                        await asyncio.sleep(delay)
                        request = ms.UnregisterBotRequest(bot_name=bot)
                        return await admin.stub.UnregisterBot(request, metadata=admin_md())  # type: ignore[no-any-return]

                    # The CreateMatch goes first, the UnregisterBot 0 to 10 ms after it: some land
                    # between the front's look at the seated bots and its calls to the processes.
                    created, unregistered = await asyncio.gather(
                        admin.create(2, [bot, "house:random"], hands=1, seed=i),
                        unregister(i / 4000),
                        return_exceptions=True,
                    )
                    known = [await _knows(w, bot) for w in f.cluster.workers]
                    gone = isinstance(unregistered, ms.UnregisterBotResponse)
                    assert known == [not gone] * 2 and (bot in f.cluster.bots) == (not gone), (i, created, unregistered)
                    if not gone:
                        assert isinstance(unregistered, grpc.aio.AioRpcError)
                        assert unregistered.code() == grpc.StatusCode.FAILED_PRECONDITION, unregistered
            finally:
                await admin.close()

    run(scenario(), 120)
