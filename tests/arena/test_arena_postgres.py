"""The PostgreSQL journal (``--db postgresql://...``) gives the results of the SQLite one.

The tests start their own PostgreSQL server from scratch: ``initdb`` and ``pg_ctl`` (Debian
package ``postgresql``) in a temporary folder, listening on 127.0.0.1 and a free port, with
password authentication. As root, the server runs as the ``postgres`` user (``runuser``),
because PostgreSQL refuses to run as root. Without the binaries or psycopg the tests are
skipped, unless the environment variable ``CI`` is set: then they fail.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gaigel.cli import main
from gaigel_arena.config import ArenaConfig, parse_config
from gaigel_arena.journal import Journal, JournalError
from gaigel_arena.runner import run_arena
from gaigel_arena.schedule import build_schedule

PASSWORD = "s3cret-pw"


def _missing(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{what} (CI is set, so this is an error: install the Debian package postgresql and psycopg)")
    pytest.skip(what)


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return candidates[-1] if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """A throwaway PostgreSQL server; :meth:`new_db` creates an empty database and returns its URL."""

    def __init__(self) -> None:
        initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
        if initdb is None or pg_ctl is None:
            _missing("initdb/pg_ctl not found (Debian package postgresql)")
        try:
            import psycopg  # noqa: F401
        except ImportError:
            _missing("psycopg is not installed (pip install 'psycopg[binary]')")
        assert initdb is not None and pg_ctl is not None
        self.pg_ctl = pg_ctl
        self.prefix: list[str] = []
        self.root = Path(tempfile.mkdtemp(prefix="gaigel-pg-"))
        owner: pwd.struct_passwd | None = None
        if os.geteuid() == 0:  # postgres refuses to run as root
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                _missing("running as root and there is no postgres user to run the server as")
            assert owner is not None
            self.prefix = ["runuser", "-u", "postgres", "--"]
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self.data = self.root / "data"
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if owner is not None:
            os.chown(pwfile, owner.pw_uid, owner.pw_gid)
        self._run(
            initdb,
            "-D",
            str(self.data),
            "-U",
            "arena",
            "--auth=scram-sha-256",
            f"--pwfile={pwfile}",
            "-E",
            "UTF8",
            "--no-sync",
        )
        self.port = _free_port()
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c fsync=off -c synchronous_commit=off"
        self._run(pg_ctl, "-D", str(self.data), "-o", opts, "-l", str(self.root / "log"), "-w", "-t", "60", "start")
        self._dbs = 0

    def _run(self, *command: str) -> None:
        done = subprocess.run([*self.prefix, *command], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.root / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(command)} failed: {done.stdout}{done.stderr}{tail}")

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://arena:{PASSWORD}@127.0.0.1:{self.port}/{db}"

    def new_db(self) -> str:
        import psycopg

        self._dbs += 1
        name = f"arena{self._dbs}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        subprocess.run(
            [*self.prefix, self.pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop"], capture_output=True
        )
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def pg() -> Iterator[PgServer]:
    server = PgServer()
    try:
        yield server
    finally:
        server.stop()


BOTS = [{"name": "r", "house": "random"}, {"name": "f", "house": "first"}, {"name": "g", "house": "first"}]
RESULT = {"sides": [{"side": 0, "dashes": 2}, {"side": 1, "dashes": 4}], "winners": [0], "termination": "completed"}


def _config(**arena: object) -> ArenaConfig:
    return parse_config({"arena": {"seed": 3, "sets_per_pairing": 2, **arena}, "bots": BOTS})


def _open(target: Path | str, config: ArenaConfig) -> Journal:
    schedule = build_schedule(config.bot_names, config.ruleset, config.sets_per_pairing, config.seed)
    return Journal.create_or_open(target, config.canonical_json(), config.config_hash(), schedule)


def _script(journal: Journal) -> list[Any]:
    """The same sequence of journal operations on any backend; returns what it observed."""
    seen: list[Any] = [journal.counts(), journal.pending()[:3]]
    first, second, third = journal.pending()[:3]
    journal.issue([first, second, third])
    journal.fix(first, RESULT, "records/x.json", 0.25)
    journal.release(third)
    with pytest.raises(JournalError, match="not started"):
        journal.fix(first, RESULT, None, 0.1)
    with pytest.raises(JournalError, match="not pending"):
        journal.issue([first])
    seen += [journal.counts(), journal.rows(), journal.config(), journal.config_hash()]
    return seen


def _results(db: Path | str) -> dict[str, object]:
    with Journal.open_existing(db) as journal:
        rows = journal.rows()
    assert len({r.match_id for r in rows}) == len(rows)
    return {r.match_id: (r.status, r.result) for r in rows}


class TestPostgresJournal:
    """Same interface, same semantics as SQLite."""

    def test_round_trip_equals_sqlite(self, pg: PgServer, tmp_path: Path) -> None:
        """The same operations give the same rows; reopening keeps them; started rows roll back."""
        url = pg.new_db()
        sqlite_journal, pg_journal = _open(tmp_path / "j.sqlite", _config()), _open(url, _config())
        assert _script(sqlite_journal) == _script(pg_journal)
        sqlite_journal.close()
        pg_journal.close()

        again, reference = _open(url, _config()), _open(tmp_path / "j.sqlite", _config())
        assert again.rows() == reference.rows()
        assert again.rollback() == reference.rollback() == 1
        assert again.rows() == reference.rows()
        assert again.pending() == reference.pending()
        assert PASSWORD not in again.label and "***" in again.label
        again.close()
        reference.close()

    def test_config_lock_and_foreign_database(self, pg: PgServer, monkeypatch: pytest.MonkeyPatch) -> None:
        """A changed config is refused naming its keys, a second runner is locked out, an empty db is no journal."""
        monkeypatch.setattr("gaigel_arena.journal.PG_LOCK_WAIT_S", 0.3)
        url = pg.new_db()
        _open(url, _config()).close()
        _open(url, _config(workers=7)).close()
        with pytest.raises(JournalError, match=r"changed: arena\.seed, arena\.sets_per_pairing") as err:
            _open(url, _config(seed=4, sets_per_pairing=3))
        assert PASSWORD not in str(err.value)
        held = _open(url, _config())
        t0 = time.monotonic()
        with pytest.raises(JournalError, match="another arena run is using"):
            _open(url, _config())
        assert time.monotonic() - t0 < 10
        with Journal.open_existing(url) as reader:  # readers take no lock
            assert reader.counts()["total"] == 12
        held.close()
        _open(url, _config()).close()  # the lock went with the connection

        with pytest.raises(JournalError, match="no arena journal"):
            Journal.open_existing(pg.new_db())
        with pytest.raises(JournalError, match="cannot connect") as err:
            Journal.open_existing(pg.url("postgres").replace(PASSWORD, "wrong"))
        assert "wrong" not in str(err.value)


SMALL = {
    "arena": {"name": "small", "seed": 11, "sets_per_pairing": 3},
    "game": {"players": 3, "hands": 2},
    "bots": [{"name": "r", "house": "random"}, {"name": "f", "house": "first"}, {"name": "f2", "house": "first"}],
}


class TestPostgresArena:
    """A whole arena into PostgreSQL: the results, ratings and reports of SQLite."""

    def test_arena_equals_sqlite(self, pg: PgServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """run_arena with --db URL and the report read back from the URL match a SQLite run."""
        config = parse_config(SMALL)
        url = pg.new_db()
        on_pg = run_arena(config, tmp_path / "pg", db=url, executor="inline", bootstrap_samples=50)
        on_sqlite = run_arena(config, tmp_path / "sqlite", executor="inline", bootstrap_samples=50)
        assert on_pg.done == on_pg.scheduled == on_sqlite.done
        assert on_pg.db_path == url and PASSWORD not in on_pg.db_label
        assert _results(url) == _results(on_sqlite.db_path)
        assert on_pg.standings.to_dict() == on_sqlite.standings.to_dict()
        again = run_arena(config, tmp_path / "pg", db=url, executor="inline", bootstrap_samples=0)
        assert again.played_now == 0

        capsys.readouterr()  # the runs' log lines
        assert main(["arena", "report", url, "--json", "--bootstrap", "50"]) == 0
        from_pg = json.loads(capsys.readouterr().out)
        assert main(["arena", "report", str(tmp_path / "sqlite"), "--json", "--bootstrap", "50"]) == 0
        assert from_pg == json.loads(capsys.readouterr().out)


KILL_TOML = """
[arena]
name = "pg kill test"
seed = 7
sets_per_pairing = 40
workers = 2

[game]
players = 2
hands = 3

[[bots]]
name = "random"
house = "random"

[[bots]]
name = "first"
house = "first"

[[bots]]
name = "random2"
house = "random"
"""


def _done_count(url: str) -> int:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            row = conn.execute("SELECT COUNT(*) FROM matches WHERE status = 'done'").fetchone()
            return int(row[0]) if row else -1
    except psycopg.Error:
        return -1  # not created yet


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses SIGKILL")
class TestPostgresKill:
    """kill -9 of a runner on a PostgreSQL journal, then the same command again."""

    def test_kill_and_resume(self, pg: PgServer, tmp_path: Path) -> None:
        """A few SIGKILLs, some while matches are played, end with the results of an uninterrupted run."""
        config_path = tmp_path / "kill.toml"
        config_path.write_text(KILL_TOML)
        gaigel = [sys.executable, "-m", "gaigel.cli", "arena", "run", str(config_path), "--quiet", "--bootstrap", "0"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        baseline = subprocess.run([*gaigel, "--out", str(tmp_path / "base")], env=env, capture_output=True, timeout=120)
        assert baseline.returncode == 0, baseline.stderr.decode()[-2000:]
        expected = _results(tmp_path / "base" / "arena.sqlite")

        url = pg.new_db()
        command = [*gaigel, "--out", str(tmp_path / "killed"), "--db", url]
        seed = int(os.environ.get("GAIGEL_KILL_SEED", time.time_ns() % 10**6))
        rng = random.Random(seed)
        kills = 0
        for attempt in range(30):
            if kills >= 6:
                break
            proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if attempt % 2:
                time.sleep(rng.uniform(0.05, 0.8))  # any moment, start-up included
            else:  # while matches are played
                before = _done_count(url)
                deadline = time.monotonic() + 30
                while proc.poll() is None and time.monotonic() < deadline and _done_count(url) <= max(before, 0):
                    time.sleep(0.02)
                time.sleep(rng.uniform(0.0, 0.2))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
            else:
                assert proc.returncode == 0, f"run exited with {proc.returncode} (kill seed {seed})"
                break  # the arena is complete (a fast machine): the kills so far are the test
            proc.wait()
        assert kills >= 1, f"no kill landed (kill seed {seed})"

        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "***" in done.stdout and PASSWORD not in done.stdout
        assert _results(url) == expected, f"kill seed {seed}"
        with Journal.open_existing(url) as journal:
            replays = sum(r.attempts for r in journal.rows()) - journal.counts()["total"]
        print(f"kill seed {seed}: {kills} kills, {replays} matches replayed")
