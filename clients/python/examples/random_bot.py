"""A complete Gaigel bot: plays a random legal action. Run with GAIGEL_SERVER and GAIGEL_TOKEN set:

python clients/python/examples/random_bot.py
"""

import logging
import random
import sys

from gaigel_client import Bot, GaigelClientError, run


class RandomBot(Bot):
    name = "random-py"  # the registered name; GAIGEL_BOT_NAME overrides it
    version = "1.0"

    def __init__(self) -> None:
        self.rng = random.Random(0)

    def on_match_start(self, msg):  # msg: gaigel.v1 MatchStart
        # The seat's bot seed: a rematch of the same record plays the same moves.
        self.rng = random.Random(self.bot_seed)

    def decide(self, request):  # request: gaigel.v1 DecisionRequest
        return self.rng.choice(request.legal_actions).id


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        run(RandomBot())
    except GaigelClientError as e:  # a setting or the server's refusal: one line says what to fix
        sys.exit(f"random_bot: {e}")
