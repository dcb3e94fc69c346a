"""The commands: ``gaigel serve`` (SIGTERM), ``gaigel try`` and ``gaigel rematch``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from srvkit import ADMIN, Admin, ScriptedBot, admin_md, run

from gaigel.record import load_record
from gaigel.replay import replay
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import match_service_pb2 as ms

GAIGEL = [sys.executable, "-c", "import sys; from gaigel.cli import main; sys.exit(main(sys.argv[1:]))"]
BOT = [sys.executable, str(Path(__file__).parent / "bots" / "minimal_bot.py")]
FAREWELL = [sys.executable, str(Path(__file__).parent / "bots" / "farewell_bot.py")]
TRY_ONE_HAND = ["--hands", "1", "--seed", "5", "--"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TestServe:
    """``gaigel serve`` as a subprocess."""

    def test_a_unix_socket_address_is_served(self, tmp_path: Path) -> None:
        """``--address unix:PATH`` (what the operator guide's kits were checked against): grpc binds
        the path itself (no front door); the start-up check for host:port addresses let it by."""
        path = tmp_path / "gaigel.sock"
        err = tmp_path / "serve.log"
        with err.open("w") as log:
            proc = subprocess.Popen(
                [
                    *GAIGEL,
                    "serve",
                    "--address",
                    f"unix:{path}",
                    "--metrics-port",
                    "0",
                    "--admin-token",
                    "unix-test-admin",
                ],
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        try:
            with grpc.insecure_channel(f"unix:{path}") as ch:
                for _ in range(200):
                    try:
                        reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=0.5)
                        break
                    except grpc.RpcError:
                        assert proc.poll() is None, err.read_text()
                        time.sleep(0.1)
                else:
                    raise AssertionError("no health answer on the unix socket: " + err.read_text())
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        finally:
            proc.terminate()
            proc.wait(30)
        assert proc.returncode == 0, err.read_text()

    def test_sigterm_aborts_running_matches_within_grace(self, tmp_path: Path) -> None:
        """SIGTERM: the process exits within --grace and the running match is recorded as aborted."""
        port = free_port()
        bots = tmp_path / "bots.toml"
        bots.write_text('[bots]\nalpha = "alpha-token-123"\n')
        records = tmp_path / "records"
        proc = subprocess.Popen(
            [
                *GAIGEL,
                "serve",
                "--address",
                f"127.0.0.1:{port}",
                "--bots",
                str(bots),
                "--records",
                str(records),
                "--metrics-port",
                "0",
                "--grace",
                "3",
                "--decision-time",
                "30",
            ],
            env=dict(os.environ, GAIGEL_ADMIN_TOKEN=ADMIN),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:

            async def scenario() -> str:
                async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
                    for _ in range(100):
                        try:
                            await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=0.5)
                            break
                        except grpc.aio.AioRpcError:
                            await asyncio.sleep(0.1)

                async def never(bot: ScriptedBot, req: bs.DecisionRequest) -> None:
                    return None

                bot = ScriptedBot(port, "alpha", policy=never)
                task = asyncio.create_task(bot.run())
                admin = Admin(port)
                m = await admin.create(2, ["alpha", "house:random"], hands=3)
                while (await admin.get(m.match_id)).state != ms.MATCH_STATE_RUNNING:
                    await asyncio.sleep(0.05)
                proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(task, 5)
                assert bot.received[-1].match_end.termination == 3  # ABORTED
                return m.match_id

            match_id = run(scenario(), timeout=30)
            started = time.monotonic()
            _out, err = proc.communicate(timeout=10)
            assert time.monotonic() - started < 3.5
            assert proc.returncode == 0
        finally:
            if proc.poll() is None:
                proc.kill()
        record = load_record(records / f"{match_id}.json")
        assert record["result"]["termination"] == "aborted" and record["hands"][-1]["aborted"]
        assert replay(record).ok
        decoder = json.JSONDecoder()  # tolerate another process's text after a log line
        lines = [decoder.raw_decode(line)[0] for line in err.splitlines() if line.startswith("{")]
        assert any(
            x["event"] == "match_end" and x["termination"] == "aborted" and x["match_id"] == match_id for x in lines
        )
        assert any(x["event"] == "hand_end" or x["event"] == "match_start" for x in lines)
        assert "alpha-token-123" not in err and ADMIN not in err


class TestTry:
    """``gaigel try`` runs a bot command against house bots."""

    def test_good_bot_passes(self) -> None:
        """A bot that answers legal ids completes the match: exit 0."""
        out = subprocess.run(
            [*GAIGEL, "try", "--players", "3", "--hands", "1", "--seed", "5", "--", *BOT],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert "completed" in out.stdout and "ok:" in out.stdout

    def test_faulty_bot_fails_with_reason_code(self) -> None:
        """A bot that answers an illegal id once: the fault is printed with its reason code, exit 1."""
        out = subprocess.run(
            [*GAIGEL, "try", "--players", "2", "--hands", "1", "--seed", "5", "--json", "--", *BOT, "--illegal"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 1, out.stdout + out.stderr
        data = json.loads(out.stdout)
        assert data["termination"] == "completed" and [f["reason"] for f in data["faults"]] == ["ILLEGAL_ACTION"]

    def test_bot_that_exits_mid_match_is_reported_without_waiting_the_resume_grace(self) -> None:
        """A crash at the first decision: a note names the exit code within seconds (the grace is 20 s)."""
        started = time.monotonic()
        out = subprocess.run(
            [*GAIGEL, "try", "--players", "2", "--hands", "1", "--seed", "5", "--", *BOT, "--exit-mid-match"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 1, out.stdout + out.stderr
        assert time.monotonic() - started < 12  # the 20 s resume grace is not waited for
        assert "fault DISCONNECT (hand 0 step " in out.stdout
        assert "note: bot candidate exited with code 3 during the match: match cancelled" in out.stdout
        assert out.stdout.splitlines()[-1] == "FAILED: see the faults and notes above"

    def test_the_bot_sees_its_match_end_and_exits_by_itself(self, tmp_path: Path) -> None:
        """After a completed match the bot's session ends with OK behind its MatchEnd, so an SDK bot
        runs its on_match_end and returns from run() before try stops it (it used to be killed first)."""
        said = tmp_path / "farewell.txt"
        out = subprocess.run(
            [*GAIGEL, "try", "--players", "2", "--hands", "1", "--seed", "5", "--", *FAREWELL, str(said)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert said.read_text().splitlines() == ["MATCH_TERMINATION_COMPLETED", "exited"]

    def test_verdict_points_only_at_what_was_printed(self) -> None:
        """No fault and no note: the last line says how the match ended instead of 'see the faults above'."""
        from gaigel_harness.trial import _verdict

        assert _verdict(False, "forfeit", faults=False, notes=False) == "FAILED: the match ended as forfeit"
        assert _verdict(False, "completed", faults=True, notes=False) == "FAILED: see the faults above"
        assert _verdict(False, "cancelled", faults=True, notes=True) == "FAILED: see the faults and notes above"

    def test_remote_decision_times_run_from_the_send_to_the_answer(self, tmp_path: Path) -> None:
        """A fast remote bot's decisions are recorded with the time from the server's send to the answer's
        arrival: above zero, since the answer cannot come before the request was sent (the write's completion,
        the old start, could be later than a fast answer and gave 0.0)."""
        path = tmp_path / "try.json"
        out = subprocess.run(
            [*GAIGEL, "try", "--players", "4", "--hands", "2", "--seed", "9", "--record", str(path), "--", *BOT],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        times = [a["ms"] for h in load_record(path)["hands"] for a in h["actions"] if a["seat"] == 0]
        assert len(times) > 10 and min(times) > 0.0, times

    def test_every_house_bot_is_offered_and_the_record_can_be_saved(self, tmp_path: Path) -> None:
        """--house takes every house bot of gaigel.bots; --record FILE writes a record that replays."""
        from gaigel.bots import HOUSE_BOTS

        usage = subprocess.run([*GAIGEL, "try", "--help"], capture_output=True, text=True, timeout=30).stdout
        assert "{" + ",".join(sorted(HOUSE_BOTS)) + "}" in usage
        path = tmp_path / "try.json"
        out = subprocess.run(
            [
                *GAIGEL,
                "try",
                *("--hands", "1", "--seed", "5", "--house", "heuristic", "--record", str(path)),
                "--",
                *BOT,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        record = load_record(path)
        assert record["seats"][1]["bot"] == "house:heuristic" and record["seed"] == 5
        assert replay(record).ok
        bad = subprocess.run(
            [*GAIGEL, "try", "--hands", "1", "--record", str(tmp_path / "no" / "such.json"), "--", *BOT],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode == 2 and "cannot write --record" in bad.stderr

    def test_relative_bot_command_runs_in_the_working_directory_with_this_python(self, tmp_path: Path) -> None:
        """``python mybot.py`` is found beside where try was started, and ``python`` is this installation's
        (PATH holds only the system folders, as in a shell without an activated venv)."""
        (tmp_path / "mybot.py").write_text(Path(BOT[1]).read_text())
        gaigel = Path(sysconfig.get_path("scripts")) / "gaigel"
        out = subprocess.run(
            [str(gaigel), "try", "--hands", "1", "--seed", "5", "--", "python", "mybot.py"],
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.splitlines()[-1] == "ok: the bot completed the match without a fault"

    def test_missing_command_is_a_usage_error(self) -> None:
        """No command after --: one line, exit 2."""
        out = subprocess.run([*GAIGEL, "try", "--players", "2"], capture_output=True, text=True, timeout=30)
        assert (
            out.returncode == 2 and "give the bot command" in out.stderr and len(out.stderr.strip().splitlines()) == 1
        )


def wait_serving(
    port: int, proc: subprocess.Popen[bytes], tries: int = 100, why: Callable[[], str] | None = None
) -> None:
    """Waits until the ``gaigel serve`` *proc* on *port* answers health checks (*why*: what to
    show if it exits first)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        for _ in range(tries):
            try:
                health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=0.5)
                return
            except grpc.RpcError:
                assert proc.poll() is None, why() if why else "gaigel serve exited"
                time.sleep(0.1)


@pytest.fixture(scope="class")
def served() -> Iterator[str]:
    """A `gaigel serve` subprocess on a free port with the admin token; yields its address."""
    port = free_port()
    proc = subprocess.Popen(
        [*GAIGEL, "serve", "--address", f"127.0.0.1:{port}", "--admin-token", ADMIN, "--metrics-port", "0"],
        env={k: v for k, v in os.environ.items() if k != "GAIGEL_ADMIN_TOKEN"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_serving(port, proc)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class TestTryServer:
    """``gaigel try --server`` plays on a running server (registering a fresh bot name there)."""

    def test_good_bot_passes_and_reports_like_local_mode(self, served: str) -> None:
        """The same text report as the local mode, exit 0; the candidate is a fresh try-<hex> bot."""
        out = subprocess.run(
            [
                *GAIGEL,
                "try",
                "--server",
                served,
                "--admin-token",
                ADMIN,
                *("--players", "3", "--hands", "1"),
                *("--seed", "5", "--", *BOT),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        lines = out.stdout.splitlines()
        assert lines[0].startswith("match ") and "seed 5: completed, 1 hands" in lines[0]
        assert lines[1].startswith("side 0 seats [0] (try-") and "house:random" in lines[2]
        assert lines[-1] == "ok: the bot completed the match without a fault"
        # The fresh name is removed again: it can be registered anew and no longer unregistered.
        name = lines[1].split("(")[1].split(",")[0]
        assert name.startswith("try-") and "warning" not in out.stderr

        async def gone() -> None:
            admin = Admin(int(served.rsplit(":", 1)[1]))
            try:
                await admin.stub.UnregisterBot(ms.UnregisterBotRequest(bot_name=name), metadata=admin_md())
            except grpc.aio.AioRpcError as e:
                assert e.code() == grpc.StatusCode.NOT_FOUND
            else:
                raise AssertionError(f"{name} is still registered")
            finally:
                await admin.close()

        run(gone())
        local = subprocess.run(
            [*GAIGEL, "try", "--players", "3", "--hands", "1", "--seed", "5", "--", *BOT],
            capture_output=True,
            text=True,
            timeout=60,
        )
        # same seed, same bots: the same match, reported the same way (but for the match id and bot name)
        assert [line.split(")")[-1] for line in local.stdout.splitlines()[1:]] == [
            line.split(")")[-1] for line in lines[1:]
        ]

    def test_the_bot_sees_its_match_end_and_exits_by_itself(self, served: str, tmp_path: Path) -> None:
        """As in local mode: unregistering the try's bot name ends its session with OK behind MatchEnd."""
        said = tmp_path / "farewell.txt"
        out = subprocess.run(
            [*GAIGEL, "try", "--server", served, "--admin-token", ADMIN, *TRY_ONE_HAND, *FAREWELL, str(said)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        assert said.read_text().splitlines() == ["MATCH_TERMINATION_COMPLETED", "exited"]

    def test_faulty_bot_fails_with_reason_code_and_token_from_env(self, served: str) -> None:
        """An illegal answer: JSON report with the fault, exit 1; the admin token comes from GAIGEL_ADMIN_TOKEN."""
        out = subprocess.run(
            [
                *GAIGEL,
                "try",
                "--server",
                served,
                *("--players", "2", "--hands", "1", "--seed", "5", "--json"),
                *("--", *BOT, "--illegal"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ, GAIGEL_ADMIN_TOKEN=ADMIN),
        )
        assert out.returncode == 1, out.stdout + out.stderr
        data = json.loads(out.stdout)
        assert data["seed"] == 5 and data["termination"] == "completed" and data["notes"] == []
        assert [f["reason"] for f in data["faults"]] == ["ILLEGAL_ACTION"]

    def test_time_limit_cancels_the_match(self, served: str) -> None:
        """A bot that never joins: the match is cancelled at --time-limit and reported, exit 1."""
        started = time.monotonic()
        out = subprocess.run(
            [
                *GAIGEL,
                "try",
                "--server",
                served,
                "--admin-token",
                ADMIN,
                "--time-limit",
                "1",
                "--json",
                *("--", sys.executable, "-c", "import time; time.sleep(60)"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 1, out.stdout + out.stderr
        assert time.monotonic() - started < 20
        data = json.loads(out.stdout)
        assert data["termination"] == "cancelled" and data["notes"] == ["time limit of 1 s reached: match cancelled"]

    def test_bad_admin_token_is_one_line(self, served: str) -> None:
        out = subprocess.run(
            [*GAIGEL, "try", "--server", served, "--admin-token", "bad-secret-3141", "--", *BOT],
            capture_output=True,
            text=True,
            timeout=30,
            env={k: v for k, v in os.environ.items() if k != "GAIGEL_ADMIN_TOKEN"},
        )
        assert out.returncode == 2 and out.stdout == ""
        assert len(out.stderr.strip().splitlines()) == 1 and "refused the admin token" in out.stderr
        assert "bad-secret-3141" not in out.stderr

    def test_missing_admin_token_and_unreachable_server_are_one_line(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "GAIGEL_ADMIN_TOKEN"}
        out = subprocess.run(
            [*GAIGEL, "try", "--server", "127.0.0.1:1", "--", *BOT], capture_output=True, text=True, timeout=30, env=env
        )
        assert out.returncode == 2 and "GAIGEL_ADMIN_TOKEN" in out.stderr and len(out.stderr.strip().splitlines()) == 1
        port = free_port()
        out = subprocess.run(
            [*GAIGEL, "try", "--server", f"127.0.0.1:{port}", "--admin-token", ADMIN, "--", *BOT],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
        )
        assert out.returncode == 2, out.stdout + out.stderr
        assert (
            len(out.stderr.strip().splitlines()) == 1 and f"cannot reach the server at 127.0.0.1:{port}" in out.stderr
        )


class TestRematch:
    """``gaigel rematch`` plays a record's bots again on its seed."""

    def test_house_bots_replay_identically(self, tmp_path: Path) -> None:
        """House bots choose as recorded: exit 0; a changed bot is reported at its first different decision."""
        path = tmp_path / "m.json"
        subprocess.run(
            [
                *GAIGEL,
                "play",
                "--players",
                "3",
                "--hands",
                "2",
                "--seed",
                "4",
                "--bot",
                "random",
                "--record",
                str(path),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        out = subprocess.run([*GAIGEL, "rematch", str(path)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and out.stdout.startswith("same:"), out.stdout + out.stderr
        data = json.loads(path.read_text())
        data["seats"][1]["bot"] = "first"
        changed = tmp_path / "changed.json"
        changed.write_text(json.dumps(data))
        out = subprocess.run([*GAIGEL, "rematch", "--json", str(changed)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 1
        diff = json.loads(out.stdout)["difference"]
        assert diff["seat"] == 1 and diff["recorded"] != diff["new"]

    def test_external_bot_through_the_server(self, tmp_path: Path) -> None:
        """A non-house bot is launched from --bots NAME=CMD and played over gRPC on the same seed."""
        path = tmp_path / "m.json"
        subprocess.run(
            [
                *GAIGEL,
                "play",
                "--players",
                "2",
                "--hands",
                "1",
                "--seed",
                "8",
                "--bot",
                "first",
                "--bot",
                "random",
                "--record",
                str(path),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        data = json.loads(path.read_text())
        data["seats"][0]["bot"] = "candidate"  # the minimal bot plays the first legal id, as 'first' did
        renamed = tmp_path / "renamed.json"
        renamed.write_text(json.dumps(data))
        cmd = " ".join(BOT)
        out = subprocess.run(
            [*GAIGEL, "rematch", str(renamed), "--bots", f"candidate={cmd}"], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0 and out.stdout.startswith("same:"), out.stdout + out.stderr
        out = subprocess.run([*GAIGEL, "rematch", str(renamed)], capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and "no command for bot(s) candidate" in out.stderr
