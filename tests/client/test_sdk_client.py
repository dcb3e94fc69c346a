"""The Python SDK against a scripted gRPC server on loopback."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fake_server as fs
import grpc
import pytest

from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_api.v1 import common_pb2, game_pb2
from gaigel_client import Bot, ConfigError, ConnectionLostError, ServerError, observation_view, run

REPO = Path(__file__).resolve().parents[2]
FAST: dict[str, Any] = {"initial_backoff": 0.02, "max_backoff": 0.1, "connect_timeout": 5.0}


class RecordingBot(Bot):
    name = "tester"
    version = "9.9"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.requests: list[pb.DecisionRequest] = []
        self.rejections: list[pb.ActionRejected] = []
        self.rng = random.Random(1)

    def decide(self, request: pb.DecisionRequest) -> int:
        self.calls.append("decide")
        self.requests.append(request)
        return self.rng.choice(request.legal_actions).id

    def on_welcome(self, msg: pb.Welcome) -> None:
        self.calls.append("welcome")

    def on_match_start(self, msg: pb.MatchStart) -> None:
        self.calls.append("match_start")

    def on_hand_start(self, msg: Any) -> None:
        self.calls.append("hand_start")

    def on_event(self, msg: Any) -> None:
        self.calls.append("event")

    def on_hand_end(self, msg: Any) -> None:
        self.calls.append("hand_end")

    def on_match_end(self, msg: Any) -> None:
        self.calls.append("match_end")

    def on_rejected(self, msg: pb.ActionRejected) -> None:
        self.calls.append("rejected")
        self.rejections.append(msg)


def test_full_session_with_rejection_drop_and_resume(serve: Any) -> None:
    legal1, legal2, legal3 = [3, 7, 9], [7, 9], [9, 20]
    seen: dict[str, Any] = {}

    def first(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        join = conn.recv()
        seen["join"] = join
        yield fs.welcome()
        yield fs.match_start(1)
        yield fs.hand_start(2)
        yield fs.decision(3, "d1", legal1)
        a1 = conn.recv_action()
        seen["a1"] = a1
        yield fs.rejected(4, a1, pb.REJECT_REASON_STALE_DECISION)
        a1b = conn.recv_action()
        seen["a1b"] = a1b
        yield fs.card_played(5, 1, a1b.action_id)
        yield fs.decision(6, "d2", legal2)
        seen["a2"] = conn.recv_action()
        yield fs.card_played(7, 1, seen["a2"].action_id)
        # messages 8 and 9 are "lost" with the stream
        conn.abort(grpc.StatusCode.UNAVAILABLE, "connection reset")

    def second(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        seen["resume"] = conn.recv()
        yield fs.welcome(resumed=True)
        yield fs.card_played(7, 1, seen["a2"].action_id)  # a duplicate the bot must skip
        yield fs.card_played(8, 0, 30)
        yield fs.decision(9, "d3", legal3)
        seen["a3"] = conn.recv_action()
        yield fs.hand_end(10)
        yield fs.match_end(11)
        conn.drain()

    address, service = serve(first, second)
    bot = RecordingBot()
    played = run(bot, address, "tok-1", matches=1, **FAST)
    assert played == 1
    assert not service.errors

    join = seen["join"].join
    assert (join.bot_token, join.bot_name, join.bot_version, join.protocol_version) == ("tok-1", "tester", "9.9", 1)
    assert seen["a1"].decision_id == "d1" and seen["a1"].action_id in legal1
    assert seen["a1b"].decision_id == "d1" and seen["a1b"].action_id in legal1
    assert seen["a2"].decision_id == "d2" and seen["a2"].action_id in legal2
    assert seen["a3"].decision_id == "d3" and seen["a3"].action_id in legal3

    resume = seen["resume"].resume
    assert (resume.match_id, resume.seat, resume.resume_token, resume.last_sequence) == ("m-1", 1, "resume-secret", 7)
    assert resume.bot_version == "9.9"

    # Leave was sent once the last wanted match started
    assert any(m.HasField("leave") for m in service.conns[0].received)
    assert bot.calls == [
        "welcome", "match_start", "hand_start", "decide", "rejected", "decide", "event", "decide", "event",
        "welcome", "event", "decide", "hand_end", "match_end",
    ]  # fmt: skip
    assert bot.rejections[0].decision_open


class IllegalBot(Bot):
    name = "tester"

    def decide(self, request: pb.DecisionRequest) -> int:
        return 999


def test_repeated_illegal_answer_falls_back_to_first_legal(serve: Any) -> None:
    got: list[pb.Action] = []

    def script(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        conn.recv()
        yield fs.welcome()
        yield fs.match_start(1)
        yield fs.decision(2, "d1", [7, 9])
        a = conn.recv_action()
        got.append(a)
        yield fs.rejected(3, a, pb.REJECT_REASON_ILLEGAL_ACTION)
        got.append(conn.recv_action())
        yield fs.card_played(4, 1, 7)
        yield fs.match_end(5)
        conn.drain()

    address, service = serve(script)
    assert run(IllegalBot(), address, "tok", matches=1, **FAST) == 1
    assert [(a.decision_id, a.action_id) for a in got] == [("d1", 999), ("d1", 7)]
    assert not service.errors


def test_resend_of_unconfirmed_answer_after_resume(serve: Any) -> None:
    got: dict[str, Any] = {}

    def first(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        conn.recv()
        yield fs.welcome()
        yield fs.match_start(1)
        yield fs.decision(2, "d1", [3, 7])
        got["a"] = conn.recv_action()
        conn.abort(grpc.StatusCode.UNAVAILABLE, "gone")  # the answer "never reached" the table

    def second(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        got["resume"] = conn.recv()
        yield fs.welcome(resumed=True)
        got["again"] = conn.recv_action()
        yield fs.card_played(3, 1, got["again"].action_id)
        yield fs.match_end(4)
        conn.drain()

    address, _ = serve(first, second)
    assert run(RecordingBot(), address, "tok", matches=1, **FAST) == 1
    assert got["resume"].resume.last_sequence == 2
    assert (got["again"].decision_id, got["again"].action_id) == ("d1", got["a"].action_id)


def test_a_fault_event_does_not_close_the_pending_decision(serve: Any) -> None:
    """Each rejection comes with a Fault event: the decision stays open through it, so the SDK
    keeps correcting its answer (it used to stop after the second rejection)."""
    got: dict[str, Any] = {}

    def fault_event(seq: int, strikes: int) -> pb.PlayResponse:
        fault = common_pb2.Fault(seat=1, reason=common_pb2.FAULT_REASON_ILLEGAL_ACTION, strike=True, strikes=strikes)
        return pb.PlayResponse(sequence=seq, event=game_pb2.Event(hand_index=0, fault=fault))

    def script(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        conn.recv()
        yield fs.welcome()
        yield fs.match_start(1)
        yield fs.decision(2, "d1", [3, 7, 9])
        answers = [conn.recv_action()]
        yield fs.rejected(3, answers[-1], pb.REJECT_REASON_ILLEGAL_ACTION, strikes=1)
        yield fault_event(4, 1)
        answers.append(conn.recv_action())
        yield fs.rejected(5, answers[-1], pb.REJECT_REASON_ILLEGAL_ACTION, strikes=2)
        yield fault_event(6, 2)
        yield fs.decision(7, "d2", [20])  # what the SDK answers next shows whether d1 was still open
        answers += [conn.recv_action(), conn.recv_action()]
        got["answers"] = answers
        yield fs.match_end(8)
        conn.drain()

    address, _ = serve(script)
    assert run(RecordingBot(), address, "tok", matches=1, **FAST) == 1
    answers = got["answers"]
    assert [a.decision_id for a in answers] == ["d1", "d1", "d1", "d2"]
    assert len({a.action_id for a in answers[:3]}) == 3  # three different legal cards tried


def test_unauthenticated_raises_with_server_message(serve: Any) -> None:
    def script(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        conn.recv()
        conn.abort(grpc.StatusCode.UNAUTHENTICATED, "unknown bot token; register the bot with MatchService.RegisterBot")
        yield from ()

    address, _ = serve(script)
    with pytest.raises(ServerError) as info:
        run(RecordingBot(), address, "wrong", **FAST)
    assert info.value.code is grpc.StatusCode.UNAUTHENTICATED
    assert "unknown bot token" in str(info.value) and "UNAUTHENTICATED" in str(info.value)


def test_server_ending_stream_with_ok_returns(serve: Any) -> None:
    def script(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        conn.recv()
        yield fs.welcome()
        yield fs.match_start(1)
        yield fs.decision(2, "d1", [3])
        conn.recv_action()
        yield fs.match_end(3)

    address, _ = serve(script)
    assert run(RecordingBot(), address, "tok", **FAST) == 1  # no match limit: ends when the server does


def test_missing_token_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GAIGEL_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="GAIGEL_TOKEN"):
        run(RecordingBot(), "127.0.0.1:1")


def _two_matches(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
    """Two matches on one stream, as a server that keeps a bot for a whole contest sends them;
    a bot that sent Leave is let go after the first (the stream then ends with OK)."""
    conn.recv()
    yield fs.welcome()
    yield fs.match_start(1, match_id="m-1")
    yield fs.decision(2, "d1", [3])
    conn.recv_action()
    yield fs.match_end(3, match_id="m-1")
    if any(m.HasField("leave") for m in conn.received):
        conn.drain()
        return
    yield fs.match_start(4, match_id="m-2")
    yield fs.decision(5, "d2", [7])
    conn.recv_action()
    yield fs.match_end(6, match_id="m-2")


def test_without_a_match_limit_the_bot_plays_until_the_server_ends_its_session(
    serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GAIGEL_MATCHES", raising=False)
    address, service = serve(_two_matches)
    assert run(RecordingBot(), address, "tok", **FAST) == 2
    assert not any(m.HasField("leave") for m in service.conns[0].received)


@pytest.mark.parametrize("value", ["0", ""])
def test_gaigel_matches_0_or_empty_is_no_limit(serve: Any, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("GAIGEL_MATCHES", value)
    address, _ = serve(_two_matches)
    assert run(RecordingBot(), address, "tok", **FAST) == 2


def test_gaigel_matches_sets_the_limit_when_run_is_given_none(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GAIGEL_MATCHES", "1")
    address, service = serve(_two_matches)
    assert run(RecordingBot(), address, "tok", **FAST) == 1
    received = service.conns[0].received
    leave = next(i for i, m in enumerate(received) if m.HasField("leave"))
    assert leave < next(i for i, m in enumerate(received) if m.HasField("action"))  # sent when the match started


def test_an_explicit_match_limit_wins_over_gaigel_matches(serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GAIGEL_MATCHES", "1")
    address, _ = serve(_two_matches)
    assert run(RecordingBot(), address, "tok", matches=2, **FAST) == 2


@pytest.mark.parametrize("value", ["two", "-1", "1.5", "\u00b2"])
def test_a_bad_gaigel_matches_is_a_config_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("GAIGEL_MATCHES", value)
    with pytest.raises(ConfigError, match=f"GAIGEL_MATCHES must be a number, got {value!r}"):
        run(RecordingBot(), "127.0.0.1:1", "tok", **FAST)


def test_waits_for_a_server_that_starts_late() -> None:
    # reserve a port, free it, start the server on it after the bot began connecting
    probe, port, _ = fs.start([])
    probe.stop(0).wait()

    def script(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        conn.recv()
        yield fs.welcome()
        yield fs.match_start(1)
        yield fs.match_end(2)
        conn.drain()

    holder: list[grpc.Server] = []
    timer = threading.Timer(0.4, lambda: holder.append(fs.start([script], port)[0]))
    timer.start()
    try:
        t0 = time.monotonic()
        assert run(RecordingBot(), f"127.0.0.1:{port}", "tok", matches=1, **FAST) == 1
        assert time.monotonic() - t0 >= 0.3
    finally:
        timer.join()
        for s in holder:
            s.stop(0)


def test_observation_view() -> None:
    request = fs.decision(1, "d", [3, 7]).decision_request
    view = observation_view(request)
    assert view.hand == tuple(fs.card(c).code for c in (3, 7, 9, 20, 30))
    assert view.trump_suit == "S" and view.trump_card == "SKa" and view.face_up_card == "SKa"
    assert view.phase == "talon" and view.to_act == 1
    assert view.current_trick == ((0, "EKb"),)
    assert view.legal == {3: "play ETb", 7: "play EOb"}


def test_random_bot_example_runs_as_a_subprocess(serve: Any) -> None:
    actions: list[pb.Action] = []
    legal = [[3, 7, 9], [7, 9], [9]]

    def script(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        join = conn.recv()
        assert join is not None and join.join.bot_token == "tok-x" and join.join.protocol_version == 1
        yield fs.welcome()
        yield fs.match_start(1)
        yield fs.hand_start(2)
        seq = 3
        for i, ids in enumerate(legal):
            yield fs.decision(seq, f"d{i}", ids)
            a = conn.recv_action()
            assert a.decision_id == f"d{i}" and a.action_id in ids, a
            actions.append(a)
            yield fs.card_played(seq + 1, 1, a.action_id)
            seq += 2
        yield fs.hand_end(seq)
        yield fs.match_end(seq + 1)

    address, service = serve(script)
    env = dict(os.environ, GAIGEL_SERVER=address, GAIGEL_TOKEN="tok-x", GAIGEL_BOT_NAME="tester")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "clients" / "python"), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, str(REPO / "clients" / "python" / "examples" / "random_bot.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert proc.returncode == 0, proc.stderr
    assert not service.errors
    assert len(actions) == 3


def test_refused_resume_joins_afresh_and_counts_matches(serve: Any) -> None:
    got: dict[str, Any] = {}

    def first(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        conn.recv()
        yield fs.welcome()
        yield fs.match_start(1, match_id="m-1")
        yield fs.decision(2, "d1", [3, 7])
        conn.recv_action()
        yield fs.card_played(3, 1, 3)
        conn.abort(grpc.StatusCode.UNAVAILABLE, "gone")

    def refuse(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        got["resume"] = conn.recv()
        conn.abort(grpc.StatusCode.FAILED_PRECONDITION, "match m-1 is over")
        yield from ()

    def second(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        got["join"] = conn.recv()
        yield fs.welcome()
        yield fs.match_start(1, match_id="m-2")  # a new session numbers from 1 again
        yield fs.decision(2, "d9", [20])
        got["a"] = conn.recv_action()
        yield fs.match_end(3, match_id="m-2")
        conn.drain()

    address, service = serve(first, refuse, second)
    assert run(RecordingBot(), address, "tok", matches=2, **FAST) == 2
    assert not service.errors
    assert got["resume"].resume.match_id == "m-1" and got["resume"].resume.last_sequence == 3
    assert got["join"].HasField("join")
    assert (got["a"].decision_id, got["a"].action_id) == ("d9", 20)
    # Leave only once the last wanted match started
    assert not any(m.HasField("leave") for m in service.conns[0].received)
    assert any(m.HasField("leave") for m in service.conns[2].received)


def test_gives_up_when_server_stays_away() -> None:
    probe, port, _ = fs.start([])
    probe.stop(0).wait()
    t0 = time.monotonic()
    with pytest.raises(ConnectionLostError, match="unreachable"):
        run(RecordingBot(), f"127.0.0.1:{port}", "tok", initial_backoff=0.02, max_backoff=0.1, connect_timeout=0.5)
    assert time.monotonic() - t0 < 3


def _resume_state(path: Path, address: str, **changes: Any) -> None:
    data = {
        "format": 1,
        "match_id": "m-1",
        "seat": 1,
        "resume_token": "resume-secret",
        "grace": None,
        "last_sequence": 3,
        "match_start_sequence": 2,
        "answer": ["d1", 7],
        "server": address,
        "bot_name": "tester",
    }
    data.update(changes)
    path.write_text(json.dumps(data))


def test_resume_file_replays_the_match_and_resends_the_saved_answer(serve: Any, tmp_path: Path) -> None:
    """A restarted process resumes from the file: replay from MatchStart, the saved answer resent, not re-decided."""
    got: dict[str, Any] = {}

    def resumed(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        got["resume"] = conn.recv()
        yield fs.welcome(resumed=True)
        yield fs.match_start(2)
        yield fs.decision(3, "d1", [3, 7])  # answered (7) by the killed process
        got["resent"] = conn.recv_action()
        yield fs.card_played(4, 1, 7)
        yield fs.decision(5, "d2", [9, 20])
        got["new"] = conn.recv_action()
        yield fs.match_end(6)
        conn.drain()

    address, service = serve(resumed)
    path = tmp_path / "resume.json"
    _resume_state(path, address)
    bot = RecordingBot()
    assert run(bot, address, "tok", matches=1, resume_file=path, **FAST) == 1
    assert not service.errors
    r = got["resume"].resume
    assert (r.match_id, r.seat, r.resume_token, r.last_sequence) == ("m-1", 1, "resume-secret", 1)
    assert (got["resent"].decision_id, got["resent"].action_id) == ("d1", 7)
    assert got["new"].decision_id == "d2"
    assert bot.calls.count("decide") == 1 and bot.calls.count("match_start") == 1
    assert not path.exists()


def test_resume_file_refused_or_foreign_joins_afresh(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused Resume deletes the file and joins; a file for another bot is ignored; a match writes the file."""
    got: dict[str, Any] = {}
    path = tmp_path / "resume.json"

    def refuse(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        got["resume"] = conn.recv()
        conn.abort(grpc.StatusCode.UNAUTHENTICATED, "wrong resume token")
        yield from ()

    def join(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        got["join"] = conn.recv()
        yield fs.welcome()
        yield fs.match_start(1, match_id="m-2")
        yield fs.decision(2, "d9", [20])
        conn.recv_action()
        got["saved"] = path.read_text()
        yield fs.match_end(3, match_id="m-2")
        conn.drain()

    address, service = serve(refuse, join)
    _resume_state(path, address)
    assert run(RecordingBot(), address, "tok", matches=1, resume_file=path, **FAST) == 1
    assert not service.errors
    assert got["resume"].HasField("resume") and got["join"].HasField("join")
    saved = json.loads(got["saved"])
    assert (saved["match_id"], saved["answer"], saved["last_sequence"]) == ("m-2", ["d9", 20], 2)
    assert not path.exists()

    address2, service2 = serve(join)
    _resume_state(path, address2, bot_name="someone-else")
    monkeypatch.setenv("GAIGEL_RESUME_FILE", str(path))
    assert run(RecordingBot(), address2, "tok", matches=1, **FAST) == 1
    assert not service2.errors and got["join"].HasField("join")


class StubbornBot(Bot):
    """Always answers the first legal id, or None for the decisions listed in *silent*."""

    name = "tester"

    def __init__(self, silent: tuple[str, ...] = (), silent_retry: bool = False) -> None:
        self.silent = silent
        self.silent_retry = silent_retry
        self.decided: list[str] = []

    def decide(self, request: pb.DecisionRequest) -> int | None:
        retry = request.decision_id in self.decided
        self.decided.append(request.decision_id)
        if request.decision_id in self.silent or (retry and self.silent_retry):
            return None
        return request.legal_actions[0].id


def test_repeated_rejected_id_falls_back_to_first_untried_legal_action(serve: Any) -> None:
    """decide repeats the rejected first legal id: the SDK sends the next untried one, then the next, then gives up."""
    got: list[pb.Action] = []

    def script(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        conn.recv()
        yield fs.welcome()
        yield fs.match_start(1)
        yield fs.decision(2, "d1", [7, 9, 20])
        seq = 3
        for strikes in (1, 2, 3):
            a = conn.recv_action()
            got.append(a)
            yield fs.rejected(seq, a, pb.REJECT_REASON_NOT_YOUR_TURN, strikes=strikes)
            seq += 1
        # every legal action was rejected: the SDK sends nothing more for d1
        yield fs.card_played(seq, 1, 7)
        yield fs.decision(seq + 1, "d2", [30])
        got.append(conn.recv_action())
        yield fs.match_end(seq + 2)
        conn.drain()

    address, service = serve(script)
    bot = StubbornBot()
    assert run(bot, address, "tok", matches=1, **FAST) == 1
    assert not service.errors
    assert [(a.decision_id, a.action_id) for a in got] == [("d1", 7), ("d1", 9), ("d1", 20), ("d2", 30)]
    assert bot.decided == ["d1", "d1", "d2"]  # decide is asked once more after the first rejection only


def test_decide_returning_none_sends_no_answer(serve: Any) -> None:
    """None from decide (for a decision, and for its retry after a rejection): nothing is sent."""
    got: list[pb.Action] = []

    def script(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        conn.recv()
        yield fs.welcome()
        yield fs.match_start(1)
        yield fs.decision(2, "d1", [3, 7])  # the bot stays silent
        time.sleep(0.2)
        yield fs.card_played(3, 1, 3)  # the server's timeout fallback
        yield fs.decision(4, "d2", [9, 20])
        a = conn.recv_action()
        got.append(a)
        yield fs.rejected(5, a, pb.REJECT_REASON_STALE_DECISION)  # the retry returns None
        time.sleep(0.2)
        yield fs.card_played(6, 1, 9)
        yield fs.decision(7, "d3", [30])
        got.append(conn.recv_action())
        yield fs.match_end(8)
        conn.drain()

    address, service = serve(script)
    bot = StubbornBot(silent=("d1",), silent_retry=True)
    assert run(bot, address, "tok", matches=1, **FAST) == 1
    assert not service.errors
    assert [(a.decision_id, a.action_id) for a in got] == [("d2", 9), ("d3", 30)]
    assert bot.decided == ["d1", "d2", "d2", "d3"]


SLOW_STDIO_BOT = r"""
import json, sys
late = None
for line in sys.stdin:
    msg = json.loads(line)
    if late is not None:  # the bridge gave up on d1 and relays what came next: answer d1 now, too late
        print(json.dumps(late), flush=True)
        late = None
    if msg["type"] == "decision":
        answer = {"decision_id": msg["decision_id"], "action": msg["legal_actions"][0]["id"]}
        if msg["decision_id"] == "d1":
            late = answer
        else:
            print(json.dumps(answer), flush=True)
"""


def test_stdio_bridge_sends_no_late_answer_after_the_timeout(serve: Any) -> None:
    """A stdio bot answering after the deadline: the bridge sends nothing for that decision (no stale strike)."""
    import io

    from gaigel_harness.stdio import StdioBot

    got: list[pb.Action] = []

    def script(conn: fs.Conn) -> Iterator[pb.PlayResponse]:
        conn.recv()
        yield fs.welcome()
        yield fs.match_start(1)
        d1 = fs.decision(2, "d1", [3, 7])
        d1.decision_request.time_left.FromMilliseconds(200)
        yield d1
        # The server's timeout fallback. The bridge relays it once it has given up on d1 (after
        # 0.2 s + 0.1 s), and only then does the bot write its late line for d1.
        yield fs.card_played(3, 1, 3)
        # Events, not sleeps, order the rest: d2 goes out once the late line has reached the
        # bridge, so that it arrives outside a decision whatever the machine's load.
        deadline = time.monotonic() + 30.0
        while bot._lines.empty():
            assert time.monotonic() < deadline, "the bot's late line for d1 never reached the bridge"
            time.sleep(0.01)
        yield fs.decision(4, "d2", [9, 20])
        got.append(conn.recv_action())
        yield fs.match_end(5)
        conn.drain()

    address, service = serve(script)
    err = io.StringIO()
    bot = StdioBot([sys.executable, "-c", SLOW_STDIO_BOT], answer_margin=0.1, err=err)
    try:
        assert run(bot, address, "tok", matches=1, **FAST) == 1
    finally:
        bot.close()
    assert not service.errors
    assert [(a.decision_id, a.action_id) for a in got] == [("d2", 9)]
    assert "no answer to decision d1" in err.getvalue() and "sending no answer" in err.getvalue()
    # the late line was dropped by the bridge, not sent on
    assert any("ignoring a" in line and '"d1"' in line for line in err.getvalue().splitlines())
