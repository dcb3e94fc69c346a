"""gaigel check-bot against good and deliberately broken bots (real processes, real servers)."""

from __future__ import annotations

import json
import sys

import pytest
from kitlib import BOTS, BRIDGE, need, run

ALL = {
    "joins with the right protocol version",
    "answers within the deadline",
    "legal answers",
    "recovers after ActionRejected",
    "resumes after a dropped stream",
    "exits cleanly after MatchEnd",
    "plays the next match on its session",
    "answers: opening declaration",
    "answers: play in the talon phase",
    "answers: meld/rob offer",
    "answers: aus/pass (aus_mode=explicit)",
}


def _check(cmd: list[str], *extra: str) -> tuple[int, dict[str, dict[str, object]], str]:
    code, checks, stderr, _ = _check_modes(cmd, *extra)
    return code, checks, stderr


def _check_modes(cmd: list[str], *extra: str) -> tuple[int, dict[str, dict[str, object]], str, list[str]]:
    """check-bot --json: its exit code, checks by name, stderr, and the mode of each real match."""
    r = run([*BRIDGE, "check-bot", "--json", *extra, "--", *cmd])
    data = json.loads(r.stdout.strip().splitlines()[-1])
    assert data["ok"] == (r.returncode == 0)
    if not data["ok"]:  # pytest shows it with a failure: the bot's last lines and check-bot's own
        print(f"bot's output:\n{data['bot_log']}\ncheck-bot's stderr:\n{r.stderr}")
    return r.returncode, {c["name"]: c for c in data["checks"]}, r.stderr, data["real_match_modes"]


def _failures(checks: dict[str, dict[str, object]]) -> dict[str, object]:
    """The reasons of the failed checks: what an assertion message should show (the whole dict is cut short)."""
    return {name: c["reason"] for name, c in checks.items() if c["ok"] is not True}


def test_python_example_passes_every_check() -> None:
    code, checks, _, modes = _check_modes([sys.executable, "clients/python/examples/random_bot.py"])
    assert set(checks) == ALL
    assert code == 0, _failures(checks)
    assert all(c["ok"] for c in checks.values())
    # The SDK joins compact by default; the real matches ask for each mode in turn. The reasons
    # name the match that first covered each kind, so they may all name compact matches (CI saw
    # that once): the modes of the matches themselves are the check-bot's word for both.
    assert "compact mode" in str(checks["joins with the right protocol version"]["reason"])
    real = [str(c["reason"]) for name, c in checks.items() if name.startswith("answers: ")]
    assert all(("compact mode" in r) != ("plain mode" in r) for r in real), real
    assert {"compact", "plain"} <= set(modes), modes


ONE_MATCH = (
    "import sys; sys.path.insert(0, 'clients/python/examples'); from random_bot import RandomBot; "
    "from gaigel_client import run; run(RandomBot(), matches=1)"
)
"""A bot that leaves after one match (a limit in its code: GAIGEL_MATCHES cannot lift it)."""


def test_reports_the_mode_of_a_bot_that_leaves_after_one_match() -> None:
    # A fast bot that plays one match and leaves is gone from the table and the pool at once;
    # check-bot still says the mode it joined in, and fails only its leaving: a per-run arena
    # keeps one process for many matches and would disqualify it.
    code, checks, _, modes = _check_modes([sys.executable, "-c", ONE_MATCH])
    assert code == 1
    assert set(_failures(checks)) == {"plays the next match on its session"}, _failures(checks)
    why = str(checks["plays the next match on its session"]["reason"])
    assert why.startswith("the bot exited with code 0 after its first match; ") and 'bot_processes = "per_run"' in why
    real = [str(c["reason"]) for name, c in checks.items() if name.startswith("answers: ")]
    assert all("no mode" not in r for r in real), real
    assert all(("compact mode" in r) != ("plain mode" in r) for r in real), real
    # Each real match asks for the other mode (one per plan at least): the bot joined in each. The
    # reasons above name only the matches that covered a kind, which may all be compact ones.
    assert len(modes) >= 2 and modes[:2] == ["compact", "plain"], modes
    assert all(m == ("compact", "plain")[i % 2] for i, m in enumerate(modes)), modes


def test_a_match_limit_in_the_callers_environment_does_not_make_the_bot_leave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # check-bot gives the bot GAIGEL_MATCHES=0 as the arena does: the example bot reads the
    # variable, and with the caller's 1 it would leave after its first match.
    monkeypatch.setenv("GAIGEL_MATCHES", "1")
    code, checks, _ = _check([sys.executable, "clients/python/examples/random_bot.py"])
    assert code == 0, _failures(checks)
    assert str(checks["plays the next match on its session"]["reason"]).startswith("seated again and played")


def test_a_bot_that_leaves_but_keeps_running_is_not_seated_again() -> None:
    code, checks, _ = _check([sys.executable, str(BOTS / "raw_bot.py"), "--mode", "leave-and-stay"])
    assert code == 1
    why = str(checks["plays the next match on its session"]["reason"])
    assert why.startswith("the bot was not seated in the next match within 10 s of its first"), why
    assert checks["answers: play in the talon phase"]["ok"] is True  # its first match was played


def test_python_example_passes_in_plain_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GAIGEL_COMPACT", "0")
    code, checks, _ = _check([sys.executable, "clients/python/examples/random_bot.py"])
    assert code == 0, _failures(checks)
    assert "plain mode" in str(checks["joins with the right protocol version"]["reason"])


def test_stdio_bash_example_passes() -> None:
    need("bash", "jq")
    code, checks, _ = _check([*BRIDGE, "stdio-bot", "--", "bash", "clients/stdio/random_bot.sh"])
    assert code == 0, _failures(checks)


def test_plain_text_output() -> None:
    r = run([*BRIDGE, "check-bot", "--", sys.executable, "clients/python/examples/random_bot.py"])
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [x for x in r.stdout.splitlines() if x.startswith(("PASS", "FAIL"))]
    assert len(lines) == len(ALL) and all(x.startswith("PASS") for x in lines)
    assert r.stdout.rstrip().splitlines()[-1].startswith("ok: 11 of 11 checks passed")


def test_bot_that_never_resumes_fails_with_the_reason() -> None:
    code, checks, _ = _check([sys.executable, str(BOTS / "raw_bot.py"), "--mode", "no-resume"], "--max-matches", "2")
    assert code == 1
    resume = checks["resumes after a dropped stream"]
    assert resume["ok"] is False
    assert "exited with code 3 after the stream was dropped" in str(resume["reason"])
    assert checks["joins with the right protocol version"]["ok"] is True
    assert checks["recovers after ActionRejected"]["ok"] is True


def test_bot_that_does_not_answer_after_a_rejection_fails_one_check() -> None:
    """One missing feature, one failure: the checks after it in the scripted match are listed as not reached
    because of it, the answer times and the real matches are judged on their own."""
    code, checks, _ = _check([sys.executable, str(BOTS / "raw_bot.py"), "--mode", "no-retry"], "--max-matches", "2")
    assert code == 1
    failed = [name for name, c in checks.items() if c["ok"] is False]
    assert failed == ["recovers after ActionRejected"], checks
    assert "no answer to decision" in str(checks["recovers after ActionRejected"]["reason"])
    assert checks["answers within the deadline"]["ok"] is True
    for name in ("resumes after a dropped stream", "exits cleanly after MatchEnd"):
        assert checks[name] == {
            "name": name,
            "ok": None,
            "reason": "not reached: recovers after ActionRejected failed",
        }
    r = run(
        [
            *BRIDGE,
            "check-bot",
            "--max-matches",
            "2",
            "--",
            sys.executable,
            str(BOTS / "raw_bot.py"),
            "--mode",
            "no-retry",
        ]
    )
    assert "NOT REACHED resumes after a dropped stream" in r.stdout
    assert ", 1 failed, 2 not reached in " in r.stdout.splitlines()[-1]


def test_bot_that_never_answers_fails_with_the_reason() -> None:
    code, checks, _ = _check(
        [sys.executable, str(BOTS / "raw_bot.py"), "--mode", "never-answers"], "--max-matches", "1"
    )
    assert code == 1
    deadline = checks["answers within the deadline"]
    assert deadline["ok"] is False and "no answer to decision 1" in str(deadline["reason"])
    assert checks["answers: opening declaration"]["ok"] is False
    assert "TIMEOUT_FALLBACK" in str(checks["answers: opening declaration"]["reason"])


def test_bot_that_cannot_start() -> None:
    r = run([*BRIDGE, "check-bot", "--", "/nonexistent/bot"])
    assert r.returncode == 2 and "cannot start" in r.stderr
