"""A chaos bot: plays legal moves, and at seeded random decisions misbehaves on purpose.

The soak (``bench/soak.py``) runs it in an arena to prove that every fault a bot can
commit ends up in the match record under its reason code, that no match is lost or
counted twice, and that the arena still rates everyone. It is a real gRPC bot process on
the SDK's session loop (:class:`gaigel_client.client.Session`), with a stream whose
request serializer can also put raw bytes on the wire.

At every fresh ``DecisionRequest`` (not one the server issued while the bot was away and
sends when it resumes) one uniform draw picks at most one fault, with the
per-decision probabilities of a spec such as
``timeout=0.01,garbage=0.005,illegal=0.01,stale=0.005,disconnect=0.005,crash=0.002``
(flag ``--chaos``, else ``$GAIGEL_CHAOS``):

* ``timeout``: sleeps past the decision's time and bank and sends no answer
  (TIMEOUT_FALLBACK);
* ``illegal``: answers with an action id that is not legal, then with a legal one
  (ILLEGAL_ACTION);
* ``stale``: first sends an answer quoting a closed or unknown decision id
  (STALE_DECISION), then the real one;
* ``garbage``: sends bytes that are not a PlayRequest; the server ends the stream and
  the bot resumes (MALFORMED_MESSAGE, DISCONNECT, RESUMED);
* ``disconnect``: cancels its stream, before or after answering, and resumes
  (DISCONNECT, RESUMED);
* ``crash``: exits at once with code :data:`CRASH_EXIT_CODE` (``os._exit``); the arena
  restarts it (DISCONNECT, then RESUMED or FORFEIT).

**Seeded and reproducible.** The draw, the illegal id, the garbage bytes and the move
played are functions of ``--seed`` and of what the bot sees (its observation and legal
actions), never of time or process: the same seed in the same situation does the same
thing, whatever process is asked.

**Crash and restart.** The arena restarts a bot process that exits, with the same
environment. Each process keeps the SDK's resume file as ``resume-<pid>.json`` in a state
directory shared by the processes of one bot on one server (``--state-dir``, default a
folder under the temporary directory named after the bot and the server address). A new
process claims the file of a dead process (an atomic rename) and resumes that match; the
decision it crashed on is marked so that it is not crashed on again. At most one crash
per ``--crash-interval`` seconds (default 10) among the processes of one bot: the arena
stops a bot that exits 10 times within a minute.

**Otherwise a careful bot.** Apart from the faults it injects, it must not collect
faults of its own, so that every recorded fault is explained. It plays on the SDK's
session loop as it is: the SDK keeps the pending decision open through Fault events (and
answers it after a Resume), and the server charges no strike for an answer to a request
that the timeout fallback decided while the seat was away.

**The fault log.** Every injected fault is one JSON line (``event: "fault"``, ``kind``,
the server's ``match_id``, ``seat``, ``hand``, ``decision_id``, ``pid``, ``bot``, ...) and
every process start one line (``event: "start"``, ``resumed_from``; also
``"suppressed"`` for a crash within the interval), appended with a single ``write`` to
``--fault-log`` (else ``$GAIGEL_CHAOS_LOG``, else stderr), so the soak can reconcile what
was injected against what was recorded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import struct
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import grpc

from gaigel.actions import NUM_ACTIONS
from gaigel.match import FaultReason
from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_api.v1 import bot_service_pb2_grpc as pb_grpc
from gaigel_api.v1 import common_pb2, game_pb2
from gaigel_client.bot import Bot
from gaigel_client.client import (
    DEFAULT_SERVER,
    PendingDecision,
    ResumeFile,
    Session,
    compact_from_env,
    matches_from_env,
)
from gaigel_client.errors import ConfigError

__all__ = [
    "CRASH_EXIT_CODE",
    "EXPECTED_REASONS",
    "FAULT_KINDS",
    "ChaosBot",
    "ChaosSession",
    "ChaosSpec",
    "claim_resume_file",
    "garbage_bytes",
    "run_chaos",
]

log = logging.getLogger("gaigel_harness.chaos")

FAULT_KINDS = ("timeout", "illegal", "stale", "garbage", "disconnect", "crash")
"""Every fault the bot can inject, in the order the cumulative draw tests them."""

EXPECTED_REASONS: Mapping[str, tuple[FaultReason, ...]] = {
    "timeout": (FaultReason.TIMEOUT_FALLBACK,),
    "illegal": (FaultReason.ILLEGAL_ACTION,),
    "stale": (FaultReason.STALE_DECISION,),
    "garbage": (FaultReason.MALFORMED_MESSAGE, FaultReason.DISCONNECT),
    "disconnect": (FaultReason.DISCONNECT,),
    "crash": (FaultReason.DISCONNECT,),
}
"""The reason codes each injected fault must leave in the match record (at least once each)."""

CRASH_EXIT_CODE = 86
"""Exit code of an injected crash (the arena logs it with ``bot_restarted``)."""

SLEEP_MARGIN_S = 0.03
"""A ``timeout`` sleeps this long past the decision's time and bank."""

PLAY_METHOD = "/gaigel.v1.BotService/Play"

DEFAULT_CRASH_INTERVAL_S = 10.0
"""Minimum seconds between two injected crashes of one bot (all its processes together)."""


# --- the spec and the seeded draws ---------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ChaosSpec:
    """Per-decision probabilities of each fault kind (at most one fault per decision)."""

    probabilities: Mapping[str, float] = dataclasses.field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> ChaosSpec:
        """Parses ``kind=p,kind=p,...`` (``""`` or ``none``: no faults).

        :raises ConfigError: for an unknown kind, a probability outside 0..1 or a sum over 1.
        """
        probs: dict[str, float] = {}
        text = text.strip()
        if text.lower() in ("", "none"):
            return cls({})
        for part in text.split(","):
            kind, sep, value = part.strip().partition("=")
            kind = kind.strip()
            if not sep or kind not in FAULT_KINDS:
                raise ConfigError(
                    f"chaos spec: expected KIND=P with KIND one of {', '.join(FAULT_KINDS)}, got {part!r}"
                )
            try:
                p = float(value)
            except ValueError:
                raise ConfigError(f"chaos spec: {kind} needs a probability, got {value!r}") from None
            if not 0.0 <= p <= 1.0:
                raise ConfigError(f"chaos spec: {kind}={p} is not a probability (0..1)")
            probs[kind] = p
        if sum(probs.values()) > 1.0 + 1e-9:
            raise ConfigError(f"chaos spec: the probabilities add up to {sum(probs.values()):g}, more than 1")
        return cls(probs)

    def pick(self, u: float) -> str | None:
        """The fault for the uniform draw *u* in [0, 1), or None (play normally)."""
        edge = 0.0
        for kind in FAULT_KINDS:
            edge += self.probabilities.get(kind, 0.0)
            if u < edge:
                return kind
        return None

    def __str__(self) -> str:
        return ",".join(f"{k}={self.probabilities[k]:g}" for k in FAULT_KINDS if self.probabilities.get(k)) or "none"


def _uniforms(seed: int, request: pb.DecisionRequest) -> tuple[float, float, float, float]:
    """Four uniforms in [0, 1) from the seed and the situation (observation and legal ids).

    The decision id, clocks and sequence numbers are left out: they differ from run to run.
    """
    h = hashlib.sha256(f"gaigel-chaos:{seed}:".encode())
    h.update(request.observation.SerializeToString(deterministic=True))
    h.update(struct.pack(f">{len(request.legal_actions)}i", *(a.id for a in request.legal_actions)))
    words = struct.unpack(">4Q", h.digest())
    return cast(tuple[float, float, float, float], tuple((w >> 11) / 2.0**53 for w in words))


def garbage_bytes(u: float) -> bytes:
    """A short byte string that is not a valid PlayRequest, chosen by *u* (deterministic).

    Random bytes often parse (unknown fields are kept), so candidates from a hash chain
    are tried until one fails to parse; the last resort is a truncated length-delimited
    field, which never parses.
    """
    from google.protobuf.message import DecodeError

    seed = struct.pack(">d", u)
    for i in range(64):
        data = hashlib.sha256(seed + bytes([i])).digest()[: 4 + i % 28]
        try:
            pb.PlayRequest.FromString(data)
        except DecodeError:
            return data
    return b"\x0a\x7f\x01"  # field 1, length 127, one byte of it


def _seconds(d: Any) -> float:
    return float(d.seconds) + float(d.nanos) / 1e9


# --- the fault log -------------------------------------------------------------------------


class FaultLog:
    """JSON lines, each written with one ``os.write`` on an ``O_APPEND`` descriptor.

    Several bot processes append to the same file; one write per line keeps lines whole,
    and a crash (``os._exit``) loses nothing written before it.
    """

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path else None
        if self.path is None:
            self.fd = sys.stderr.fileno()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, **entry: Any) -> None:
        """Appends one line with a wall-clock time stamp."""
        line = json.dumps({"t": round(time.time(), 3), **entry}, separators=(",", ":")) + "\n"
        with contextlib.suppress(OSError):
            os.write(self.fd, line.encode())


# --- the bot and its stream ----------------------------------------------------------------


class ChaosBot(Bot):
    """Plays a legal action chosen from the seeded hash of the situation."""

    name = "chaos"
    version = "chaos-1"

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def decide(self, request: pb.DecisionRequest) -> int:
        legal = request.legal_actions
        u = _uniforms(self.seed, request)[1]
        return int(legal[int(u * len(legal))].id)


class _DroppedByUs(grpc.RpcError, grpc.Call):
    """What the SDK sees of a stream we broke on purpose (garbage sent, or cancelled).

    UNAVAILABLE is the SDK's "broken stream": it reconnects (with Resume inside a match)
    instead of giving up with a ServerError, as it rightly would for a real bad message.
    """

    def __init__(self, details: str) -> None:
        super().__init__(details)
        self._details = details

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return self._details

    def initial_metadata(self) -> tuple[()]:
        return ()

    def trailing_metadata(self) -> tuple[()]:
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> float:
        return 0.0

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Any) -> bool:
        return False


class _Call:
    """The stream call as the SDK iterates it, which remembers whether we sent garbage on it.

    A stream we broke on purpose (garbage sent, or cancelled) ends as :class:`_DroppedByUs`,
    so that the SDK resumes instead of giving up.
    """

    def __init__(self, call: Any) -> None:
        self._call = call
        self.garbage_sent = False
        self._cancelled = False

    def __iter__(self) -> Iterator[pb.PlayResponse]:
        return self

    def __next__(self) -> pb.PlayResponse:
        if self._cancelled:  # nothing more after cancel(), even what grpc had received already
            raise _DroppedByUs("the stream was cancelled")
        try:
            return cast(pb.PlayResponse, next(self._call))
        except grpc.RpcError as e:
            if self._cancelled:
                raise _DroppedByUs("the stream was cancelled") from None
            code = e.code() if isinstance(e, grpc.Call) else None
            if self.garbage_sent and code == grpc.StatusCode.INVALID_ARGUMENT:
                details = e.details() if isinstance(e, grpc.Call) else str(e)
                raise _DroppedByUs(f"the server ended the stream after our garbage: {details}") from None
            raise

    def cancel(self) -> None:
        self._cancelled = True
        self._call.cancel()


class _RawStub:
    """A BotService stub whose request serializer writes chosen raw bytes for marked messages."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._raw: dict[int, bytes] = {}
        self._play = channel.stream_stream(
            PLAY_METHOD, request_serializer=self._serialize, response_deserializer=pb.PlayResponse.FromString
        )
        self.call: _Call | None = None

    def _serialize(self, message: pb.PlayRequest) -> bytes:
        raw = self._raw.pop(id(message), None)
        return raw if raw is not None else message.SerializeToString()

    def raw(self, data: bytes) -> pb.PlayRequest:
        """A placeholder message that goes on the wire as *data*."""
        placeholder = pb.PlayRequest()
        self._raw[id(placeholder)] = data
        return placeholder

    def Play(self, requests: Iterator[pb.PlayRequest]) -> _Call:
        self.call = _Call(self._play(requests))
        return self.call


class ChaosSession(Session):
    """The SDK's session loop with faults injected at fresh decisions."""

    def __init__(
        self,
        bot: ChaosBot,
        stub: _RawStub,
        *,
        spec: ChaosSpec,
        fault_log: FaultLog,
        no_fault: set[str],
        **kwargs: Any,
    ) -> None:
        super().__init__(bot, cast(pb_grpc.BotServiceStub, stub), **kwargs)
        self.raw_stub = stub
        self.spec = spec
        self.seed = bot.seed
        self.fault_log = fault_log
        self.no_fault = no_fault
        """Decision ids never to inject a fault at (the one a previous process crashed on)."""
        self.seen_match = ""
        self.seen: list[str] = []
        """The decision ids received so far in the current match (stale answers quote them)."""
        self.state_dir: Path | None = None
        self.crash_interval = DEFAULT_CRASH_INTERVAL_S
        self.catching_up = False
        """Between a resumed Welcome and our seat's RESUMED event: the messages the server kept
        while we were away. Their decisions were issued before the resume, so they are not fresh."""

    def handle_welcome(self, msg: pb.Welcome, resuming: bool) -> None:
        self.catching_up = bool(msg.resumed)
        super().handle_welcome(msg, resuming)

    def handle_event(self, event: game_pb2.Event) -> None:
        if (
            self.catching_up
            and self.last_sequence > self.replay_through  # not one of an earlier resume, replayed after a crash
            and event.WhichOneof("kind") == "fault"
            and event.fault.reason == common_pb2.FAULT_REASON_RESUMED
            and self.match is not None
            and event.fault.seat == self.match.seat
        ):
            self.catching_up = False
        super().handle_event(event)

    def handle_decision(self, request: pb.DecisionRequest) -> None:
        match_id = self.match.match_id if self.match else ""
        if match_id != self.seen_match:
            self.seen_match, self.seen = match_id, []
        earlier = list(self.seen)
        self.seen.append(request.decision_id)
        u = _uniforms(self.seed, request)
        # No fault at a decision issued while we were away: its clock ran during the outage, so
        # the record could not tell an injected timeout there from an outage's (the soak's audit
        # counted both), and it may already be closed (an illegal answer to it costs nothing).
        fresh = request.decision_id not in self.no_fault and not self.catching_up
        kind = self.spec.pick(u[0]) if fresh else None
        if kind is None:
            super().handle_decision(request)
            return
        getattr(self, f"_inject_{kind}")(request, u[2], earlier)

    def _note(self, kind: str, request: pb.DecisionRequest, **detail: Any) -> None:
        self.fault_log.write(
            event="fault",
            kind=kind,
            bot=self.name,
            pid=os.getpid(),
            match_id=self.match.match_id if self.match else "",
            seat=self.match.seat if self.match else -1,
            hand=request.observation.hand_index,
            decision_id=request.decision_id,
            **detail,
        )

    def _inject_timeout(self, request: pb.DecisionRequest, u: float, earlier: list[str]) -> None:
        wait = _seconds(request.time_left) + _seconds(request.bank_left) + SLEEP_MARGIN_S
        self._note("timeout", request, sleep_s=round(wait, 3))
        self.pending = PendingDecision(request)
        time.sleep(wait)  # stuck: the server's fallback plays; no late answer (that would be a second fault)

    def _inject_illegal(self, request: pb.DecisionRequest, u: float, earlier: list[str]) -> None:
        legal = {a.id for a in request.legal_actions}
        if u < 0.2:
            action = NUM_ACTIONS + int(u * 1000)  # outside the action space
        else:
            others = [a for a in range(NUM_ACTIONS) if a not in legal]
            action = others[int((u - 0.2) / 0.8 * len(others))]
        self._note("illegal", request, action_id=action)
        pending = PendingDecision(request)
        self.pending = pending
        self.send_action(pending, action)  # rejected: the SDK asks decide() again, which answers legally

    def _inject_stale(self, request: pb.DecisionRequest, u: float, earlier: list[str]) -> None:
        if earlier and u < 0.5:
            # A closed decision of this match. The action id is outside the action space, so
            # it can never repeat an accepted answer (which the server ignores after a Resume).
            decision_id, what = earlier[int(u * 2 * len(earlier))], "closed"
        else:
            decision_id, what = hashlib.sha256(f"{self.seed}:{u!r}".encode()).hexdigest()[:22], "unknown"
        action = NUM_ACTIONS + 1
        self._note("stale", request, stale_decision_id=decision_id, stale=what)
        self.send(pb.PlayRequest(action=pb.Action(decision_id=decision_id, action_id=action)))
        super().handle_decision(request)  # then the real answer

    def _inject_garbage(self, request: pb.DecisionRequest, u: float, earlier: list[str]) -> None:
        data = garbage_bytes(u)
        self._note("garbage", request, bytes_hex=data.hex())
        self.pending = PendingDecision(request)  # answered after the Resume
        assert self.raw_stub.call is not None
        self.raw_stub.call.garbage_sent = True
        self.send(self.raw_stub.raw(data))

    def _inject_disconnect(self, request: pb.DecisionRequest, u: float, earlier: list[str]) -> None:
        answered = u < 0.5
        self._note("disconnect", request, answered_first=answered)
        if answered:
            super().handle_decision(request)  # the answer may or may not get out: the SDK resends it
        else:
            self.pending = PendingDecision(request)  # answered after the Resume
        assert self.raw_stub.call is not None
        self.raw_stub.call.cancel()

    def _inject_crash(self, request: pb.DecisionRequest, u: float, earlier: list[str]) -> None:
        if not self._may_crash():
            self.fault_log.write(event="suppressed", kind="crash", bot=self.name, pid=os.getpid())
            super().handle_decision(request)
            return
        self._note("crash", request, exit_code=CRASH_EXIT_CODE)
        if self.state_dir is not None:
            marker = self.state_dir / f"crash-{os.getpid()}.json"
            with contextlib.suppress(OSError):
                marker.write_text(json.dumps({"decision_id": request.decision_id}))
        os._exit(CRASH_EXIT_CODE)

    def _may_crash(self) -> bool:
        """At most one crash per ``crash_interval`` seconds among all processes of this bot.

        The arena stops a bot whose processes exit 10 times within a minute (a bot that
        cannot start); a soak's crashes must stay below that.
        """
        if self.state_dir is None or self.crash_interval <= 0:
            return True
        stamp = self.state_dir / "last-crash"
        try:
            if time.time() - stamp.stat().st_mtime < self.crash_interval:
                return False
        except FileNotFoundError:
            pass
        with contextlib.suppress(OSError):
            stamp.touch()
        return True


# --- restart: claiming a dead process's resume file ------------------------------------------


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim_resume_file(state_dir: Path) -> tuple[Path, int | None, set[str]]:
    """This process's resume file in *state_dir*, taken over from a dead process when there is one.

    Returns the path, the pid whose file was claimed (or None) and the decision ids that
    process crashed on. The claim is an atomic rename, so two new processes never take the
    same file.
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    mine = state_dir / f"resume-{pid}.json"
    for path in sorted(state_dir.glob("resume-*.json")):
        try:
            other = int(path.stem.removeprefix("resume-"))
        except ValueError:
            continue
        if other == pid or _alive(other):
            continue
        try:
            os.rename(path, mine)
        except FileNotFoundError:
            continue  # another new process was faster
        return mine, other, _take_crash_marker(state_dir, other)
    return mine, None, set()


def _take_crash_marker(state_dir: Path, pid: int) -> set[str]:
    marker = state_dir / f"crash-{pid}.json"
    try:
        data = json.loads(marker.read_text())
        marker.unlink()
    except (OSError, ValueError):
        return set()
    decision = data.get("decision_id") if isinstance(data, dict) else None
    return {decision} if isinstance(decision, str) else set()


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)


def default_state_dir(bot_name: str, server: str) -> Path:
    """Shared by the processes of one bot on one server, so a restarted process finds its predecessor."""
    return Path(tempfile.gettempdir()) / f"gaigel-chaos-{os.getuid()}" / _safe(f"{bot_name}-{server}")


def run_chaos(
    spec: ChaosSpec,
    *,
    seed: int = 0,
    fault_log: str | os.PathLike[str] | None = None,
    state_dir: str | os.PathLike[str] | None = None,
    server: str | None = None,
    token: str | None = None,
    name: str | None = None,
    matches: int | None = None,
    crash_interval: float = DEFAULT_CRASH_INTERVAL_S,
) -> int:
    """Connects a :class:`ChaosBot` and plays until done; returns the matches played.

    Server, token, name and matches default as in :func:`gaigel_client.run`. A drawn ``crash`` is
    skipped (and played normally) when this bot crashed less than *crash_interval* seconds ago.

    :raises ConfigError: without a token.
    :raises ServerError: when the server refuses the session.
    :raises ConnectionLostError: when the server stays unreachable too long.
    """
    address = server or os.environ.get("GAIGEL_SERVER") or DEFAULT_SERVER
    token = token if token is not None else os.environ.get("GAIGEL_TOKEN", "")
    if not token:
        raise ConfigError("no bot token: set GAIGEL_TOKEN (or pass --token)")
    bot = ChaosBot(seed)
    bot_name = name or os.environ.get("GAIGEL_BOT_NAME") or bot.name
    folder = Path(state_dir) / _safe(bot_name) if state_dir else default_state_dir(bot_name, address)
    resume_path, resumed_from, no_fault = claim_resume_file(folder)
    flog = FaultLog(fault_log)
    flog.write(event="start", bot=bot_name, pid=os.getpid(), resumed_from=resumed_from, spec=str(spec), seed=seed)
    with grpc.insecure_channel(address) as channel:
        session = ChaosSession(
            bot,
            _RawStub(channel),
            spec=spec,
            fault_log=flog,
            no_fault=no_fault,
            token=token,
            name=bot_name,
            version=bot.version,
            matches=matches if matches is not None else matches_from_env(),
            connect_timeout=30.0,
            initial_backoff=0.1,
            max_backoff=2.0,
            server=address,
            resume_file=ResumeFile(resume_path),
            compact=compact_from_env(),
        )
        session.state_dir = folder
        session.crash_interval = crash_interval
        return session.run()
