"""Sandboxes for submitted bots: how the arena launches a ``command`` bot it does not trust.

* ``bwrap`` (:mod:`gaigel_arena.bwrap`): bubblewrap namespaces, no daemon and no image:
  own pid, network, ipc and uts namespaces, a read-only view of only the bot's runtime and
  folder, a private tmpfs, seccomp, a uid of its own, and a cgroup (memory, pids) where one
  can be created, else rlimits. What ``auto`` picks without an image.
* ``podman``: a container with ``--network=none``, a read-only root, a private tmpfs at
  ``/tmp``, CPU, memory (no swap), pids, CPU-time and open-file limits, no capabilities,
  ``no-new-privileges``, uid 65534, and only the ``GAIGEL_`` variables (plus ``HOME=/tmp``).
  The match server is reached through a unix socket whose folder is bind-mounted read-only
  at ``/run/gaigel`` (``GAIGEL_SERVER=unix:/run/gaigel/server.sock``).
* ``process``: the bot runs on the host, in a process group of its own, with rlimits on
  memory (``RLIMIT_DATA``), CPU time, processes and open files. Its network and files are
  the organiser's: this stops runaway bots, not hostile ones; only as an explicit choice.
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
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

from gaigel.match import FaultReason
from gaigel_arena import lifeline
from gaigel_arena.cgroup import counter

__all__ = [
    "CONTAINER_SOCKET_DIR",
    "LIMIT_KEYS",
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
    "process_environment",
    "resolve_sandbox",
]

SANDBOXES = ("auto", "bwrap", "podman", "process", "none")
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
    """The ``[sandbox]`` table: the default for command bots and the limits of every sandbox
    (a bot's ``limits`` table overrides them for that bot)."""

    default: str = "auto"
    cpus: float = 1.0
    """podman ``--cpus`` (a share of the machine, throttled, never killed)."""
    memory_mb: int = 512
    """Memory the bot may use: its cgroup's limit (podman; bwrap where a cgroup can be made),
    else ``RLIMIT_DATA`` (heap and private mappings, not reserved address space)."""
    pids: int = 64
    """Tasks (processes and threads): the cgroup's ``pids.max`` and RLIMIT_NPROC (per uid;
    bwrap gives every bot process a uid of its own when the arena runs as root)."""
    cpu_seconds: int = 36_000
    """RLIMIT_CPU of the bot process (every sandbox): CPU time over its whole life."""
    address_space_mb: int = 0
    """RLIMIT_AS if not 0 (off by default: JVM, Go and V8 reserve far more than they use)."""
    open_files: int = 256
    """RLIMIT_NOFILE (every sandbox)."""
    tmpfs_mb: int = 64
    """bwrap and podman: size of the private writable ``/tmp``."""
    log_bytes: int = 2**20
    """What a bot process writes to stdout and stderr that is kept (per process and match)."""
    pass_env: tuple[str, ...] = ()
    """Names of the organiser's environment variables passed to bots (nothing else is)."""

    def rlimits(self, memory: bool = True) -> dict[str, int]:
        """The rlimits of a bot process by :mod:`resource` name (*memory*: with RLIMIT_DATA, for a
        process whose memory no cgroup limits)."""
        limits = {"RLIMIT_CPU": self.cpu_seconds, "RLIMIT_NPROC": self.pids, "RLIMIT_NOFILE": self.open_files}
        if memory:
            limits["RLIMIT_DATA"] = self.memory_mb * 2**20
        if self.address_space_mb:
            limits["RLIMIT_AS"] = self.address_space_mb * 2**20
        return limits

    def merged(self, overrides: Mapping[str, Any]) -> SandboxConfig:
        """These limits with a bot's *overrides* (validated by :func:`parse_limits`)."""
        return dataclasses.replace(self, **overrides) if overrides else self


def _positive(table: Mapping[str, Any], key: str, default: Any, kind: type, zero: bool = False) -> Any:
    value = table.get(key, default)
    low_ok = value >= 0 if zero else value > 0
    ok = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool) and low_ok
    if not ok:
        what = "a non-negative" if zero else "a positive"
        raise ValueError(f"sandbox.{key} must be {what} {'number' if kind is float else 'integer'}, got {value!r}")
    return kind(value)


LIMIT_KEYS = {
    "cpus": float,
    "memory_mb": int,
    "pids": int,
    "cpu_seconds": int,
    "address_space_mb": int,
    "open_files": int,
    "tmpfs_mb": int,
    "log_bytes": int,
}


def parse_limits(table: Mapping[str, Any], base: SandboxConfig | None = None) -> dict[str, Any]:
    """The limit keys of *table* (``[sandbox]`` or a bot's ``limits``), checked.

    :raises ValueError: naming the first invalid key.
    """
    base = base or SandboxConfig()
    out = {}
    for key, kind in LIMIT_KEYS.items():
        if key in table:
            out[key] = _positive(table, key, getattr(base, key), kind, zero=key == "address_space_mb")
    return out


def parse_sandbox(table: Mapping[str, Any]) -> SandboxConfig:
    """Validates the ``[sandbox]`` table.

    :raises ValueError: naming the first invalid key.
    """
    base = SandboxConfig()
    default = table.get("default", base.default)
    if default not in SANDBOXES:
        raise ValueError(f"sandbox.default must be one of {', '.join(SANDBOXES)}, got {default!r}")
    pass_env = table.get("pass_env", [])
    if not isinstance(pass_env, list) or not all(isinstance(n, str) and n for n in pass_env):
        raise ValueError(f"sandbox.pass_env must be a list of variable names, got {pass_env!r}")
    return SandboxConfig(default=default, pass_env=tuple(pass_env), **parse_limits(table, base))


def podman_available() -> bool:
    """True when a ``podman`` command is on PATH."""
    return shutil.which("podman") is not None


def resolve_sandbox(wanted: str, has_image: bool, podman: bool, bwrap: str = "", has_command: bool = True) -> str:
    """The sandbox a command bot gets: *wanted* (the bot's, else the arena default) made concrete.

    ``auto`` is ``podman`` for a bot with an image (``image`` or ``build``) where podman is
    installed, else ``bwrap`` where bubblewrap works (*bwrap* is why it does not, or ``""``).
    It never falls back to ``process``: that is only an explicit choice.

    :raises SandboxError: for a sandbox that cannot run the bot, saying what to install.
    """
    if wanted == "auto":
        if has_image and podman:
            return "podman"
        if not bwrap and has_command:
            return "bwrap"
        if not has_command:
            raise SandboxError("it has only an image, and podman is not installed (apt-get install podman runc)")
        raise SandboxError(
            f"no sandbox for command bots here: {bwrap}; or install podman and give the bot an image, "
            'or set sandbox = "process" to run it unconfined'
        )
    if wanted == "podman" and not podman:
        raise SandboxError("sandbox = podman, but podman is not installed (apt-get install podman runc)")
    if wanted == "podman" and not has_image:
        raise SandboxError('sandbox = podman needs image = "..." or build = "folder with a Dockerfile"')
    if wanted == "bwrap" and bwrap:
        raise SandboxError(f"sandbox = bwrap, but {bwrap}")
    if wanted == "bwrap" and not has_command:
        raise SandboxError("sandbox = bwrap needs a command")
    return wanted


class SandboxedBot(Protocol):
    """What :func:`command_bot_sandboxes` reads of a bot (a :class:`gaigel_arena.config.BotConfig`).

    A Protocol, not the config class: config.py imports this module, so naming its classes
    here, even for the type checker only, would make the two one module in two files.
    """

    @property
    def kind(self) -> str: ...
    @property
    def command(self) -> tuple[str, ...]: ...
    @property
    def sandbox(self) -> str: ...
    @property
    def image(self) -> str: ...
    @property
    def build(self) -> str: ...


BotT = TypeVar("BotT", bound=SandboxedBot, covariant=True)


class SandboxedArena(Protocol[BotT]):
    """What :func:`command_bot_sandboxes` reads of an arena (a :class:`gaigel_arena.config.ArenaConfig`)."""

    @property
    def bots(self) -> tuple[BotT, ...]: ...
    @property
    def sandbox(self) -> SandboxConfig: ...


def command_bot_sandboxes(config: SandboxedArena[BotT], podman: bool) -> Iterator[tuple[BotT, str | SandboxError]]:
    """Each command bot of *config* with its concrete sandbox (:func:`resolve_sandbox`), or why
    it cannot have the one it asks for."""
    from gaigel_arena.bwrap import bwrap_problem

    for bot in config.bots:
        if bot.kind != "command":
            continue
        wanted = bot.sandbox or config.sandbox.default
        problem = bwrap_problem() if wanted in ("auto", "bwrap") else ""
        try:
            yield bot, resolve_sandbox(wanted, bool(bot.image or bot.build), podman, problem, bool(bot.command))
        except SandboxError as e:
            yield bot, e


# --- process ------------------------------------------------------------------------------


def launcher_command(
    command: list[str], rlimits: Mapping[str, int] | None = None, cgroups: Iterable[str] = ()
) -> list[str]:
    """*command* started through the arena's one launcher (:func:`gaigel_arena.lifeline.launcher_command`):
    it dies with this process (Linux), in *cgroups* and under *rlimits* (by :mod:`resource` name)."""
    return lifeline.launcher_command(command, rlimits, cgroups)


def process_environment(
    host: Mapping[str, str], passed: Mapping[str, str], session: Mapping[str, str]
) -> dict[str, str]:
    """The environment of a ``process`` bot: *host*'s PATH, HOME, LANG and TMPDIR, what the config
    passes, and its session's ``GAIGEL_*`` variables; nothing else of the organiser's."""
    env = {n: host[n] for n in ("PATH", "HOME", "LANG", "TMPDIR") if n in host}
    env.update(passed)
    env.update(session)
    return env


def process_command(command: list[str], limits: SandboxConfig) -> list[str]:
    """*command* wrapped so that it runs under the ``process`` sandbox's rlimits."""
    return launcher_command(command, limits.rlimits())


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
) -> tuple[list[str], dict[str, str]]:
    """``podman run`` for one bot process, and the environment to start it with.

    The container *name* stays after exit for :func:`exit_reason`. The bot's variables (its
    token among them) are named on the command line without values (``--env NAME``): podman
    takes the values from its own environment, so no token shows in ``ps``.
    """
    env = {"GAIGEL_SERVER": f"unix:{CONTAINER_SOCKET_DIR}/{SOCKET_NAME}", **gaigel_env}
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
        "--env=HOME=/tmp",  # a value, not a name: podman itself needs the organiser's HOME
        "--health-interval=disable",
        "--log-driver=none",
        f"--volume={socket_dir}:{CONTAINER_SOCKET_DIR}:ro",
    ]
    args += [f"--env={key}" for key in sorted(env)]
    return [*args, image, *command], {**podman_env(), **env}


def _inspect(name: str, template: str) -> str | None:
    """``podman container inspect --format`` *template* of container *name* (None: no such container)."""
    proc = subprocess.run(
        ["podman", "container", "inspect", "--format", template, name],
        env=podman_env(),
        capture_output=True,
        text=True,
    )
    return proc.stdout if proc.returncode == 0 else None


def _podman_state(name: str) -> dict[str, Any]:
    text = _inspect(name, "{{json .State}}")
    if text is None:
        return {}
    try:
        state = json.loads(text)
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
    """The cgroup files of the running container *name* the arena watches (``pids.events``,
    the CPU time used: ``cpuacct.usage`` in ns on cgroup v1, ``cpu.stat`` on v2, and the
    memory limit's hits: ``memory.failcnt`` on v1, ``memory.events`` on v2); {} while they
    cannot be told (not started yet, or exiting)."""
    pid, _, container_id = (_inspect(name, "{{.State.Pid}} {{.Id}}") or "").strip().partition(" ")
    if not pid.isdigit() or int(pid) <= 0 or not container_id:
        return {}
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return {}
    return {key: f for key, f in cgroup_files(text, container_id).items() if f.is_file()}


def cgroup_files(proc_cgroup: str, container_id: str) -> dict[str, Path]:
    """The watched files named by a process's ``/proc/PID/cgroup`` text, from the hierarchies
    that place it in container *container_id*'s cgroup.

    An exiting process shows "/" on the v1 hierarchies (the kernel's proc_cgroup_show): a
    container's PID 1 killed at its memory limit, read before it is reaped, would name the
    host's root cgroup, whose ``cpuacct.usage`` is every CPU-second the machine spent (a memory
    probe 0.4 s old was once called SANDBOX_CPU at its 30 s limit that way).
    """
    candidates: dict[str, Path] = {}
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        if container_id not in path:
            continue
        names = controllers.split(",")
        if "pids" in names:
            candidates["pids"] = Path("/sys/fs/cgroup", controllers, path.lstrip("/"), "pids.events")
        if "cpuacct" in names:
            candidates["cpu"] = Path("/sys/fs/cgroup", controllers, path.lstrip("/"), "cpuacct.usage")
        if "memory" in names:
            candidates["memory"] = Path("/sys/fs/cgroup", controllers, path.lstrip("/"), "memory.failcnt")
        if controllers == "":  # cgroup v2: one folder for every controller
            folder = Path("/sys/fs/cgroup", path.lstrip("/"))
            candidates.setdefault("pids", folder / "pids.events")
            candidates.setdefault("cpu", folder / "cpu.stat")
            candidates.setdefault("memory", folder / "memory.events")
    return candidates


def _text(file: Path | None) -> str:
    """The text of a container's cgroup file ("" when there is none, or it is gone with the container)."""
    if file is None:
        return ""
    try:
        return file.read_text()
    except OSError:
        return ""


def cpu_seconds_used(file: Path | None) -> float:
    """CPU time a container used so far, from ``cpuacct.usage`` (v1) or ``cpu.stat`` (v2); 0 if unknown."""
    text = _text(file)
    if file is not None and file.name == "cpuacct.usage":
        return int(text) / 1e9 if text.strip().isdigit() else 0.0
    return counter(text, "usage_usec") / 1e6


def memory_limit_hits(file: Path | None) -> int:
    """How often the container's memory use met its limit (``memory.failcnt`` on v1, ``max``
    in ``memory.events`` on v2); 0 if unknown."""
    text = _text(file)
    if file is not None and file.name == "memory.failcnt":
        return int(text) if text.strip().isdigit() else 0
    return counter(text, "max")


def pids_limit_hits(file: Path | None) -> int:
    """How often a fork was refused by the pids limit (``max`` in ``pids.events``)."""
    return counter(_text(file), "max")


def exit_reason(
    sandbox: str,
    returncode: int,
    container: str = "",
    cpu_used: float = 0.0,
    cpu_limit: int = 0,
    oom_kills: int = 0,
    memory_hits: int = 0,
) -> tuple[str, str]:
    """(reason code, message) for a bot process that ended with *returncode*.

    ``podman run`` and ``bwrap`` exit with 128 + the signal of the bot's main process. A
    SIGKILL (137) comes from the kernel: from the memory limit's OOM killer when podman says
    OOMKilled, the bot's cgroup counts *oom_kills* or a container was seen meeting its
    memory limit (*memory_hits*; podman on cgroup v1 does not always set OOMKilled). That
    comes first: a bot thrashing at its memory limit burns CPU time too, and a bot at its
    CPU-time limit gets SIGXCPU before the hard limit's SIGKILL. Else a SIGKILL is the
    CPU-time hard limit when the bot had used its *cpu_limit* (*cpu_used*, last seen by the
    arena), else the OOM killer again.
    """
    if sandbox in ("podman", "bwrap"):
        state = _podman_state(container) if sandbox == "podman" and container else {}
        code = state.get("ExitCode", returncode)
        killed = code == 128 + signal.SIGKILL
        if killed and (state.get("OOMKilled") or oom_kills > 0 or memory_hits > 0):
            return REASON_OOM, f"killed by the kernel at the memory limit (exit code {code})"
        # RLIMIT_CPU's SIGKILL comes at the hard limit, a second past the soft one (a bot running as
        # its container's PID 1 never sees the soft limit's SIGXCPU): by then the arena, reading
        # the CPU time every 0.2 s, has seen at least the soft limit. (80 % of it was too little:
        # a memory probe that had spent 1.6 of 2 s starting up under load was called SANDBOX_CPU.)
        cpu_spent = cpu_limit > 0 and cpu_used >= cpu_limit
        if code == 128 + signal.SIGXCPU or (killed and cpu_spent):
            return REASON_CPU, f"killed at its CPU-time limit of {cpu_limit} s (exit code {code})"
        oom = state.get("OOMKilled") or oom_kills > 0 or (sandbox == "podman" and killed)
        if oom:
            return REASON_OOM, f"killed by the kernel at the memory limit (exit code {code})"
        if code > 128:
            return REASON_EXIT, f"killed by signal {_signal_name(code - 128)} (exit code {code})"
        return REASON_EXIT, f"exited with code {code}"
    if returncode == -signal.SIGXCPU:
        return REASON_CPU, "killed at its CPU-time limit (SIGXCPU)"
    if returncode < 0:
        return REASON_EXIT, f"killed by signal {_signal_name(-returncode)}"
    return REASON_EXIT, f"exited with code {returncode}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


# --- records ------------------------------------------------------------------------------


def annotate_record(record: dict[str, Any], faults: list[dict[str, Any]], started: float, ended: float) -> None:
    """Adds the sandbox faults of *faults* (bot, reason, message, at) that fell in [started, ended]
    to *record*'s faults, for every seat of that bot that disconnected in the match."""
    seats = record.get("seats") or []
    disconnected = {
        f.get("seat")
        for f in record.get("faults", [])
        if isinstance(f, dict) and f.get("reason") == FaultReason.DISCONNECT
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
