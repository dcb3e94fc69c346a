"""The saved policy as a bot over gRPC: check-bot passes it, and it plays as the policy does in-process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gaigel.match import hand_setup, spec_from_record
from gaigel.state import GaigelState
from gaigel_rl.policy import LinearPolicy
from gaigel_rl.tensor import encode_state, tensor_size

ROOT = Path(__file__).resolve().parents[2]
GAIGEL = str(Path(sys.executable).with_name("gaigel"))
POLICY = ROOT / "examples" / "rl" / "policy-2p.npz"
BOT = [sys.executable, "-m", "gaigel_rl.bot", str(POLICY)]
SLOW_CLOCK = ["--decision-time", "10", "--bank", "60", "--time-limit", "280"]
"""Generous clocks: on a loaded machine a timeout fallback would play a move that is not the policy's."""


def test_the_trained_policy_is_committed_and_loads() -> None:
    policy = LinearPolicy.load(POLICY)
    assert (policy.players, policy.sides) == (2, 2)
    assert policy.weights.shape == (165, tensor_size(2, 2))
    assert np.abs(policy.weights).sum() > 0  # trained, not the uniform start


def test_check_bot_passes_the_policy_bot() -> None:
    r = subprocess.run(
        [GAIGEL, "check-bot", "--json", "--", *BOT], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    data = json.loads(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 0 and data["ok"], data
    assert all(c["ok"] for c in data["checks"]), data["checks"]


def test_over_grpc_it_plays_what_the_policy_chooses_in_process(tmp_path: Path) -> None:
    record = tmp_path / "match.json"
    r = subprocess.run(
        [
            GAIGEL,
            "try",
            "--players",
            "2",
            "--hands",
            "2",
            "--house",
            "random",
            "--seed",
            "1",  # a fixed deal: with a random one two short hands gave the policy only 16 decisions
            *SLOW_CLOCK,
            "--record",
            str(record),
            "--",
            *BOT,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr  # (no fault: a timeout fallback would not be the policy's move)
    data = json.loads(record.read_text())
    spec = spec_from_record(data)
    policy = LinearPolicy.load(POLICY)
    mine = next(i for i, s in enumerate(data["seats"]) if s["bot"] != "random")
    checked = 0
    for k, hand in enumerate(data["hands"]):
        d, _, forehand = hand_setup(spec, k)
        state = GaigelState(spec.ruleset, d, forehand)
        for a in hand["actions"]:
            seat, action = a["seat"], a["action"]
            if seat == mine:
                assert action == policy.best(encode_state(state, seat), state.legal_actions()), (k, a)
                checked += 1
            state.apply(action)
    assert checked >= 20


def test_a_missing_policy_file_is_one_clear_line_and_exit_2(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "gaigel_rl.bot", str(tmp_path / "none.npz")], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "cannot read a policy" in r.stderr
    bad = tmp_path / "bad.npz"
    np.savez(bad, format=np.array("something-else"))
    r = subprocess.run([sys.executable, "-m", "gaigel_rl.bot", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not a gaigel-linear-policy-v1 file" in r.stderr
    _ = pytest


def test_the_arena_sandbox_lets_the_policy_bot_import_gaigel_rl() -> None:
    from gaigel_arena.bwrap import project_paths

    assert ROOT / "gaigel_rl" in [p.resolve() for p in project_paths()]
