"""``gaigel check-bot``: a conformance run for any bot command.

Two parts:

* **Protocol checks** against a scripted BotService on 127.0.0.1 that plays one real hand
  (the engine deals and rules; the other seat plays randomly) and stages the situations:
  the Join, answer times, an ActionRejected the bot must recover from, a stream dropped
  mid-match that the bot must Resume with the right match id, seat, token and
  last_sequence, and the end of the session after MatchEnd, after which the process must
  exit with code 0. It speaks the mode the bot joined in: with ``Join.compact`` it folds
  HandStart and Events into the next DecisionRequest, as the server does (its one hand ends
  right before MatchEnd, which flushes the HandEnd, so ``Join.compact_hand_end`` changes
  nothing here; the real matches below fold it across their hands).
* **Rules checks** on the real server (short clocks, house bots on the other seat): the
  bot must answer every decision kind legally and without a fault: an opening
  declaration, plays in the talon phase, a meld/rob offer (seeds are searched so the bot's
  hand holds a marriage and the trump Seven), and in ``aus_mode = explicit`` the Aus/Pass
  decisions. After the first real match the same process must play a second on its session,
  as the protocol's sessions do and an arena with ``bot_processes = "per_run"`` relies on (a
  bot that leaves after one match is disqualified there); ``per_run=False`` (``gaigel arena
  check-bot`` of a ``per_match`` arena) reports a bot that leaves without failing it.

The bot is launched once per run with GAIGEL_SERVER, GAIGEL_TOKEN, GAIGEL_BOT_NAME and
GAIGEL_MATCHES=0 (no limit of its own, as the arena gives it) set;
for the real matches also GAIGEL_COMPACT, 1 and 0 in turn, so that a kit which reads it
(the Python SDK and the Go, TypeScript, Rust, Java and C++ kits do) plays in both modes.
Each check says the mode the bot joined in.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import queue
import random
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent import futures
from typing import IO, Any

import grpc

from gaigel.match import DecisionRequest, HandStarted, MatchDriver, MatchOver, MatchSpec, MatchTermination
from gaigel.ruleset import preset
from gaigel_api import PROTOCOL_VERSION
from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_api.v1 import bot_service_pb2_grpc as pb_grpc
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import game_pb2 as gm
from gaigel_harness.launch import bot_environment
from gaigel_harness.startup import REFUSAL_GRACE, STARTUP_TIMEOUT, quoted, tail_lines
from gaigel_server import codec
from gaigel_server.clock import Clock

BOT_NAME = "candidate"
PLAYERS = 2
SEAT = 1  # the candidate's seat in the scripted match (not 0, to catch bots that assume it)
EXIT_WAIT = 5.0
SEATED_AGAIN_WAIT = 10.0
"""Seconds after its first real match within which the bot must be seated in the second. A bot
that stays is seated at once (its session is idle when the match ends); the wait is for a bot
that leaves to finish exiting on a loaded machine, so that the reason names its exit code."""
JOIN = "joins with the right protocol version"
NEXT_MATCH = "plays the next match on its session"
PER_RUN_HINT = (
    'an arena with bot_processes = "per_run" keeps one process for all of a bot\'s matches and would '
    "disqualify it; play until the server ends the session (every kit's default, GAIGEL_MATCHES=0)"
)

KIND_OPENING = "opening declaration"
KIND_TALON = "play in the talon phase"
KIND_MELD_ROB = "meld/rob offer"
KIND_AUS = "aus/pass (aus_mode=explicit)"


@dataclasses.dataclass
class Check:
    name: str
    ok: bool | None  # None: not reached
    reason: str


class Results:
    """The checks so far, and the bot's last output lines where a stage failed."""

    def __init__(self) -> None:
        self.checks: dict[str, Check] = {}
        self.scripted_log = ""  # the bot's output tail when the scripted match failed (not --verbose)
        self.real_log = ""  # the same for the real matches
        self.real_modes: list[str] = []  # the mode the bot joined each real match in ("" when it never played)

    def set(self, name: str, ok: bool | None, reason: str) -> None:
        old = self.checks.get(name)
        if old is not None and old.ok is False:
            return  # the first failure stays
        self.checks[name] = Check(name, ok, reason)


# --- launching the bot ---------------------------------------------------------------


Launch = Callable[[Sequence[str], dict[str, str]], tuple[list[str], dict[str, str], tuple[int, ...]]]
"""(command, the bot's GAIGEL_* variables) -> (argv, environment, file descriptors to inherit)."""


@dataclasses.dataclass(frozen=True)
class Confinement:
    """How to start the bot as an arena would (``gaigel arena check-bot``): through *launch*, reaching
    the check's servers on unix sockets in *socket_dir*, which the bot sees as *seen_as*."""

    launch: Launch
    socket_dir: str
    seen_as: str

    def listen(self, server: Any, name: str) -> str:
        """Adds a unix socket *name* to the grpc *server*; the address the bot is given."""
        if server.add_insecure_port(f"unix:{self.socket_dir}/{name}") == 0:
            raise OSError(f"cannot listen on unix:{self.socket_dir}/{name}")
        os.chmod(f"{self.socket_dir}/{name}", 0o666)  # the bot's own uid must reach it
        return f"unix:{self.seen_as}/{name}"


class BotProcess:
    """The bot command with its stderr and stdout captured in a temp file (shown on failure)."""

    def __init__(
        self,
        cmd: Sequence[str],
        server: str,
        token: str,
        verbose: bool,
        compact: bool | None = None,
        confinement: Confinement | None = None,
    ) -> None:
        # GAIGEL_MATCHES 0, as the arena gives its bots: a limit exported in the caller's shell
        # must not decide whether the bot plays the next match.
        session = {"GAIGEL_SERVER": server, "GAIGEL_TOKEN": token, "GAIGEL_BOT_NAME": BOT_NAME, "GAIGEL_MATCHES": "0"}
        if compact is not None:  # asks kits that read it for a mode; the bot's Join decides
            session["GAIGEL_COMPACT"] = "1" if compact else "0"
        argv, env = list(cmd), bot_environment(**session)
        fds: tuple[int, ...] = ()
        if confinement is not None:
            argv, env, fds = confinement.launch(cmd, session)
        self.log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed with the object)
        out: Any = None if verbose else self.log
        try:
            self.proc = subprocess.Popen(
                argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out, pass_fds=fds, start_new_session=True
            )
        finally:
            for fd in fds:
                os.close(fd)

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            if self.wait(2.0) is None:
                self.proc.kill()
                self.proc.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # whatever the bot started

    def tail(self) -> str:
        """The last lines of its output, indented (empty when verbose: they were shown as they came)."""
        return quoted(self.last_lines()).lstrip("\n")

    def last_lines(self) -> list[str]:
        self.log.seek(0)
        return tail_lines(self.log.read())

    def exited(self, code: int, where: str) -> str:
        """The reason for an exit before or instead of joining, with the last lines of its output."""
        lines = self.last_lines()
        last = f"; its last output lines:{quoted(lines)}" if lines else ""
        return f"the bot exited with code {code} {where}{last}"


# --- the scripted servicer ------------------------------------------------------------


class ScriptAbort(Exception):
    """Ends the scripted stream (a failed expectation was recorded) with *code*, as the server would."""

    def __init__(self, reason: str, code: grpc.StatusCode = grpc.StatusCode.PERMISSION_DENIED) -> None:
        super().__init__(reason)
        self.code = code


class Stream:
    """One Play stream: the bot's messages arrive on a queue, so reads can time out."""

    def __init__(self, requests: Iterator[pb.PlayRequest]) -> None:
        self.inbox: queue.SimpleQueue[pb.PlayRequest | None] = queue.SimpleQueue()
        threading.Thread(target=self._pump, args=(requests,), daemon=True).start()

    def _pump(self, requests: Iterator[pb.PlayRequest]) -> None:
        try:
            for r in requests:
                self.inbox.put(r)
        except Exception:
            pass
        self.inbox.put(None)

    def recv(self, timeout: float) -> pb.PlayRequest | str | None:
        """The next message, None when the bot closed its side, "timeout" when nothing came."""
        try:
            return self.inbox.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return "timeout"


class ScriptedMatch(pb_grpc.BotServiceServicer):
    """Plays one 2-player hand with the candidate on seat 1 and stages the protocol checks."""

    def __init__(
        self, results: Results, token: str, deadline: float, seed: int, startup_timeout: float = STARTUP_TIMEOUT
    ) -> None:
        self.startup_timeout = startup_timeout
        self.codec = codec
        self.results = results
        self.token = token
        self.deadline = deadline
        self.bank = deadline
        self.grace = 10.0
        self.rules = preset("default", players=PLAYERS)
        self.dealer = (SEAT - 1) % PLAYERS  # so that the candidate is forehand
        bots = tuple(BOT_NAME if s == SEAT else "house:random" for s in range(PLAYERS))
        spec = MatchSpec(ruleset=self.rules, seed=seed, hands=1, bots=bots, first_dealer=self.dealer)
        self.driver = MatchDriver(spec, record=False, events=True)
        started = self.driver.next()
        assert isinstance(started, HandStarted)
        self.state = started.state
        self.hev = codec.HandEvents(self.rules, 0, self.state.talon_size)
        self.rng = random.Random(seed)
        self.match_id = f"check-{secrets.token_hex(6)}"
        self.resume_token = secrets.token_urlsafe(16)
        self.sent: list[pb.PlayResponse] = []  # every numbered message, for resends
        self.latencies: list[float] = []
        self.streams = 0
        self.stage = "join"  # join -> decide -> reject -> drop -> resumed -> finish -> done
        self.decisions = 0
        self.reject_tries = 0
        self.finished = threading.Event()
        self.resend_notes: list[str] = []
        self.dropped_at = 0
        self.drop_time = 0.0
        self.resume_detail = ""
        self.compact = False  # the bot's Join.compact
        self.held_start: gm.HandStart | None = None  # compact: waiting for the next DecisionRequest
        self.held_events: list[gm.Event] = []

    # --- helpers ---

    def _msg(self, **kind: Any) -> pb.PlayResponse:
        msg = pb.PlayResponse(sequence=len(self.sent) + 1, **kind)
        self.sent.append(msg)
        return msg

    def _out(self, **kind: Any) -> Iterator[pb.PlayResponse]:
        """The numbered messages to write for *kind*: in compact mode HandStart and Events wait
        for the next DecisionRequest and ride in it; anything else first flushes them."""
        if self.compact and "hand_start" in kind:
            self.held_start = kind["hand_start"]
            return
        if self.compact and "event" in kind:
            self.held_events.append(kind["event"])
            return
        if "decision_request" in kind:
            request: pb.DecisionRequest = kind["decision_request"]
            if self.held_start is not None:
                request.hand_start.CopyFrom(self.held_start)
            request.events.extend(self.held_events)
        else:
            if self.held_start is not None:
                yield self._msg(hand_start=self.held_start)
            for ev in self.held_events:
                yield self._msg(event=ev)
        self.held_start, self.held_events = None, []
        yield self._msg(**kind)

    def _flush_events(self) -> Iterator[pb.PlayResponse]:
        for ev in self.driver.take_events():
            for routed in self.hev.feed(ev):
                yield from self._out(event=gm.Event.FromString(routed.for_viewer(SEAT)))

    def _house_turns(self) -> Iterator[pb.PlayResponse]:
        """Plays the other seat's random decisions up to the candidate's next decision (or the hand's end)."""
        while isinstance(step := self.driver.next(), DecisionRequest) and step.seat != SEAT:
            self.driver.decide(self.rng.choice(step.legal_actions))
            yield from self._flush_events()

    def _fail(self, name: str, reason: str) -> ScriptAbort:
        self.results.set(name, False, reason)
        return ScriptAbort(reason)

    def _refuse(self, code: grpc.StatusCode, message: str) -> ScriptAbort:
        """Fails the join check the way the real server refuses a first message: with *code* and *message*."""
        self.results.set(JOIN, False, f"the server refused the first message with {code.name}: {message}")
        return ScriptAbort(message, code)

    def _await_action(
        self,
        stream: Stream,
        did: str,
        legal: list[int],
        sent_at: float,
        what: str,
        check: str = "answers within the deadline",
    ) -> int:
        """The bot's next Action for *did*; records the latency; raises ScriptAbort on failure (of *check*)."""
        limit = self.deadline + self.bank + 1.0
        while True:
            msg = stream.recv(sent_at + limit - time.monotonic())
            if msg == "timeout":
                raise self._fail(check, f"no answer to {what} within {limit:.1f} s")
            if msg is None:
                raise self._fail(check, f"the bot closed the stream instead of answering {what}")
            assert isinstance(msg, pb.PlayRequest)
            if msg.HasField("leave"):
                continue
            if not msg.HasField("action"):
                raise self._fail(check, f"expected an Action for {what}, got {msg.WhichOneof('message')}")
            if msg.action.decision_id != did:
                self.resend_notes.append(f"an Action for decision {msg.action.decision_id!r} while {did} was open")
                continue
            took = time.monotonic() - sent_at
            self.latencies.append(took)
            if took > self.deadline:
                self.results.set(
                    "answers within the deadline",
                    False,
                    f"{what} answered after {took * 1000:.0f} ms; the decision time was {self.deadline * 1000:.0f} ms",
                )
            if msg.action.action_id not in legal:
                raise self._fail(
                    "legal answers", f"{what}: action {msg.action.action_id} is not among the legal ids {legal}"
                )
            return int(msg.action.action_id)

    def _decision(self, request: DecisionRequest) -> tuple[pb.PlayResponse, list[int]]:
        legal = list(request.legal_actions)
        did = secrets.token_urlsafe(12)
        req = pb.DecisionRequest(
            decision_id=did,
            legal_actions=[self.codec.legal_action(a) for a in legal],
            observation=self.codec.observation(request.observation, 0),
            time_left=codec.duration(self.deadline),
            bank_left=codec.duration(self.bank),
        )
        (msg,) = self._out(decision_request=req)
        return msg, legal

    # --- the RPC ---

    def Play(self, request_iterator: Any, context: grpc.ServicerContext) -> Iterator[pb.PlayResponse]:
        stream = Stream(request_iterator)
        self.streams += 1
        try:
            if self.streams == 1:
                yield from self._first_stream(stream, context)
            elif self.stage == "drop":
                yield from self._resumed_stream(stream, context)
            else:
                context.abort(grpc.StatusCode.PERMISSION_DENIED, "check-bot: no further stream expected")
        except ScriptAbort as e:
            self.finished.set()
            context.abort(e.code, str(e) if e.code is not grpc.StatusCode.PERMISSION_DENIED else f"check-bot: {e}")
        except Exception as e:  # a bug of ours: report it rather than hang
            if self.stage == "drop":
                raise  # context.abort of the planned drop
            self.results.set("scripted server", False, f"internal error: {type(e).__name__}: {e}")
            self.finished.set()
            raise

    def _first_stream(self, stream: Stream, context: grpc.ServicerContext) -> Iterator[pb.PlayResponse]:
        first = stream.recv(self.startup_timeout)
        name = JOIN
        if first == "timeout":
            raise self._refuse(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                f"the bot opened a stream but sent no first message within {self.startup_timeout:g} s",
            )
        if first is None:
            raise self._fail(name, "the bot opened a stream and closed it without sending a first message")
        assert isinstance(first, pb.PlayRequest)
        kind = first.WhichOneof("message")
        if kind is None:
            raise self._refuse(
                grpc.StatusCode.INVALID_ARGUMENT, "MALFORMED_MESSAGE: PlayRequest has no message set (expected join)"
            )
        if kind != "join":
            raise self._refuse(
                grpc.StatusCode.FAILED_PRECONDITION, f"MISSING_JOIN: the first message must be Join, got {kind}"
            )
        j = first.join
        if j.protocol_version != PROTOCOL_VERSION:
            raise self._refuse(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"unsupported protocol_version {j.protocol_version}: this server speaks {PROTOCOL_VERSION} (gaigel.v1)",
            )
        problems = []
        if j.bot_token != self.token:
            problems.append("bot_token is not $GAIGEL_TOKEN")
        if j.bot_name != BOT_NAME:
            problems.append(f"bot_name {j.bot_name!r} is not $GAIGEL_BOT_NAME ({BOT_NAME!r})")
        if problems:
            raise self._refuse(grpc.StatusCode.UNAUTHENTICATED, "; ".join(problems))
        self.compact = j.compact
        mode = "compact" if j.compact else "plain"
        self.results.set(
            name,
            True,
            f"Join with protocol_version 1, token and name from the environment (version {j.bot_version!r}, {mode} mode)",
        )
        yield pb.PlayResponse(
            sequence=0,
            welcome=pb.Welcome(
                session_id="check-1",
                bot_name=BOT_NAME,
                protocol_version=PROTOCOL_VERSION,
                server_version="check-bot",
                max_message_bytes=65536,
            ),
        )
        clock = Clock(decision_time=self.deadline, bank=self.bank, strikes_limit=3, resume_grace=self.grace)
        sides = [
            cm.Side(
                side=x,
                seats=[
                    cm.SeatInfo(seat=s, bot_name=BOT_NAME if s == SEAT else "house:random")
                    for s in self.rules.seats_of(x)
                ],
            )
            for x in range(self.rules.num_sides)
        ]
        yield from self._out(
            match_start=pb.MatchStart(
                match_id=self.match_id,
                seat=SEAT,
                side=self.rules.side_of(SEAT),
                players=PLAYERS,
                sides=sides,
                ruleset_preset="default",
                ruleset_json=json.dumps(self.rules.to_dict(), sort_keys=True),
                hands=1,
                first_dealer_seat=self.dealer,
                clock=codec.clock(clock),
                resume_token=self.resume_token,
            )
        )
        yield from self._out(hand_start=self.codec.hand_start(self.state, 0, self.dealer, SEAT))
        yield from self._flush_events()  # what happened at the deal
        self.stage = "decide"
        yield from self._play(stream, context)

    def _resumed_stream(self, stream: Stream, context: grpc.ServicerContext) -> Iterator[pb.PlayResponse]:
        name = "resumes after a dropped stream"
        first = stream.recv(self.grace)
        if first == "timeout" or first is None:
            raise self._fail(name, "a new stream came but sent no Resume")
        assert isinstance(first, pb.PlayRequest)
        if not first.HasField("resume"):
            raise self._fail(name, f"the first message after the drop is {first.WhichOneof('message')}, not Resume")
        r = first.resume
        problems = []
        if r.match_id != self.match_id:
            problems.append(f"match_id {r.match_id!r}, expected {self.match_id!r}")
        if r.seat != SEAT:
            problems.append(f"seat {r.seat}, expected {SEAT}")
        if r.resume_token != self.resume_token:
            problems.append("resume_token is not the one from MatchStart")
        if r.last_sequence > self.dropped_at:
            problems.append(f"last_sequence {r.last_sequence} is above the last message sent ({self.dropped_at})")
        if problems:
            raise self._fail(name, "; ".join(problems))
        note = "" if r.last_sequence == self.dropped_at else f" (asked for a resend from {r.last_sequence + 1})"
        self.resume_detail = (
            f"Resume with match id, seat {SEAT}, token and last_sequence {r.last_sequence} of {self.dropped_at}{note}"
        )
        yield pb.PlayResponse(
            sequence=0,
            welcome=pb.Welcome(
                session_id="check-1", bot_name=BOT_NAME, protocol_version=1, server_version="check-bot", resumed=True
            ),
        )
        for msg in self.sent:
            if msg.sequence > r.last_sequence:
                yield msg
        self.stage = "resumed"
        yield from self._play(stream, context)

    def _play(self, stream: Stream, context: grpc.ServicerContext) -> Iterator[pb.PlayResponse]:
        state, driver = self.state, self.driver
        while True:
            yield from self._house_turns()
            request = driver.next()
            if not isinstance(request, DecisionRequest):
                break
            msg, legal = self._decision(request)
            did = msg.decision_request.decision_id
            sent_at = time.monotonic()
            yield msg
            self.decisions += 1
            what = f"decision {self.decisions} ({_phase(state)})"
            action = self._await_action(stream, did, legal, sent_at, what)
            if self.stage == "decide":
                self.stage = "reject"
            elif self.stage == "reject" and len(legal) >= 2:
                self.reject_tries += 1
                if action != legal[0] or self.reject_tries >= 4:
                    action = yield from self._reject(stream, did, legal, action, what)
                    self.drop_time = time.monotonic() + 1.0
                    self.stage = "drop"
                    driver.decide(action)
                    yield from self._flush_events()
                    yield from self._house_turns()
                    self.dropped_at = len(self.sent)
                    time.sleep(0.05)
                    self.drop_time = time.monotonic()
                    context.abort(grpc.StatusCode.UNAVAILABLE, "check-bot: the stream is dropped on purpose; resume it")
            elif self.stage == "resumed":
                self.results.set(
                    "resumes after a dropped stream", True, f"{self.resume_detail}; answered the next decision"
                )
                self.stage = "finish"
            driver.decide(action)
            yield from self._flush_events()
        yield from self._out(hand_end=self.codec.hand_end(state, 0, self.hev.deciding_seat, self.rules))
        over = driver.next()
        while not isinstance(over, MatchOver):  # the HandEnded of the one hand, then the end
            over = driver.next()
        score = over.score
        *flushed, match_end = self._out(
            match_end=gm.MatchEnd(
                match_id=self.match_id,
                termination=cm.MATCH_TERMINATION_COMPLETED,
                winner_sides=score.winners(),
                sides=codec.side_results(score.hands_won, score.dashes),
                hands_played=score.hands_played,
            )
        )
        yield from flushed
        # "done" before the yield: a fast bot may exit on MatchEnd before this generator resumes.
        self.stage = "done"
        yield match_end
        # The session ends here with OK, as after a Leave: wait briefly for the bot's last messages.
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            got = stream.recv(end - time.monotonic())
            if got is None or got == "timeout":
                break
        self.finished.set()

    def _reject(
        self, stream: Stream, did: str, legal: list[int], action: int, what: str
    ) -> Generator[pb.PlayResponse, None, int]:
        name = "recovers after ActionRejected"
        sent_at = time.monotonic()
        yield from self._out(
            action_rejected=pb.ActionRejected(
                decision_id=did,
                action_id=action,
                reason=pb.REJECT_REASON_ILLEGAL_ACTION,
                message=f"check-bot: action {action} rejected on purpose; answer again with another legal action",
                decision_open=True,
                strikes=1,
                strikes_limit=3,
            )
        )
        try:
            again = self._await_action(stream, did, legal, sent_at, f"{what} after the rejection", check=name)
        except ScriptAbort as e:
            raise self._fail(name, str(e)) from None
        if again == action:
            raise self._fail(name, f"the bot repeated the rejected action {action}")
        self.results.set(name, True, f"answered {again} after action {action} was rejected (decision still open)")
        return again


def _phase(state: Any) -> str:
    return str(state.phase.name).lower() if hasattr(state, "phase") else "?"


def run_scripted(
    cmd: Sequence[str],
    results: Results,
    deadline: float,
    verbose: bool,
    startup_timeout: float = STARTUP_TIMEOUT,
    confinement: Confinement | None = None,
) -> None:
    """The protocol checks."""
    token = secrets.token_urlsafe(16)
    script = ScriptedMatch(results, token, deadline, random.SystemRandom().randrange(1 << 63), startup_timeout)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_BotServiceServicer_to_server(script, server)
    port = server.add_insecure_port("127.0.0.1:0")
    address = f"127.0.0.1:{port}" if confinement is None else confinement.listen(server, "scripted.sock")
    server.start()
    bot = BotProcess(cmd, address, token, verbose, confinement=confinement)
    try:
        started = time.monotonic()
        limit = started + startup_timeout + 120.0
        while not script.finished.wait(0.1):
            if script.stage == "done":
                break  # MatchEnd is out; the bot may already be gone, taking the stream with it
            if script.streams == 0 and time.monotonic() > started + startup_timeout:
                results.set(
                    JOIN,
                    False,
                    f"the bot opened no stream to {address} (its GAIGEL_SERVER) within {startup_timeout:g} s "
                    "(--startup-timeout)",
                )
                break
            code = bot.proc.poll()
            if code is not None and script.stage != "done":
                time.sleep(0.2)
                if script.finished.is_set():
                    break
                where = {
                    "join": f"before joining on {address} (its GAIGEL_SERVER)",
                    "drop": "after the stream was dropped (no Resume)",
                }.get(script.stage, f"during the match (stage {script.stage})")
                reason = (
                    bot.exited(code, where) if script.stage == "join" else f"the bot exited with code {code} {where}"
                )
                name = "resumes after a dropped stream" if script.stage == "drop" else _stage_check(script.stage)
                results.set(name, False, reason)
                break
            if script.stage == "drop" and time.monotonic() > script.drop_time + script.grace:
                results.set(
                    "resumes after a dropped stream",
                    False,
                    f"no Resume within {script.grace:g} s after the server dropped the stream (UNAVAILABLE)",
                )
                break
            if time.monotonic() > limit:
                results.set(
                    _stage_check(script.stage), False, "the scripted match took longer than 120 s after the join"
                )
                break
        if script.stage == "done":
            code = bot.wait(EXIT_WAIT)
            if code == 0:
                results.set(
                    "exits cleanly after MatchEnd", True, "exit code 0 after MatchEnd and the end of the session"
                )
            elif code is None:
                results.set(
                    "exits cleanly after MatchEnd",
                    False,
                    f"still running {EXIT_WAIT:g} s after MatchEnd and the server ending the session with OK",
                )
            else:
                results.set("exits cleanly after MatchEnd", False, f"exit code {code} after MatchEnd")
        if script.latencies:
            results.set("legal answers", True, f"all {len(script.latencies)} answers named a legal action id")
            worst = max(script.latencies)
            results.set(
                "answers within the deadline",
                worst <= deadline,
                f"{len(script.latencies)} answers, slowest {worst * 1000:.0f} ms (limit {deadline * 1000:.0f} ms)",
            )
    finally:
        bot.stop()
        server.stop(0.5)
    if any(c.ok is False for c in results.checks.values()) and not verbose:
        results.scripted_log = bot.tail()


def _stage_check(stage: str) -> str:
    return {
        "join": "joins with the right protocol version",
        "decide": "answers within the deadline",
        "reject": "recovers after ActionRejected",
        "drop": "resumes after a dropped stream",
        "resumed": "resumes after a dropped stream",
        "finish": "exits cleanly after MatchEnd",
    }.get(stage, "scripted match")


# --- the real matches --------------------------------------------------------------------


def _seat0_has_meld_and_seven(seed: int, rules: Any) -> bool:
    from gaigel.cards import Rank, card_rank, card_suit
    from gaigel.deal import deal

    d = deal(seed, 0, PLAYERS, rules.deal_packets)
    hand = d.hands[0]  # the forehand (seat 0 with first dealer 1)
    kings = {card_suit(c) for c in hand if card_rank(c) == Rank.KING}
    obers = {card_suit(c) for c in hand if card_rank(c) == Rank.OBER}
    trump = card_suit(d.trump_card)
    seven = any(card_rank(c) == Rank.SEVEN and card_suit(c) == trump for c in hand)
    return bool(kings & obers) and seven


def _kinds_faced(record: dict[str, Any], seat: int) -> dict[str, int]:
    """Decision kinds *seat* faced in *record* (replayed with the engine)."""
    from gaigel import actions as A
    from gaigel.match import hand_setup, spec_from_record
    from gaigel.state import GaigelState

    spec = spec_from_record(record)
    out: dict[str, int] = {}
    for hand in record["hands"]:
        d, _dealer, forehand = hand_setup(spec, hand["index"])
        state = GaigelState(spec.ruleset, d, forehand)
        for entry in hand["actions"]:
            if entry["seat"] == seat:
                legal = state.legal_actions()
                kinds = set()
                if any(A.OPENING_BASE <= a < A.AUS for a in legal):
                    kinds.add(KIND_OPENING)
                if any(a in (A.AUS, A.PASS) for a in legal):
                    kinds.add(KIND_AUS)
                if any(A.MELD_PLAY_BASE <= a <= A.ROB or A.MELD_BASE <= a < A.NO_MELD for a in legal):
                    kinds.add(KIND_MELD_ROB)
                if state.talon_size > 0 and any(a < A.MELD_PLAY_BASE for a in legal):
                    kinds.add(KIND_TALON)
                for k in kinds:
                    out[k] = out.get(k, 0) + 1
            state.apply(entry["action"])
    return out


async def _real_match(
    cmd: Sequence[str],
    rules: Any,
    seed: int,
    deadline: float,
    verbose: bool,
    compact: bool | None = None,
    startup_timeout: float = STARTUP_TIMEOUT,
    confinement: Confinement | None = None,
    next_match: bool = False,
) -> RealMatch:
    """One real match against a house bot; *compact* sets GAIGEL_COMPACT. With *next_match*, once
    it completed, a second (one hand) that the same process must be seated in and play."""
    from gaigel_api.v1 import match_service_pb2 as ms
    from gaigel_server import matches
    from gaigel_server.logging import configure_logging
    from gaigel_server.server import ServerConfig, create_server
    from gaigel_server.states import TableState

    configure_logging("warning" if verbose else "error")
    clock = Clock(decision_time=deadline, bank=deadline, strikes_limit=3, resume_grace=5.0)
    server, port = create_server("127.0.0.1:0", ServerConfig(clock=clock))
    address = f"127.0.0.1:{port}"
    if confinement is not None:
        address = confinement.listen(server.grpc, f"real-{secrets.token_hex(4)}.sock")
    await server.start()
    notes: list[str] = []
    bot: BotProcess | None = None
    try:
        token = server.bots.register(BOT_NAME)
        bot = BotProcess(cmd, address, token, verbose, compact, confinement)
        request = ms.CreateMatchRequest(
            players=PLAYERS,
            seat_bots=[BOT_NAME, "house:random"],
            hands=2,
            seed=seed,
            ruleset_preset="default",
            ruleset_overrides_json=json.dumps(rules.to_dict()),
            first_dealer_seat=1,
        )
        assert server.play is not None
        refusals = server.play.refusals
        started = time.monotonic()
        limit = started + startup_timeout + 90.0
        launched = bot

        async def stop(table: Any) -> str:
            waiting = table.state is TableState.WAITING
            why = ""
            if time.monotonic() > limit:
                why = "the match took longer than 90 s"
            elif waiting and launched.proc.poll() is not None:
                why = launched.exited(launched.proc.returncode, f"before joining on {address} (its GAIGEL_SERVER)")
            elif waiting and refusals and time.monotonic() - refusals[-1].at >= REFUSAL_GRACE:
                why = f"the server refused the bot's stream with {refusals[-1].code.name}: {refusals[-1].message}"
            elif waiting and time.monotonic() > started + startup_timeout:
                why = f"the bot did not join on {address} within {startup_timeout:g} s (--startup-timeout)"
            if why:
                notes.append(why)
            return why

        table = server.lobby.open(matches.validate(request, server.bots, clock))
        await server.lobby.play(table, stop)
        assert table.record is not None
        after: str | None = None
        done = (table.record.get("result") or {}).get("termination") == MatchTermination.COMPLETED.value
        if next_match and done and not notes:
            after = await _next_match(server, request, launched, clock)
    finally:
        if bot is not None:
            bot.stop()
        await server.stop(1.0)
    assert bot is not None and table.record is not None
    return RealMatch(table.record, notes, table.modes[0], bot.tail(), after)


async def _next_match(server: Any, first: Any, bot: BotProcess, clock: Clock) -> str:
    """Plays a one-hand match after *first* on *server*; "" when *bot*'s process was seated in it
    within SEATED_AGAIN_WAIT seconds and played it without a fault, else why not."""
    from gaigel_api.v1 import match_service_pb2 as ms
    from gaigel_server import matches
    from gaigel_server.states import TableState

    request = ms.CreateMatchRequest()
    request.CopyFrom(first)
    request.hands, request.seed = 1, first.seed ^ 1
    ended = time.monotonic()
    why = ""

    async def watch(table: Any) -> str:
        nonlocal why
        if table.state is not TableState.WAITING:
            return ""
        if bot.proc.poll() is not None:
            why = f"the bot exited with code {bot.proc.returncode} after its first match"
        elif time.monotonic() - ended > SEATED_AGAIN_WAIT:
            why = (
                f"the bot was not seated in the next match within {SEATED_AGAIN_WAIT:g} s of its first "
                "(it left, or closed its stream and did not join again)"
            )
        return why

    table = server.lobby.open(matches.validate(request, server.bots, clock))
    await server.lobby.play(table, watch)
    if why:
        return why
    record = table.record or {}
    faults = [f for f in record.get("faults", []) if f["seat"] == 0]
    if faults:
        return f"in the next match: {faults[0]['reason']}: {faults[0]['message']}"
    term = (record.get("result") or {}).get("termination", "?")
    return "" if term == MatchTermination.COMPLETED.value else f"the next match ended {term}"


@dataclasses.dataclass(frozen=True)
class RealMatch:
    """One real match of check-bot: its record, notes on what went wrong, the mode the bot joined in
    ("compact", "plain", or "" when it never played), the last lines of the bot's output and, if
    asked for, how the next match on the same session went ("": played; None: not played)."""

    record: dict[str, Any]
    notes: list[str]
    mode: str
    bot_log: str
    next_match: str | None = None


def run_real(
    cmd: Sequence[str],
    results: Results,
    deadline: float,
    max_matches: int,
    verbose: bool,
    startup_timeout: float = STARTUP_TIMEOUT,
    confinement: Confinement | None = None,
    per_run: bool = True,
) -> None:
    """The rules checks on the real server, and the next match on one session after the first
    (failed when the bot leaves only if *per_run*)."""
    from gaigel.ruleset import Ruleset, preset

    base = preset("default", players=PLAYERS)
    rng = random.SystemRandom()
    covered: dict[str, str] = {}
    played = 0  # real matches so far: GAIGEL_COMPACT is 1 for even ones, 0 for odd ones
    plans: list[tuple[list[str], Any]] = [
        ([KIND_OPENING, KIND_TALON, KIND_MELD_ROB], base),
        ([KIND_AUS], Ruleset.from_dict({"aus_mode": "explicit"}, base)),
    ]
    for wanted, rules in plans:
        for attempt in range(max_matches):
            if all(k in covered for k in wanted):
                break
            seed = rng.randrange(1 << 63)
            if KIND_MELD_ROB in wanted and KIND_MELD_ROB not in covered:
                for _ in range(5000):
                    if _seat0_has_meld_and_seven(seed, rules):
                        break
                    seed = rng.randrange(1 << 63)
            real = asyncio.run(
                _real_match(
                    cmd, rules, seed, deadline, verbose, played % 2 == 0, startup_timeout, confinement, played == 0
                )
            )
            played += 1
            if real.next_match is not None:
                _judge_next_match(results, real, seed, per_run)
            results.real_modes.append(real.mode)
            record, notes, mode, tail = real.record, real.notes, real.mode, real.bot_log
            faults = [f for f in record.get("faults", []) if f["seat"] == 0]
            term = (record.get("result") or {}).get("termination", "?")
            label = f"match seed {seed}" + (" (aus_mode=explicit)" if KIND_AUS in wanted else "")
            label += f", {mode or 'no'} mode"
            if faults or notes or term != MatchTermination.COMPLETED.value:
                why = "; ".join([f"{f['reason']}: {f['message']}" for f in faults[:1]] + notes) or f"match {term}"
                if len(faults) > 1:
                    why += f" (and {len(faults) - 1} more: {', '.join(f['reason'] for f in faults[1:])})"
                for k in wanted:
                    if k not in covered:
                        results.set(f"answers: {k}", False, f"{label}: {why}")
                if tail and not verbose:
                    results.real_log = tail
                return
            slow = [
                a["ms"] for h in record["hands"] for a in h["actions"] if a["seat"] == 0 and a["ms"] > deadline * 1000
            ]
            if slow:
                results.set(
                    "answers within the deadline",
                    False,
                    f"{label}: {len(slow)} answers slower than {deadline * 1000:.0f} ms (slowest {max(slow):.0f} ms)",
                )
            for kind, n in _kinds_faced(record, 0).items():
                if kind in wanted and kind not in covered:
                    covered[kind] = f"{n} answered legally without a fault ({label}, attempt {attempt + 1})"
        for k in wanted:
            if k in covered:
                results.set(f"answers: {k}", True, covered[k])
            else:
                results.set(
                    f"answers: {k}", False, f"not offered to the bot in {max_matches} matches (increase --max-matches)"
                )


def _judge_next_match(results: Results, real: RealMatch, seed: int, per_run: bool) -> None:
    why = real.next_match
    if not why:
        results.set(
            NEXT_MATCH, True, f"seated again and played a one-hand match after match seed {seed} without a fault"
        )
    elif per_run:
        results.set(NEXT_MATCH, False, f"{why}; {PER_RUN_HINT}")
        if real.bot_log and not results.real_log:
            results.real_log = real.bot_log
    else:
        results.set(NEXT_MATCH, True, f"not required here (this arena starts a process per match): {why}")


# --- the command ---------------------------------------------------------------------------

ORDER = [
    "joins with the right protocol version",
    "answers within the deadline",
    "legal answers",
    "recovers after ActionRejected",
    "resumes after a dropped stream",
    "exits cleanly after MatchEnd",
    NEXT_MATCH,
    f"answers: {KIND_OPENING}",
    f"answers: {KIND_TALON}",
    f"answers: {KIND_MELD_ROB}",
    f"answers: {KIND_AUS}",
]


def run_checks(
    cmd: Sequence[str],
    *,
    deadline: float = 1.0,
    max_matches: int = 8,
    as_json: bool = False,
    verbose: bool = False,
    startup_timeout: float = STARTUP_TIMEOUT,
    confinement: Confinement | None = None,
    per_run: bool = True,
) -> int:
    """Runs every check; prints PASS/FAIL lines (or JSON); returns 0 only when all pass.

    With *confinement* the bot runs as an arena would run it (its sandbox and limits); without
    *per_run* a bot that leaves after one match passes (an arena that starts a process per match).

    A failure is reported once: the checks it left unreachable (the later stages of the scripted match,
    and everything after a failed join) are listed as not reached because of it, not as failures."""
    results = Results()
    started = time.monotonic()
    try:
        run_scripted(cmd, results, deadline, verbose, startup_timeout, confinement)
    except OSError as e:
        print(f"gaigel check-bot: error: cannot start {' '.join(cmd)!r}: {e.strerror or e}", file=sys.stderr)
        return 2
    join = results.checks.get(JOIN)
    if join is None or join.ok is not False:  # a bot that cannot join would fail the real matches the same way
        run_real(cmd, results, deadline, max_matches, verbose, startup_timeout, confinement, per_run)
    blocker = next((n for n in ORDER if n in results.checks and results.checks[n].ok is False), None)
    unreached = f"not reached: {blocker} failed" if blocker else "not reached"
    checks = [results.checks.get(name) or Check(name, None, unreached) for name in ORDER]
    checks += [c for name, c in results.checks.items() if name not in ORDER]
    ok = all(c.ok for c in checks)
    shown = "\n".join(c.reason for c in checks)
    logs = [x for x in (results.scripted_log, results.real_log) if x and x not in shown]
    if as_json:
        checked = [dataclasses.asdict(c) for c in checks]
        bot_log = "\n".join(logs) if not ok else ""
        print(json.dumps({"ok": ok, "checks": checked, "real_match_modes": results.real_modes, "bot_log": bot_log}))
    else:
        for c in checks:
            tag = "PASS" if c.ok else ("FAIL" if c.ok is False else "NOT REACHED")
            print(f"{tag:5} {c.name}: {c.reason}")
        if not ok and logs:
            print("last lines of the bot's output:")
            print("\n".join(logs))
        passed = sum(c.ok is True for c in checks)
        failed = sum(c.ok is False for c in checks)
        counts = f"{passed} of {len(checks)} checks passed"
        if not ok:
            counts += f", {failed} failed, {len(checks) - passed - failed} not reached"
        print(f"{'ok' if ok else 'FAILED'}: {counts} in {time.monotonic() - started:.1f} s")
    return 0 if ok else 1


__all__ = ["Confinement", "Launch", "run_checks"]
