"""Sandboxes for submitted bots: how the arena launches a ``command`` bot it does not trust.

* ``podman``: a container with ``--network=none``, a read-only root, a private tmpfs at
  ``/tmp``, CPU, memory (no swap), pids, CPU-time and open-file limits, no capabilities,
  ``no-new-privileges``, uid 65534, and only the ``GAIGEL_`` variables (plus ``HOME=/tmp``).
  The match server is reached through a unix socket whose folder is bind-mounted read-only
  at ``/run/gaigel`` (``GAIGEL_SERVER=unix:/run/gaigel/server.sock``).
* ``process``: the bot runs on the host, in a process group of its own, with rlimits on
  address space, CPU time, processes and open files. Its network, files and environment
  are the organiser's: this stops runaway bots, not hostile ones (docs/operator-guide.md).
* ``none``: as before (house bots, trusted commands).

A bot process that ends is classified by :func:`exit_reason`; a limit hit becomes a
fault with a reason code (``SANDBOX_OOM``, ``SANDBOX_PIDS``, ``SANDBOX_CPU``, else
``BOT_EXIT``) that the executor records and adds to the records of the matches it hurt.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gaigel_arena.config import ArenaConfig, BotConfig

__all__ = [
    "CONTAINER_SOCKET_DIR",
    "SANDBOXES",
    "SandboxConfig",
    "annotate_record",
    "build_image",
    "command_bot_sandboxes",
    "exit_reason",
    "parse_sandbox",
    "pids_limit_hits",
    "podman_available",
    "podman_command",
    "process_command",
    "resolve_sandbox",
]

SANDBOXES = ("auto", "podman", "process", "none")
CONTAINER_SOCKET_DIR = "/run/gaigel"
SOCKET_NAME = "server.sock"
CONTAINER_UID = "65534:65534"
"""nobody: whatever USER an image names, a submitted bot never runs as root in its container."""

REASON_OOM = "SANDBOX_OOM"
REASON_PIDS = "SANDBOX_PIDS"
REASON_CPU = "SANDBOX_CPU"
REASON_EXIT = "BOT_EXIT"


class SandboxError(ValueError):
    """A sandbox that cannot be set up (no podman, an image that does not build)."""


@dataclasses.dataclass(frozen=True)
class SandboxConfig:
    """The ``[sandbox]`` table: the default for command bots and the limits of every sandbox."""

    default: str = "auto"
    cpus: float = 1.0
    """podman ``--cpus`` (a share of the machine, throttled, never killed)."""
    memory_mb: int = 512
    """podman ``--memory`` = ``--memory-swap`` (no swap): beyond it the kernel OOM-kills."""
    pids: int = 64
    """podman ``--pids-limit``; ``process``: RLIMIT_NPROC (per user, and ignored for root)."""
    cpu_seconds: int = 36_000
    """RLIMIT_CPU of the bot process (both sandboxes): CPU time over its whole life."""
    address_space_mb: int = 2048
    """``process``: RLIMIT_AS (virtual memory; gRPC threads alone reserve a few hundred MB)."""
    open_files: int = 256
    """RLIMIT_NOFILE (both sandboxes)."""
    tmpfs_mb: int = 64
    """podman: size of the private writable ``/tmp``."""

    def rlimits(self) -> dict[str, int]:
        """The rlimits of the ``process`` sandbox, by :mod:`resource` name."""
        return {
            "RLIMIT_AS": self.address_space_mb * 2**20,
            "RLIMIT_CPU": self.cpu_seconds,
            "RLIMIT_NPROC": self.pids,
            "RLIMIT_NOFILE": self.open_files,
        }


def _positive(table: Mapping[str, Any], key: str, default: Any, kind: type) -> Any:
    value = table.get(key, default)
    ok = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool) and value > 0
    if not ok:
        raise ValueError(f"sandbox.{key} must be a positive {'number' if kind is float else 'integer'}, got {value!r}")
    return kind(value)


def parse_sandbox(table: Mapping[str, Any]) -> SandboxConfig:
    """Validates the ``[sandbox]`` table.

    :raises ValueError: naming the first invalid key.
    """
    base = SandboxConfig()
    default = table.get("default", base.default)
    if default not in SANDBOXES:
        raise ValueError(f"sandbox.default must be one of {', '.join(SANDBOXES)}, got {default!r}")
    return SandboxConfig(
        default=default,
        cpus=_positive(table, "cpus", base.cpus, float),
        memory_mb=_positive(table, "memory_mb", base.memory_mb, int),
        pids=_positive(table, "pids", base.pids, int),
        cpu_seconds=_positive(table, "cpu_seconds", base.cpu_seconds, int),
        address_space_mb=_positive(table, "address_space_mb", base.address_space_mb, int),
        open_files=_positive(table, "open_files", base.open_files, int),
        tmpfs_mb=_positive(table, "tmpfs_mb", base.tmpfs_mb, int),
    )


def podman_available() -> bool:
    """True when a ``podman`` command is on PATH."""
    return shutil.which("podman") is not None


def resolve_sandbox(wanted: str, has_image: bool, podman: bool) -> str:
    """The sandbox a command bot gets: *wanted* (the bot's, else the arena default) made concrete.

    ``auto`` is ``podman`` for a bot with an image (``image`` or ``build``) where podman is
    installed, else ``process``.

    :raises SandboxError: for ``podman`` without podman or without an image.
    """
    if wanted == "auto":
        return "podman" if has_image and podman else "process"
    if wanted == "podman" and not podman:
        raise SandboxError("sandbox = podman, but podman is not installed (apt-get install podman runc)")
    if wanted == "podman" and not has_image:
        raise SandboxError('sandbox = podman needs image = "..." or build = "folder with a Dockerfile"')
    return wanted


def command_bot_sandboxes(config: ArenaConfig, podman: bool) -> Iterator[tuple[BotConfig, str | SandboxError]]:
    """Each command bot of *config* with its concrete sandbox (:func:`resolve_sandbox`), or why
    it cannot have the one it asks for."""
    for bot in config.bots:
        if bot.kind != "command":
            continue
        try:
            yield bot, resolve_sandbox(bot.sandbox or config.sandbox.default, bool(bot.image or bot.build), podman)
        except SandboxError as e:
            yield bot, e


# --- process ------------------------------------------------------------------------------

_PROCESS_LAUNCHER = """
import ctypes, json, os, resource, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the runner
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):  # the runner died before the signal was armed
    os._exit(1)
for name, value in json.loads(sys.argv[2]).items():
    limit = getattr(resource, name)
    # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL a second later if the bot ignores it.
    hard = value + 1 if limit == resource.RLIMIT_CPU else value
    try:
        resource.setrlimit(limit, (value, hard))
    except (ValueError, OSError) as e:  # above the runner's own hard limit: keep that one
        sys.stderr.write(f"sandbox: cannot set {name}={value}: {e}\\n")
try:
    os.execvp(sys.argv[3], sys.argv[3:])
except OSError as e:
    sys.stderr.write(f"cannot start {sys.argv[3]}: {e.strerror}\\n")
    os._exit(127)
"""
"""``python -I -c _PROCESS_LAUNCHER RUNNER_PID RLIMITS_JSON COMMAND...``: the parent-death
signal, the rlimits, then exec (no Python code runs between fork and exec in the runner)."""


def process_command(command: list[str], limits: SandboxConfig) -> list[str]:
    """*command* wrapped so that it runs under the ``process`` sandbox's rlimits."""
    rlimits = json.dumps(limits.rlimits(), sort_keys=True)
    return [sys.executable, "-I", "-c", _PROCESS_LAUNCHER, str(os.getpid()), rlimits, *command]


# --- podman -------------------------------------------------------------------------------


def podman_env() -> dict[str, str]:
    """The environment of the podman client itself (never passed into the container)."""
    env = dict(os.environ)
    repo_conf = Path(__file__).resolve().parents[2] / "docker" / "containers.conf"
    if "CONTAINERS_CONF" not in env and repo_conf.is_file():
        env["CONTAINERS_CONF"] = str(repo_conf)  # runc and cgroupfs, as docker/README.md explains
    return env


def build_image(bot_name: str, folder: str) -> str:
    """Builds the submission *folder*'s Dockerfile without pulling; returns the image tag.

    The tag names the bot and a hash of the folder path, so submissions do not overwrite
    each other; podman's layer cache makes an unchanged folder cheap to build again.

    :raises SandboxError: when the folder has no Dockerfile or the build fails.
    """
    path = Path(folder)
    if not (path / "Dockerfile").is_file():
        raise SandboxError(f"bot {bot_name!r}: no Dockerfile in {folder}")
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:10]
    tag = f"localhost/gaigel-bot-{bot_name.lower()}:{digest}"
    proc = subprocess.run(
        ["podman", "build", "--pull=never", "--network=none", "--tag", tag, str(path)],
        env=podman_env(),
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
        raise SandboxError(f"bot {bot_name!r}: podman build {folder} failed: {' | '.join(tail)}")
    return tag


def podman_command(
    name: str,
    image: str,
    command: list[str],
    gaigel_env: Mapping[str, str],
    socket_dir: str,
    limits: SandboxConfig,
) -> list[str]:
    """``podman run`` for one bot process; the container *name* stays after exit for :func:`exit_reason`."""
    env = dict(gaigel_env, GAIGEL_SERVER=f"unix:{CONTAINER_SOCKET_DIR}/{SOCKET_NAME}", HOME="/tmp")
    args = [
        "podman",
        "run",
        "--replace",
        f"--name={name}",
        "--network=none",
        "--read-only",
        f"--tmpfs=/tmp:rw,nosuid,nodev,size={limits.tmpfs_mb}m,mode=1777",
        f"--cpus={limits.cpus:g}",
        f"--memory={limits.memory_mb}m",
        f"--memory-swap={limits.memory_mb}m",
        f"--pids-limit={limits.pids}",
        f"--ulimit=cpu={limits.cpu_seconds}:{limits.cpu_seconds + 1}",
        f"--ulimit=nofile={limits.open_files}:{limits.open_files}",
        # Stated, not inherited from containers.conf: runc cannot raise it once capabilities are dropped.
        # The pids limit is the cap; nproc counts every process of uid 65534 on the host.
        "--ulimit=nproc=4096:4096",
        "--cap-drop=all",
        "--security-opt=no-new-privileges",
        f"--user={CONTAINER_UID}",
        "--workdir=/tmp",
        "--health-interval=disable",
        "--log-driver=none",
        f"--volume={socket_dir}:{CONTAINER_SOCKET_DIR}:ro",
    ]
    args += [f"--env={key}={value}" for key, value in sorted(env.items())]
    return [*args, image, *command]


def _podman_state(name: str) -> dict[str, Any]:
    proc = subprocess.run(
        ["podman", "container", "inspect", "--format", "{{json .State}}", name],
        env=podman_env(),
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return {}
    try:
        state = json.loads(proc.stdout)
    except ValueError:
        return {}
    return state if isinstance(state, dict) else {}


def remove_containers(names: list[str]) -> None:
    """Removes the containers *names* (running or not), ignoring those that are gone."""
    if names:
        subprocess.run(
            ["podman", "rm", "--force", "--time=0", "--ignore", *names],
            env=podman_env(),
            capture_output=True,
        )


def container_cgroup_files(name: str) -> dict[str, Path]:
    """The cgroup files of the running container *name* the arena watches (``pids.events``
    and the CPU time used: ``cpuacct.usage`` in ns on cgroup v1, ``cpu.stat`` on v2)."""
    pid = _podman_state(name).get("Pid")
    if not isinstance(pid, int) or pid <= 0:
        return {}
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return {}
    candidates: dict[str, Path] = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        names = controllers.split(",")
        if "pids" in names:
            candidates["pids"] = Path("/sys/fs/cgroup", controllers, path.lstrip("/"), "pids.events")
        if "cpuacct" in names:
            candidates["cpu"] = Path("/sys/fs/cgroup", controllers, path.lstrip("/"), "cpuacct.usage")
        if controllers == "":  # cgroup v2: one folder for every controller
            folder = Path("/sys/fs/cgroup", path.lstrip("/"))
            candidates.setdefault("pids", folder / "pids.events")
            candidates.setdefault("cpu", folder / "cpu.stat")
    return {key: f for key, f in candidates.items() if f.is_file()}


def cpu_seconds_used(file: Path | None) -> float:
    """CPU time a container used so far, from ``cpuacct.usage`` (v1) or ``cpu.stat`` (v2); 0 if unknown."""
    if file is None:
        return 0.0
    try:
        text = file.read_text()
        if file.name == "cpuacct.usage":
            return int(text) / 1e9
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
    except (OSError, ValueError):
        pass
    return 0.0


def pids_limit_hits(file: Path | None) -> int:
    """How often a fork was refused by the pids limit (``max`` in ``pids.events``)."""
    if file is None:
        return 0
    try:
        for line in file.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "max":
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def exit_reason(
    sandbox: str, returncode: int, container: str = "", cpu_used: float = 0.0, cpu_limit: int = 0
) -> tuple[str, str]:
    """(reason code, message) for a bot process that ended with *returncode*.

    ``podman run`` exits with 128 + the signal of the container's main process. A SIGKILL
    (137) comes from the kernel: at the CPU-time hard limit when the container had used
    about its *cpu_limit* (*cpu_used*, last seen by the arena), else from the memory
    limit's OOM killer (podman on cgroup v1 does not always set OOMKilled).
    """
    if sandbox == "podman" and container:
        state = _podman_state(container)
        code = state.get("ExitCode", returncode)
        cpu_spent = cpu_limit > 0 and cpu_used >= 0.8 * cpu_limit
        if code == 128 + signal.SIGXCPU or (code == 128 + signal.SIGKILL and cpu_spent):
            return REASON_CPU, f"killed at its CPU-time limit of {cpu_limit} s (exit code {code})"
        if state.get("OOMKilled") or code == 128 + signal.SIGKILL:
            return REASON_OOM, f"killed by the kernel at the memory limit (exit code {code})"
        return REASON_EXIT, f"exited with code {code}"
    if returncode == -signal.SIGXCPU:
        return REASON_CPU, "killed at its CPU-time limit (SIGXCPU)"
    if returncode < 0:
        return REASON_EXIT, f"killed by signal {signal.Signals(-returncode).name}"
    return REASON_EXIT, f"exited with code {returncode}"


# --- records ------------------------------------------------------------------------------


def annotate_record(record: dict[str, Any], faults: list[dict[str, Any]], started: float, ended: float) -> None:
    """Adds the sandbox faults of *faults* (bot, reason, message, at) that fell in [started, ended]
    to *record*'s faults, for every seat of that bot that disconnected in the match."""
    seats = record.get("seats") or []
    disconnected = {
        f.get("seat") for f in record.get("faults", []) if isinstance(f, dict) and f.get("reason") == "DISCONNECT"
    }
    added = []
    for fault in faults:
        if not started <= fault["at"] <= ended or fault["reason"] == REASON_EXIT:
            continue
        for seat, info in enumerate(seats):
            if isinstance(info, dict) and info.get("bot") == fault["bot"] and seat in disconnected:
                added.append({"seat": seat, "reason": fault["reason"], "message": fault["message"], "by": "arena"})
    if added:
        record.setdefault("faults", []).extend(added)
        record["sandbox_faults"] = added
