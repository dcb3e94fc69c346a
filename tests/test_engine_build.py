"""Which engine build runs (gaigel/_build.py): compiled with mypyc or pure Python, and why."""

from __future__ import annotations

import copy
import hashlib
import importlib.machinery
import json
import os
import pickle
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gaigel
import gaigel.state
from gaigel import _build
from gaigel.deal import deal
from gaigel.ruleset import Ruleset, preset
from gaigel.state import GaigelState

ROOT = Path(__file__).resolve().parent.parent
COMPILED = gaigel.state.__file__ is not None and gaigel.state.__file__.endswith(
    tuple(importlib.machinery.EXTENSION_SUFFIXES)
)


def python(
    code: str, env: dict[str, str] | None = None, cwd: Path = ROOT, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
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


def setup_constant(name: str) -> Any:
    """The literal value setup.py assigns to *name* (read, not run: running it builds)."""
    import ast

    tree = ast.parse((ROOT / "setup.py").read_text())
    return next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == name for t in node.targets)
    )


def test_setup_compiles_the_modules_build_knows() -> None:
    """setup.py and gaigel/_build.py name the same compiled modules."""
    listed = setup_constant("COMPILED_MODULES")
    assert [Path(p).stem for p in listed] == list(_build.COMPILED_MODULES)


def test_compiled_modules_spell_out_list_item_updates() -> None:
    """No ``x[i] op= v`` in the compiled modules: mypyc makes it a generic call (gaigel/state.py's docstring)."""
    import ast

    found, spelled = [], 0
    for name in _build.COMPILED_MODULES:
        path = ROOT / "gaigel" / f"{name}.py"
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript):
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(node)}")
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp):
                spelled += ast.unparse(node.value.left) == ast.unparse(node.targets[0])
    assert found == []
    assert spelled >= 10  # the scan reads the engine's code: state.py spells out 13 of them


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


@given(
    seed=st.integers(0, 2**64 - 1),
    players=st.sampled_from([2, 3, 4, 6]),
    preset_name=st.sampled_from(["default", "parlett"]),
)
@settings(max_examples=40, deadline=None)
def test_engine_values_survive_pickle_and_deepcopy(seed: int, players: int, preset_name: str) -> None:
    """Rulesets, deals, observations and outcomes cross process boundaries (the arena's
    worker processes, Ray tasks) equal to themselves, compiled or pure."""
    rules = preset(preset_name, players)
    dealt = deal(seed, 0, players)
    state = GaigelState(rules, dealt, 0)
    rnd = random.Random(seed)
    while not state.is_terminal():
        state.apply(rnd.choice(state.legal_actions()))
    values = [rules, dealt, state.observation(0), state.outcome()]
    for value in values:
        assert pickle.loads(pickle.dumps(value)) == value
        assert copy.deepcopy(value) == value


@given(
    seed=st.integers(0, 2**64 - 1),
    players=st.sampled_from([2, 3, 4, 6]),
    preset_name=st.sampled_from(["default", "parlett"]),
    cut=st.floats(0.0, 1.0),
)
@settings(max_examples=40, deadline=None)
def test_a_state_mid_hand_survives_pickle_and_deepcopy(seed: int, players: int, preset_name: str, cut: float) -> None:
    """A hand copied mid-way by pickle or deepcopy plays on exactly like the original:
    same legal actions, hashes and outcome, and the copies share no mutable part."""
    state = GaigelState(preset(preset_name, players), deal(seed, 0, players), 0, record_events=True)
    rnd = random.Random(seed)
    while not state.is_terminal() and rnd.random() > cut / 20:
        state.apply(rnd.choice(state.legal_actions()))
    copies = [pickle.loads(pickle.dumps(state)), copy.deepcopy(state)]
    while not state.is_terminal():
        action = rnd.choice(state.legal_actions())
        for other in copies:
            assert other.legal_actions() == state.legal_actions()
            other.apply(action)
        state.apply(action)
    for other in copies:
        assert other.state_hash() == state.state_hash()
        assert other.outcome() == state.outcome()
        assert other.events == state.events


# Every RULES.md §14 option the engine reads, each away from its default once, the
# combinations RULES.md §17 decides, and both presets (match.* and signals do not reach it).
OPTION_SETS: list[dict[str, object]] = [
    {"preset": "default"},
    {"preset": "parlett"},
    {"deal_packets": "5-T"},
    {"opening.special_first_trick": False},
    {"opening.enabled": ["ANDERE_ALTE"]},
    {"opening.enabled": ["GE_ELFEN"]},
    {"opening.enabled": ["HOEHER_HAT"]},
    {"opening.enabled": ["AUF_DISSLE"]},
    {"opening.enabled": ["ANDERE_ALTE"], "opening.all_trump_fallback": "REDEAL"},
    {"opening.trump_lead_forbidden": False},
    {"opening.ge_elfen_trump_ace": True},
    {"opening.followers_no_trump": True},
    {"opening.ace_compulsory": True},
    {"opening.all_trump_fallback": "REDEAL"},
    {"dissle.min_sevens": 0},
    {"dissle.min_sevens": 2},
    {"dissle.first_trick": "normal"},
    {"dissle.min_sevens": 2, "dissle.fail_on_talon_exhausted": False},
    {"five_sevens_dealt_wins": False},
    {"five_sevens_anytime": True},
    {"five_sevens_anytime": True, "five_sevens_dealt_wins": False},
    {"meld.timing": "lead_only"},
    {"meld.timing": "trick_winner"},
    {"meld.timing": "trick_winner", "meld.partner_privilege": True},
    {"meld.timing": "any_time"},
    {"meld.requires_side_trick": False},
    {"meld.after_talon": False},
    {"meld.single_plain": 30, "meld.single_trump": 50, "meld.double_plain": 60, "meld.double_trump": 100},
    {"meld.once_per_suit_per_player": False},
    {"rob.enabled": False},
    {"rob.timing": "lead_only"},
    {"rob.timing": "any_time"},
    {"rob.requires_side_trick": False},
    {"rob.reservation": True},
    {"rob.second_seven_points": 10},
    {"rob.second_seven_points": 10, "rob.requires_side_trick": False},
    {"rob.second_seven_points": 10, "rob.timing": "lead_only"},
    {"strict.mode": "parlett_literal"},
    {"strict.mode": "follow_only"},
    {"strict.must_undertrump": False},
    {"target": 61},
    {"last_trick_bonus": 10},
    {"aus_mode": "explicit"},
    {"expose_scores": False},
    {"gigackel_criterion": "no_points"},
    {"tie_break": "last_trick"},
    {"three_player_losers": "all_non_winners"},
    {"six_player_teams": "3x2"},
]


RARE_DEALS = [(4844, 0), (2108, 0), (34, 0)]
"""2-player deals for rare events: the forehand dealt five Sevens, a follower dealt five Sevens,
a turned-up trump Seven."""


def option_set_digests(hands: int = 6) -> dict[str, str]:
    """Per option set, a digest of the legal actions, state hashes and acting seat's observations
    of random hands: *hands* at each of 2, 3, 4 and 6 players, and the rare deals."""
    out = {}
    for options in OPTION_SETS:
        h = hashlib.blake2b(digest_size=16)
        for players in (2, 3, 4, 6):
            rules = Ruleset.from_dict(options, base=preset("default", players))
            games = [(k, k) for k in range(hands)] + (RARE_DEALS if players == 2 else [])
            for seed, k in games:
                state = GaigelState(rules, deal(seed, k, players, rules.deal_packets), forehand=k % players)
                rnd = random.Random(seed)
                h.update(state.state_hash().encode())
                while not state.is_terminal():
                    legal = state.legal_actions()
                    obs = json.dumps(state.observation(state.to_act).to_dict(), sort_keys=True)
                    action = rnd.choice(legal)
                    state.apply(action)
                    h.update(f"{legal}{action}{state.state_hash()}{obs}".encode())
        out[json.dumps(options, sort_keys=True)] = h.hexdigest()
    return out


@pytest.mark.skipif(not COMPILED, reason="needs the compiled engine (pip install -e . with a C compiler)")
def test_compiled_and_pure_engines_agree_on_every_option_set() -> None:
    """The pure-Python sources play every option set exactly like the compiled build: legal actions, hashes, observations."""
    code = (
        "import json, sys; sys.path.insert(0, 'tests'); import gaigel, test_engine_build as t; "
        "print(gaigel.engine_build()); print(json.dumps(t.option_set_digests()))"
    )
    pure = python(code, env={"GAIGEL_PURE": "1"}, timeout=240)
    assert pure.returncode == 0, pure.stderr
    build, digests = pure.stdout.splitlines()[-2:]
    assert build == "pure Python (GAIGEL_PURE)"
    compiled = option_set_digests()
    assert len(compiled) == len(OPTION_SETS)
    assert json.loads(digests) == compiled
