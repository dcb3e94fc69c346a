"""Hostile input against a live ``gaigel serve`` subprocess (the bounded CI run of bench/fuzz.py).

Hypothesis draws Play streams, MatchService calls and raw TCP connections (strategies in
bench/fuzzkit.py, shared with bench/fuzz.py) and sends each to one real server process.
Properties: the process never dies; every call ends with a defined status (never UNKNOWN or
INTERNAL, never a hang), with a message when it is not OK; an admin call without the admin
token never gets past the token check; garbage from a bot seated in a real match ends up as
fault reason codes in the record; and afterwards the server is SERVING, plays a normal
match, and its open file descriptors, event-loop tasks and memory are where they were before.

The run is derandomized (the same examples every time), so CI is stable; the examples are
still drawn by the strategies, and the explicit ``@example`` inputs pin the cases found
by hand: sizes at the limit, invalid UTF-8, deep JSON, out-of-range durations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bench import fuzzkit as fk
from gaigel.replay import replay
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import match_service_pb2 as ms

FUZZ_SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
PLAY_EXAMPLES = 150
ADMIN_EXAMPLES = 300
TCP_EXAMPLES = 120
MATCH_EXAMPLES = 4
TOLERANCE = fk.Tolerance(fds=4, tasks=4, rss_bytes=48 * 1024 * 1024)
"""Growth allowed over the whole file: a few descriptors and tasks (a scrape or a channel in
flight), and memory for allocator slack and the matches the fuzz created (the server keeps
ended matches until --keep-ended pushes them out)."""


@dataclasses.dataclass
class Live:
    """The server under test, the client's event loop, and the resources measured before the fuzz."""

    server: fk.LiveServer
    loop: fk.LoopThread
    baseline: fk.Resources
    _fuzzer: fk.Fuzzer | None = None

    def fuzzer(self) -> fk.Fuzzer:
        """The shared fuzzer (its channels stay open across examples until :meth:`close_fuzzer`)."""
        if self._fuzzer is None:

            async def make() -> fk.Fuzzer:
                return fk.Fuzzer(self.server.address)

            self._fuzzer = self.loop.run(make())
        return self._fuzzer

    def send(self, inp: fk.Input) -> fk.Outcome:
        """Sends *inp*; fails at once if the server process died."""
        outcome = self.loop.run(self.fuzzer().run(inp))
        assert self.server.alive(), f"the server died on {inp!r}:\n{self.server.log_tail()}"
        return outcome

    def close_fuzzer(self) -> None:
        if self._fuzzer is not None:
            self.loop.run(self._fuzzer.close())
            self._fuzzer = None


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """One server for the whole file; the baseline is measured after a warm-up match and a
    few inputs of each kind, so one-time allocations do not count as growth."""
    server = fk.start_server(tmp_path_factory.mktemp("fuzz"))
    loop = fk.LoopThread()
    state = Live(server, loop, fk.measure(server))
    try:
        loop.run(fk.play_scripted_match(server.address, seed=3))
        for inp in _warm_up_inputs():
            state.send(inp)
        state.close_fuzzer()
        fk.settle(server)
        state.baseline = fk.measure(server)
        yield state
    finally:
        state.close_fuzzer()
        loop.close()
        server.stop()


def _warm_up_inputs() -> list[fk.Input]:
    join = ("join_ok", _join())
    return [
        fk.PlayInput((join, ("action", _action("x", 3))), "probe"),
        fk.PlayInput((join,), "half_close"),
        fk.PlayInput((("sized", fk.sized_action(fk.MAX_MESSAGE_BYTES + 1)),), "probe"),
        fk.AdminInput("ListMatches", b"", fk.GOOD_AUTH),
        fk.AdminInput("GetMatch", ms.GetMatchRequest(match_id="nope").SerializeToString(), None),
        fk.TcpInput("random", (b"\x00" * 64,), 0.02),
    ]


def _join(token: str = fk.FUZZ_TOKEN) -> bytes:
    return bs.PlayRequest(join=bs.Join(bot_token=token, bot_name=fk.FUZZ_BOT, protocol_version=1)).SerializeToString()


def _action(decision_id: str, action_id: int) -> bytes:
    return bs.PlayRequest(action=bs.Action(decision_id=decision_id, action_id=action_id)).SerializeToString()


def _check(outcome: fk.Outcome, inp: fk.Input) -> None:
    assert outcome.problem is None, f"{outcome.describe()}\ninput: {inp!r}"


# --- explicit examples: found by hand, kept so every run covers them --------------------------------

JOIN = ("join_ok", _join())
NON_UTF8_DECISION = fk.length_delimited(3, fk.length_delimited(1, b"\xff\xfe"))
NON_UTF8_TOKEN = fk.length_delimited(1, fk.length_delimited(1, b"\xc0\x80") + fk.length_delimited(2, b"fuzz"))
DEEP_JSON = ms.CreateMatchRequest(
    players=2, seat_bots=["house:random", "house:first"], hands=1, ruleset_overrides_json="[" * 5000 + "]" * 5000
)
HUGE_CLOCK = ms.CreateMatchRequest(players=2, seat_bots=[fk.IDLE_BOT, fk.IDLE_BOT], hands=1)
HUGE_CLOCK.clock.decision_time.seconds = 2**63 - 1


@settings(FUZZ_SETTINGS, max_examples=PLAY_EXAMPLES)
@example(fk.PlayInput((JOIN, ("sized", fk.sized_action(fk.MAX_MESSAGE_BYTES))), "probe"))
@example(fk.PlayInput((JOIN, ("sized", fk.sized_action(fk.MAX_MESSAGE_BYTES + 1))), "probe"))
@example(fk.PlayInput((JOIN, ("raw", NON_UTF8_DECISION)), "probe"))
@example(fk.PlayInput((("raw", NON_UTF8_TOKEN),), "probe"))
@example(fk.PlayInput((JOIN, ("action", _action("", 0))), "probe"))
@example(fk.PlayInput((JOIN, ("action", _action("f" * 32, -1)), ("action", _action("x", 165))), "probe"))
@example(fk.PlayInput((("action", _action("x", 0)),), "probe"))
@example(fk.PlayInput((("empty", b""),), "probe"))
@example(fk.PlayInput((JOIN, ("join_ok", _join())), "probe"))
@example(fk.PlayInput((JOIN, *[("action", _action("flood", 1))] * 1000), "noread"))
@given(inp=fk.play_inputs())
def test_play_streams_end_with_defined_statuses(live: Live, inp: fk.PlayInput) -> None:
    """Any Play stream ends with a defined status and message, or stays open and answers the probe."""
    _check(live.send(inp), inp)


@settings(FUZZ_SETTINGS, max_examples=ADMIN_EXAMPLES)
@example(fk.AdminInput("CreateMatch", DEEP_JSON.SerializeToString(), fk.GOOD_AUTH))
@example(fk.AdminInput("CreateMatch", HUGE_CLOCK.SerializeToString(), fk.GOOD_AUTH))
@example(fk.AdminInput("GetMatch", fk.length_delimited(1, b"\xff"), fk.GOOD_AUTH, raw=True))
@example(fk.AdminInput("CreateMatch", b"\xff\xff\xff", None, raw=True))
@example(fk.AdminInput("ListMatches", ms.ListMatchesRequest(page_token="9" * 5000).SerializeToString(), fk.GOOD_AUTH))
@example(fk.AdminInput("ListMatches", b"", "Bearer " + "x" * 16_000))
@example(fk.AdminInput("RegisterBot", ms.RegisterBotRequest(bot_name="x" * 65).SerializeToString(), fk.GOOD_AUTH))
@given(inp=fk.admin_inputs())
def test_match_service_calls_end_with_defined_statuses(live: Live, inp: fk.AdminInput) -> None:
    """Any MatchService call ends with a defined status; without the admin token, UNAUTHENTICATED."""
    _check(live.send(inp), inp)


@settings(FUZZ_SETTINGS, max_examples=TCP_EXAMPLES)
@example(fk.TcpInput("silent", (), 0.3))
@example(fk.TcpInput("half", (fk.PREFACE[:10],), 0.05))
@given(inp=fk.tcp_inputs())
def test_raw_connections_do_not_disturb_the_server(live: Live, inp: fk.TcpInput) -> None:
    """Random bytes, garbage HTTP/2 frames and cut-off connections: the server lives and still answers."""
    _check(live.send(inp), inp)
    assert fk.health_sync(live.server.address) == "SERVING", f"after {inp!r}"


def test_a_stream_that_sends_nothing_ends_at_the_join_timeout(live: Live) -> None:
    """No first message: DEADLINE_EXCEEDED from the server (not a hang), with a message."""
    outcome = live.loop.run(fk.run_silent(live.fuzzer()))
    assert outcome.result == "DEADLINE_EXCEEDED" and "Join timeout" in outcome.details, outcome.describe()


@settings(FUZZ_SETTINGS, max_examples=MATCH_EXAMPLES)
@example(moves=["illegal", "unknown_decision", "undecodable"], seed=1)
@example(moves=["illegal", "illegal", "stale", "illegal"], seed=2)
@given(moves=fk.garbage_moves, seed=st.integers(0, 2**32))
def test_garbage_from_a_seated_bot_ends_the_match_with_its_faults_recorded(
    live: Live, moves: list[str], seed: int
) -> None:
    """A bot with a valid token, seated in a real match, sends garbage: the match still ends
    (completed or forfeit), and the record names every fault with its reason code."""
    result = live.loop.run(
        fk.play_scripted_match(live.server.address, moves, hands=2, seed=seed, clock=fk.short_clock())
    )
    assert result.state == ms.MATCH_STATE_ENDED, result
    termination = result.record["result"]["termination"]
    assert termination in ("completed", "forfeit"), termination
    assert result.faults_as_expected(), (result.sent, result.expected, result.reasons)
    assert result.sent, "the bot was never asked for a decision"
    assert replay(result.record).ok


def test_after_the_fuzz_the_server_is_healthy_plays_and_has_not_grown(live: Live) -> None:
    """Runs last: SERVING, a normal match completes without faults, fds/tasks/RSS flat."""
    live.close_fuzzer()
    fk.settle(live.server)
    after = fk.measure(live.server)
    assert fk.health_sync(live.server.address) == "SERVING"
    result = live.loop.run(fk.play_scripted_match(live.server.address, players=3, hands=1, seed=11))
    assert result.record["result"]["termination"] == "completed" and result.reasons == []
    assert fk.leaks(live.baseline, after, TOLERANCE) == [], (live.baseline, after)
    assert live.server.alive()


def test_kit_sizes_messages_exactly_at_the_limit() -> None:
    """The size-limit inputs are what they claim: exactly the limit, and one byte over it."""
    assert len(fk.sized_action(fk.MAX_MESSAGE_BYTES)) == fk.MAX_MESSAGE_BYTES
    assert len(fk.sized_action(fk.MAX_MESSAGE_BYTES + 1)) == fk.MAX_MESSAGE_BYTES + 1
    assert fk.input_from_json(fk.PlayInput((JOIN,), "cancel").to_json()) == fk.PlayInput((JOIN,), "cancel")
