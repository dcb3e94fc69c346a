"""The duplicate-leak attack as a real bot on the Python SDK (gaigel_client).

It plays the first legal action and remembers, for every hand it has seen, the trump card,
its own five cards, the cards the other seats played and the cards it drew (by talon
position). When a hand starts with a trump card it remembers, the deal has come back in another seating (of a duplicate set
of the arena, or inside a match with ``match.format = "duplicate"``): the opponent now holds the
bot's old cards and the bot's old draws lie at the same talon positions. It writes one
JSON line per recognised hand to ``$GAIGEL_LEAK_LOG`` (server match id, hand index, seat,
predicted opponent hand as card ids, predicted talon cards by position).

python duplicate_leak_bot.py    (GAIGEL_SERVER, GAIGEL_TOKEN and GAIGEL_LEAK_LOG set)
"""

from __future__ import annotations

import collections
import json
import os
from typing import Any

from gaigel_client import Bot, run


class DuplicateLeakBot(Bot):
    name = "leak"
    version = "1"

    def __init__(self, log_path: str) -> None:
        self.log_path = log_path
        self.memory: list[dict[str, Any]] = []
        """Finished hands: trump card id, own hand, others' played cards, own draws by talon position."""
        self.current: dict[str, Any] | None = None
        self.match_id = ""
        self.seat = -1

    def decide(self, request):  # type: ignore[no-untyped-def]
        return request.legal_actions[0].id

    def on_match_start(self, msg):  # type: ignore[no-untyped-def]
        self.match_id, self.seat = msg.match_id, msg.seat

    def on_hand_start(self, msg):  # type: ignore[no-untyped-def]
        hand = sorted(c.id for c in msg.hand)
        trump = msg.trump_card.id
        self._predict(msg.hand_index, trump, hand)
        self.current = {
            "match": self.match_id,
            "trump": trump,
            "hand": hand,
            "others_played": collections.Counter(),
            "draws": 0,
            "own_draws": {},
        }

    def _predict(self, hand_index: int, trump: int, hand: list[int]) -> None:
        """Recognises the deal by its trump card (the exact card, one of 48); among several, the one whose
        other seats played most of my cards."""
        mine = collections.Counter(hand)

        def overlap(m: dict[str, Any]) -> int:
            return sum(min(n, m["others_played"][c]) for c, n in mine.items())

        seen = [m for m in self.memory if m["trump"] == trump]
        if not seen:
            return
        best = max(seen, key=overlap)
        line = {
            "match_id": self.match_id,
            "hand_index": hand_index,
            "seat": self.seat,
            "opponent_hand": best["hand"],
            "talon": best["own_draws"],
        }
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    def on_event(self, msg):  # type: ignore[no-untyped-def]
        cur = self.current
        if cur is None:
            return
        kind = msg.WhichOneof("kind")
        if kind == "card_played" and msg.card_played.seat != self.seat and msg.card_played.HasField("card"):
            cur["others_played"][msg.card_played.card.id] += 1
        elif kind == "card_drawn" and not msg.card_drawn.face_up_card:
            if msg.card_drawn.seat == self.seat and msg.card_drawn.HasField("card"):
                cur["own_draws"][str(cur["draws"])] = msg.card_drawn.card.id
            cur["draws"] += 1

    def on_hand_end(self, msg):  # type: ignore[no-untyped-def]
        if self.current is not None:
            self.memory.append(self.current)
            self.current = None


if __name__ == "__main__":
    run(DuplicateLeakBot(os.environ["GAIGEL_LEAK_LOG"]))
