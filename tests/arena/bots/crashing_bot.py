"""A test bot that crashes: it plays the first legal action and dies (``os._exit``) on its
Nth decision in each process, like a bot with a bug. Uses the Python SDK (gaigel_client).

python crashing_bot.py --crash-at N [--every K]      (GAIGEL_SERVER and GAIGEL_TOKEN set by the arena)
"""

from __future__ import annotations

import argparse
import os
import sys

from gaigel_client import Bot, run


class CrashingBot(Bot):
    name = "crashing"
    version = "1"

    def __init__(self, crash_at: int, every: int) -> None:
        self.crash_at = crash_at
        self.every = every
        self.decisions = 0

    def decide(self, request):  # type: ignore[no-untyped-def]
        self.decisions += 1
        # --every K: only in about one match in K (chosen by the match's bot seed, so reruns agree)
        chosen = self.every <= 1 or self.bot_seed % self.every == 0
        if self.decisions == self.crash_at and chosen:
            sys.stderr.write(f"crashing_bot: crashing on decision {self.decisions} (pid {os.getpid()})\n")
            sys.stderr.flush()
            os._exit(3)
        return request.legal_actions[0].id


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--crash-at", type=int, required=True)
    parser.add_argument("--every", type=int, default=1, help="crash in one match of this many (by bot seed)")
    parser.add_argument("--marker", default="", help="ignored; lets a test find this process")
    args = parser.parse_args()
    run(CrashingBot(args.crash_at, args.every))


if __name__ == "__main__":
    main()
