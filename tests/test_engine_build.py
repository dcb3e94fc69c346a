"""Which engine build runs (gaigel/_build.py): compiled with mypyc or pure Python, and why."""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gaigel
import gaigel.state
from gaigel import _build

ROOT = Path(__file__).resolve().parent.parent
COMPILED = gaigel.state.__file__ is not None and gaigel.state.__file__.endswith(
    tuple(importlib.machinery.EXTENSION_SUFFIXES)
)


def python(code: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def test_engine_build_says_what_is_loaded() -> None:
    build = gaigel.engine_build()
    deal_module = sys.modules["gaigel.deal"]
    if COMPILED:
        assert build == "compiled, mypyc"
        assert deal_module._NATIVE_INTS, "the compiled deal shuffles on i64"
    else:
        assert not deal_module._NATIVE_INTS
        assert build.startswith("pure Python")


def test_setup_compiles_the_modules_build_knows() -> None:
    """setup.py and gaigel/_build.py name the same compiled modules."""
    import ast

    tree = ast.parse((ROOT / "setup.py").read_text())
    listed = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "COMPILED_MODULES" for t in node.targets)
    )
    assert [Path(p).stem for p in listed] == list(_build.COMPILED_MODULES)


def test_version_names_the_engine_build() -> None:
    """`gaigel --version` prints the package version and the engine build of this interpreter."""
    proc = subprocess.run(
        [sys.executable, "-m", "gaigel.cli", "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"gaigel-arena {gaigel.__version__} (engine: {gaigel.engine_build()})"


def test_gaigel_pure_loads_the_sources() -> None:
    """GAIGEL_PURE=1 runs the Python sources even where compiled modules are installed."""
    proc = python(
        "import sys, gaigel; print(gaigel.engine_build()); "
        "print(*(sys.modules[f'gaigel.{m}'].__file__ for m in ('cards', 'deal', 'state')))",
        env={"GAIGEL_PURE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    build, files = proc.stdout.splitlines()
    assert build == "pure Python (GAIGEL_PURE)"
    assert all(f.endswith(".py") for f in files.split()), files


@pytest.mark.skipif(not COMPILED, reason="needs the compiled engine (pip install -e . with a C compiler)")
def test_a_stale_build_is_passed_over(tmp_path: Path) -> None:
    """In a source checkout, a source newer than its compiled module runs as Python, with a warning."""
    package = Path(gaigel.__file__).parent
    shutil.copytree(package, tmp_path / "gaigel", ignore=shutil.ignore_patterns("__pycache__"))
    for lib in package.parent.glob("gaigel_engine__mypyc.*"):
        shutil.copy2(lib, tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    code = "import gaigel, gaigel.state; print(gaigel.engine_build()); print(gaigel.state.__file__)"
    fresh = python(code, env={"PYTHONPATH": str(tmp_path)}, cwd=tmp_path)
    assert fresh.stdout.splitlines()[0] == "compiled, mypyc", fresh.stderr
    later = time.time() + 5
    os.utime(tmp_path / "gaigel" / "state.py", (later, later))
    stale = python(code, env={"PYTHONPATH": str(tmp_path)}, cwd=tmp_path)
    assert stale.returncode == 0, stale.stderr
    build, file = stale.stdout.splitlines()
    assert build == "pure Python (stale build)"
    assert file.endswith("state.py")
    assert "gaigel/state.py is newer than its compiled module" in stale.stderr
