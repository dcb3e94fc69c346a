"""A bot process killed with SIGKILL mid-hand comes back with Resume (GAIGEL_RESUME_FILE).

End to end over real gRPC on loopback: the real server in a thread, the bot as a
subprocess; skipped when the server package is not installed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from server_thread import ServerThread

from gaigel_api.v1 import common_pb2
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc

REPO = Path(__file__).resolve().parents[2]
BOT = Path(__file__).resolve().parent / "bots" / "resume_bot.py"
ADMIN = (("authorization", "Bearer admin-secret"),)


class BotProcess:
    """The bot subprocess; its stdout lines are collected by a thread."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(BOT)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.strip())
                self.cond.notify_all()

    def has(self, prefix: str) -> bool:
        return any(x.startswith(prefix) for x in self.lines)

    def wait_line(self, prefix: str, timeout: float = 20.0) -> None:
        with self.cond:
            ok = self.cond.wait_for(lambda: self.has(prefix) or self.proc.poll() is not None, timeout)
        assert ok and self.has(prefix), f"no {prefix!r} from the bot: {self.lines} {self.stderr()}"

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return self.proc.stderr.read()


def test_killed_bot_process_resumes_from_its_resume_file(tmp_path: Path) -> None:
    """SIGKILL inside decide, restart, SIGKILL right after a decide, restart: the match completes, no strike."""
    from gaigel_server.logging import configure_logging

    configure_logging("warning", json=True)
    server = ServerThread({"resumer": "tok-r"})
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = ms_grpc.MatchServiceStub(channel)
            clock = common_pb2.ClockSettings(strikes_limit=0)  # any strike forfeits
            clock.decision_time.FromSeconds(5)
            clock.bank.FromSeconds(5)
            clock.resume_grace.FromSeconds(15)
            match = stub.CreateMatch(
                ms.CreateMatchRequest(players=2, seat_bots=["resumer", "house:random"], hands=2, seed=11, clock=clock),
                metadata=ADMIN,
                timeout=10,
            ).match
            resume_file = tmp_path / "resume.json"
            env = dict(
                os.environ,
                GAIGEL_SERVER=f"127.0.0.1:{server.port}",
                GAIGEL_TOKEN="tok-r",
                GAIGEL_BOT_NAME="resumer",
                GAIGEL_RESUME_FILE=str(resume_file),
                GAIGEL_TEST_DELAY="0.02",
            )
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "clients" / "python"), env.get("PYTHONPATH")]))

            first = BotProcess(env)
            first.wait_line("deciding 4")  # killed inside decide: this answer is never sent
            first.kill()
            saved = json.loads(resume_file.read_text())
            assert saved["match_id"] == match.match_id and saved["seat"] == 0 and saved["answer"]
            assert oct(resume_file.stat().st_mode & 0o777) == "0o600"

            second = BotProcess(env)
            second.wait_line("decided 3")  # killed just after deciding: the answer may or may not be out
            second.kill()

            third = BotProcess(env)
            assert third.proc.wait(60) == 0, third.stderr()
            third.wait_line("match_end MATCH_TERMINATION_COMPLETED", timeout=5)
            for p in (second, third):
                assert "welcome resumed" in p.lines and f"match_start {match.match_id}" in p.lines, p.lines
            assert not any(line.startswith("rejected") for p in (first, second, third) for line in p.lines)
            assert not resume_file.exists()

            deadline = time.monotonic() + 10
            while stub.GetMatch(ms.GetMatchRequest(match_id=match.match_id), metadata=ADMIN).match.state != (
                ms.MATCH_STATE_ENDED
            ):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            record: dict[str, Any] = json.loads(
                stub.GetMatchRecord(ms.GetMatchRecordRequest(match_id=match.match_id), metadata=ADMIN).record_json
            )
    finally:
        server.stop()
    assert record["result"]["termination"] == "completed"
    faults = [(f["seat"], f["reason"]) for f in record["faults"]]
    assert faults == [(0, "DISCONNECT"), (0, "RESUMED")] * 2, record["faults"]
    from gaigel.replay import replay

    assert replay(record).ok
