"""A random bot for the kill-and-restart test: reports its progress on stdout, one line per step.

Environment: GAIGEL_SERVER, GAIGEL_TOKEN, GAIGEL_BOT_NAME, GAIGEL_RESUME_FILE (read by the
SDK), GAIGEL_TEST_DELAY (seconds spent in every decide).
"""

from __future__ import annotations

import logging
import os
import random
import sys
import time

from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_api.v1 import common_pb2, game_pb2
from gaigel_client import Bot, run


def say(*words: object) -> None:
    print(*words, flush=True)


class ResumeBot(Bot):
    name = "resumer"
    version = "1.0"

    def __init__(self) -> None:
        self.rng = random.Random()
        self.delay = float(os.environ.get("GAIGEL_TEST_DELAY", "0"))
        self.decisions = 0
        self.events = 0

    def decide(self, request: pb.DecisionRequest) -> int:
        self.decisions += 1
        say("deciding", self.decisions)
        time.sleep(self.delay)
        action = self.rng.choice(request.legal_actions).id
        say("decided", self.decisions)
        return action

    def on_welcome(self, msg: pb.Welcome) -> None:
        say("welcome", "resumed" if msg.resumed else "joined")

    def on_match_start(self, msg: pb.MatchStart) -> None:
        say("match_start", msg.match_id)

    def on_event(self, msg: game_pb2.Event) -> None:
        self.events += 1

    def on_rejected(self, msg: pb.ActionRejected) -> None:
        say("rejected", msg.message)

    def on_match_end(self, msg: game_pb2.MatchEnd) -> None:
        say("match_end", common_pb2.MatchTermination.Name(msg.termination), "events", self.events)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    sys.exit(0 if run(ResumeBot(), matches=1, initial_backoff=0.05) == 1 else 1)
