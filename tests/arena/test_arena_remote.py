"""Remote bots: processes the arena does not start connect to its published server with their token.

The arena runs as a `gaigel arena run` subprocess publishing ``[arena] listen`` on a loopback
port; the remote bot is a second process started by the test with nothing but the address,
its name and its token (tests/arena/bots/remote_bot.py: the first legal action, like the
house bot ``first``, so results can be compared with an in-process run). This test process
never starts gRPC threads.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from gaigel_arena.config import parse_config
from gaigel_arena.journal import Journal
from gaigel_arena.runner import run_arena

pytest.importorskip("gaigel_server.server")

BOT = Path(__file__).parent / "bots" / "remote_bot.py"
TOKEN = "remote-token-9f3c1a7e"


def _certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (as tests/server/test_security.py makes it; skips without openssl)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"),
            *("-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    return cert, key


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(
    tmp_path: Path, port: int, *, sets: int, hands: int, wait_ms: int, extra_bots: str = "", arena: str = ""
) -> Path:
    (tmp_path / "friend.token").write_text(TOKEN + "\n")
    path = tmp_path / "remote.toml"
    path.write_text(
        f'[arena]\nname = "remote"\nseed = 5\nsets_per_pairing = {sets}\nworkers = 1\nlisten = "127.0.0.1:{port}"\n'
        + arena
        + f"[game]\nplayers = 2\nhands = {hands}\n"
        f"[clock]\nconnect_wait_ms = {wait_ms}\n"
        '[[bots]]\nname = "friend"\nremote = true\ntoken_file = "friend.token"\n'
        '[[bots]]\nname = "first"\nhouse = "first"\n' + extra_bots
    )
    return path


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": str(tmp_path), **extra}


def _arena(tmp_path: Path, config: Path) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "gaigel.cli", "arena", "run", str(config), "--out", str(tmp_path / "out")]
    return subprocess.Popen(
        [*command, "--quiet", "--bootstrap", "0"],
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _remote_bot(tmp_path: Path, port: int, *, delay: float = 0.0, trust: Path | None = None) -> subprocess.Popen[bytes]:
    """The bot "from another machine": only the published address, its name and its token
    (and, with *trust*, TLS trusting that certificate)."""
    env = _env(
        tmp_path,
        GAIGEL_SERVER=f"127.0.0.1:{port}",
        GAIGEL_TOKEN=TOKEN,
        GAIGEL_BOT_NAME="friend",
        GAIGEL_RESUME_FILE=str(tmp_path / "friend.resume"),
    )
    if trust is not None:
        env["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = str(trust)
    return subprocess.Popen(
        [sys.executable, str(BOT), "--delay", str(delay), *(["--secure"] if trust else [])],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _finish(arena: subprocess.Popen[str], timeout: float = 180) -> str:
    out, err = arena.communicate(timeout=timeout)
    assert arena.returncode == 0, err[-3000:]
    return out + err


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _rows(tmp_path: Path) -> dict[str, tuple[str, dict[str, Any] | None]]:
    with Journal.open_existing(tmp_path / "out" / "arena.sqlite") as journal:
        return {r.match_id: (r.status, r.result) for r in journal.rows()}


def _inline_results(tmp_path: Path, sets: int, hands: int) -> dict[str, tuple[str, dict[str, Any] | None]]:
    """The same schedule with the house bot ``first`` in place of the remote bot, played in process."""
    data = {
        "arena": {"name": "remote", "seed": 5, "sets_per_pairing": sets},
        "game": {"players": 2, "hands": hands},
        "bots": [{"name": "friend", "house": "first"}, {"name": "first", "house": "first"}],
    }
    summary = run_arena(parse_config(data), tmp_path / "inline", executor="inline", bootstrap_samples=0)
    with Journal.open_existing(summary.db_path) as journal:
        return {r.match_id: (r.status, r.result) for r in journal.rows()}


def _presence(tmp_path: Path) -> list[dict[str, Any]]:
    data = json.loads((tmp_path / "out" / "presence.json").read_text())
    assert data["format"] == "gaigel.arena.presence.v1"
    return list(data["runs"])


def _report(tmp_path: Path, *flags: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "gaigel.cli", "arena", "report", str(tmp_path / "out"), *flags],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_remote_bot_from_another_process_plays_its_matches(tmp_path: Path) -> None:
    """Every match is played with the remote bot, with the results of an in-process run; its
    connected time is reported; the token shows up in no output, journal or file of the arena."""
    port = _free_port()
    arena = _arena(tmp_path, _config(tmp_path, port, sets=2, hands=2, wait_ms=60_000))
    bot = _remote_bot(tmp_path, port)
    try:
        output = _finish(arena)
    finally:
        _stop(bot)
    assert _rows(tmp_path) == _inline_results(tmp_path, sets=2, hands=2)
    runs = _presence(tmp_path)
    assert len(runs) == 1 and runs[0]["bots"]["friend"]["connected_s"] > 0
    assert runs[0]["bots"]["friend"]["absent_forfeits"] == 0
    assert TOKEN not in output
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    report = json.loads(_report(tmp_path, "--json"))
    assert report["presence"]["friend"]["connected_s"] > 0


def test_remote_bot_over_tls(tmp_path: Path) -> None:
    """With tls_cert/tls_key the published port speaks TLS (the remote bot trusts the certificate),
    while the arena's own bot processes keep playing over its loopback port."""
    cert, key = _certificate(tmp_path)
    port = _free_port()
    tls = f'tls_cert = "{cert}"\ntls_key = "{key}"\n'
    arena = _arena(tmp_path, _config(tmp_path, port, sets=1, hands=1, wait_ms=60_000, arena=tls))
    bot = _remote_bot(tmp_path, port, trust=cert)
    try:
        _finish(arena)
    finally:
        _stop(bot)
    assert _rows(tmp_path) == _inline_results(tmp_path, sets=1, hands=1)


def test_remote_bot_that_never_connects_is_forfeited_as_absent(tmp_path: Path) -> None:
    """Its side forfeits every match it is in (reason ABSENT, no match played) after connect_wait_ms;
    the other bots' matches are played; the report shows its absent time and forfeits."""
    extra = '[[bots]]\nname = "rnd"\nhouse = "random"\n'
    arena = _arena(tmp_path, _config(tmp_path, _free_port(), sets=1, hands=1, wait_ms=700, extra_bots=extra))
    output = _finish(arena)
    rows = _rows(tmp_path)
    assert len(rows) == 6 and all(status == "done" for status, _ in rows.values())
    for match_id, (_, result) in rows.items():
        assert result is not None
        if "friend" in match_id:
            side = result["sides"][result["forfeit"]["side"]]
            assert result["termination"] == "forfeit" and result["hands_played"] == 0
            assert result["forfeit"]["reason"] == "ABSENT" and result["forfeit"]["bot"] == "friend"
            assert side["bots"] == ["friend"] and result["forfeit_sides"] == [result["forfeit"]["side"]]
        else:
            assert result["termination"] == "completed"
    friend = _presence(tmp_path)[0]["bots"]["friend"]
    assert friend["connected_s"] == 0 and friend["absent_s"] >= 0.7 and friend["absent_forfeits"] == 4
    assert "ABSENT" in output
    text = _report(tmp_path)
    line = next(x for x in text.splitlines() if x.lstrip().startswith("friend") and "absent" in x)
    assert "4 absent forfeits" in line, text


def test_remote_bot_that_drops_and_resumes_keeps_its_seat(tmp_path: Path) -> None:
    """Killed with SIGKILL inside a match and started again (its resume file holds the seat),
    the bot resumes within the grace: no forfeit, the record shows DISCONNECT then RESUMED."""
    port = _free_port()
    arena = _arena(tmp_path, _config(tmp_path, port, sets=1, hands=3, wait_ms=60_000))
    bot = _remote_bot(tmp_path, port, delay=0.05)
    resume = tmp_path / "friend.resume"
    try:
        deadline = time.monotonic() + 60
        while not resume.exists() and time.monotonic() < deadline:  # written from MatchStart on
            time.sleep(0.02)
        assert resume.exists(), "the remote bot never started a match"
        time.sleep(0.3)
        os.kill(bot.pid, signal.SIGKILL)
        bot.wait()
        bot = _remote_bot(tmp_path, port, delay=0.0)
        _finish(arena)
    finally:
        _stop(bot)
    rows = _rows(tmp_path)
    assert rows == _inline_results(tmp_path, sets=1, hands=3)  # no forfeit: the same results
    reasons = [
        f["reason"] for p in (tmp_path / "out" / "records").glob("*.json") for f in json.loads(p.read_text())["faults"]
    ]
    assert "DISCONNECT" in reasons and "RESUMED" in reasons and "FORFEIT" not in reasons


def test_killed_arena_with_a_remote_bot_resumes_without_counting_a_match_twice(tmp_path: Path) -> None:
    """kill -9 of the arena while the remote bot keeps running; the same command again finishes
    the schedule: every match once, with the results of an uninterrupted in-process run."""
    port = _free_port()
    config = _config(tmp_path, port, sets=3, hands=2, wait_ms=60_000)
    arena = _arena(tmp_path, config)
    bot = _remote_bot(tmp_path, port, delay=0.02)
    records = tmp_path / "out" / "records"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(list(records.glob("*.json"))) < 3:
            time.sleep(0.05)
        os.kill(arena.pid, signal.SIGKILL)
        arena.communicate()
        before = {m for m, (status, _) in _rows(tmp_path).items() if status == "done"}
        assert 2 <= len(before) < 6
        _finish(_arena(tmp_path, config))
    finally:
        _stop(bot)
    rows = _rows(tmp_path)
    assert rows == _inline_results(tmp_path, sets=3, hands=2)
    assert len(list(records.glob("*.json"))) == 6
    runs = _presence(tmp_path)
    assert len(runs) == 2 and runs[1]["bots"]["friend"]["connected_s"] > 0


class TestRemoteConfig:
    """Where a remote bot's token comes from, and the settings that go with remote bots."""

    BASE: ClassVar[dict[str, Any]] = {"arena": {"listen": "0.0.0.0:50051"}, "game": {"players": 2}}

    def _bots(self, **remote: Any) -> list[dict[str, Any]]:
        return [{"name": "friend", "remote": True, **remote}, {"name": "first", "house": "first"}]

    def test_token_from_the_environment_or_a_file(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("FRIEND_TOKEN", TOKEN)
        config = parse_config({**self.BASE, "bots": self._bots(token_env="FRIEND_TOKEN")})
        assert config.bot("friend").token == TOKEN and TOKEN not in repr(config.bot("friend"))
        (tmp_path / "t").write_text(TOKEN + "\n")
        from_file = parse_config({**self.BASE, "bots": self._bots(token_file="t")}, base_dir=tmp_path)
        assert from_file.bot("friend").token == TOKEN
        assert from_file.config_hash() == config.config_hash()  # the token is not part of the config

    @pytest.mark.parametrize(
        ("arena", "remote", "message"),
        [
            ({"listen": "0.0.0.0:50051"}, {"token_env": "GAIGEL_TEST_UNSET_VAR"}, "GAIGEL_TEST_UNSET_VAR"),
            ({"listen": "0.0.0.0:50051"}, {"token_file": "missing"}, "cannot read token_file"),
            ({"listen": "0.0.0.0:50051"}, {"token": "short"}, "at least 8"),
            ({"listen": "0.0.0.0:50051"}, {"token": TOKEN, "token_env": "X"}, "one of token_env"),
            ({}, {"token": TOKEN}, "need a published server"),
            ({"listen": "nowhere"}, {"token": TOKEN}, "HOST:PORT"),
            ({"listen": "0.0.0.0:1", "tls_cert": "c.pem"}, {"token": TOKEN}, "go together"),
            ({"listen": "0.0.0.0:1", "bot_processes": "never"}, {"token": TOKEN}, "bot_processes"),
        ],
    )
    def test_errors(self, tmp_path: Path, arena: dict[str, Any], remote: dict[str, Any], message: str) -> None:
        from gaigel_arena.config import ConfigError

        with pytest.raises(ConfigError, match=message) as e:
            parse_config({"arena": arena, "bots": self._bots(**remote)}, base_dir=tmp_path)
        assert TOKEN not in str(e.value)

    def test_in_match_duplicate_with_submitted_bots_needs_an_opt_in(self) -> None:
        """match.format = duplicate replays a deal inside one match: refused with non-house bots
        unless allow_in_match_duplicate = true; house bots alone are fine."""
        from gaigel_arena.config import ConfigError

        game = {"players": 2, "hands": 2, "options": {"match.format": "duplicate"}}
        bots = [{"name": "mine", "command": ["python", "bot.py"]}, {"name": "first", "house": "first"}]
        with pytest.raises(ConfigError, match="allow_in_match_duplicate"):
            parse_config({"game": game, "bots": bots})
        assert parse_config({"arena": {"allow_in_match_duplicate": True}, "game": game, "bots": bots})
        assert parse_config({"game": game, "bots": [{"name": "a", "house": "random"}, bots[1]]})
