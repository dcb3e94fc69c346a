"""Match records: every state re-derives from the seed and the actions, hash for hash."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gaigel.bots import make_bot
from gaigel.match import MatchSpec, play_match
from gaigel.record import RECORD_VERSION, validate_record
from gaigel.replay import replay
from gaigel.ruleset import preset


@dataclasses.dataclass(frozen=True)
class Match:
    players: int
    rules: str
    seed: int
    hands: int
    bot: str


matches = st.builds(
    Match,
    players=st.sampled_from([2, 3, 4, 6]),
    rules=st.sampled_from(["default", "parlett"]),
    seed=st.integers(0, 2**64 - 1),
    hands=st.integers(1, 3),
    bot=st.sampled_from(["random", "first", "heuristic"]),
)


def record_of(m: Match) -> dict[str, Any]:
    spec = MatchSpec(ruleset=preset(m.rules, m.players), seed=m.seed, hands=m.hands, bots=(m.bot,) * m.players)
    _, record = play_match(spec, [make_bot(m.bot) for _ in range(m.players)])
    assert record is not None
    return json.loads(json.dumps(record))  # type: ignore[no-any-return]  # through JSON, as a file would be


class TestReplay:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(matches)
    def test_every_record_replays(self, m: Match) -> None:
        """A record written by the match runner replays hash for hash and reproduces the match result."""
        record = record_of(m)
        validate_record(record)
        assert record["format_version"] == RECORD_VERSION
        report = replay(record)
        assert report.ok, report.mismatch
        assert report.result is not None
        assert report.result["sides"] == record["result"]["sides"]

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(matches, st.data())
    def test_tampering_is_found_at_its_step(self, m: Match, data: st.DataObject) -> None:
        """Changing one recorded action (to another legal one or any id) is reported at that hand and step or earlier."""
        record = record_of(m)
        hands = record["hands"]
        candidates = [(h, s) for h, hand in enumerate(hands) for s in range(len(hand["actions"]))]
        h, s = data.draw(st.sampled_from(candidates))
        entry = hands[h]["actions"][s]
        new = data.draw(st.integers(0, 164).filter(lambda a: a != entry["action"]))
        entry["action"] = new
        report = replay(record)
        assert not report.ok
        assert report.mismatch is not None
        assert (report.mismatch.hand, report.mismatch.step) == (hands[h]["index"], s)
