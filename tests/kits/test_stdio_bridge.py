"""gaigel stdio-bot: the JSON-line conversion and real matches through `gaigel try`."""

from __future__ import annotations

import json
import sys

from kitlib import BOTS, BRIDGE, GAIGEL, need, run

from gaigel.deal import deal
from gaigel.ruleset import preset
from gaigel.state import GaigelState
from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_harness.stdio import decision_line, event_line, friendly, parse_answer
from gaigel_server import codec

PY_BOT = [sys.executable, str(BOTS / "stdio_first.py")]


def _request() -> pb.DecisionRequest:
    rules = preset("default", players=2)
    state = GaigelState(rules, deal(1, 0, 2, rules.deal_packets), 0)
    legal = state.legal_actions()
    req = pb.DecisionRequest(
        decision_id="d1",
        legal_actions=[codec.legal_action(a) for a in legal],
        observation=codec.observation(state.observation(0), 0),
    )
    req.time_left.FromMilliseconds(1500)
    req.bank_left.FromMilliseconds(30000)
    return req


def test_decision_line_is_friendly_json() -> None:
    line = decision_line(_request())
    text = json.dumps(line, separators=(",", ":"))
    assert text.startswith('{"type":"decision"')
    assert line["time_left_ms"] == 1500 and line["bank_left_ms"] == 30000
    assert line["retry"] is False
    obs = line["observation"]
    assert obs["phase"] == "opening"
    assert obs["trump_suit"] in "EBHS" and len(obs["trump_card"]) == 3
    assert all(isinstance(c, str) and len(c) == 3 for c in obs["hand"])
    assert obs["dissle_declarer_seat"] is None  # unset optional -> null
    kinds = {a["kind"] for a in line["legal_actions"]}
    assert kinds == {"opening"}
    assert all({"id", "label"} <= a.keys() for a in line["legal_actions"])
    assert all(a["opening"] for a in line["legal_actions"])
    assert "card" not in line["legal_actions"][0]  # keys that do not apply are left out


def test_event_and_seed_conversion() -> None:
    from gaigel_api.v1 import game_pb2 as gm

    ev = gm.Event(hand_index=2, card_played=gm.CardPlayed(seat=1, trick_index=3, face_down=True))
    assert event_line(ev) == {
        "type": "event",
        "hand_index": 2,
        "kind": "card_played",
        "card_played": {"seat": 1, "trick_index": 3, "face_down": True, "card": None},
    }
    end = friendly(gm.MatchEnd(match_id="m", seed=2**63 + 5))
    assert end["seed"] == str(2**63 + 5) and end["termination"] is None and end["forfeiting_side"] is None


def test_parse_answer() -> None:
    assert parse_answer('{"action": 12}\n') == (12, None, "")
    assert parse_answer('{"action": 3, "decision_id": "x"}') == (3, "x", "")
    assert parse_answer(" 7 \n") == (7, None, "")
    for bad in ("hello", '{"action": "3"}', "true", "[1]", '{"act": 1}', "1.5"):
        action, _, problem = parse_answer(bad)
        assert action is None and problem, bad


def test_bash_example_under_try_4_players() -> None:
    need("bash", "jq")
    r = run(
        [
            *GAIGEL,
            "try",
            "--players",
            "4",
            "--seed",
            "11",
            "--",
            *BRIDGE,
            "stdio-bot",
            "--",
            "bash",
            "clients/stdio/random_bot.sh",
        ]
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok: the bot completed the match without a fault" in r.stdout


def test_python_stdio_bot_with_bare_integers() -> None:
    r = run([*GAIGEL, "try", "--players", "2", "--seed", "4", "--", *BRIDGE, "stdio-bot", "--", *PY_BOT, "bare"])
    assert r.returncode == 0, r.stdout + r.stderr


def test_garbage_answers_cost_strikes_but_the_match_goes_on() -> None:
    r = run(
        [*GAIGEL, "try", "--players", "2", "--hands", "1", "--seed", "4", "--strikes-limit", "1000", "--json", "--",
         *BRIDGE, "stdio-bot", "--", *PY_BOT, "garbage"]
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["termination"] == "completed"
    assert out["faults"] and {f["reason"] for f in out["faults"]} == {"ILLEGAL_ACTION"}
    assert "unreadable answer" in r.stderr and "not JSON and not an integer" in r.stderr


def test_bot_that_exits_ends_the_bridge_with_a_clear_error() -> None:
    r = run(
        [*GAIGEL, "try", "--players", "2", "--hands", "1", "--seed", "4", "--resume-grace", "1", "--json", "--",
         *BRIDGE, "stdio-bot", "--", *PY_BOT, "exit"]
    )  # fmt: skip
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert out["termination"] == "forfeit"
    assert {"DISCONNECT", "FORFEIT"} <= {f["reason"] for f in out["faults"]}
    assert "the bot process exited with code 7" in r.stderr


def test_missing_command_is_a_usage_error() -> None:
    r = run([*BRIDGE, "stdio-bot"])
    assert r.returncode == 2 and "give the bot command after --" in r.stderr
