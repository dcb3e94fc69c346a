"""Operator mistakes (issue 14): one line naming the path or port and exit code 2, before any
work where it can be checked, and nothing lost when the disk fills up mid-run.

Read-only and full disks are real file systems: small tmpfs mounts when the tests run as root
(the tests that need them skip otherwise); the other cases need no privileges.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

GAIGEL = [sys.executable, "-c", "import sys; from gaigel.cli import main; sys.exit(main(sys.argv[1:]))"]

ARENA = """
[arena]
name = "disk"
seed = 3
sets_per_pairing = 30
executor = "local"
keep_records = true

[game]
players = 2
hands = 2

[[bots]]
name = "random"
house = "random"

[[bots]]
name = "first"
house = "first"
"""


def gaigel(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GAIGEL_ADMIN_TOKEN"}
    return subprocess.run([*GAIGEL, *args], capture_output=True, text=True, timeout=timeout, env=env)


def one_line_error(out: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Asserts exit 2 and a single stderr line holding every needle; returns the line."""
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert len(lines) == 1, out.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@contextlib.contextmanager
def tmpfs(path: Path, size: str, read_only: bool = False) -> Iterator[Path]:
    """A small tmpfs at *path* (skips the test when it cannot be mounted, e.g. not root)."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- gaigel serve ------------------------------------------------------------------------------


def test_serve_with_the_metrics_port_taken(taken_port: int) -> None:
    out = gaigel("serve", "--address", f"127.0.0.1:{free_port()}", "--metrics-port", str(taken_port))
    one_line_error(out, f"--metrics-port 127.0.0.1:{taken_port}", "in use")


def test_serve_with_the_address_taken(taken_port: int) -> None:
    out = gaigel("serve", "--address", f"127.0.0.1:{taken_port}", "--metrics-port", "0")
    one_line_error(out, f"--address 127.0.0.1:{taken_port}", "in use")


def test_serve_with_records_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    records = tmp_path / "file" / "records"
    out = gaigel("serve", "--address", f"127.0.0.1:{free_port()}", "--metrics-port", "0", "--records", str(records))
    one_line_error(out, f"--records {records}", "cannot write")


def test_serve_with_records_on_a_read_only_disk(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        out = gaigel("serve", "--address", f"127.0.0.1:{free_port()}", "--metrics-port", "0", "--records", str(ro))
        one_line_error(out, f"--records {ro}", "Read-only file system")


# --- gaigel play --record, gaigel arena report --html ----------------------------------------


@pytest.mark.parametrize("where", ["missing folder", "a folder", "under a file"])
def test_play_record_that_cannot_be_written(tmp_path: Path, where: str) -> None:
    (tmp_path / "file").write_text("x")
    target = {
        "missing folder": tmp_path / "nope" / "r.json",
        "a folder": tmp_path,
        "under a file": tmp_path / "file" / "r.json",
    }[where]
    out = gaigel("play", "--players", "2", "--hands", "1", "--record", str(target))
    one_line_error(out, f"--record {target}")
    assert "hand" not in out.stdout  # checked before the match is played


def test_play_record_on_a_full_disk(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "full", "4k") as full:
        (full / "filler").write_bytes(b"\0" * 4096 * 1)
        out = gaigel("play", "--players", "4", "--hands", "8", "--record", str(full / "r.json"))
        one_line_error(out, f"--record {full / 'r.json'}", "No space left on device")


def _arena(tmp_path: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "disk.toml"
    config.write_text(ARENA)
    return gaigel("arena", "run", str(config), "--out", str(out), "--quiet", "--workers", "1", *extra, timeout=180)


def test_arena_report_html_that_cannot_be_written(tmp_path: Path) -> None:
    assert _arena(tmp_path, tmp_path / "run").returncode == 0
    (tmp_path / "file").write_text("x")
    target = tmp_path / "file" / "report.html"  # a missing folder is created (the viewer pages go beside it)
    one_line_error(
        gaigel("arena", "report", str(tmp_path / "run"), "--html", str(target)), f"--html {tmp_path / 'file'}"
    )
    one_line_error(gaigel("arena", "report", str(tmp_path / "run"), "--html", str(tmp_path)), "is a directory")


# --- gaigel arena run --out ----------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["a file", "under a file", "records is a file", "journal is a folder"])
def test_arena_out_that_cannot_be_written(tmp_path: Path, variant: str) -> None:
    out = tmp_path / "out"
    if variant == "a file":
        out.write_text("x")
    elif variant == "under a file":
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "out"
    elif variant == "records is a file":
        out.mkdir()
        (out / "records").write_text("x")
    else:
        (out / "arena.sqlite").mkdir(parents=True)
    # One stderr line, at the default log level: not even arena_start was logged.
    one_line_error(_arena(tmp_path, out), "--out", str(out))


def test_arena_out_on_a_read_only_disk(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        one_line_error(_arena(tmp_path, ro / "out"), f"--out {ro / 'out'}", "Read-only file system")


def test_arena_on_a_disk_that_fills_up_keeps_every_finished_match(tmp_path: Path) -> None:
    """A 400 KiB disk fills after a few matches: one line, exit 2; the journal keeps what was
    finished; with room again the same command finishes the rest and plays nothing twice."""
    with tmpfs(tmp_path / "disk", "400k") as disk:
        out = disk / "out"
        first = _arena(tmp_path, out, "--log-level", "error")
        line = one_line_error(first, f"--out {out}", "cannot write", "rerun the same command")
        # The record write (ENOSPC) or the journal (SQLite's "disk is full") meets the full disk first.
        assert "No space left on device" in line or "full" in line, line
        with sqlite3.connect(out / "arena.sqlite") as db:
            done_first = {row[0] for row in db.execute("select match_id from matches where status = 'done'")}
        assert done_first, "the disk filled before a single match was kept: make it larger"
        for match_id in done_first:  # every finished match has its record, whole
            assert (out / "records" / f"{match_id}.json").read_text().endswith("}\n")
        subprocess.run(["mount", "-o", "remount,size=20m", str(disk)], check=True)
        second = _arena(tmp_path, out, "--log-level", "error")
        assert second.returncode == 0, second.stderr
        with sqlite3.connect(out / "arena.sqlite") as db:
            rows = dict(db.execute("select status, count(*) from matches group by status").fetchall())
        assert rows == {"done": 60}
        assert f"played {60 - len(done_first)} matches" in second.stdout
