"""Helpers for the kit tests: the gaigel command line, tool detection.

A plain module, not conftest.py: test files import it by name, and several test folders
have a conftest.py of their own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BOTS = Path(__file__).resolve().parent / "bots"

GAIGEL = [sys.executable, "-m", "gaigel.cli"]


BRIDGE = GAIGEL  # `gaigel stdio-bot` and `gaigel check-bot`


def need(*tools: str) -> None:
    """Skips unless every tool is on PATH (fails instead when $CI is set)."""
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI: missing tools {missing}")
        pytest.skip(f"missing tools: {', '.join(missing)}")


def run(args: list[str], timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
