"""A kit's bot moved between the processes of ``gaigel serve --processes 2``, end to end.

    python -m tests.tools.kitmove -- clients/go/randombot

Starts a two-process server on loopback, a Python-kit bot first (its idle session lands in
one process), then the bot under test (it lands in the other), and creates a match of the
two: it is placed with the first, so the bot under test must follow its session's MOVED
(``UNAVAILABLE``) by joining again. Passes when the match completes with exactly one move.
Exit code 0 on success, 1 with the reason and the bot's log otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc
from prometheus_client import CollectorRegistry

from gaigel_api.v1 import common_pb2 as common
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc
from gaigel_server.cluster import Cluster
from gaigel_server.logging import configure_logging
from gaigel_server.server import ServerConfig

ROOT = Path(__file__).resolve().parents[2]
ADMIN = "kitmove-admin-token"
BOTS = {"anchor": "anchor-token-123", "mover": "mover-token-4567"}
ANCHOR = [sys.executable, str(ROOT / "clients" / "python" / "examples" / "random_bot.py")]


def _start(command: list[str], port: int, name: str, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "GAIGEL_SERVER": f"127.0.0.1:{port}", "GAIGEL_TOKEN": BOTS[name], "GAIGEL_BOT_NAME": name}
    with log.open("w") as err:
        return subprocess.Popen(command, env=env, stdout=err, stderr=subprocess.STDOUT, cwd=ROOT)


async def _idle_in(cluster: Cluster, bot: str, seconds: float) -> int:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        await cluster.refresh()
        for w in cluster.workers:
            if w.status["idle"].get(bot):
                return w.index
        await asyncio.sleep(0.1)
    raise RuntimeError(f"bot {bot!r} did not join within {seconds:g} s")


async def check(command: list[str], logs: Path, seconds: float = 120.0) -> str:
    """Runs the scenario; returns "" on success, else what went wrong."""
    config = ServerConfig(admin_token=ADMIN, bots=dict(BOTS), registry=CollectorRegistry())
    cluster = Cluster(config, 2, log_level="warning")
    port = await cluster.start("127.0.0.1:0")
    bots: list[subprocess.Popen[bytes]] = []
    try:
        bots.append(_start(ANCHOR, port, "anchor", logs / "anchor.log"))
        first = await _idle_in(cluster, "anchor", seconds)
        bots.append(_start(command, port, "mover", logs / "mover.log"))
        second = await _idle_in(cluster, "mover", seconds)
        if first == second:
            return f"both bots joined process {first}: nothing to move"
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            admin = ms_grpc.MatchServiceStub(channel)
            md = (("authorization", f"Bearer {ADMIN}"),)
            request = ms.CreateMatchRequest(players=2, seat_bots=["anchor", "mover"], hands=2, seed=3)
            match = (await admin.CreateMatch(request, metadata=md)).match
            loop = asyncio.get_running_loop()
            deadline = loop.time() + seconds
            while True:
                got = (await admin.GetMatch(ms.GetMatchRequest(match_id=match.match_id), metadata=md)).match
                if got.state == ms.MATCH_STATE_ENDED:
                    break
                if loop.time() > deadline:
                    return f"the match did not end within {seconds:g} s (state {got.state}, moves {cluster.moves})"
                await asyncio.sleep(0.1)
        if got.termination != common.MATCH_TERMINATION_COMPLETED:
            return f"the match ended {common.MatchTermination.Name(got.termination)}"
        if cluster.moves != 1 or cluster.owner[match.match_id] != first:
            return f"{cluster.moves} moves, the match in process {cluster.owner[match.match_id]}"
        return ""
    finally:
        for bot in bots:
            bot.kill()
            bot.wait()
        await cluster.stop(2.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the bot's command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the bot's command after --")
    configure_logging("warning")
    with tempfile.TemporaryDirectory(prefix="kitmove-") as d:
        logs = Path(d)
        problem = asyncio.run(check(command, logs))
        if problem:
            print(f"kitmove: FAIL: {problem}\n--- the bot's log:\n{(logs / 'mover.log').read_text()[-4000:]}")
            return 1
    print("kitmove: the bot followed its session's move and played the match to its end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
