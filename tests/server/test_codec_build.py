"""The server's codec compiled with mypyc (gaigel_server.CODEC, setup.py): the build is loaded
where the engine's is, it writes exactly the bytes of its Python source, and a stale build or
GAIGEL_PURE loads the source, as for the engine (gaigel/_build.py)."""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

import gaigel_server
import gaigel_server.wire
from tests.test_engine_build import COMPILED, setup_constant

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = tuple(importlib.machinery.EXTENSION_SUFFIXES)

# Every observation, DecisionRequest and event's bytes of seeded matches, hashed; and which file
# the codec was loaded from.
DIGEST = """
import hashlib, random, dataclasses
from gaigel.match import DecisionRequest, HandStarted, MatchDriver, MatchOver, MatchSpec
from gaigel.ruleset import preset
from gaigel_server import codec, wire

h = hashlib.sha256()
for players, name in ((2, "default"), (3, "parlett"), (4, "default"), (6, "default")):
    rules = preset(name, players)
    spec = MatchSpec(ruleset=rules, seed=players * 7, hands=4, bots=tuple(f"b{s}" for s in range(players)))
    driver = MatchDriver(spec, events=True)
    rng = random.Random(players)
    tricks, events = wire.TrickCache(), None
    while True:
        step = driver.next()
        if isinstance(step, DecisionRequest):
            obs = wire.observation(step.observation, step.hand_index, tricks)
            h.update(wire.decision_request(f"d{driver.step}", wire.legal_actions(step.legal_actions), obs, 1.5, 0.25))
            driver.decide(rng.choice(list(step.legal_actions)), 0.0)
        elif isinstance(step, HandStarted):
            tricks, events = wire.TrickCache(), codec.HandEvents(rules, step.hand_index, step.state.talon_size)
        elif isinstance(step, MatchOver):
            break
        if events is not None:
            for ev in driver.take_events():
                for routed in events.feed(ev):
                    h.update(repr(routed).encode())
print(wire.__file__)
print(h.hexdigest())
"""


def _digest(env: dict[str, str]) -> tuple[str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", DIGEST],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
        env={**os.environ, **env},
    )
    assert proc.returncode == 0, proc.stderr
    file, digest = proc.stdout.split()
    return file, digest


def test_setup_compiles_the_codec_modules_the_server_names() -> None:
    listed = setup_constant("CODEC_MODULES")
    assert [Path(p).stem for p in listed] == list(gaigel_server.CODEC.modules)
    assert all(Path(p).parent == Path("server/gaigel_server") for p in listed)


@pytest.mark.skipif(not COMPILED, reason="needs the compiled engine (pip install -e . with a C compiler)")
def test_the_compiled_codec_writes_the_bytes_of_its_source() -> None:
    """Loaded where the engine is compiled; the same bytes as the Python source (GAIGEL_PURE)."""
    assert (gaigel_server.wire.__file__ or "").endswith(EXTENSION)
    compiled_file, compiled = _digest({"GAIGEL_PURE": ""})
    pure_file, pure = _digest({"GAIGEL_PURE": "1"})
    assert compiled_file.endswith(EXTENSION) and pure_file.endswith("wire.py")
    assert compiled == pure


@pytest.mark.skipif(not COMPILED, reason="needs the compiled engine (pip install -e . with a C compiler)")
def test_a_stale_codec_build_is_passed_over(tmp_path: Path) -> None:
    """In a source checkout, a wire.py newer than its build runs as Python, with a warning."""
    shutil.copytree(ROOT / "server", tmp_path / "server", ignore=shutil.ignore_patterns("__pycache__"))
    for lib in ROOT.glob("gaigel_codec__mypyc.*"):
        shutil.copy2(lib, tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    code = "import gaigel_server.wire as w; print(w.__file__)"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'server'}{os.pathsep}{tmp_path}", "GAIGEL_PURE": ""}

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False, env=env, cwd=tmp_path
        )

    fresh = run()
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout.strip() == str(
        tmp_path / "server" / "gaigel_server" / Path(gaigel_server.wire.__file__ or "").name
    )
    later = time.time() + 5
    os.utime(tmp_path / "server" / "gaigel_server" / "wire.py", (later, later))
    stale = run()
    assert stale.returncode == 0, stale.stderr
    assert stale.stdout.strip() == str(tmp_path / "server" / "gaigel_server" / "wire.py")
    assert "gaigel_server/wire.py is newer than its compiled module: the pure-Python codec runs" in stale.stderr


@pytest.mark.skipif(not COMPILED, reason="needs the compiled engine (pip install -e . with a C compiler)")
def test_a_codec_build_without_its_library_runs_the_source(tmp_path: Path) -> None:
    """wire's extension module without gaigel_codec__mypyc (no editable install's module map:
    ``python -S``, the packages on PYTHONPATH) runs wire.py, with a warning, not an ImportError."""
    for package in ("gaigel", "gaigel_api"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    for lib in ROOT.glob("gaigel_engine__mypyc.*"):
        shutil.copy2(lib, tmp_path)
    shutil.copytree(ROOT / "server", tmp_path / "server", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "pyproject.toml").write_text("")  # a source checkout
    path = os.pathsep.join([str(tmp_path / "server"), str(tmp_path), sysconfig.get_paths()["purelib"]])
    proc = subprocess.run(
        [sys.executable, "-S", "-c", "import gaigel_server.wire as w; print(w.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": path, "GAIGEL_PURE": ""},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(tmp_path / "server" / "gaigel_server" / "wire.py")
    assert "the compiled gaigel_server modules have no gaigel_codec__mypyc" in proc.stderr
