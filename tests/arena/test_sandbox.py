"""Sandboxed command bots: a hostile bot under ``podman`` and under ``process``.

The hostile bot (tests/arena/hostile/hostile_bot.py) attacks at its first decision: a TCP
connection to a listener of this test, reading a secret planted in a home folder,
writing outside its tmpfs, a (bounded) fork bomb, allocating 4 GB, spinning the CPU. Each
arena has the hostile bot and two house bots; the house bots' own matches must finish
normally whatever the hostile bot does. The outcome per attack and sandbox is the table in
docs/operator-guide.md ("What each sandbox stops").

The podman tests need root, podman, runc and debootstrap (see docker/README.md) and the
project image that tests/container builds (docker/build_image.sh, same tag, cached
layers); they are skipped without them, except under CI, where that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gaigel_arena.config import parse_config
from gaigel_arena.journal import Journal
from gaigel_arena.runner import run_arena

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = Path(__file__).resolve().parent / "hostile"
IMAGE = os.environ.get("GAIGEL_TEST_IMAGE", "localhost/gaigel-arena:test")
LIMITS = {"memory_mb": 256, "pids": 32, "cpu_seconds": 2, "address_space_mb": 1024, "tmpfs_mb": 16}
SECRET = "organiser-secret-7f3a"


def require_podman() -> None:
    missing = [tool for tool in ("podman", "runc", "debootstrap") if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root")
    if missing:
        message = f"the podman sandbox tests need {', '.join(missing)} (see docker/README.md)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def project_image() -> str:
    """The project image of tests/container (built once; podman's layer cache makes it cheap here)."""
    require_podman()
    env = dict(os.environ, CONTAINERS_CONF=str(ROOT / "docker" / "containers.conf"))
    proc = subprocess.run(
        ["bash", str(ROOT / "docker" / "build_image.sh"), IMAGE], env=env, capture_output=True, text=True, timeout=1500
    )
    assert proc.returncode == 0, f"docker/build_image.sh failed:\n{(proc.stdout + proc.stderr)[-4000:]}"
    return IMAGE


def host_address() -> str:
    """An address of this machine that is not the loopback (the container's own loopback is its own)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            return str(s.getsockname()[0])
        except OSError:
            return "127.0.0.1"


@pytest.fixture
def listener() -> Iterator[tuple[str, list[bytes]]]:
    """A TCP server on all addresses; yields its HOST:PORT and what connections sent it."""
    server = socket.create_server(("0.0.0.0", 0))
    server.settimeout(0.2)
    received: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                received.append(conn.recv(100))

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"{host_address()}:{server.getsockname()[1]}", received
    stop.set()
    thread.join(5)
    server.close()


def run_hostile(out: Path, sandbox: str, attack: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Runs the hostile bot (*attack*) with two house bots; returns the records and the journal results."""
    if sandbox == "podman":
        hostile: dict[str, Any] = {"name": "hostile", "build": str(HOSTILE), "command": attack}
    else:
        hostile = {"name": "hostile", "command": [sys.executable, str(HOSTILE / "hostile_bot.py"), *attack]}
    hostile["sandbox"] = sandbox
    data = {
        "arena": {"seed": 5, "sets_per_pairing": 1},
        "game": {"players": 2, "hands": 1},
        # The bank lets a spinning bot reach its CPU-time limit (2 s) before its strikes run out
        # (decision time + bank + 3 more decisions) even at a fifth of a core, as on a loaded machine.
        "clock": {"decision_ms": 500, "bank_ms": 8000, "resume_grace_ms": 1500},
        "sandbox": LIMITS,
        "bots": [hostile, {"name": "house-a", "house": "random"}, {"name": "house-b", "house": "random"}],
    }
    summary = run_arena(parse_config(data), out, workers=1, bootstrap_samples=0)
    assert summary.done == summary.scheduled == 6
    records = [json.loads(p.read_text()) for p in sorted((out / "records").glob("*.json"))]
    with Journal.open_existing(summary.db_path) as journal:
        results = {r.match_id: r.result for r in journal.rows()}
    return records, results


def bots_of(record: dict[str, Any]) -> set[str]:
    return {seat["bot"] for seat in record["seats"]}


def assert_other_tables_finished(records: list[dict[str, Any]]) -> None:
    others = [r for r in records if "hostile" not in bots_of(r)]
    assert len(others) == 2, [bots_of(r) for r in records]
    for record in others:
        assert record["result"]["termination"] == "completed", record["result"]
        assert not record["result"].get("forfeit_sides"), record["result"]
        assert [f for f in record.get("faults", []) if f.get("reason") != "TIMEOUT_FALLBACK"] == []


def sandbox_faults(records: list[dict[str, Any]]) -> list[str]:
    return [f["reason"] for r in records for f in r.get("sandbox_faults", [])]


def verdicts(err: str, attack: str) -> list[str]:
    return [line.split()[2] for line in err.splitlines() if line.startswith(f"hostile: {attack} ")]


# --- podman ----------------------------------------------------------------------------------


@pytest.mark.container
@pytest.mark.slow
@pytest.mark.timeout(1800)
class TestPodmanSandbox:
    """Every attack is contained; limit hits are faults in the records, and the house tables finish."""

    def test_network_home_and_writes_are_contained(
        self,
        project_image: str,
        tmp_path: Path,
        listener: tuple[str, list[bytes]],
        capfd: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        del project_image
        home = tmp_path / "home"
        home.mkdir()
        (home / "secret.txt").write_text(SECRET)
        monkeypatch.setenv("HOME", str(home))
        target, received = listener
        for attack in (["tcp", target], ["home", str(home / "secret.txt")], ["write", str(tmp_path / "pwned")]):
            records, _ = run_hostile(tmp_path / attack[0], "podman", attack)
            assert_other_tables_finished(records)
            found = verdicts(capfd.readouterr().err, attack[0])
            assert found and set(found) == {"contained"}, (attack, found)
        assert received == []
        assert not (tmp_path / "pwned").exists()
        assert not (HOSTILE / "hostile").exists()

    def test_python_kit_image_plays_through_the_unix_socket(self, project_image: str, tmp_path: Path) -> None:
        """clients/python/Dockerfile with the example bot: a whole arena in the sandbox, no fault."""
        (tmp_path / "bot").mkdir()
        shutil.copy(ROOT / "clients/python/Dockerfile", tmp_path / "bot" / "Dockerfile")
        shutil.copy(ROOT / "clients/python/examples/random_bot.py", tmp_path / "bot" / "bot.py")
        tag = "localhost/gaigel-kit-python:test"
        env = dict(os.environ, CONTAINERS_CONF=str(ROOT / "docker" / "containers.conf"))
        build = ["podman", "build", "--pull=never", "--network=none", f"--build-arg=GAIGEL_IMAGE={project_image}"]
        proc = subprocess.run([*build, "-t", tag, str(tmp_path / "bot")], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        data = {
            "arena": {"seed": 3, "sets_per_pairing": 1},
            "game": {"players": 2, "hands": 2},
            "sandbox": {"default": "podman"},
            "bots": [{"name": "kit-py", "image": tag}, {"name": "house", "house": "random"}],
        }
        summary = run_arena(parse_config(data), tmp_path / "out", workers=1, bootstrap_samples=0)
        assert summary.done == summary.scheduled == 2
        for path in (tmp_path / "out" / "records").glob("*.json"):
            record = json.loads(path.read_text())
            assert record["result"]["termination"] == "completed" and record["faults"] == [], record["faults"]

    @pytest.mark.parametrize(
        ("attack", "reason"), [("fork", "SANDBOX_PIDS"), ("mem", "SANDBOX_OOM"), ("cpu", "SANDBOX_CPU")]
    )
    def test_limit_hits_are_faults_and_the_bot_restarts(
        self, project_image: str, tmp_path: Path, capfd: pytest.CaptureFixture[str], attack: str, reason: str
    ) -> None:
        del project_image
        records, results = run_hostile(tmp_path / attack, "podman", [attack])
        assert_other_tables_finished(records)
        hostile = [r for r in records if "hostile" in bots_of(r)]
        # Each process attacks once: every hostile match loses a process to the limit, the
        # restarted one plays the next match.
        assert sandbox_faults(records) and set(sandbox_faults(records)) == {reason}, sandbox_faults(records)
        forfeits = [res["forfeit"] for res in results.values() if res and "forfeit" in res]
        assert forfeits and all(f["bot"] == "hostile" for f in forfeits), forfeits
        # A spinning bot may run out of strikes (late answers) before its CPU time is out.
        assert reason in {f["reason"] for f in forfeits} <= {reason, "TIMEOUT_FALLBACK"}, forfeits
        assert len(forfeits) <= len(hostile)
        assert "BREACHED" not in verdicts(capfd.readouterr().err, attack)


# --- process ---------------------------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="rlimits and PR_SET_PDEATHSIG are Linux here")
class TestProcessSandbox:
    """What rlimits stop, and what they do not: the `process` column of the operator guide's table."""

    def test_rlimits_stop_memory_and_cpu(self, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
        records, _ = run_hostile(tmp_path / "mem", "process", ["mem"])
        assert_other_tables_finished(records)
        found = verdicts(capfd.readouterr().err, "mem")
        assert found and set(found) == {"contained"}, found  # RLIMIT_AS: a MemoryError, no fault

        records, results = run_hostile(tmp_path / "cpu", "process", ["cpu"])
        assert_other_tables_finished(records)
        assert set(sandbox_faults(records)) == {"SANDBOX_CPU"}
        forfeits = [res["forfeit"] for res in results.values() if res and "forfeit" in res]
        # A spinning bot may run out of strikes (late answers) before its CPU time is out.
        reasons = {f["reason"] for f in forfeits}
        assert "SANDBOX_CPU" in reasons and reasons <= {"SANDBOX_CPU", "TIMEOUT_FALLBACK"}, forfeits

    def test_network_home_and_files_are_not_contained(
        self,
        tmp_path: Path,
        listener: tuple[str, list[bytes]],
        capfd: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        home = tmp_path / "home"
        home.mkdir()
        (home / "secret.txt").write_text(SECRET)
        monkeypatch.setenv("HOME", str(home))
        target, received = listener
        for attack in (["tcp", target], ["home", str(home / "secret.txt")], ["write", str(tmp_path / "pwned")]):
            records, _ = run_hostile(tmp_path / attack[0], "process", attack)
            assert_other_tables_finished(records)
            found = verdicts(capfd.readouterr().err, attack[0])
            assert found and set(found) == {"BREACHED"}, (attack, found)
        assert received and all(data.startswith(b"hostile") for data in received)
        assert (tmp_path / "pwned").read_text().startswith("hostile")

    def test_fork_bomb_is_stopped_only_for_a_non_root_organiser(
        self, tmp_path: Path, capfd: pytest.CaptureFixture[str]
    ) -> None:
        records, _ = run_hostile(tmp_path / "fork", "process", ["fork"])
        assert_other_tables_finished(records)
        found = set(verdicts(capfd.readouterr().err, "fork"))
        # RLIMIT_NPROC counts every process of the user and does not apply to root at all.
        assert found == ({"BREACHED"} if os.geteuid() == 0 else {"contained"}), found


# --- configuration -----------------------------------------------------------------------------


def _config(bot: dict[str, Any], sandbox: dict[str, Any] | None = None, base: Path | None = None) -> Any:
    data: dict[str, Any] = {"bots": [bot, {"name": "house", "house": "random"}]}
    if sandbox is not None:
        data["sandbox"] = sandbox
    return parse_config(data, base_dir=base)


class TestSandboxConfig:
    def test_defaults_and_a_build_folder_relative_to_the_config(self, tmp_path: Path) -> None:
        (tmp_path / "sub").mkdir()
        (tmp_path / "sub" / "Dockerfile").write_text("FROM scratch\n")
        config = _config({"name": "b", "build": "sub", "sandbox": "podman"}, {"memory_mb": 128}, tmp_path)
        bot = config.bot("b")
        assert (bot.kind, bot.command, bot.sandbox, bot.build) == ("command", (), "podman", str(tmp_path / "sub"))
        assert config.sandbox.default == "auto" and config.sandbox.memory_mb == 128 and config.sandbox.pids == 64
        assert config.sandbox.rlimits()["RLIMIT_AS"] == 2048 * 2**20

    def test_the_sandbox_is_not_hashed_but_the_image_is(self) -> None:
        plain = _config({"name": "b", "command": ["python", "b.py"]})
        confined = _config({"name": "b", "command": ["python", "b.py"], "sandbox": "process"}, {"pids": 8})
        assert plain.config_hash() == confined.config_hash()
        imaged = _config({"name": "b", "command": ["python", "b.py"], "image": "localhost/b:1"})
        assert imaged.config_hash() != plain.config_hash()

    @pytest.mark.parametrize(
        ("bot", "sandbox", "message"),
        [
            ({"name": "b", "command": ["x"], "sandbox": "jail"}, None, "sandbox must be one of auto, podman"),
            ({"name": "b", "image": "i", "build": "f"}, None, "give image or build, not both"),
            ({"name": "b", "build": "nowhere"}, None, "has no Dockerfile"),
            ({"name": "b", "house": "random", "sandbox": "process"}, None, "only for command bots"),
            ({"name": "b", "command": ["x"]}, {"memory_mb": 0}, "sandbox.memory_mb must be a positive integer"),
            ({"name": "b", "command": ["x"]}, {"default": "vm"}, "sandbox.default must be one of"),
            ({"name": "b", "command": ["x"]}, {"swap": 1}, r"unknown key\(s\) in \[sandbox\]: swap"),
        ],
    )
    def test_bad_settings_are_one_line_errors(
        self, tmp_path: Path, bot: dict[str, Any], sandbox: dict[str, Any] | None, message: str
    ) -> None:
        with pytest.raises(ValueError, match=message) as caught:
            _config(bot, sandbox, tmp_path)
        assert "\n" not in str(caught.value)

    def test_podman_without_podman_stops_the_arena_at_start(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("PATH", str(tmp_path))  # no podman here
        config = _config({"name": "b", "image": "localhost/b:1", "sandbox": "podman"})
        with pytest.raises(ValueError, match="'b': sandbox = podman, but podman is not installed"):
            run_arena(config, tmp_path / "out", workers=1, bootstrap_samples=0)
