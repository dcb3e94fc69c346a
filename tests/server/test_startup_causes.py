"""`gaigel try` and `gaigel check-bot` name why a bot did not start, within seconds of the cause:
never connected (with its address), refused by the server (status and message), exited before
joining (exit code and its last stderr lines). Real processes, a real server on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

GAIGEL = [sys.executable, "-c", "import sys; from gaigel.cli import main; sys.exit(main(sys.argv[1:]))"]
BAD = [sys.executable, str(Path(__file__).parent / "bots" / "bad_start_bot.py"), "--mode"]
STARTUP = 3.0
WITHIN = 10.0
"""Seconds from the cause to the exit of the harness that the issue allows."""


def _timed(args: list[str]) -> tuple[int, str, str, float]:
    """Runs *args*; exit code, stdout, stderr, and the seconds from the bot's "cause" line (or the start) to the exit."""
    started = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cause: list[float] = []
    err: list[str] = []

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.strip() == "cause" and not cause:
                cause.append(time.monotonic())
            err.append(line)

    # stderr has one reader only: communicate() would read it too, racing the thread for its lines.
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    guard = threading.Timer(120, proc.kill)  # the read below has no timeout of its own
    guard.start()
    try:
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.wait(timeout=10)
    finally:
        guard.cancel()
        proc.kill()
    ended = time.monotonic()
    reader.join(5)
    return proc.returncode, out, "".join(err), ended - (cause[0] if cause else started)


def _try(mode: str, *extra: str) -> tuple[int, dict[str, object], str, float]:
    code, out, err, took = _timed([*GAIGEL, "try", "--hands", "1", "--json", *extra, "--", *BAD, mode])
    return code, json.loads(out.strip().splitlines()[-1]), err, took


class TestTry:
    def test_never_connected_names_the_address_after_the_startup_timeout(self) -> None:
        code, data, _, took = _try("sleep", "--startup-timeout", str(STARTUP))
        assert code == 1 and data["ok"] is False
        (note,) = data["notes"]
        assert isinstance(note, str)
        assert note.startswith(f"bot candidate did not join within {STARTUP:g} s (--startup-timeout)"), note
        assert "it opened no stream to 127.0.0.1:" in note and "GAIGEL_SERVER" in note
        assert took < STARTUP + WITHIN

    def test_exit_before_joining_gives_the_code_and_the_last_stderr_lines(self) -> None:
        code, data, err, took = _try("exit")
        assert code == 1
        (note,) = data["notes"]
        assert isinstance(note, str)
        assert note.startswith("bot candidate exited with code 4 before joining the match on 127.0.0.1:"), note
        assert "    | bad_start_bot: no model file model.bin" in note
        assert "bad_start_bot: loading the model" in err  # still passed through as it came
        assert took < WITHIN

    @pytest.mark.parametrize(
        ("mode", "status"),
        [
            ("wrong-token", "UNAUTHENTICATED: unknown or revoked bot token"),
            ("malformed", "INVALID_ARGUMENT: MALFORMED_MESSAGE: PlayRequest has no message set"),
        ],
    )
    def test_refused_by_the_server_gives_its_status_and_message(self, mode: str, status: str) -> None:
        code, data, _, took = _try(mode)
        assert code == 1
        (note,) = data["notes"]
        assert isinstance(note, str)
        assert note.startswith("bot candidate was refused by the server at 127.0.0.1:"), note
        assert status in note
        assert took < WITHIN  # the bot keeps running: the refusal itself ends the try

    def test_text_output_shows_the_cause_above_the_verdict(self) -> None:
        code, out, _, _ = _timed([*GAIGEL, "try", "--hands", "1", "--", *BAD, "exit"])
        assert code == 1
        lines = out.splitlines()
        assert any(line.startswith("note: bot candidate exited with code 4 before joining") for line in lines)
        assert lines[-1] == "FAILED: see the notes above"


def _check(mode: str, *extra: str) -> tuple[int, dict[str, dict[str, object]], float]:
    code, out, _, took = _timed([*GAIGEL, "check-bot", "--json", *extra, "--", *BAD, mode])
    data = json.loads(out.strip().splitlines()[-1])
    return code, {c["name"]: c for c in data["checks"]}, took


class TestCheckBot:
    JOIN = "joins with the right protocol version"

    def _only_join_failed(self, checks: dict[str, dict[str, object]]) -> str:
        """The join check failed and every other one is listed as not reached because of it."""
        assert checks[self.JOIN]["ok"] is False
        for name, c in checks.items():
            if name != self.JOIN:
                assert c["ok"] is None and c["reason"] == f"not reached: {self.JOIN} failed", (name, c)
        return str(checks[self.JOIN]["reason"])

    def test_never_connected(self) -> None:
        code, checks, took = _check("sleep", "--startup-timeout", str(STARTUP))
        assert code == 1
        reason = self._only_join_failed(checks)
        assert reason.startswith("the bot opened no stream to 127.0.0.1:"), reason
        assert f"within {STARTUP:g} s (--startup-timeout)" in reason
        assert took < STARTUP + WITHIN

    def test_exit_before_joining(self) -> None:
        code, checks, took = _check("exit")
        assert code == 1
        reason = self._only_join_failed(checks)
        assert reason.startswith("the bot exited with code 4 before joining"), reason
        assert "    | bad_start_bot: no model file model.bin" in reason
        assert took < WITHIN

    @pytest.mark.parametrize(
        ("mode", "status"),
        [
            ("wrong-token", "UNAUTHENTICATED: bot_token is not $GAIGEL_TOKEN"),
            ("malformed", "INVALID_ARGUMENT: MALFORMED_MESSAGE: PlayRequest has no message set"),
        ],
    )
    def test_refused(self, mode: str, status: str) -> None:
        code, checks, took = _check(mode)
        assert code == 1
        reason = self._only_join_failed(checks)
        assert reason.startswith("the server refused the first message with "), reason
        assert status in reason
        assert took < WITHIN
