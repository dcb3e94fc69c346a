"""Tests of the gRPC executor: command bots through a local match server.

Kept in a file of its own that runs after the other arena tests, so that no worker
process is forked from a test process that has already started gRPC threads.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gaigel_arena.config import parse_config
from gaigel_arena.journal import Journal
from gaigel_arena.runner import run_arena

pytest.importorskip("gaigel_server.server")


def _results(db: Path) -> dict[str, object]:
    with Journal.open_existing(db) as journal:
        return {r.match_id: (r.status, r.result) for r in journal.rows()}


GRPC_BOTS = [
    {"name": "cmd", "command": [sys.executable, "-m", "gaigel.cli", "bot", "first"]},
    {"name": "house", "house": "first"},
]


class TestGrpcExecutor:
    """Command bots play through a local match server, with the results of in-process play."""

    def test_command_bot_matches_in_process_results(self, tmp_path: Path) -> None:
        """A command bot (the SDK's `gaigel bot first`) against a house bot gives the in-process results."""
        data = {"arena": {"seed": 4, "sets_per_pairing": 2}, "game": {"players": 2, "hands": 2}, "bots": GRPC_BOTS}
        summary = run_arena(parse_config(data), tmp_path / "grpc", workers=1, bootstrap_samples=0)
        assert summary.done == summary.scheduled == 4
        local = {**data, "bots": [{"name": "cmd", "house": "first"}, {"name": "house", "house": "first"}]}
        inline = run_arena(parse_config(local), tmp_path / "inline", executor="inline", bootstrap_samples=0)
        assert _results(summary.db_path) == _results(inline.db_path)
        for record in (tmp_path / "grpc" / "records").glob("*.json"):
            assert json.loads(record.read_text())["match_id"] == record.stem

    def test_crashing_command_bot_stops_the_arena(self, tmp_path: Path) -> None:
        """A bot command that keeps exiting ends the run with an error naming the bot."""
        bots = [{"name": "broken", "command": [sys.executable, "-c", "raise SystemExit(3)"]}, GRPC_BOTS[1]]
        data = {"arena": {"sets_per_pairing": 1}, "game": {"players": 2, "hands": 1}, "bots": bots}
        with pytest.raises(Exception, match="'broken' exited"):
            run_arena(parse_config(data), tmp_path / "o", workers=1, bootstrap_samples=0)
        statuses = {status for status, _ in _results(tmp_path / "o" / "arena.sqlite").values()}
        assert "done" not in statuses  # nothing was counted
