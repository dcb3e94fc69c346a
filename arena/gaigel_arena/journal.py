"""The journal: one database that makes an arena resumable.

Two backends hold the same two tables behind one interface (:class:`Journal`):

* **SQLite** in WAL mode, the default: ``OUT/arena.sqlite``, or any file path given to
  ``--db``. Embedded, nothing to start. A lock file next to the database refuses a second
  runner. WAL with ``synchronous=NORMAL`` keeps every committed transaction across a
  killed process (``kill -9``); only a power loss may drop the last few commits, which
  are then replayed.
* **PostgreSQL**, for ``--db postgresql://user:password@host:port/dbname`` (or
  ``postgres://``), through psycopg 3 (``pip install 'psycopg[binary]'``). One database
  (more exactly: the first schema of its ``search_path``) holds one arena. A session-level
  advisory lock refuses a second runner; the server releases it when the runner's
  connection ends, also after ``kill -9``.

The journal holds the canonical configuration (JSON) and its hash once, and one row per
scheduled match with its status:

* ``pending``: not played yet;
* ``started``: handed to a worker (:meth:`Journal.issue`); after a crash such rows are
  made pending again (:meth:`Journal.rollback`) and replayed from their seed;
* ``done``: the result is stored (:meth:`Journal.fix`, called only after the match
  record file is on disk); a done match is never replayed.

Every change is one transaction. The runner process is the only writer (workers return
results to it). Opening a journal with a different configuration is refused with the
differing keys named.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import re
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from gaigel_arena.schedule import MatchId, ScheduledMatch

__all__ = [
    "JOURNAL_FORMAT",
    "Journal",
    "JournalError",
    "JournalRow",
    "Status",
    "config_diff",
    "is_url",
    "redact_url",
    "resolve_db",
]

JOURNAL_FORMAT = "gaigel.arena.journal.v1"
DEFAULT_DB_NAME = "arena.sqlite"
PG_SCHEMES = ("postgresql", "postgres")

PG_LOCK_KEY = 0x6761_6967_656C_4A31  # "gaigelJ1": the advisory lock of an arena journal
PG_LOCK_WAIT_S = 3.0
"""How long a new PostgreSQL runner waits for the advisory lock: the server may take a
moment to notice that the connection of a killed runner is gone."""

Status = Literal["pending", "started", "done"]

DbTarget = Path | str
"""A SQLite file path, or a ``postgresql://`` URL."""


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


def _schema(real: str) -> list[str]:
    return [
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        f"""CREATE TABLE IF NOT EXISTS matches (
    idx INTEGER PRIMARY KEY,
    match_id TEXT NOT NULL UNIQUE,
    set_id TEXT NOT NULL,
    sides TEXT NOT NULL,
    seats TEXT NOT NULL,
    seed BIGINT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'started', 'done')),
    attempts INTEGER NOT NULL DEFAULT 0,
    result TEXT,
    record_path TEXT,
    started_at {real},
    finished_at {real},
    duration_s {real}
)""",
        "CREATE INDEX IF NOT EXISTS matches_status ON matches (status, idx)",
    ]


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


def is_url(db: DbTarget) -> bool:
    """Whether *db* is a database URL (a ``str`` with ``://``) rather than a file path."""
    return isinstance(db, str) and "://" in db


def redact_url(db: DbTarget) -> str:
    """*db* for messages and logs: the password of a URL replaced by ``***``."""
    if not is_url(db):
        return str(db)
    return re.sub(r"^([a-zA-Z][\w+.-]*://[^:/@?#]*):[^@/?#]*@", r"\1:***@", str(db))


def resolve_db(out_dir: Path, db: str | None) -> DbTarget:
    """The journal for an output folder and an optional ``--db`` value.

    :returns: the SQLite file path (default ``OUT/arena.sqlite``), or the PostgreSQL URL.
    :raises JournalError: for a URL of another scheme.
    """
    if db is None:
        return out_dir / DEFAULT_DB_NAME
    if "://" in db:
        scheme = db.split("://", 1)[0].lower()
        if scheme not in PG_SCHEMES:
            raise JournalError(
                f"--db {scheme}://... is not supported; give a SQLite file path (default: OUT/{DEFAULT_DB_NAME}) "
                "or a postgresql://user:password@host:port/dbname URL"
            )
        return db
    return Path(db)


# --- backends ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Result:
    rows: list[tuple[Any, ...]]
    rowcount: int


class _Backend:
    """What the journal needs from a database: statements, transactions, a runner lock.

    A backend is opened with ``lock=True`` by a runner (taking the exclusive runner lock
    for its lifetime) and with ``lock=False`` by readers.
    """

    label: str
    begin_sql = "BEGIN"
    real_type = "REAL"
    errors: tuple[type[BaseException], ...] = ()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Result:
        """Runs one statement (``?`` placeholders) and returns its rows and row count."""
        raise NotImplementedError

    def executemany(self, sql: str, params: Iterable[Sequence[Any]]) -> None:
        """Runs one statement once per parameter tuple."""
        raise NotImplementedError

    def close(self) -> None:
        """Closes the connection and releases the lock."""
        raise NotImplementedError


_LOCKED: set[str] = set()
"""Lock files of SQLite journals that this process holds."""


class _SqliteBackend(_Backend):
    begin_sql = "BEGIN IMMEDIATE"
    errors = (sqlite3.Error,)

    def __init__(self, path: Path, lock: bool) -> None:
        self.path = path
        self.label = str(path)
        self._lock_key = ""
        self._lock_fd = self._lock(path) if lock else None  # before connecting: a second runner never touches the file
        try:
            self._conn = sqlite3.connect(str(path), isolation_level=None, timeout=30.0)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as e:
            self._unlock()
            raise JournalError(f"{path} is not an arena journal (SQLite says: {e})") from None

    def _lock(self, path: Path) -> int:
        lock_path = path.with_name(path.name + ".lock")
        key = str(lock_path.resolve())
        busy = JournalError(f"another arena run is using {path} (lock {lock_path})")
        # POSIX record locks are per process, so a second journal of this process is refused
        # here, before the lock file is opened again (closing any descriptor of that file
        # would release the process's lock).
        if key in _LOCKED:
            raise busy
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # A POSIX record lock, not flock: forked match workers do not inherit it, so a
            # killed runner's last workers cannot keep the next run out while they die.
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise busy from None
        _LOCKED.add(key)
        self._lock_key = key
        return fd

    def _unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
            _LOCKED.discard(self._lock_key)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Result:
        cur = self._conn.execute(sql, tuple(params))
        return _Result(cur.fetchall(), cur.rowcount)

    def executemany(self, sql: str, params: Iterable[Sequence[Any]]) -> None:
        self._conn.executemany(sql, params)

    def close(self) -> None:
        self._conn.close()
        self._unlock()


class _PostgresBackend(_Backend):
    real_type = "DOUBLE PRECISION"

    def __init__(self, url: str, lock: bool) -> None:
        self.label = redact_url(url)
        try:
            import psycopg
        except ImportError:
            raise JournalError(
                f"--db {self.label} needs psycopg 3 for PostgreSQL: pip install 'psycopg[binary]'"
            ) from None
        self.errors = (psycopg.Error,)
        try:
            self._conn = psycopg.connect(url, autocommit=True, connect_timeout=10, application_name="gaigel-arena")
        except psycopg.Error as e:
            raise JournalError(f"cannot connect to the PostgreSQL journal {self.label}: {_first_line(e)}") from None
        if lock:
            try:
                self._lock()
            except BaseException:
                self._conn.close()
                raise

    @staticmethod
    def _sql(sql: str) -> str:
        return sql.replace("?", "%s")  # the journal's statements hold no literal question marks

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Result:
        cur = self._conn.execute(self._sql(sql), tuple(params))
        rows = cur.fetchall() if cur.description is not None else []
        return _Result([tuple(r) for r in rows], cur.rowcount)

    def executemany(self, sql: str, params: Iterable[Sequence[Any]]) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(self._sql(sql), [tuple(p) for p in params])

    def _lock(self) -> None:
        deadline = time.monotonic() + PG_LOCK_WAIT_S
        while not self.execute("SELECT pg_try_advisory_lock(?)", (PG_LOCK_KEY,)).rows[0][0]:
            if time.monotonic() >= deadline:
                holder = self.execute(
                    "SELECT a.pid, a.client_addr, a.application_name FROM pg_locks l "
                    "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
                    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) LIMIT 1"
                ).rows
                who = f" (server process {holder[0][0]}, client {holder[0][1]}, {holder[0][2]})" if holder else ""
                raise JournalError(f"another arena run is using {self.label}{who}")
            time.sleep(0.1)

    def close(self) -> None:
        self._conn.close()  # ends the session, which releases the advisory lock


def _other_config(label: str, stored_json: str, config_json: str) -> JournalError:
    diff = config_diff(json.loads(stored_json), json.loads(config_json))
    return JournalError(
        f"{label} belongs to a different arena config (changed: {', '.join(diff) or 'unknown'}); "
        "use another --out folder (or --db) or restore the old config"
    )


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _open_backend(target: DbTarget, lock: bool) -> _Backend:
    if is_url(target):
        return _PostgresBackend(str(target), lock)
    return _SqliteBackend(Path(target), lock)


# --- the journal ---------------------------------------------------------------------------


class Journal:
    """An open arena journal. Use :meth:`create_or_open` or :meth:`open_existing`."""

    def __init__(self, target: DbTarget, backend: _Backend) -> None:
        self.path = target
        """The SQLite file path or the PostgreSQL URL (see :attr:`label` for messages)."""
        self.label = backend.label
        """Where the journal is, for messages (a URL's password replaced by ``***``)."""
        self._db = backend

    # --- opening ------------------------------------------------------------------------

    @classmethod
    def create_or_open(
        cls, target: DbTarget, config_json: str, config_hash: str, schedule: Sequence[ScheduledMatch]
    ) -> Journal:
        """Opens the journal at *target* (file path or URL) for running, creating it with *schedule* if new.

        Takes an exclusive lock for the lifetime of the object.

        :raises JournalError: if the journal belongs to another configuration (naming the
            differing keys), is not a journal, cannot be reached, or another run holds the lock.
        """
        if not is_url(target):
            target = Path(target)
            target.parent.mkdir(parents=True, exist_ok=True)
        backend = _open_backend(target, lock=True)
        try:
            journal = cls(target, backend)
            journal._init(config_json, config_hash, schedule)
        except BaseException as e:
            backend.close()
            if isinstance(e, backend.errors):
                raise JournalError(f"{backend.label} is not a usable arena journal: {_first_line(e)}") from None
            raise
        return journal

    @classmethod
    def check_config(cls, target: DbTarget, config_json: str, config_hash: str) -> None:
        """Refuses, before anything is started, an existing journal at *target* of another config
        (the check :meth:`create_or_open` makes again under its lock); a missing journal passes.

        :raises JournalError: naming the differing keys.
        """
        try:
            journal = cls.open_existing(target)
        except JournalError:
            return  # none yet (or unreadable: create_or_open says why)
        try:
            meta = dict(journal._db.execute("SELECT key, value FROM meta").rows)
        finally:
            journal.close()
        if meta.get("config_hash") not in (None, config_hash):
            raise _other_config(journal.label, meta["config"], config_json)

    @classmethod
    def open_existing(cls, target: DbTarget) -> Journal:
        """Opens an existing journal (file path or URL) for reading (reports); no lock is taken.

        :raises JournalError: if there is no journal at *target*.
        """
        if not is_url(target) and not Path(target).is_file():
            raise JournalError(f"no arena journal at {target}")
        backend = _open_backend(target, lock=False)
        journal = cls(target, backend)
        try:
            journal._check_format()
        except BaseException:
            backend.close()
            raise
        return journal

    def _check_format(self) -> None:
        try:
            rows = self._db.execute("SELECT value FROM meta WHERE key = 'format'").rows
        except self._db.errors as e:
            raise JournalError(f"no arena journal at {self.label} ({_first_line(e)})") from None
        if not rows or rows[0][0] != JOURNAL_FORMAT:
            raise JournalError(f"{self.label} is not an arena journal of format {JOURNAL_FORMAT}")

    def _init(self, config_json: str, config_hash: str, schedule: Sequence[ScheduledMatch]) -> None:
        with self._transaction():  # the schema is created in the same transaction as its rows
            for statement in _schema(self._db.real_type):
                self._db.execute(statement)
            meta = dict(self._db.execute("SELECT key, value FROM meta").rows)
            if not meta:
                self._db.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [
                        ("format", JOURNAL_FORMAT),
                        ("config", config_json),
                        ("config_hash", config_hash),
                        ("created_at", repr(time.time())),
                    ],
                )
                self._db.executemany(
                    "INSERT INTO matches (idx, match_id, set_id, sides, seats, seed, status) VALUES (?, ?, ?, ?, ?, ?, 'pending')",
                    [
                        (m.index, m.match_id, m.set_id, json.dumps(m.sides), json.dumps(m.seats), m.seed)
                        for m in schedule
                    ],
                )
                return
            if meta.get("format") != JOURNAL_FORMAT:
                raise JournalError(f"{self.label} is not an arena journal of format {JOURNAL_FORMAT}")
            if meta.get("config_hash") != config_hash:
                raise _other_config(self.label, meta["config"], config_json)
            count = self._db.execute("SELECT COUNT(*) FROM matches").rows[0][0]
            if count != len(schedule):
                raise JournalError(f"{self.label} holds {count} matches, the schedule has {len(schedule)}")

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute(self._db.begin_sql)
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def close(self) -> None:
        """Closes the database and releases the lock."""
        self._db.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- metadata ------------------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """The canonical configuration stored at creation."""
        rows = self._db.execute("SELECT value FROM meta WHERE key = 'config'").rows
        return dict(json.loads(rows[0][0])) if rows else {}

    def config_hash(self) -> str:
        """The stored configuration hash."""
        rows = self._db.execute("SELECT value FROM meta WHERE key = 'config_hash'").rows
        return str(rows[0][0]) if rows else ""

    def meta(self, key: str) -> str | None:
        """A value stored with :meth:`put_meta` (or a built-in key such as ``config``), or None."""
        rows = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).rows
        return str(rows[0][0]) if rows else None

    def put_meta(self, key: str, value: str) -> None:
        """Stores *value* under *key* once: data fixed before the first match (a test's control variate).

        :raises JournalError: if *key* already holds another value (it is never overwritten).
        """
        with self._transaction():
            rows = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).rows
            if rows and rows[0][0] != value:
                raise JournalError(f"{self.label} already holds another {key}; it is never overwritten")
            if not rows:
                self._db.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (key, value))

    # --- issue / fix / rollback (gomill's scheduler tokens) -------------------------------

    def rollback(self) -> int:
        """Makes every ``started`` match ``pending`` again (after a crash); returns how many."""
        with self._transaction():
            return self._db.execute(
                "UPDATE matches SET status = 'pending', started_at = NULL WHERE status = 'started'"
            ).rowcount

    def pending(self) -> list[MatchId]:
        """Ids of pending matches in schedule order."""
        return [
            r[0] for r in self._db.execute("SELECT match_id FROM matches WHERE status = 'pending' ORDER BY idx").rows
        ]

    def issue(self, match_ids: Iterable[MatchId]) -> None:
        """Marks pending matches ``started`` (counting one attempt each).

        :raises JournalError: if one of them is not pending.
        """
        ids = list(match_ids)
        now = time.time()
        with self._transaction():
            for match_id in ids:
                cur = self._db.execute(
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
            cur = self._db.execute(
                "UPDATE matches SET status = 'done', result = ?, record_path = ?, finished_at = ?, duration_s = ? "
                "WHERE match_id = ? AND status = 'started'",
                (json.dumps(result, sort_keys=True), record_path, time.time(), duration_s, match_id),
            )
            if cur.rowcount != 1:
                raise JournalError(f"match {match_id} is not started; its result was not stored")

    def release(self, match_id: MatchId) -> None:
        """Returns a started match to ``pending`` (a void game: infrastructure failure)."""
        with self._transaction():
            self._db.execute(
                "UPDATE matches SET status = 'pending', started_at = NULL WHERE match_id = ? AND status = 'started'",
                (match_id,),
            )

    # --- reading -------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """Matches per status (every status present, zeros included) and ``total``."""
        out = {"pending": 0, "started": 0, "done": 0}
        for status, n in self._db.execute("SELECT status, COUNT(*) FROM matches GROUP BY status").rows:
            out[status] = int(n)
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
        for r in self._db.execute(sql + " ORDER BY idx", params).rows:
            out.append(
                JournalRow(
                    index=r[0],
                    match_id=r[1],
                    set_id=r[2],
                    sides=tuple(json.loads(r[3])),
                    seats=tuple(json.loads(r[4])),
                    seed=int(r[5]),
                    status=r[6],
                    attempts=r[7],
                    result=json.loads(r[8]) if r[8] is not None else None,
                    record_path=r[9],
                    duration_s=r[10],
                )
            )
        return out
