"""A Python SDK bot for `gaigel try` tests that says goodbye: at MatchEnd it writes the match's
termination to the file named by its first argument, and once ``run`` returns (the server ended
its session), "exited" on a line of its own."""

from __future__ import annotations

import sys
from pathlib import Path

from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import common_pb2, game_pb2
from gaigel_client import Bot, run


class Farewell(Bot):
    version = "farewell-1"

    def __init__(self, path: Path) -> None:
        self.path = path

    def decide(self, request: bs.DecisionRequest) -> int:
        return request.legal_actions[0].id

    def on_match_end(self, msg: game_pb2.MatchEnd) -> None:
        self.path.write_text(common_pb2.MatchTermination.Name(msg.termination) + "\n")


if __name__ == "__main__":
    path = Path(sys.argv[1])
    run(Farewell(path))
    with path.open("a") as f:
        f.write("exited\n")
