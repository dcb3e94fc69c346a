"""A bot that plays from "another machine": started by a test, not by the arena, it connects
on its own to the arena's published server with GAIGEL_SERVER, GAIGEL_TOKEN and
GAIGEL_BOT_NAME (and GAIGEL_RESUME_FILE, so a restarted process resumes its seat).
Plays the first legal action, after ``--delay`` seconds per decision.

python remote_bot.py [--delay S] [--secure]   (--secure: TLS; trust the certificate with
GRPC_DEFAULT_SSL_ROOTS_FILE_PATH)
"""

from __future__ import annotations

import argparse
import time

from gaigel_client import Bot, run


class SlowFirstBot(Bot):
    name = "remote"
    version = "1"

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def decide(self, request):  # type: ignore[no-untyped-def]
        time.sleep(self.delay)
        return request.legal_actions[0].id


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--secure", action="store_true")
    args = parser.parse_args()
    run(SlowFirstBot(args.delay), secure=args.secure)
