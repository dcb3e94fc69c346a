"""``gaigel arena check-bot CONFIG --bot NAME``: the conformance checks with the bot run as the arena runs it.

A bot that passes ``gaigel check-bot`` on the organiser's shell can still fail in the
arena: the sandbox hides the files it reads, the memory limit stops its runtime, the clock
is the arena's. This runs the same checks (:mod:`gaigel_harness.checkbot`) with the bot in
the sandbox the arena would give it (``bwrap``, ``process`` or ``none``; ``podman`` bots
through their image), its limits (the ``[sandbox]`` table and the bot's own ``limits``), and
the arena's decision time as the deadline, scaled by the machine's load: on a machine whose
load average per core is L > 1 the deadline is multiplied by L, so that a busy organiser's
machine does not reject a good bot (``--deadline`` fixes it instead). The line before the
checks says the deadline used and why.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from gaigel_arena import bwrap, sandbox
from gaigel_arena.cgroup import BotCgroup
from gaigel_arena.config import ArenaConfig, BotConfig
from gaigel_arena.confine import bwrap_launch
from gaigel_harness.checkbot import Confinement, run_checks
from gaigel_harness.launch import bot_environment, find_program

__all__ = ["check_arena_bot", "load_factor"]


def load_factor() -> float:
    """The load average of the last minute per core, at least 1."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return 1.0
    return max(1.0, load / (os.cpu_count() or 1))


def _confinement(
    config: ArenaConfig, bot: BotConfig, kind: str, socket_dir: str, private: Path, groups: list[BotCgroup]
) -> Confinement:
    limits = config.sandbox.merged(dict(bot.limits))
    passed = {n: os.environ[n] for n in (*config.sandbox.pass_env, *bot.pass_env) if n in os.environ}

    def launch(cmd: Sequence[str], session: dict[str, str]) -> tuple[list[str], dict[str, str], tuple[int, ...]]:
        if kind == "podman":
            image = bot.image or sandbox.build_image(bot.name, bot.build)
            name = f"gaigel-check-{os.getpid()}-{bot.name.lower()}"
            argv, env = sandbox.podman_command(name, image, list(cmd), session, socket_dir, limits)
            return ["podman", *argv[1:2], "--rm", *argv[2:]], env, ()
        program = find_program(cmd[0], bot_environment())
        if program is None:
            raise OSError(f"{cmd[0]} is not an executable")
        if kind == "bwrap":
            hidden = [private, Path(os.environ.get("HOME", "/nonexistent"))]
            hidden += [Path(b.folder) for b in config.bots if b.folder and b.name != bot.name]
            confined = bwrap_launch(
                cmd,
                program,
                session=session,
                passed=passed,
                folders=[Path(bot.folder)] if bot.folder else [],
                hidden=hidden,
                socket_dir=socket_dir,
                private=private,
                limits=limits,
                group_name=f"gaigel-check-{os.getpid()}-{os.urandom(3).hex()}",
            )
            if confined.group is not None:
                groups.append(confined.group)
            return confined.argv, confined.env, confined.pass_fds
        host = bot_environment(**session)
        if kind == "process":
            env = sandbox.process_environment(host, passed, session)
            return sandbox.process_command(list(cmd), limits), env, ()
        return sandbox.launcher_command(list(cmd)), host, ()

    seen_as = bwrap.SOCKET_DIR if kind in ("bwrap", "podman") else socket_dir
    return Confinement(launch=launch, socket_dir=socket_dir, seen_as=seen_as)


def check_arena_bot(
    config: ArenaConfig,
    name: str,
    *,
    deadline: float | None,
    startup_timeout: float,
    max_matches: int,
    as_json: bool,
    verbose: bool,
) -> int:
    """Runs the conformance checks on bot *name* of *config* in its arena sandbox; the exit code.

    :raises ValueError: for a bot that is not a command bot, or whose sandbox cannot run here.
    """
    bot = next((b for b in config.bots if b.name == name), None)
    if bot is None:
        raise ValueError(f"no bot {name!r} in the config (bots: {', '.join(b.name for b in config.bots)})")
    if bot.kind != "command":
        raise ValueError(f"bot {name!r} is a {bot.kind} bot: only command bots are started by the arena")
    kinds = dict((b.name, k) for b, k in sandbox.command_bot_sandboxes(config, sandbox.podman_available()))
    kind = kinds[name]
    if isinstance(kind, sandbox.SandboxError):
        raise ValueError(f"bot {name!r}: {kind}")
    if kind == "podman" and not bot.command:
        raise ValueError(f"bot {name!r} runs its image's own entry point: give it a command to check it")
    why = "--deadline"
    if deadline is None:
        factor = load_factor()
        deadline = config.clock.decision_ms / 1000.0 * factor
        why = f"the arena's decision_ms {config.clock.decision_ms} x load factor {factor:.2f}"
    print(f"checking bot {name!r} in the {kind} sandbox, deadline {deadline:.2f} s ({why})", file=sys.stderr)
    socket_dir = tempfile.mkdtemp(prefix="gaigel-check-sock-")
    private = Path(tempfile.mkdtemp(prefix="gaigel-check-private-"))
    os.chmod(socket_dir, 0o755)  # the bot's uid must reach the sockets
    groups: list[BotCgroup] = []
    try:
        return run_checks(
            list(bot.command),
            deadline=deadline,
            max_matches=max_matches,
            as_json=as_json,
            verbose=verbose,
            startup_timeout=startup_timeout,
            confinement=_confinement(config, bot, kind, socket_dir, private, groups),
            per_run=config.bot_processes == "per_run",
        )
    finally:
        for group in groups:
            group.kill()
            group.remove()
        shutil.rmtree(socket_dir, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)
