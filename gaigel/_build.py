"""Which build of the engine runs: the mypyc-compiled hot modules, or their Python sources.

``pip install`` compiles :data:`COMPILED_MODULES` with mypyc where a C compiler works
(``setup.py``) and installs the sources alone otherwise; both play identically (the golden
playthroughs pin every state hash). :func:`engine_build` says which one is loaded, and
``gaigel --version`` prints it.

The sources are loaded instead of the compiled modules, even when those exist, when

* the environment variable ``GAIGEL_PURE`` is set (not empty, not ``0``): for comparing
  the builds and testing the pure one from a compiled installation; or
* in a source checkout (an editable install, or ``PYTHONPATH``), one of the sources is
  newer than its compiled module, i.e. it was edited, or checked out, after the last
  ``pip install -e .``: the stale build is ignored, with a warning, until the next one.

This module only reads the environment and file times (at import of :mod:`gaigel`).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

COMPILED_MODULES: tuple[str, ...] = ("cards", "deal", "state", "actions", "phase", "ruleset", "observation")
"""The modules of the gaigel package that setup.py compiles (the engine's hot path)."""

PACKAGE_DIR = Path(__file__).resolve().parent

_why_pure: str | None = None
"""Why the sources are loaded though compiled modules may exist (set by :func:`choose`)."""


def _compiled_file(name: str) -> Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = PACKAGE_DIR / f"{name}{suffix}"
        if path.exists():
            return path
    return None


def _stale_module() -> str | None:
    """The first compiled module older than its source, in a source checkout; else None."""
    if not (PACKAGE_DIR.parent / "pyproject.toml").exists():
        return None  # an installed package: its files are written together, in any order
    for name in COMPILED_MODULES:
        compiled = _compiled_file(name)
        if compiled is not None and (PACKAGE_DIR / f"{name}.py").stat().st_mtime > compiled.stat().st_mtime:
            return name
    return None


class _SourceFinder:
    """Finds the Python source of the compiled modules, ahead of the extension modules."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != __package__ or name not in COMPILED_MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, PACKAGE_DIR / f"{name}.py")


def choose() -> None:
    """Loads the sources instead of the compiled modules when forced or stale (module docstring).

    Called by ``gaigel/__init__.py`` before it imports any engine module.
    """
    global _why_pure
    if any(isinstance(f, _SourceFinder) for f in sys.meta_path):
        return
    if os.environ.get("GAIGEL_PURE", "") not in ("", "0"):
        _why_pure = "GAIGEL_PURE"
    else:
        stale = _stale_module()
        if stale is None:
            return
        _why_pure = "stale build"
        warnings.warn(
            f"gaigel: gaigel/{stale}.py is newer than its compiled module: the pure-Python engine runs "
            "until the next `pip install -e .`",
            RuntimeWarning,
            stacklevel=3,
        )
    sys.meta_path.insert(0, _SourceFinder())


def engine_build() -> str:
    """``"compiled, mypyc"`` when :mod:`gaigel.state` is an extension module, else
    ``"pure Python"`` (with the reason when compiled modules were passed over)."""
    import gaigel.state

    file = gaigel.state.__file__ or ""
    if file.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
        return "compiled, mypyc"
    return f"pure Python ({_why_pure})" if _why_pure else "pure Python"
