"""Issue 22: the record tools (`gaigel replay`, `gaigel rematch`, `gaigel view`) given hostile
files. Each gets exit 2 and one line naming the problem, never a traceback, and never runs past
what the file holds: a record nested 100,000 deep, a file larger than the cap, a FIFO nobody
writes to, a record planning 10^9 hands. Real subprocesses of the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gaigel.record import MAX_JSON_VALUES, MAX_RECORD_BYTES, RecordError, load_record

GAIGEL = [sys.executable, "-c", "import sys; from gaigel.cli import main; sys.exit(main(sys.argv[1:]))"]


@pytest.fixture(scope="module")
def real_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rec") / "m.json"
    subprocess.run(
        [*GAIGEL, "play", "--players", "2", "--hands", "2", "--seed", "7", "--bot", "random", "--record", str(path)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return path


def _refused(args: list[str], within: float = 30.0) -> str:
    began = time.monotonic()
    out = subprocess.run([*GAIGEL, *args], capture_output=True, text=True, timeout=within + 30)
    took = time.monotonic() - began
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr[-2000:]
    assert took < within, took
    return lines[0]


TOOLS = [["replay"], ["rematch"], ["view"]]


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t[0])
def test_deep_nesting_is_one_line(tool: list[str], tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert "nested too deeply" in _refused([*tool, str(path)])


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t[0])
def test_a_file_over_the_cap_is_refused_unread(tool: list[str], tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    with open(path, "wb") as f:
        f.truncate(MAX_RECORD_BYTES + 1)  # sparse: 64 MiB of zeros without writing them
    assert "larger than 64 MiB" in _refused([*tool, str(path)])


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t[0])
def test_a_fifo_is_refused_without_waiting_for_a_writer(tool: list[str], tmp_path: Path) -> None:
    path = tmp_path / "fifo.json"
    os.mkfifo(path)
    # open() of a FIFO blocks until a writer comes: the test's own writer end keeps it from hanging
    # forever if the tool does block, and the time bound shows it did not wait.
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    try:
        assert "is not a regular file" in _refused([*tool, str(path)], within=20)
    finally:
        os.close(fd)


def test_a_record_planning_a_billion_hands_is_refused_at_once(real_record: Path, tmp_path: Path) -> None:
    data = json.loads(real_record.read_text())
    data["hands_planned"] = 10**9
    path = tmp_path / "billion.json"
    path.write_text(json.dumps(data))
    line = _refused(["rematch", "--time-limit", "15", str(path)], within=15)
    assert "hands_planned' is 1000000000" in line


def test_a_record_holding_more_hands_than_planned_is_refused(real_record: Path, tmp_path: Path) -> None:
    data = json.loads(real_record.read_text())
    data["hands_planned"] = 1
    path = tmp_path / "more.json"
    path.write_text(json.dumps(data))
    assert "holds 2 hands but planned only 1" in _refused(["replay", str(path)])


def test_rematch_replays_what_an_aborted_record_holds(real_record: Path, tmp_path: Path) -> None:
    """A record that planned more hands than it holds (an aborted match) is compared on what it holds."""
    data = json.loads(real_record.read_text())
    data["hands_planned"] = 5000
    path = tmp_path / "aborted.json"
    path.write_text(json.dumps(data))
    began = time.monotonic()
    out = subprocess.run([*GAIGEL, "rematch", "--json", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["same"] is True and json.loads(out.stdout)["hands"] == 2
    assert time.monotonic() - began < 30


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0.0, 1.0), flip=st.integers(0, 255), at=st.floats(0.0, 1.0))
def test_truncated_or_damaged_records_give_a_record_error(
    real_record: Path, tmp_path: Path, cut: float, flip: int, at: float
) -> None:
    raw = bytearray(real_record.read_bytes())
    raw = raw[: int(len(raw) * cut)] if cut < 1.0 else raw
    if raw:
        raw[min(len(raw) - 1, int(len(raw) * at))] = flip
    path = tmp_path / "damaged.json"
    path.write_bytes(bytes(raw))
    try:
        load_record(path)
    except RecordError as e:
        assert "\n" not in str(e)


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t[0])
def test_millions_of_tiny_values_are_refused_before_parsing(tool: list[str], tmp_path: Path) -> None:
    """12 MB of ``[],`` would be 4 million lists (hundreds of MB) once parsed: refused by count,
    in a process whose address space is capped at 1 GiB, so a parse that happened would fail."""
    path = tmp_path / "tiny.json"
    path.write_text("[" + "[]," * (MAX_JSON_VALUES + 1) + "[]]")
    began = time.monotonic()
    out = subprocess.run(
        ["prlimit", f"--as={1 << 30}", *GAIGEL, *tool, str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert "JSON values: not a match record" in out.stderr.strip().splitlines()[-1]
    assert time.monotonic() - began < 30


@pytest.mark.parametrize("tool", TOOLS, ids=lambda t: t[0])
@pytest.mark.parametrize("field,value", [("faults", None), ("faults", [1]), ("result", []), ("match_id", 5)])
def test_a_record_field_of_the_wrong_type_is_one_line(
    tool: list[str], field: str, value: object, real_record: Path, tmp_path: Path
) -> None:
    """Optional fields checked as the required ones are (``faults: null`` crashed the viewer)."""
    data = json.loads(real_record.read_text())
    data[field] = value
    path = tmp_path / "typed.json"
    path.write_text(json.dumps(data))
    assert f"record field '{field}'" in _refused([*tool, str(path)])


def test_rematch_stops_at_its_time_limit_with_house_bots(tmp_path: Path) -> None:
    """--time-limit bounds the in-process rematch too: 6 hands of the search bot take seconds."""
    path = tmp_path / "slow.json"
    subprocess.run(
        [*GAIGEL, "play", "--players", "2", "--hands", "6", "--seed", "3", "--bot", "search", "--record", str(path)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    line = _refused(["rematch", "--time-limit", "0.2", str(path)], within=20)
    assert "time limit of 0.2 s reached after" in line and "of 6 hands" in line
