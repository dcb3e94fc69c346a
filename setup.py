"""Builds the engine's hot modules with mypyc where a C compiler works; pure Python otherwise.

All metadata is in pyproject.toml; this file only adds the compiled extensions.

* ``pip install .`` and ``pip install -e .`` compile :data:`COMPILED_MODULES` (and the
  server's codec, :data:`CODEC_MODULES`) with mypyc
  (an editable install puts the extension modules beside the sources, git-ignored;
  ``gaigel`` loads the sources instead when one of them is newer than its build, see
  ``gaigel/_build.py``).
* No working C compiler, or a failed mypyc or C build: a warning, and the pure-Python
  package is installed (the same behaviour, about half the speed).
* ``GAIGEL_PURE=1`` at build time skips compiling altogether.

``gaigel --version`` says which engine an installation has.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

COMPILED_MODULES = [
    "gaigel/cards.py",
    "gaigel/deal.py",
    "gaigel/state.py",
    "gaigel/actions.py",
    "gaigel/phase.py",
    "gaigel/ruleset.py",
    "gaigel/observation.py",
]
"""The hot modules of the rules engine (self-play, search, the server's per-decision work);
gaigel/_build.py lists the same. gaigel/events.py is left out: compiled with the others it
crashes the import of gaigel.state (mypy 2.4)."""
GROUP = "gaigel_engine"
"""mypyc's group name: the shared library is the top-level module ``gaigel_engine__mypyc``."""
CODEC_MODULES = ["server/gaigel_server/wire.py"]
"""The server's codec hot path (the protobuf bytes of every decision); gaigel_server.CODEC lists
the same. A group of its own (``gaigel_codec__mypyc``): the engine's build does not depend on it."""
CODEC_GROUP = "gaigel_codec"


def warn(message: str) -> None:
    print(f"gaigel setup: {message}", file=sys.stderr, flush=True)


class OptionalBuildExt(build_ext):
    """Builds the mypyc extensions, or none at all: a failed compile means the pure package."""

    def run(self) -> None:
        try:
            super().run()
            if self.inplace:
                # Editable install: gaigel/_build.py ignores a compiled module older than its
                # source, and unchanged modules are not rebuilt (nor copied): date them now.
                for ext in self.extensions:
                    os.utime(self.get_ext_fullpath(ext.name))
        except Exception as e:  # CompileError, LinkError, no compiler (PlatformError), ...
            warn(f"compiling the engine failed ({type(e).__name__}: {e}); installing the pure-Python engine")
            # Some modules may have been built before the failure: none or all of them.
            self.inplace = False  # (setuptools' run() left it so when the build failed)
            for ext in self.extensions:
                path = self.get_ext_fullpath(ext.name)
                if os.path.exists(path):
                    os.remove(path)
            self.extensions = []
            remove_inplace_builds()

    def get_outputs(self) -> list[str]:
        return super().get_outputs() if self.extensions else []


def remove_inplace_builds(modules: list[str] | None = None, groups: tuple[str, ...] = (GROUP, CODEC_GROUP)) -> None:
    """Removes the extension modules an earlier editable install left beside the sources
    (a pure build must not leave them to be imported): all of them, or those of *modules*."""
    here = Path(__file__).resolve().parent
    for name in COMPILED_MODULES + CODEC_MODULES if modules is None else modules:
        for path in here.glob(name.removesuffix(".py") + ".*.so"):
            path.unlink()
    for group in groups:
        for path in here.glob(f"{group}__mypyc.*.so"):
            path.unlink()


def mypyc_extensions() -> list[object]:
    """The mypyc extension modules, or [] (pure build) with a warning why. The codec is
    compiled where it can be; its failure leaves the engine compiled (and says so)."""
    if os.environ.get("GAIGEL_PURE", "") not in ("", "0"):
        warn("GAIGEL_PURE is set: installing the pure-Python engine")
        remove_inplace_builds()
        return []
    try:
        from mypyc.build import mypycify

        extensions = mypycify(COMPILED_MODULES, opt_level="3", group_name=GROUP)
    except (Exception, SystemExit) as e:  # mypyc exits on a type error
        warn(f"mypyc could not translate the engine ({type(e).__name__}: {e}); installing the pure-Python engine")
        remove_inplace_builds()
        return []
    try:
        extensions += mypycify(CODEC_MODULES, opt_level="3", group_name=CODEC_GROUP)
    except (Exception, SystemExit) as e:
        warn(f"mypyc could not translate the server's codec ({type(e).__name__}: {e}); it stays Python")
        remove_inplace_builds(CODEC_MODULES, (CODEC_GROUP,))
    for ext in extensions:
        # The deal's SplitMix64 runs on signed 64-bit integers (mypyc's i64) and relies on
        # two's-complement wrap-around of + and *: make that defined behaviour in C.
        if os.name != "nt" and "-fwrapv" not in ext.extra_compile_args:  # (one list, shared)
            ext.extra_compile_args.append("-fwrapv")
    return list(extensions)


setup(ext_modules=mypyc_extensions(), cmdclass={"build_ext": OptionalBuildExt})
