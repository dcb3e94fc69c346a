"""The one way a process the arena starts dies with its parent, even when the parent is killed with ``kill -9``.

:func:`die_with_parent` arms Linux's parent-death signal (``PR_SET_PDEATHSIG``, SIGKILL) in the
calling process and ends it at once if the parent is already gone. The arena uses it twice:

* in process: the initializer of the local executor's pool workers and the table worker
  processes (:func:`gaigel_arena.executors.worker_initializer`) calls it;
* as the launcher of every bot process (:func:`launcher_command`): this file, run as a script
  with ``python -I``, calls it, enters the bot's cgroups, sets its rlimits and execs the bot
  command. No Python code runs between fork and exec in the arena itself, whose gRPC threads
  make that unsafe (``preexec_fn``); the signal survives the exec.

Run as a script, this module imports the standard library only (``-I`` puts nothing of the
project on the path). Processes that a bot command starts itself are not covered.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterable, Mapping

__all__ = ["die_with_parent", "launcher_command"]


def die_with_parent(parent_pid: int) -> None:
    """Has this process receive SIGKILL when its parent dies (Linux); exits now if *parent_pid*
    is no longer its parent (the parent died before the signal was armed)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:
        os._exit(1)


def launcher_command(
    command: list[str], rlimits: Mapping[str, int] | None = None, cgroups: Iterable[str] = ()
) -> list[str]:
    """*command* started through this launcher: it dies with this process (Linux), in *cgroups*
    (their ``cgroup.procs`` files) and under *rlimits* (by :mod:`resource` name).

    ``python -I lifeline.py PARENT_PID SPEC_JSON COMMAND...``; elsewhere than Linux *command* itself.
    """
    if not sys.platform.startswith("linux"):
        return command
    spec = json.dumps({"rlimits": dict(rlimits or {}), "cgroups": list(cgroups)}, sort_keys=True)
    return [sys.executable, "-I", os.path.abspath(__file__), str(os.getpid()), spec, *command]


def _launch(argv: list[str]) -> None:
    """The launcher: the parent-death signal, the cgroups, the rlimits, then exec of ``argv[2:]``."""
    import resource

    die_with_parent(int(argv[0]))
    spec = json.loads(argv[1])
    for name in spec.get("cgroups", []):  # the bot and all it starts are counted in its group
        try:
            with open(name, "w") as f:
                f.write(str(os.getpid()))
        except OSError as e:
            sys.stderr.write(f"sandbox: cannot enter {name}: {e}\n")
            os._exit(126)
    for name, value in spec.get("rlimits", {}).items():
        limit = getattr(resource, name)
        # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL a second later if the bot ignores it.
        hard = value + 1 if limit == resource.RLIMIT_CPU else value
        try:
            resource.setrlimit(limit, (value, hard))
        except (ValueError, OSError) as e:  # above the runner's own hard limit: keep that one
            sys.stderr.write(f"sandbox: cannot set {name}={value}: {e}\n")
    try:
        os.execvp(argv[2], argv[2:])  # the parent-death signal survives exec
    except OSError as e:
        sys.stderr.write(f"cannot start {argv[2]}: {e.strerror}\n")
        os._exit(127)


if __name__ == "__main__":
    _launch(sys.argv[1:])
