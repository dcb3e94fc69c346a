"""The runner and its table workers share one stderr: every JSON log line stays whole."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_SCRIPT = """
import logging, multiprocessing, sys
import structlog
from gaigel_arena.workers import worker_logging

def work(index):
    worker_logging(logging.INFO, worker=index)
    log = structlog.get_logger()
    for n in range(3000):
        log.info("hand_end", n=n, pad="x" * 80)

if __name__ == "__main__":
    multiprocessing.set_start_method("spawn")
    processes = [multiprocessing.Process(target=work, args=(i,)) for i in range(4)]
    for p in processes:
        p.start()
    for p in processes:
        p.join()
"""


def test_concurrent_workers_write_whole_lines(tmp_path: Path) -> None:
    """print() wrote a line's text and its newline apart, so lines of other processes got glued
    into it and the soak's audit lost a runner's match_done line (before the fix: about 2,700
    of these 12,000 lines broken)."""
    script, log = tmp_path / "workers.py", tmp_path / "arena.log"
    script.write_text(_SCRIPT)  # a file, not -c: spawned processes import their target from it
    with log.open("wb") as err:
        subprocess.run([sys.executable, str(script)], stderr=err, check=True, timeout=120)
    lines = log.read_text().splitlines()
    broken = []
    for line in lines:
        try:
            json.loads(line)
        except ValueError:
            broken.append(line[:120])
    assert len(lines) == 4 * 3000
    assert broken == []
