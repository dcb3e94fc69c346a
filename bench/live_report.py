"""The live report server (``gaigel arena run --web-port``) held by idle connections (issue 22),
before and after the hardening, each in its own subprocess on loopback.

Run from the repository root::

    python bench/live_report.py                  # 400 idle connections, before (fe468b6) and after
    python bench/live_report.py --connections 1000 --only after

The server serves the live report of an empty folder (its waiting page). *--connections*
sockets connect and send nothing, or half a request head (every other one); then the
server's threads are counted (``/proc``), a GET is timed, and 12 s later (the after-server's
request timeout is 10 s) the threads and the connections the server has closed are counted.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

# Run as python bench/live_report.py, which puts bench/ on the path, not the project root (for bench.attacks).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.attacks import source_tree

SERVE = (
    "import sys, time; from gaigel_arena.web import serve_live_report; "
    "s = serve_live_report(sys.argv[1], '127.0.0.1', 0); print(s.server_address[1], flush=True); time.sleep(3600)"
)


def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return -1


def _closed(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(100) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def measure(tree: Path, connections: int) -> dict[str, Any]:
    paths = [tree, tree / "server", tree / "arena", tree / "clients" / "python"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in paths)}
    with tempfile.TemporaryDirectory(prefix="live-report-") as tmp:
        proc = subprocess.Popen([sys.executable, "-c", SERVE, str(Path(tmp) / "none")], env=env, stdout=subprocess.PIPE)
        try:
            assert proc.stdout is not None
            port = int(proc.stdout.readline())
            idle = _threads(proc.pid)
            socks = []
            for i in range(connections):
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                if i % 2:
                    s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                socks.append(s)
            time.sleep(1.0)
            held = _threads(proc.pid)
            t0 = time.monotonic()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as r:
                r.read()
            get_s = time.monotonic() - t0
            time.sleep(12.0)
            result = {
                "connections": connections,
                "threads_idle": idle,
                "threads_held": held,
                "get_s_while_held": round(get_s, 3),
                "threads_after_12s": _threads(proc.pid),
                "closed_by_server_after_12s": sum(_closed(s) for s in socks),
            }
            for s in socks:
                s.close()
            return result
        finally:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--connections", type=int, default=400, help="idle connections (default 400)")
    p.add_argument("--before", default="fe468b6", help="git revision of the 'before' server (default fe468b6)")
    p.add_argument("--only", choices=("before", "after"), help="measure one server only")
    args = p.parse_args(argv)
    print("# " + shlex.join([sys.executable, "bench/live_report.py", *(argv or sys.argv[1:])]), flush=True)
    with tempfile.TemporaryDirectory(prefix="live-before-") as tmp:
        for name in ("before", "after"):
            if args.only and name != args.only:
                continue
            tree = source_tree(args.before, Path(tmp)) if name == "before" else Path(__file__).resolve().parent.parent
            print(f"{name:6s} {json.dumps(measure(tree, args.connections))}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
