"""The size and scrape time of ``/metrics`` with many registered bots (issue 22), before and after
the per-bot series cap, against real ``gaigel serve`` subprocesses on loopback.

Run from the repository root::

    python bench/metrics_size.py                      # 5,000 bots, before (fe468b6) and after
    python bench/metrics_size.py --bots 20000 --only after --extra=--max-bot-series=0

Each server gets *--bots* bots through the RegisterBot admin call, then ``/metrics`` is scraped
*--scrapes* times over HTTP; the figures are the page's bytes and lines, the number of per-bot
decision-latency series, and the median and worst scrape time. "before" is the server of
``--before`` (a git revision, extracted with ``git archive``), "after" is this checkout. The first
output line is the command that reproduces the run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import grpc

# Run as python bench/metrics_size.py, which puts bench/ on the path, not the project root (for bench.attacks).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.attacks import ADMIN, Server, free_port, source_tree
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc

SERIES = "gaigel_decision_duration_seconds_count{"


async def _register(address: str, count: int) -> None:
    md = (("authorization", f"Bearer {ADMIN}"),)
    async with grpc.aio.insecure_channel(address) as ch:
        stub = ms_grpc.MatchServiceStub(ch)
        for start in range(0, count, 250):  # 250 calls in flight at a time
            await asyncio.gather(
                *(
                    stub.RegisterBot(ms.RegisterBotRequest(bot_name=f"bench-bot-{i:05d}"), metadata=md)
                    for i in range(start, min(count, start + 250))
                )
            )


def measure(tree: Path, bots: int, scrapes: int, extra: list[str]) -> dict[str, Any]:
    metrics_port = free_port()
    with tempfile.TemporaryDirectory(prefix="metrics-size-") as tmp:
        server = Server(tree, Path(tmp), [*extra, "--metrics-port", str(metrics_port)])
        try:
            t0 = time.monotonic()
            asyncio.run(_register(server.address, bots))
            registered_s = time.monotonic() - t0
            times: list[float] = []
            body = b""
            for _ in range(scrapes):
                t0 = time.monotonic()
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=120) as r:
                    body = r.read()
                times.append(time.monotonic() - t0)
            text = body.decode()
            return {
                "bots": bots,
                "bytes": len(body),
                "lines": text.count("\n"),
                "bot_series": text.count(SERIES),
                "other_series": 'bot="_other"' in text,
                "scrape_s_median": round(statistics.median(times), 3),
                "scrape_s_max": round(max(times), 3),
                "register_s": round(registered_s, 1),
                "rss_mib": round(server.rss_mib(), 1),
            }
        finally:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bots", type=int, default=5000, help="bots registered (default 5000)")
    p.add_argument("--scrapes", type=int, default=5, help="scrapes timed (default 5)")
    p.add_argument("--before", default="fe468b6", help="git revision of the 'before' server (default fe468b6)")
    p.add_argument("--only", choices=("before", "after"), help="measure one server only")
    p.add_argument("--extra", action="append", default=[], help="an extra flag for the 'after' server")
    p.add_argument("--json", action="store_true", help="one JSON object at the end")
    args = p.parse_args(argv)
    print("# " + shlex.join([sys.executable, "bench/metrics_size.py", *(argv or sys.argv[1:])]), flush=True)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="metrics-before-") as tmp:
        for name in ("before", "after"):
            if args.only and name != args.only:
                continue
            tree = source_tree(args.before, Path(tmp)) if name == "before" else Path(__file__).resolve().parent.parent
            results[name] = measure(tree, args.bots, args.scrapes, args.extra if name == "after" else [])
            print(f"{name:6s} {json.dumps(results[name])}", flush=True)
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
