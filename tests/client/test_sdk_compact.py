"""The SDK in compact mode: it asks for it by default, and unfolds what rides in a
DecisionRequest into the same hooks, in the same order, as plain mode delivers them."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import fake_server as fs
import grpc
import pytest
from server_thread import ServerThread

from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_api.v1 import game_pb2
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc
from gaigel_client import Bot, run
from gaigel_client import client as client_mod

FAST: dict[str, Any] = {"initial_backoff": 0.02, "max_backoff": 0.1, "connect_timeout": 5.0}

Calls = list[tuple[str, bytes]]


class Recorder(Bot):
    """Records every hook with its message's bytes (per-run ids blanked); plays the first legal action."""

    def __init__(self, name: str = "tester") -> None:
        self.name = name
        self.calls: Calls = []
        self.decisions: dict[str, str] = {}

    def decide(self, request: pb.DecisionRequest) -> int:
        req = pb.DecisionRequest()
        req.CopyFrom(request)
        req.decision_id = self.decisions.setdefault(req.decision_id, f"d{len(self.decisions)}")
        req.ClearField("bank_left")  # the bank moves with this machine's speed
        self.calls.append(("decide", req.SerializeToString()))
        return request.legal_actions[0].id

    def on_welcome(self, msg: pb.Welcome) -> None:
        self.calls.append(("welcome", msg.bot_name.encode()))

    def on_match_start(self, msg: pb.MatchStart) -> None:
        m = pb.MatchStart()
        m.CopyFrom(msg)
        m.match_id, m.resume_token = "", ""
        self.calls.append(("match_start", m.SerializeToString()))

    def on_hand_start(self, msg: game_pb2.HandStart) -> None:
        self.calls.append(("hand_start", msg.SerializeToString()))

    def on_event(self, msg: game_pb2.Event) -> None:
        self.calls.append(("event", msg.SerializeToString()))

    def on_hand_end(self, msg: game_pb2.HandEnd) -> None:
        self.calls.append(("hand_end", msg.SerializeToString()))

    def on_match_end(self, msg: game_pb2.MatchEnd) -> None:
        m = game_pb2.MatchEnd()
        m.CopyFrom(msg)
        m.match_id = ""
        self.calls.append(("match_end", m.SerializeToString()))

    def on_rejected(self, msg: pb.ActionRejected) -> None:
        self.calls.append(("rejected", msg.SerializeToString()))


# --- the Join -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "env", "expected"),
    [
        ({}, None, True),
        ({"compact": False}, None, False),
        ({}, "0", False),
        ({}, "off", False),
        ({}, "1", True),
        ({"compact": True}, "0", True),  # the argument wins over the environment
    ],
)
def test_join_asks_for_compact_by_default_and_can_be_turned_off(
    serve: Any, monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], env: str | None, expected: bool
) -> None:
    if env is None:
        monkeypatch.delenv("GAIGEL_COMPACT", raising=False)
    else:
        monkeypatch.setenv("GAIGEL_COMPACT", env)
    joins: list[pb.Join] = []

    def script(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        first = conn.recv()
        assert first is not None
        joins.append(first.join)
        yield fs.welcome()

    address, _ = serve(script)
    assert run(Recorder(), address, "tok", **FAST, **kwargs) == 0
    assert [j.compact for j in joins] == [expected]
    assert [j.compact_hand_end for j in joins] == [expected]  # it unfolds the hand's end too


# --- unfolding --------------------------------------------------------------------------------


def _messages() -> list[pb.PlayResponse]:
    """A hand's start as the plain mode sends it: HandStart, two events, a decision, one more event."""
    return [
        fs.match_start(1),
        fs.hand_start(2),
        fs.card_played(3, 0, 3),
        fs.card_played(4, 0, 7),
        fs.decision(5, "d1", [9, 20]),
        fs.card_played(6, 1, 9),
        fs.hand_end(7),
        fs.match_end(8),
    ]


def _folded() -> list[pb.PlayResponse]:
    """The same in compact mode: HandStart and the events ride in the decision."""
    plain = _messages()
    request = plain[4]
    request.decision_request.hand_start.CopyFrom(plain[1].hand_start)
    request.decision_request.events.extend([plain[2].event, plain[3].event])
    out = [plain[0], request, plain[5], plain[6], plain[7]]
    for i, msg in enumerate(out):
        msg.sequence = i + 1
    return out


def _play(serve: Any, messages: list[pb.PlayResponse], compact: bool) -> Recorder:
    def script(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        conn.recv()
        yield fs.welcome()
        for msg in messages:
            yield msg
            if msg.HasField("decision_request"):
                conn.recv_action()
        conn.drain()

    address, service = serve(script)
    bot = Recorder()
    assert run(bot, address, "tok", matches=1, compact=compact, **FAST) == 1
    assert not service.errors
    return bot


def test_folded_messages_reach_the_same_hooks_in_the_same_order(serve: Any) -> None:
    plain = _play(serve, _messages(), compact=False)
    compact = _play(serve, _folded(), compact=True)
    assert [c[0] for c in plain.calls] == [
        "welcome",
        "match_start",
        "hand_start",
        "event",
        "event",
        "decide",
        "event",
        "hand_end",
        "match_end",
    ]
    # decide sees the request without the folded fields, byte for byte as in plain mode
    assert compact.calls == plain.calls


def _two_hands() -> list[pb.PlayResponse]:
    """Plain mode across a hand's end: a decision, the hand's last event and HandEnd, the next
    hand's start and first event, a decision, its hand's end."""
    out = [
        fs.match_start(1),
        fs.hand_start(2),
        fs.decision(3, "d1", [9, 20]),
        fs.card_played(4, 1, 9),
        fs.hand_end(5),
        fs.hand_start(6, hand=(4, 8, 10, 21, 31)),
        fs.card_played(7, 0, 4),
        fs.decision(8, "d2", [8, 10]),
        fs.hand_end(9),
        fs.match_end(10),
    ]
    out[5].hand_start.hand_index = out[6].event.hand_index = out[8].hand_end.hand_index = 1
    return out


def _folded_ends() -> list[pb.PlayResponse]:
    """The same with Join.compact_hand_end: the first hand's end rides in d2, in front of the new hand."""
    plain = _two_hands()
    first, second = plain[2], plain[7]
    first.decision_request.hand_start.CopyFrom(plain[1].hand_start)
    second.decision_request.ended_hand_events.append(plain[3].event)
    second.decision_request.hand_end.CopyFrom(plain[4].hand_end)
    second.decision_request.hand_start.CopyFrom(plain[5].hand_start)
    second.decision_request.events.append(plain[6].event)
    out = [plain[0], first, second, plain[8], plain[9]]
    for i, msg in enumerate(out):
        msg.sequence = i + 1
    return out


def test_a_folded_hand_end_reaches_the_hooks_between_its_events_and_the_next_hand(serve: Any) -> None:
    plain = _play(serve, _two_hands(), compact=False)
    compact = _play(serve, _folded_ends(), compact=True)
    assert [c[0] for c in plain.calls] == [
        "welcome",
        "match_start",
        "hand_start",
        "decide",
        "event",
        "hand_end",
        "hand_start",
        "event",
        "decide",
        "hand_end",
        "match_end",
    ]
    assert compact.calls == plain.calls


def test_standalone_messages_still_work_in_compact_mode(serve: Any) -> None:
    """A compact session gets HandStart and Events on their own when something flushed them."""
    assert _play(serve, _messages(), compact=True).calls == _play(serve, _messages(), compact=False).calls


# --- against the real server ------------------------------------------------------------------


def _real_match(modes: dict[str, bool], seed: int) -> dict[str, Recorder]:
    tokens = {name: f"tok-{name}" for name in modes}
    server = ServerThread(tokens)
    try:
        bots = {name: Recorder(name) for name in modes}
        threads = [
            threading.Thread(
                target=run,
                args=(bots[name], f"127.0.0.1:{server.port}", tokens[name]),
                kwargs={"matches": 1, "compact": modes[name], **FAST},
                daemon=True,
            )
            for name in modes
        ]
        for t in threads:
            t.start()
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            request = ms.CreateMatchRequest(players=2, seat_bots=list(modes), hands=2, seed=seed, match_key="sdk")
            ms_grpc.MatchServiceStub(channel).CreateMatch(request, metadata=(("authorization", "Bearer admin-secret"),))
        for t in threads:
            t.join(60)
            assert not t.is_alive()
        return bots
    finally:
        server.stop()


def test_compact_and_plain_sdk_bots_see_the_same_real_match(monkeypatch: pytest.MonkeyPatch) -> None:
    folds: dict[str, int] = {}
    unfold = client_mod.Session._unfold

    def counting(self: Any, request: pb.DecisionRequest) -> None:
        carried = int(request.HasField("hand_start")) + len(request.events)
        folds[self.name] = folds.get(self.name, 0) + carried
        unfold(self, request)

    monkeypatch.setattr(client_mod.Session, "_unfold", counting)
    first = _real_match({"north": True, "south": False}, 21)
    assert folds.get("north", 0) > 0 and folds.get("south", 0) == 0
    folds.clear()
    second = _real_match({"north": False, "south": True}, 21)
    assert folds.get("south", 0) > 0 and folds.get("north", 0) == 0
    for name in ("north", "south"):
        assert len(first[name].calls) > 20
        assert first[name].calls == second[name].calls, name
