"""``gaigel serve --loop``: the same match, played through the front door by a real bot process,
on uvloop and on asyncio's own loop (the default); and a clear error where uvloop is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.test_commands import BOT, GAIGEL, free_port, wait_serving

NO_UVLOOP = [
    sys.executable,
    "-c",
    "import sys; sys.modules['uvloop'] = None; from gaigel.cli import main; sys.exit(main(sys.argv[1:]))",
]
ADMIN = "loop-test-admin-token"


def _serve_and_try(loop: str | None, tmp_path: Path) -> tuple[dict[str, object], list[str]]:
    """Starts ``gaigel serve --loop loop`` (no ``--loop`` for None), plays one seeded match on it with ``gaigel try --server``;
    returns the server's start-up log line and the report lines (match id and bot name cut off)."""
    port = free_port()
    err = tmp_path / f"serve-{loop}.log"
    with err.open("w") as log:
        proc = subprocess.Popen(
            [
                *GAIGEL,
                *("serve", "--address", f"127.0.0.1:{port}", "--admin-token", ADMIN),
                *(("--loop", loop) if loop else ()),
            ],
            env={k: v for k, v in os.environ.items() if k != "GAIGEL_ADMIN_TOKEN"},
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        wait_serving(port, proc, tries=200, why=err.read_text)
        out = subprocess.run(
            [
                *GAIGEL,
                "try",
                "--server",
                f"127.0.0.1:{port}",
                "--admin-token",
                ADMIN,
                *("--players", "4", "--hands", "2", "--seed", "11", "--", *BOT),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stdout + out.stderr + err.read_text()
    finally:
        proc.terminate()
        proc.wait(20)
    assert proc.returncode == 0, err.read_text()
    started = next(json.loads(line) for line in err.read_text().splitlines() if '"server_started"' in line)
    return started, [line.split(")")[-1] for line in out.stdout.splitlines()[1:]]


def test_the_same_match_on_uvloop_and_on_asyncio(tmp_path: Path) -> None:
    """Each loop is the one the start-up line names (asyncio's by default), and the seeded match is
    the same on both."""
    pytest.importorskip("uvloop")
    on_uv, report_uv = _serve_and_try("uvloop", tmp_path)
    on_asyncio, report_asyncio = _serve_and_try(None, tmp_path)
    assert on_uv["loop"] == "uvloop" and on_asyncio["loop"] == "asyncio"
    assert report_uv == report_asyncio and report_uv[-1] == "ok: the bot completed the match without a fault"


def test_uvloop_asked_for_but_missing_is_one_line() -> None:
    out = subprocess.run(
        [*NO_UVLOOP, "serve", "--address", "127.0.0.1:0", "--loop", "uvloop"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip() == (
        "gaigel serve: error: --loop uvloop: uvloop is not installed (pip install uvloop), or use --loop asyncio"
    )
