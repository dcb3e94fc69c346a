"""Debug bundles: a bot's bundle holds the record, every decision and its own output only."""

from __future__ import annotations

import io
import json
import os
import sys
import zipfile
from pathlib import Path

import pytest

from gaigel_arena.bundle import bundle_bytes, write_bundle
from gaigel_arena.bwrap import bwrap_problem
from gaigel_arena.config import parse_config
from gaigel_arena.runner import run_arena

SDK_BOT = Path(__file__).resolve().parents[2] / "clients" / "python" / "examples" / "random_bot.py"


@pytest.mark.skipif(bool(bwrap_problem()) and not os.environ.get("CI"), reason="needs bubblewrap")
def test_a_bundle_has_the_record_the_decisions_and_only_its_own_bots_output(tmp_path: Path) -> None:
    data = {
        "arena": {"seed": 2, "sets_per_pairing": 1},
        "game": {"players": 2, "hands": 1},
        "bots": [
            {"name": "alpha", "command": [sys.executable, str(SDK_BOT)]},
            {"name": "beta", "command": [sys.executable, str(SDK_BOT)]},
        ],
    }
    out = tmp_path / "out"
    run_arena(parse_config(data), out, workers=1, bootstrap_samples=0)
    record = json.loads(next((out / "records").glob("*.json")).read_text())
    assert set(record["bot_logs"]) == {"0", "1"}
    for bot, other in (("alpha", "beta"), ("beta", "alpha")):
        z = zipfile.ZipFile(io.BytesIO(bundle_bytes(record, bot, out)))
        names = z.namelist()
        assert {"record.json", "decisions.tsv", "faults.json"} <= set(names)
        logs = [n for n in names if n.endswith(".log")]
        assert logs and all(bot in n for n in logs) and not any(other in n for n in logs), names
        said = b"".join(z.read(n) for n in logs).decode()
        assert f"as '{bot}." in said and f"as '{other}." not in said  # the SDK's "joined ... as NAME"
        rows = z.read("decisions.tsv").decode().splitlines()
        assert len(rows) - 1 == sum(len(h["actions"]) for h in record["hands"])
        assert json.loads(z.read("record.json")) == record
    first = write_bundle(record, "alpha", out, tmp_path / "b1").read_bytes()
    assert first == write_bundle(record, "alpha", out, tmp_path / "b2").read_bytes()  # same bytes every time
