"""The journal: one SQLite database (WAL mode) that makes an arena resumable.

It holds the canonical configuration (JSON) and its hash once, and one row per scheduled
match with its status:

* ``pending``: not played yet;
* ``started``: handed to a worker (:meth:`Journal.issue`); after a crash such rows are
  made pending again (:meth:`Journal.rollback`) and replayed from their seed;
* ``done``: the result is stored (:meth:`Journal.fix`, called only after the match
  record file is on disk); a done match is never replayed.

Every change is one transaction. The runner process is the only writer (workers return
results to it), and a lock file next to the database refuses a second runner. Opening a
journal with a different configuration is refused with the differing keys named.
WAL with ``synchronous=NORMAL`` keeps every committed transaction across a killed
process (``kill -9``); only a power loss may drop the last few commits, which are then
replayed.

``--db`` takes a file path; PostgreSQL URLs are not supported yet.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from gaigel_arena.schedule import MatchId, ScheduledMatch

__all__ = ["JOURNAL_FORMAT", "Journal", "JournalError", "JournalRow", "Status", "config_diff"]

JOURNAL_FORMAT = "gaigel.arena.journal.v1"
DEFAULT_DB_NAME = "arena.sqlite"

Status = Literal["pending", "started", "done"]


class JournalError(ValueError):
    """A journal that cannot be used: foreign, from another config, locked or unreadable."""


@dataclasses.dataclass(frozen=True)
class JournalRow:
    """One scheduled match as the journal holds it."""

    index: int
    match_id: MatchId
    set_id: str
    sides: tuple[str, ...]
    seats: tuple[str, ...]
    seed: int
    status: Status
    attempts: int
    result: dict[str, Any] | None
    record_path: str | None
    duration_s: float | None


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS matches (
    idx INTEGER PRIMARY KEY,
    match_id TEXT NOT NULL UNIQUE,
    set_id TEXT NOT NULL,
    sides TEXT NOT NULL,
    seats TEXT NOT NULL,
    seed INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'started', 'done')),
    attempts INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    record_path TEXT,
    started_at REAL,
    finished_at REAL,
    duration_s REAL
);
CREATE INDEX IF NOT EXISTS matches_status ON matches (status, idx);
"""


def config_diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two JSON values (lists compared by index)."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out: list[str] = []
        for key in sorted(set(old) | set(new), key=str):
            name = f"{prefix}.{key}" if prefix else str(key)
            if key not in old or key not in new:
                out.append(name)
            else:
                out.extend(config_diff(old[key], new[key], name))
        return out
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [prefix or "(root)"]
        out = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            out.extend(config_diff(a, b, f"{prefix}[{i}]"))
        return out
    return [] if old == new else [prefix or "(root)"]


def resolve_db(out_dir: Path, db: str | None) -> Path:
    """The database path for an output folder and an optional ``--db`` value.

    :raises JournalError: for a ``postgresql://`` URL (not supported yet).
    """
    if db is None:
        return out_dir / DEFAULT_DB_NAME
    if "://" in db:
        scheme = db.split("://", 1)[0]
        raise JournalError(
            f"--db {scheme}://... is not supported yet; give a SQLite file path (default: OUT/{DEFAULT_DB_NAME})"
        )
    return Path(db)


class Journal:
    """An open arena journal. Use :meth:`create_or_open` or :meth:`open_existing`."""

    def __init__(self, path: Path, conn: sqlite3.Connection, lock_fd: int | None) -> None:
        self.path = path
        self._conn = conn
        self._lock_fd = lock_fd

    # --- opening ------------------------------------------------------------------------

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(str(path), isolation_level=None, timeout=30.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as e:
            raise JournalError(f"{path} is not an arena journal (SQLite says: {e})") from None
        return conn

    @staticmethod
    def _lock(path: Path) -> int:
        lock_path = path.with_name(path.name + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise JournalError(f"another arena run is using {path} (lock {lock_path})") from None
        return fd

    @classmethod
    def create_or_open(
        cls, path: Path, config_json: str, config_hash: str, schedule: Sequence[ScheduledMatch]
    ) -> Journal:
        """Opens the journal at *path* for running, creating it with *schedule* if new.

        Takes an exclusive lock for the lifetime of the object.

        :raises JournalError: if the journal belongs to another configuration (naming the
            differing keys), is not a journal, or another run holds the lock.
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        lock_fd = cls._lock(path)
        try:
            conn = cls._connect(path)
            journal = cls(path, conn, lock_fd)
            journal._init(config_json, config_hash, schedule)
        except BaseException:
            os.close(lock_fd)
            raise
        return journal

    @classmethod
    def open_existing(cls, path: Path) -> Journal:
        """Opens an existing journal for reading (reports); no lock is taken.

        :raises JournalError: if there is no journal at *path*.
        """
        if not path.is_file():
            raise JournalError(f"no arena journal at {path}")
        journal = cls(path, cls._connect(path), None)
        journal._check_format()
        return journal

    def _check_format(self) -> None:
        try:
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        except sqlite3.DatabaseError as e:
            raise JournalError(f"{self.path} is not an arena journal ({e})") from None
        if row is None or row[0] != JOURNAL_FORMAT:
            raise JournalError(f"{self.path} is not an arena journal of format {JOURNAL_FORMAT}")

    def _init(self, config_json: str, config_hash: str, schedule: Sequence[ScheduledMatch]) -> None:
        self._conn.executescript(_SCHEMA)  # idempotent; executescript commits on its own
        with self._transaction():
            meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
            if not meta:
                self._conn.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [
                        ("format", JOURNAL_FORMAT),
                        ("config", config_json),
                        ("config_hash", config_hash),
                        ("created_at", repr(time.time())),
                    ],
                )
                self._conn.executemany(
                    "INSERT INTO matches (idx, match_id, set_id, sides, seats, seed, status) VALUES (?, ?, ?, ?, ?, ?, 'pending')",
                    [
                        (m.index, m.match_id, m.set_id, json.dumps(m.sides), json.dumps(m.seats), m.seed)
                        for m in schedule
                    ],
                )
                return
            if meta.get("format") != JOURNAL_FORMAT:
                raise JournalError(f"{self.path} is not an arena journal of format {JOURNAL_FORMAT}")
            if meta.get("config_hash") != config_hash:
                diff = config_diff(json.loads(meta["config"]), json.loads(config_json))
                raise JournalError(
                    f"{self.path} belongs to a different arena config (changed: {', '.join(diff) or 'unknown'}); "
                    "use another --out folder or restore the old config"
                )
            count = self._conn.execute("SELECT COUNT(*) FROM matches").fetchone()[0]
            if count != len(schedule):
                raise JournalError(f"{self.path} holds {count} matches, the schedule has {len(schedule)}")

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def close(self) -> None:
        """Closes the database and releases the lock."""
        self._conn.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- metadata ------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """The canonical configuration stored at creation."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()
        return dict(json.loads(row[0])) if row else {}

    def config_hash(self) -> str:
        """The stored configuration hash."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'config_hash'").fetchone()
        return str(row[0]) if row else ""

    # --- issue / fix / rollback (gomill's scheduler tokens) -------------------------------

    def rollback(self) -> int:
        """Makes every ``started`` match ``pending`` again (after a crash); returns how many."""
        with self._transaction():
            cur = self._conn.execute(
                "UPDATE matches SET status = 'pending', started_at = NULL WHERE status = 'started'"
            )
            return cur.rowcount

    def pending(self) -> list[MatchId]:
        """Ids of pending matches in schedule order."""
        return [r[0] for r in self._conn.execute("SELECT match_id FROM matches WHERE status = 'pending' ORDER BY idx")]

    def issue(self, match_ids: Iterable[MatchId]) -> None:
        """Marks pending matches ``started`` (counting one attempt each).

        :raises JournalError: if one of them is not pending.
        """
        ids = list(match_ids)
        now = time.time()
        with self._transaction():
            for match_id in ids:
                cur = self._conn.execute(
                    "UPDATE matches SET status = 'started', attempts = attempts + 1, started_at = ? "
                    "WHERE match_id = ? AND status = 'pending'",
                    (now, match_id),
                )
                if cur.rowcount != 1:
                    raise JournalError(f"match {match_id} is not pending")

    def fix(self, match_id: MatchId, result: Mapping[str, Any], record_path: str | None, duration_s: float) -> None:
        """Stores the result of a started match and marks it ``done``.

        Call only once the match record (if any) is on disk.

        :raises JournalError: if the match is not ``started`` (a done match is never overwritten).
        """
        with self._transaction():
            cur = self._conn.execute(
                "UPDATE matches SET status = 'done', result = ?, record_path = ?, finished_at = ?, duration_s = ? "
                "WHERE match_id = ? AND status = 'started'",
                (json.dumps(result, sort_keys=True), record_path, time.time(), duration_s, match_id),
            )
            if cur.rowcount != 1:
                raise JournalError(f"match {match_id} is not started; its result was not stored")

    def release(self, match_id: MatchId) -> None:
        """Returns a started match to ``pending`` (a void game: infrastructure failure)."""
        with self._transaction():
            self._conn.execute(
                "UPDATE matches SET status = 'pending', started_at = NULL WHERE match_id = ? AND status = 'started'",
                (match_id,),
            )

    # --- reading -------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Matches per status (every status present, zeros included) and ``total``."""
        out = {"pending": 0, "started": 0, "done": 0}
        for status, n in self._conn.execute("SELECT status, COUNT(*) FROM matches GROUP BY status"):
            out[status] = n
        out["total"] = sum(out.values())
        return out

    def rows(self, status: Status | None = None) -> list[JournalRow]:
        """Rows in schedule order, optionally only those with *status*."""
        sql = (
            "SELECT idx, match_id, set_id, sides, seats, seed, status, attempts, result, record_path, duration_s "
            "FROM matches"
        )
        params: tuple[str, ...] = ()
        if status is not None:
            sql += " WHERE status = ?"
            params = (status,)
        out = []
        for r in self._conn.execute(sql + " ORDER BY idx", params):
            out.append(
                JournalRow(
                    index=r[0],
                    match_id=r[1],
                    set_id=r[2],
                    sides=tuple(json.loads(r[3])),
                    seats=tuple(json.loads(r[4])),
                    seed=r[5],
                    status=r[6],
                    attempts=r[7],
                    result=json.loads(r[8]) if r[8] is not None else None,
                    record_path=r[9],
                    duration_s=r[10],
                )
            )
        return out
