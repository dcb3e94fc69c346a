"""The container image, for real: built with podman from a locally made base image, then run.

The base image (python:3.11-slim-bookworm) is made by docker/build_base_image.sh from a
debootstrapped Debian rootfs, since no image registry is reachable; docker/build_image.sh
builds the Dockerfile with ``--pull=never``. The tests check the image's configuration,
the default command (bound to 0.0.0.0, in a network namespace of its own), and a server on
the host network bound to 127.0.0.1: health, metrics, a full match played from the host by
``gaigel try --server`` with the Python SDK's example bot against a house bot, and a
shutdown on SIGTERM within the grace period (with a bot connected).

Needs root, podman, runc and debootstrap (see docker/README.md). Skipped without them,
except under CI, where that is a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc

pytestmark = [pytest.mark.container, pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
TAG = os.environ.get("GAIGEL_TEST_IMAGE", "localhost/gaigel-arena:test")
ADMIN = "container-admin-token"
BOT_NAME, BOT_TOKEN = "random-py", "random-py-token-12345"
GRACE = 5.0  # --grace of the host-network server
DEFAULT_GRACE = 8.0  # --grace of the image's default command
STOP_MARGIN = 3.0  # podman's own time on top of the grace period
ENV = dict(os.environ)
# The host's `gaigel` command (the console script of this venv, else the same entry point).
_SCRIPT = Path(sys.executable).with_name("gaigel")
GAIGEL = (
    [str(_SCRIPT)]
    if _SCRIPT.exists()
    else [sys.executable, "-c", "import sys; from gaigel.cli import main; sys.exit(main(sys.argv[1:]))"]
)
ENV.setdefault("CONTAINERS_CONF", str(DOCKER / "containers.conf"))


def require_tools() -> None:
    missing = [tool for tool in ("podman", "runc", "debootstrap") if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root")
    if missing:
        message = f"the container tests need {', '.join(missing)} (see docker/README.md)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def podman(*args: str, timeout: float = 120.0, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["podman", *args], env=ENV, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Makes the base image (cached) and builds the Dockerfile; returns the tag."""
    require_tools()
    log = tmp_path_factory.mktemp("build") / "build.log"
    started = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.run(
            ["bash", str(DOCKER / "build_image.sh"), TAG],
            env=ENV,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=1500,
        )
    text = log.read_text()
    assert proc.returncode == 0, f"docker/build_image.sh failed ({proc.returncode}):\n{text[-6000:]}"
    print(f"image {TAG} built in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return TAG


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def container(name: str, *args: str) -> Iterator[str]:
    """A detached container, removed afterwards whatever happened."""
    podman("rm", "--force", "--time", "0", name, check=False)
    # Podman runs health checks from systemd timers, which this machine lacks: the
    # tests run them with `podman healthcheck run` instead.
    try:
        podman("run", "--detach", "--name", name, "--health-interval", "disable", *args)
        yield name
    finally:
        logs = podman("logs", name, check=False)
        print(f"--- logs of {name}:\n{logs.stdout}{logs.stderr}", file=sys.stderr)
        podman("rm", "--force", "--time", "0", name, check=False)


def state(name: str) -> dict[str, Any]:
    info = json.loads(podman("container", "inspect", name).stdout)
    return info[0]["State"]  # type: ignore[no-any-return]


def wait_healthy(name: str, timeout: float = 60.0) -> str:
    """Runs the image's HEALTHCHECK until it passes; returns its output."""
    deadline = time.monotonic() + timeout
    while True:
        st = state(name)
        assert st["Running"], f"{name} is not running: {st}"
        proc = podman("healthcheck", "run", name, check=False)
        if proc.returncode == 0:
            log = health(name).get("Log") or [{}]
            return str(log[-1].get("Output", ""))
        if time.monotonic() > deadline:
            raise AssertionError(f"{name} not healthy in {timeout} s: {proc.stdout}{proc.stderr}")
        time.sleep(0.5)


def health(name: str) -> dict[str, Any]:
    """The health state podman keeps: Status, FailingStreak, Log (with each check's output)."""
    st = state(name)
    found: dict[str, Any] = st.get("Health") or st.get("Healthcheck") or {}
    return found


def stop_with_sigterm(name: str, limit: float) -> tuple[float, int]:
    """Sends SIGTERM and waits for the exit; returns (seconds taken, exit code)."""
    started = time.monotonic()
    podman("kill", "--signal", "TERM", name)
    proc = podman("wait", name, timeout=limit + 30)
    took = time.monotonic() - started
    print(f"{name} stopped {took:.1f} s after SIGTERM", file=sys.stderr)
    return took, int(proc.stdout.strip().splitlines()[-1])


def listening_ports(name: str) -> set[tuple[str, int]]:
    """(local address in hex, port) of every listening TCP socket in the container."""
    out = podman("exec", name, "cat", "/proc/net/tcp", "/proc/net/tcp6").stdout
    found = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3] == "0A" and ":" in fields[1]:  # 0A: LISTEN
            address, port = fields[1].split(":")
            found.add((address, int(port, 16)))
    return found


def test_image_configuration(image: str) -> None:
    info = json.loads(podman("image", "inspect", image).stdout)[0]
    config = info["Config"]
    assert config["User"] == "10001:10001"
    assert {"50051/tcp", "9464/tcp"} <= set(config["ExposedPorts"])
    # Podman shows the HEALTHCHECK beside the OCI config, Docker inside it.
    healthcheck = info.get("Healthcheck") or config.get("Healthcheck") or {}
    assert healthcheck.get("Test") == ["CMD", "gaigel-healthcheck"]
    assert config.get("StopSignal", "SIGTERM") == "SIGTERM"
    cmd = config["Cmd"]
    assert cmd[:2] == ["gaigel", "serve"]
    assert cmd[cmd.index("--address") + 1] == "0.0.0.0:50051"
    assert cmd[cmd.index("--metrics-address") + 1] == "0.0.0.0"
    assert float(cmd[cmd.index("--grace") + 1]) == DEFAULT_GRACE
    # The runtime stage has the venv, not the sources or the build tools.
    proc = podman(
        "run",
        "--rm",
        "--network",
        "none",
        "--health-interval",
        "disable",
        image,
        "sh",
        "-c",
        "id -u; test ! -e /src && test ! -e /opt/gaigel/bin/pip && gaigel --help >/dev/null && echo slim",
    )
    assert proc.stdout.split() == ["10001", "slim"], proc.stdout + proc.stderr
    size = int(info["Size"])
    assert size < 400 * 2**20, f"image is {size / 2**20:.0f} MiB"


def test_default_command_serves_on_all_addresses(image: str) -> None:
    """The default CMD, alone in its own network namespace: healthy, listening on 0.0.0.0."""
    name = f"gaigel-test-default-{os.getpid()}"
    with container(name, "--network", "none", "--env", f"GAIGEL_ADMIN_TOKEN={ADMIN}", image):
        out = wait_healthy(name)
        assert "127.0.0.1:50051: SERVING" in out
        assert health(name)["Status"] == "healthy"
        ports = listening_ports(name)
        wildcard = {"00000000", "00000000000000000000000000000000"}
        for port in (50051, 9464):
            assert any(addr in wildcard and p == port for addr, p in ports), f"nothing on 0.0.0.0:{port}: {ports}"
        metrics = podman(
            "exec",
            name,
            "python3",
            "-c",
            "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9464/metrics').read().decode())",
        ).stdout
        assert "gaigel_" in metrics
        took, code = stop_with_sigterm(name, DEFAULT_GRACE)
        assert code == 0
        assert took <= DEFAULT_GRACE + STOP_MARGIN, f"took {took:.1f} s to stop"


def test_gaigel_try_runs_in_the_image(image: str) -> None:
    """The image's CLI and SDK: `gaigel try` (its own in-process server) with the example bot."""
    bot = ROOT / "clients/python/examples/random_bot.py"
    proc = podman(
        "run",
        "--rm",
        "--network",
        "none",
        "--health-interval",
        "disable",
        "--volume",
        f"{bot}:/opt/bots/random_bot.py:ro",
        image,
        *("gaigel", "try", "--players", "2", "--hands", "1", "--seed", "3", "--json"),
        *("--", "python3", "/opt/bots/random_bot.py"),
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ok"] is True, result
    assert result["termination"] == "completed"
    assert result["faults"] == []


def host_health(port: int) -> str:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


def test_match_health_metrics_and_sigterm(image: str, tmp_path: Path) -> None:
    """On the host network bound to 127.0.0.1: health, `gaigel try --server` from the host, metrics, SIGTERM."""
    port, metrics_port = free_port(), free_port()
    bots = tmp_path / "bots.toml"
    bots.write_text(f'[bots]\n"{BOT_NAME}" = "{BOT_TOKEN}"\n')
    bots.chmod(0o644)
    name = f"gaigel-test-match-{os.getpid()}"
    args = [
        "--network",
        "host",
        "--env",
        f"GAIGEL_ADMIN_TOKEN={ADMIN}",
        "--volume",
        f"{bots}:/etc/gaigel/bots.toml:ro",
        image,
        "gaigel",
        "serve",
        "--address",
        f"127.0.0.1:{port}",
        "--metrics-address",
        "127.0.0.1",
        "--metrics-port",
        str(metrics_port),
        "--bots",
        "/etc/gaigel/bots.toml",
        "--grace",
        str(GRACE),
    ]
    with container(name, *args):
        # The image's HEALTHCHECK finds the port from the server's command line.
        assert f"127.0.0.1:{port}: SERVING" in wait_healthy(name)
        assert host_health(port) == "SERVING"

        # A full match from the host: `gaigel try --server` registers a fresh bot name with the
        # admin token, launches the example bot as that bot and plays it against a house bot.
        bot_cmd = [sys.executable, str(ROOT / "clients/python/examples/random_bot.py")]
        started = time.monotonic()
        tried = subprocess.run(
            [
                *GAIGEL,
                "try",
                "--server",
                f"127.0.0.1:{port}",
                "--admin-token",
                ADMIN,
                *("--players", "2", "--hands", "2", "--seed", "7", "--time-limit", "120", "--json", "--", *bot_cmd),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
        print(f"gaigel try --server took {time.monotonic() - started:.1f} s", file=sys.stderr)
        assert tried.returncode == 0, tried.stdout + tried.stderr
        result = json.loads(tried.stdout.strip().splitlines()[-1])
        assert result["ok"] is True and result["termination"] == "completed", result
        assert result["faults"] == [] and result["notes"] == [] and result["seed"] == 7
        assert result["result"]["hands_played"] == 2
        assert result["result"]["sides"][0]["bots"][0].startswith("try-")
        assert result["result"]["sides"][1]["bots"] == ["house:random"]

        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        admin = ms_grpc.MatchServiceStub(channel)
        md = (("authorization", f"Bearer {ADMIN}"),)
        ended = admin.ListMatches(ms.ListMatchesRequest(state=ms.MATCH_STATE_ENDED), metadata=md, timeout=10).matches
        assert len(ended) == 1 and ended[0].termination == cm.MATCH_TERMINATION_COMPLETED, ended
        assert ended[0].hands_played == 2 and ended[0].seed == 7
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
            metrics = resp.read().decode()
        answered = re.search(r'^gaigel_decisions_total\{outcome="answered"\} (\S+)$', metrics, re.M)
        assert answered and float(answered.group(1)) > 0, metrics[:2000]

        channel.close()

        # The registered bot of the bots file joins and waits in the lobby (no match for it).
        bot_env = dict(os.environ, GAIGEL_SERVER=f"127.0.0.1:{port}", GAIGEL_TOKEN=BOT_TOKEN, GAIGEL_BOT_NAME=BOT_NAME)
        bot = subprocess.Popen(bot_cmd, env=bot_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        joined = threading.Event()
        bot_log: list[str] = []

        def read_bot_log() -> None:
            assert bot.stdout is not None
            for line in bot.stdout:
                bot_log.append(line)
                if "joined session" in line:
                    joined.set()

        reader = threading.Thread(target=read_bot_log, daemon=True)
        reader.start()
        try:
            assert joined.wait(30), "the bot did not join in 30 s:\n" + "".join(bot_log)
            assert bot.poll() is None, "the bot exited:\n" + "".join(bot_log)

            # SIGTERM with the bot still connected: the server must be gone within the grace period.
            took, code = stop_with_sigterm(name, GRACE)
            logs = podman("logs", name).stdout + podman("logs", name).stderr
            assert code == 0, logs[-3000:]
            assert took <= GRACE + STOP_MARGIN, f"took {took:.1f} s to stop (grace {GRACE} s)"
            assert "server_stopped" in logs
        finally:
            if bot.poll() is None:
                bot.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                bot.wait(10)
            if bot.poll() is None:
                bot.kill()
                bot.wait()
