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
  ``pip install -e .``: the stale build is ignored, with a warning, until the next one; or
* compiled modules are there without their group's shared library (``setup.py build_ext
  --inplace`` on an editable install made before the group existed): likewise.

The server's codec (``gaigel_server.wire``, the protobuf bytes of every decision) is compiled
the same way and chosen the same way (:class:`CompiledModules`, from ``gaigel_server/__init__.py``).

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
"""Why the engine's sources are loaded though compiled modules may exist (set by :func:`choose`)."""


class CompiledModules:
    """Modules of one package that setup.py compiles with mypyc, and the choice between their
    builds and their sources: the engine's here, the server's codec (``gaigel_server.wire``)
    from ``gaigel_server/__init__.py``."""

    def __init__(self, package: str, directory: Path, modules: tuple[str, ...], library: str) -> None:
        self.package = package
        self.directory = directory
        self.modules = modules
        self.library = library  # mypyc's shared library of the group, a top-level module

    def in_checkout(self) -> bool:
        """A source checkout (an editable install, or ``PYTHONPATH``), not an installed package,
        whose files are written together, in any order, and never rebuilt one by one."""
        return any((d / "pyproject.toml").exists() for d in self.directory.parents[:2])

    def library_missing(self) -> bool:
        """In a source checkout, compiled modules are there but their shared library cannot be
        found: a build added by ``setup.py build_ext --inplace`` to an editable install older
        than its group."""
        if not self.in_checkout() or not any(self.compiled_file(name) for name in self.modules):
            return False
        return importlib.util.find_spec(self.library) is None

    def compiled_file(self, name: str) -> Path | None:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = self.directory / f"{name}{suffix}"
            if path.exists():
                return path
        return None

    def stale_module(self) -> str | None:
        """The first compiled module older than its source, in a source checkout; else None."""
        if not self.in_checkout():
            return None
        for name in self.modules:
            compiled = self.compiled_file(name)
            if compiled is not None and (self.directory / f"{name}.py").stat().st_mtime > compiled.stat().st_mtime:
                return name
        return None

    def choose(self, what: str, stacklevel: int = 3) -> str | None:
        """Has the sources loaded instead of the compiled modules when forced (``GAIGEL_PURE``),
        stale or without their library, warning of *what*; returns why, or None for the builds.
        Called before any of the modules is imported."""
        if any(isinstance(f, _SourceFinder) and f.modules is self for f in sys.meta_path):
            return None
        if os.environ.get("GAIGEL_PURE", "") not in ("", "0"):
            why = "GAIGEL_PURE"
        else:
            stale = self.stale_module()
            if stale is not None:
                why, said = "stale build", f"{self.directory.name}/{stale}.py is newer than its compiled module"
            elif self.library_missing():
                why, said = "no library", f"the compiled {self.directory.name} modules have no {self.library}"
            else:
                return None
            warnings.warn(
                f"gaigel: {said}: the pure-Python {what} runs until the next `pip install -e .`",
                RuntimeWarning,
                stacklevel=stacklevel,
            )
        sys.meta_path.insert(0, _SourceFinder(self))
        return why


class _SourceFinder:
    """Finds the Python sources of a :class:`CompiledModules`, ahead of the extension modules."""

    def __init__(self, modules: CompiledModules) -> None:
        self.modules = modules

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != self.modules.package or name not in self.modules.modules:
            return None
        return importlib.util.spec_from_file_location(fullname, self.modules.directory / f"{name}.py")


ENGINE = CompiledModules(__package__ or "gaigel", PACKAGE_DIR, COMPILED_MODULES, "gaigel_engine__mypyc")


def choose() -> None:
    """Loads the engine's sources instead of its compiled modules when forced or stale (module
    docstring). Called by ``gaigel/__init__.py`` before it imports any engine module."""
    global _why_pure
    why = ENGINE.choose("engine", stacklevel=4)
    if why is not None:
        _why_pure = why


def engine_build() -> str:
    """``"compiled, mypyc"`` when :mod:`gaigel.state` is an extension module, else
    ``"pure Python"`` (with the reason when compiled modules were passed over)."""
    import gaigel.state

    file = gaigel.state.__file__ or ""
    if file.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
        return "compiled, mypyc"
    return f"pure Python ({_why_pure})" if _why_pure else "pure Python"
