"""The import contract (tests/tools/layers.py) holds, and the checker catches what it must."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.tools import layers

ROOT = Path(__file__).resolve().parents[1]


def test_the_house_keeps_its_layers() -> None:
    problems, modules, imports = layers.check()
    assert modules > 50 and imports > 500  # it read the whole house
    assert [str(p) for p in problems] == []


def test_the_command_prints_one_line_per_problem_and_fails(tmp_path: Path) -> None:
    engine = tmp_path / "gaigel"
    server = tmp_path / "gaigel_server"
    engine.mkdir()
    server.mkdir()
    (engine / "__init__.py").write_text("")
    (engine / "cli.py").write_text("import grpc\nfrom gaigel_server import table\n")
    (server / "__init__.py").write_text("")
    (server / "table.py").write_text("from gaigel_server import lobby\n")
    (server / "lobby.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import gaigel_server.x\nfrom gaigel_server import table\n"
    )
    sources = {"gaigel": engine, "gaigel_server": server}
    old = layers.ROOT
    layers.ROOT = tmp_path
    try:
        problems, _, _ = layers.check(sources, known=())
    finally:
        layers.ROOT = old
    texts = sorted(p.text for p in problems)
    assert texts == [
        "gaigel imports gaigel_server.table: gaigel may import no other first-party package",
        "gaigel imports grpc: the engine uses the standard library only",
        "import circle among gaigel_server.lobby, gaigel_server.table (here gaigel_server.lobby imports gaigel_server.table)",
    ]


def test_module_entry_point_exits_zero_on_the_house() -> None:
    r = subprocess.run([sys.executable, "-m", "tests.tools.layers"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("layers ok:")


def _check_tmp(tmp_path: Path, files: dict[str, str], known: tuple[tuple[str, ...], ...] = ()) -> list[str]:
    """layers.check on a synthetic gaigel_server package in *tmp_path*: the problems' texts."""
    server = tmp_path / "gaigel_server"
    server.mkdir()
    for name, text in {"__init__.py": "", **files}.items():
        (server / name).write_text(text)
    old = layers.ROOT
    layers.ROOT = tmp_path
    try:
        problems, _, _ = layers.check({"gaigel_server": server}, known=known)
    finally:
        layers.ROOT = old
    return sorted(p.text for p in problems)


TYPE_CIRCLE = {
    # a needs b's types, b imports a: one module in two files, though no import loop runs
    "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gaigel_server import b\n    import gaigel_arena\n",
    "b.py": "from gaigel_server import a\n",
}


def test_a_type_level_circle_fails_and_a_type_level_import_breaks_no_layer(tmp_path: Path) -> None:
    assert _check_tmp(tmp_path, TYPE_CIRCLE) == [
        "type-level import circle: gaigel_server.a -> gaigel_server.b (TYPE_CHECKING) -> gaigel_server.a"
    ]  # and nothing about gaigel_arena: under TYPE_CHECKING it is no dependency of the server


def test_known_type_circles_pass_until_they_are_gone(tmp_path: Path) -> None:
    known = (("gaigel_server.b", "gaigel_server.a"), ("gaigel_server.b", "gaigel_server.c"))
    assert _check_tmp(tmp_path, TYPE_CIRCLE, known) == [
        "KNOWN_TYPE_CIRCLES: gaigel_server.b -> gaigel_server.c is no circle any more"
    ]


def test_the_house_tolerates_no_type_level_circle() -> None:
    """Server, harness and arena have no import circle, type-level imports counted (issue 25)."""
    assert layers.KNOWN_TYPE_CIRCLES == ()
    assert {"gaigel_server", "gaigel_arena"} <= layers.TYPE_CIRCLE_PACKAGES
