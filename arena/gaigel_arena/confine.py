"""One bot process in the ``bwrap`` sandbox, as the arena and ``gaigel arena check-bot`` start it.

:func:`bwrap_launch` turns a bot command into what to hand to ``subprocess.Popen``: the
launcher's argument vector (parent-death signal, cgroup, rlimits, then ``bwrap``), the
environment built from scratch, the file descriptor of the seccomp program to inherit,
and a description of the limits that really hold, for records and reports.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gaigel_arena import bwrap, cgroup, sandbox

__all__ = ["Confined", "bwrap_launch"]


@dataclasses.dataclass
class Confined:
    """What ``Popen`` needs for one sandboxed bot process, and what holds it."""

    argv: list[str]
    env: dict[str, str]
    pass_fds: tuple[int, ...]
    """Close these in the parent once the process has started."""
    info: dict[str, Any]
    group: cgroup.BotCgroup | None


def bwrap_launch(
    command: Sequence[str],
    program: str,
    *,
    session: Mapping[str, str],
    passed: Mapping[str, str],
    folders: Iterable[Path],
    hidden: Iterable[Path],
    socket_dir: str,
    private: Path,
    limits: sandbox.SandboxConfig,
    group_name: str,
) -> Confined:
    """*command* (its program found at *program*) in the bwrap sandbox.

    *session* are the bot's ``GAIGEL_*`` variables (``GAIGEL_SERVER`` a ``unix:`` address
    below :data:`gaigel_arena.bwrap.SOCKET_DIR`, where *socket_dir* is shown), *passed* the
    organiser's variables the config passes. *private* is a folder of the caller's that no
    bot sees (the seccomp program and made-up passwd files go there).
    """
    group = cgroup.create(group_name, limits.memory_mb * 2**20, limits.pids)
    fd = os.open(bwrap.seccomp_file(private), os.O_RDONLY)
    program = os.path.abspath(program)
    plan = bwrap.plan(
        command,
        executable=program,
        cwd=Path.cwd(),
        folders=folders,
        hidden=hidden,
        socket_dir=socket_dir,
        files_dir=private,
        seccomp_fd=fd,
        tmpfs_mb=limits.tmpfs_mb,
    )
    env = bwrap.environment(session, passed, program)
    cgroups = group.procs_files() if group is not None else []
    argv = sandbox.launcher_command(plan.argv, limits.rlimits(memory=group is None), cgroups)
    by = f"cgroup v{group.version}" if group is not None else "RLIMIT_DATA"
    info = {
        "sandbox": "bwrap",
        "memory": f"{by} ({limits.memory_mb} MB)",
        "pids": f"{f'cgroup v{group.version} and ' if group else ''}RLIMIT_NPROC ({limits.pids})",
        "uid": "a uid of its own" if os.geteuid() == 0 else "the organiser's, as nobody in a user namespace",
        "network": "none",
        "seccomp": True,
    }
    return Confined(argv, env, (fd,), info, group)
