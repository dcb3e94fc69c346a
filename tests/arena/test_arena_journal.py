"""Tests for the arena journal (SQLite, WAL): round trip, crash states and config checks."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gaigel_arena.config import ArenaConfig, parse_config
from gaigel_arena.journal import Journal, JournalError, config_diff, redact_url, resolve_db
from gaigel_arena.schedule import ScheduledMatch, build_schedule

BOTS = [{"name": "r", "house": "random"}, {"name": "f", "house": "first"}, {"name": "g", "house": "first"}]


def _config(**arena: object) -> ArenaConfig:
    return parse_config({"arena": {"seed": 3, "sets_per_pairing": 2, **arena}, "bots": BOTS})


def _open(path: Path, config: ArenaConfig) -> tuple[Journal, list[ScheduledMatch]]:
    schedule = build_schedule(config.bot_names, config.ruleset, config.sets_per_pairing, config.seed)
    return Journal.create_or_open(path, config.canonical_json(), config.config_hash(), schedule), schedule


RESULT = {"sides": [{"side": 0, "dashes": 2}, {"side": 1, "dashes": 4}], "winners": [0], "termination": "completed"}


class TestJournal:
    """Statuses move pending -> started -> done and survive reopening."""

    def test_round_trip(self, tmp_path: Path) -> None:
        """Issued and fixed matches are read back with their results after reopening."""
        db = tmp_path / "arena.sqlite"
        journal, schedule = _open(db, _config())
        assert journal.counts() == {"pending": 12, "started": 0, "done": 0, "total": 12}
        assert journal.pending() == [m.match_id for m in schedule]
        first, second = schedule[0].match_id, schedule[1].match_id
        journal.issue([first, second])
        journal.fix(first, RESULT, "records/x.json", 0.25)
        journal.close()
        assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "wal"

        journal, _ = _open(db, _config())
        rows = {r.match_id: r for r in journal.rows()}
        assert rows[first].status == "done"
        assert rows[first].result == RESULT
        assert rows[first].record_path == "records/x.json"
        assert rows[first].sides == schedule[0].sides
        assert rows[second].status == "started"
        assert journal.rollback() == 1
        assert rows[second].match_id in journal.pending()
        assert first not in journal.pending()
        assert journal.config() == _config().canonical()
        journal.close()

    def test_done_is_never_overwritten(self, tmp_path: Path) -> None:
        """Fixing a match that is not started, or issuing a done one, is refused."""
        journal, schedule = _open(tmp_path / "j.sqlite", _config())
        mid = schedule[0].match_id
        with pytest.raises(JournalError, match="not started"):
            journal.fix(mid, RESULT, None, 0.1)
        journal.issue([mid])
        journal.fix(mid, RESULT, None, 0.1)
        with pytest.raises(JournalError, match="not pending"):
            journal.issue([mid])
        with pytest.raises(JournalError, match="not started"):
            journal.fix(mid, {**RESULT, "winners": [1]}, None, 0.1)
        assert journal.rows("done")[0].result == RESULT
        journal.close()

    def test_changed_config_is_refused(self, tmp_path: Path) -> None:
        """Reopening with another config names the differing keys; workers do not count."""
        db = tmp_path / "j.sqlite"
        _open(db, _config())[0].close()
        _open(db, _config(workers=7))[0].close()
        with pytest.raises(JournalError, match=r"changed: arena\.seed, arena\.sets_per_pairing"):
            _open(db, _config(seed=4, sets_per_pairing=3))

    def test_second_runner_is_locked_out(self, tmp_path: Path) -> None:
        """Only one run may hold a journal."""
        db = tmp_path / "j.sqlite"
        journal, _ = _open(db, _config())
        with pytest.raises(JournalError, match="another arena run"):
            _open(db, _config())
        journal.close()
        _open(db, _config())[0].close()

    def test_foreign_files(self, tmp_path: Path) -> None:
        """A file that is not a journal and an unknown URL scheme give clear errors; passwords are redacted."""
        bogus = tmp_path / "x.sqlite"
        bogus.write_text("hello, this is not a database, really not at all" * 20)
        with pytest.raises(JournalError, match="not an arena journal"):
            _open(bogus, _config())
        with pytest.raises(JournalError, match="no arena journal"):
            Journal.open_existing(tmp_path / "none.sqlite")
        with pytest.raises(JournalError, match=r"mysql://\.\.\. is not supported"):
            resolve_db(tmp_path, "mysql://localhost/arena")
        assert resolve_db(tmp_path, "postgresql://u:pw@localhost/arena") == "postgresql://u:pw@localhost/arena"
        assert resolve_db(tmp_path, None) == tmp_path / "arena.sqlite"
        assert redact_url("postgresql://u:pw@localhost:5/arena") == "postgresql://u:***@localhost:5/arena"
        assert redact_url("postgresql://u@localhost/arena") == "postgresql://u@localhost/arena"
        assert redact_url(tmp_path / "a:b@c") == str(tmp_path / "a:b@c")

    def test_config_diff(self) -> None:
        """Differences are reported as dotted keys."""
        assert config_diff({"a": {"b": 1, "c": [1, 2]}}, {"a": {"b": 2, "c": [1, 3], "d": 0}}) == [
            "a.b",
            "a.c[1]",
            "a.d",
        ]
