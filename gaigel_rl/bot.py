"""A bot that plays a saved :class:`~gaigel_rl.policy.LinearPolicy` over gRPC with the Python SDK.

    GAIGEL_SERVER=... GAIGEL_TOKEN=... python -m gaigel_rl.bot examples/rl/policy-2p.npz
    gaigel check-bot -- python -m gaigel_rl.bot examples/rl/policy-2p.npz

It builds the tensor from the ``DecisionRequest``'s Observation (:func:`gaigel_rl.tensor.encode_proto`),
the same tensor the policy was trained on in-process, and answers the legal action with the
highest logit. At a table size the policy was not trained for it answers the first legal
action (and says so once on stderr).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from gaigel.ruleset import Ruleset, RulesetError
from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_client import Bot, run
from gaigel_rl.policy import LinearPolicy
from gaigel_rl.tensor import encode_proto


class PolicyBot(Bot):
    """Plays *policy* greedily."""

    name = "policy"
    version = "1"

    def __init__(self, policy: LinearPolicy) -> None:
        self.policy = policy
        self.sides: list[tuple[int, ...]] | None = None
        self._warned = False

    def on_match_start(self, msg: pb.MatchStart) -> None:
        try:
            rules = Ruleset.from_dict(json.loads(msg.ruleset_json), Ruleset(players=msg.players))
        except (ValueError, RulesetError):
            rules = Ruleset(players=msg.players)
        self.sides = [rules.seats_of(x) for x in range(rules.num_sides)]

    def decide(self, request: pb.DecisionRequest) -> int:
        legal = [a.id for a in request.legal_actions]
        obs = request.observation
        sides = self.sides
        if sides is None or sum(len(s) for s in sides) != obs.players:  # (a Resume without MatchStart)
            sides = [Ruleset(players=obs.players).seats_of(x) for x in range(Ruleset(players=obs.players).num_sides)]
        if obs.players != self.policy.players or len(sides) != self.policy.sides:
            if not self._warned:
                print(
                    f"policy bot: trained for {self.policy.players} players, playing {obs.players}: first legal action",
                    file=sys.stderr,
                )
                self._warned = True
            return legal[0]
        return self.policy.best(encode_proto(obs, sides), legal)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gaigel_rl.bot", description="Plays a saved policy over gRPC.")
    parser.add_argument("policy", help="a .npz file written by LinearPolicy.save")
    parser.add_argument("--matches", type=int, default=None, help="stop after this many matches")
    args = parser.parse_args(argv)
    try:
        policy = LinearPolicy.load(args.policy)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING)
    run(PolicyBot(policy), matches=args.matches)
    return 0


if __name__ == "__main__":
    sys.exit(main())
