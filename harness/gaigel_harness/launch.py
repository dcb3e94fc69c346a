"""The environment of a bot command launched by ``gaigel try``, ``gaigel check-bot`` and the arena.

The command runs in the caller's working directory (relative paths in it are relative to
where ``gaigel`` was started) with this environment: the caller's, the ``GAIGEL_*``
variables of the session, and the scripts folder of the Python that runs ``gaigel`` first
on ``PATH``. So after ``.venv/bin/pip install -e .`` a bot command ``python my_bot.py`` or
``gaigel stdio-bot -- ...`` finds that venv's ``python`` (with the SDK) and ``gaigel``, as if
the venv were activated.
"""

from __future__ import annotations

import os
import shutil
import sysconfig


def bot_environment(**variables: str) -> dict[str, str]:
    """The caller's environment plus *variables*, with this installation's scripts folder first on PATH."""
    env = dict(os.environ, **variables)
    scripts = sysconfig.get_path("scripts")
    rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != scripts]
    env["PATH"] = os.pathsep.join([scripts, *rest])
    return env


def find_program(program: str, env: dict[str, str]) -> str | None:
    """Where *program* (a bot command's first word) is found with *env*'s PATH, or None."""
    if os.sep in program:
        return program if os.access(program, os.X_OK) else None
    return shutil.which(program, path=env.get("PATH"))


__all__ = ["bot_environment", "find_program"]
