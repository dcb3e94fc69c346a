"""Golden playthroughs (tests/golden/*.txt): the engine must replay each file line for line.

A failure means the engine now plays differently. If that is intended, rewrite the files
with ``python tests/golden/regenerate.py`` and review ``git diff tests/golden``.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import types
from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def _load_playthrough() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("gaigel_golden_playthrough", GOLDEN_DIR / "playthrough.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses need the module registered
    spec.loader.exec_module(module)
    return module


pt = _load_playthrough()
GOLDEN_FILES = sorted(p for p in GOLDEN_DIR.glob("*.txt"))
MAX_TOTAL_BYTES = 2 * 1024 * 1024


def test_golden_files_exist() -> None:
    """The golden set is present and stays modest in size."""
    assert GOLDEN_FILES, f"no golden playthroughs in {GOLDEN_DIR}; run python tests/golden/regenerate.py"
    total = sum(p.stat().st_size for p in GOLDEN_FILES)
    assert total < MAX_TOTAL_BYTES, f"golden playthroughs take {total} bytes (limit {MAX_TOTAL_BYTES})"


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=[p.stem for p in GOLDEN_FILES])
def test_golden_playthrough(path: Path) -> None:
    """Replaying the file's seed with the fixed policy reproduces the file exactly."""
    text = path.read_text(encoding="utf-8")
    spec = pt.parse_header(text)
    diff = pt.first_difference(text.splitlines(), pt.render(spec).splitlines())
    if diff is not None:
        line, expected, got = diff
        pytest.fail(
            f"golden file {path.name} differs at line {line}: expected {expected!r}, got {got!r} "
            "(if the change is intended: python tests/golden/regenerate.py)",
            pytrace=False,
        )


def test_golden_coverage() -> None:
    """Together the files cover 2, 3, 4 and 6 players, the parlett preset, a meld, a rob and the strict phase."""
    configs = set()
    applied: list[str] = []
    strict = False
    for path in GOLDEN_FILES:
        text = path.read_text(encoding="utf-8")
        spec = pt.parse_header(text)
        configs.add((spec.preset, spec.players))
        applied += re.findall(r"^apply: \d+ (.*)$", text, flags=re.M)
        strict = strict or '"strict":true' in text
    assert {("default", 2), ("default", 3), ("default", 4), ("default", 6), ("parlett", 4)} <= configs
    assert any("+marriage" in a or "+double" in a or a.startswith("meld ") for a in applied), (
        "no meld in the golden set"
    )
    assert "rob" in applied, "no rob in the golden set"
    assert strict, "no strict-phase decision in the golden set"


def test_legal_line_parses_back() -> None:
    """The documented split rule recovers every id:label pair of a legal: line."""
    from gaigel.actions import NUM_ACTIONS, action_label

    line = " ".join(f"{a}:{action_label(a)}" for a in range(NUM_ACTIONS))
    pairs = re.findall(r"(\d+):(.*?)(?= \d+:|$)", line)
    assert [(int(a), label) for a, label in pairs] == [(a, action_label(a)) for a in range(NUM_ACTIONS)]
