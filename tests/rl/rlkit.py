"""The adapter tests need the rl extra: they skip without it, and fail when CI is set."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def need(module: str) -> ModuleType:
    """Imports *module*; skips the test when it is missing (fails instead when ``CI`` is set)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"{module} is not installed (pip install -e '.[rl]')")
