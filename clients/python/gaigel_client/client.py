"""The session loop: connect, Join, answer decisions, handle rejections, Resume after a drop.

Synchronous and thread-free on our side: grpc's sync API reads the outgoing messages from a
generator fed by a queue, and the bot's ``decide`` runs on the calling thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import operator
import os
import queue
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc

from gaigel_api import PROTOCOL_VERSION
from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_api.v1 import bot_service_pb2_grpc as pb_grpc
from gaigel_api.v1 import game_pb2
from gaigel_client.bot import Bot
from gaigel_client.errors import ConfigError, ConnectionLostError, ServerError

DEFAULT_SERVER = "127.0.0.1:50051"

log = logging.getLogger("gaigel_client")

# A broken stream: reconnect (with Resume inside a match, with Join otherwise).
_DROPPED = frozenset({grpc.StatusCode.UNAVAILABLE})
# Also treated as a broken stream while a match is on (transport resets surface as these).
_DROPPED_IN_MATCH = _DROPPED | {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.CANCELLED}


@dataclasses.dataclass
class _Match:
    match_id: str
    seat: int
    resume_token: str
    grace: float | None


RESUME_FILE_FORMAT = 1
RESUME_FILE_INTERVAL = 0.25
"""Seconds between resume-file writes for messages other than decisions (those are written at once)."""


class ResumeFile:
    """The on-disk resume state of one bot process (``GAIGEL_RESUME_FILE``).

    Holds ``{match_id, seat, resume_token, last_sequence, server, ...}`` as JSON, written
    atomically (temporary file, then ``os.replace``) with mode 0600: the resume token is a
    secret. A restarted process reads it and sends ``Resume`` instead of ``Join``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.last_write = 0.0

    def load(self) -> dict[str, Any] | None:
        """The saved state, or None when there is none (or it is unreadable: then it is ignored)."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            log.warning("ignoring unreadable resume file %s: %s", self.path, e)
            return None
        keys = ("match_id", "seat", "resume_token", "last_sequence", "match_start_sequence", "server", "bot_name")
        if not isinstance(data, dict) or data.get("format") != RESUME_FILE_FORMAT or any(k not in data for k in keys):
            log.warning("ignoring resume file %s: not a gaigel_client resume file of format %d", self.path, 1)
            return None
        return data

    def save(self, data: dict[str, Any]) -> None:
        """Writes *data* atomically; a failure is logged, never raised (the bot plays on)."""
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"format": RESUME_FILE_FORMAT, **data}, f)
            os.replace(tmp, self.path)
        except OSError as e:
            log.warning("cannot write resume file %s: %s", self.path, e)
        self.last_write = time.monotonic()

    def delete(self) -> None:
        """Removes the file (the match is over)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


@dataclasses.dataclass
class PendingDecision:
    """The open decision of a :class:`Session`: its request and the answers sent for it so far."""

    request: pb.DecisionRequest
    answers: list[int] = dataclasses.field(default_factory=list)
    replayed: bool = False
    """Replayed after a restart and answered by the previous process (answer unknown): never decided again."""
    time_capped: bool = False
    """The bot's last decide() for this decision set ``bot.time_capped``: sent with the answer."""


def _requests(outbox: queue.SimpleQueue[pb.PlayRequest | None]) -> Iterator[pb.PlayRequest]:
    while True:
        item = outbox.get()
        if item is None:
            return
        yield item


class Session:
    """One bot's connection state across reconnects: the loop behind :func:`run`.

    :func:`run` is the way to play; this class is public for tools that need the same loop
    with some of its steps changed (the harness's chaos bot injects faults this way). A
    subclass may override the per-message steps :meth:`handle_welcome`, :meth:`handle_event`
    and :meth:`handle_decision` (calling ``super()`` for the normal behaviour), and send with
    :meth:`send_action` and :meth:`send`; :meth:`handle` feeds it one server message.
    Attributes without an underscore (``match``, ``pending``, ``last_sequence``,
    ``replay_through``, ...) may be read; the rest may change between versions.
    """

    def __init__(
        self,
        bot: Bot,
        stub: pb_grpc.BotServiceStub,
        *,
        token: str,
        name: str,
        version: str,
        matches: int | None,
        connect_timeout: float,
        initial_backoff: float,
        max_backoff: float,
        server: str = "",
        resume_file: ResumeFile | None = None,
        compact: bool = True,
    ) -> None:
        self.bot = bot
        self.compact = compact
        self.stub = stub
        self.token = token
        self.name = name
        self.version = version
        self.matches = matches
        self.connect_timeout = connect_timeout
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.last_sequence = 0
        self.match: _Match | None = None
        self.pending: PendingDecision | None = None
        self.matches_done = 0
        self.leave_sent = False
        self.session_id = ""
        self._outbox: queue.SimpleQueue[pb.PlayRequest | None] = queue.SimpleQueue()
        self.server = server
        self.resume_file = resume_file
        self.match_start_sequence = 0
        self.dirty = False
        # After a restart from the resume file: the match is replayed from its MatchStart so that
        # the bot's hooks rebuild its state; decisions up to replay_through were answered before.
        self.replay_through = 0
        self.replay_answer: tuple[str, int] | None = None
        self.from_file = False
        if resume_file is not None:
            self._load_resume_file(resume_file)

    # --- the resume file -------------------------------------------------------------

    def _load_resume_file(self, resume_file: ResumeFile) -> None:
        data = resume_file.load()
        if data is None:
            return
        if data["server"] != self.server or data["bot_name"] != self.name:
            log.warning(
                "ignoring resume file %s: it is for bot %r on %s, not %r on %s",
                resume_file.path,
                data["bot_name"],
                data["server"],
                self.name,
                self.server,
            )
            return
        try:
            grace = data.get("grace")
            self.match = _Match(str(data["match_id"]), int(data["seat"]), str(data["resume_token"]), grace)
            self.match_start_sequence = int(data["match_start_sequence"])
            self.replay_through = int(data["last_sequence"])
            answer = data.get("answer")
            self.replay_answer = (str(answer[0]), int(answer[1])) if answer else None
        except (TypeError, ValueError, IndexError) as e:
            log.warning("ignoring resume file %s: %s", resume_file.path, e)
            self.match = None
            return
        self.last_sequence = max(0, self.match_start_sequence - 1)
        self.from_file = True
        log.info("resume file %s: resuming match %s seat %d", resume_file.path, self.match.match_id, self.match.seat)

    def _save(self, force: bool = False) -> None:
        rf = self.resume_file
        if rf is None or self.match is None:
            return
        if not force and time.monotonic() - rf.last_write < RESUME_FILE_INTERVAL:
            self.dirty = True
            return
        pending = self.pending
        answer = [pending.request.decision_id, pending.answers[-1]] if pending and pending.answers else None
        rf.save(
            {
                "match_id": self.match.match_id,
                "seat": self.match.seat,
                "resume_token": self.match.resume_token,
                "grace": self.match.grace,
                "last_sequence": self.last_sequence,
                "match_start_sequence": self.match_start_sequence,
                "answer": answer,
                "server": self.server,
                "bot_name": self.name,
            }
        )
        self.dirty = False

    def _match_over(self) -> None:
        self.match = None
        self.from_file = False
        self.replay_through = 0
        self.replay_answer = None
        self.dirty = False
        if self.resume_file is not None:
            self.resume_file.delete()

    # --- the connection loop ---------------------------------------------------------

    def run(self) -> int:
        try:
            return self._run()
        finally:
            if self.dirty:
                self._save(force=True)

    def _run(self) -> int:
        failures = 0
        lost_since: float | None = None
        while True:
            resuming = self.match is not None
            if resuming:
                first = self._resume_message()
            else:
                self.last_sequence = 0
                self.pending = None
                first = pb.PlayRequest(
                    join=pb.Join(
                        bot_token=self.token,
                        bot_name=self.name,
                        bot_version=self.version,
                        protocol_version=PROTOCOL_VERSION,
                        compact=self.compact,
                        compact_hand_end=self.compact,  # _unfold reads the hand's end too
                    )
                )
            outbox: queue.SimpleQueue[pb.PlayRequest | None] = queue.SimpleQueue()
            outbox.put(first)
            self._outbox = outbox
            welcomed = False
            call = self.stub.Play(_requests(outbox))
            try:
                for response in call:
                    if response.HasField("welcome"):
                        welcomed = True
                        failures = 0
                        lost_since = None
                    if self.handle(response, resuming):
                        call.cancel()  # type: ignore[no-untyped-call]
                        return self.matches_done
                log.info("the server ended the session")
                return self.matches_done
            except grpc.RpcError as e:
                code = e.code() if isinstance(e, grpc.Call) else grpc.StatusCode.UNKNOWN
                details = (e.details() if isinstance(e, grpc.Call) else None) or str(e)
                refused: tuple[grpc.StatusCode, ...] = (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND)
                if self.from_file:
                    # a stale or foreign file must not stop the bot from joining
                    refused += (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.INVALID_ARGUMENT)
                if resuming and not welcomed and code in refused:
                    assert self.match is not None
                    log.warning(
                        "could not resume match %s (%s: %s); joining afresh", self.match.match_id, code.name, details
                    )
                    started_here = not self.from_file
                    self._match_over()
                    if started_here:
                        self.matches_done += 1  # the match is over for us
                    if self.matches is not None and self.matches_done >= self.matches:
                        return self.matches_done
                    continue
                in_match = self.match is not None
                if code not in (_DROPPED_IN_MATCH if in_match else _DROPPED):
                    raise ServerError(code, details) from None
                now = time.monotonic()
                if lost_since is None:
                    lost_since = now
                limit = self._give_up_after()
                if now - lost_since >= limit:
                    raise ConnectionLostError(
                        f"server {self.server} unreachable for {now - lost_since:.1f} s (limit {limit:.1f} s); last status {code.name}: {details}"
                    ) from None
                delay = min(self.max_backoff, self.initial_backoff * 2**failures) * random.uniform(0.8, 1.2)
                delay = min(delay, max(0.0, lost_since + limit - now))
                failures += 1
                log.warning(
                    "stream lost (%s: %s); %s in %.2f s",
                    code.name,
                    details,
                    f"resuming match {self.match.match_id}" if self.match else "reconnecting",
                    delay,
                )
                time.sleep(delay)
            finally:
                outbox.put(None)

    def _give_up_after(self) -> float:
        if self.match is not None and self.match.grace is not None:
            return self.match.grace
        return self.connect_timeout

    def _resume_message(self) -> pb.PlayRequest:
        assert self.match is not None
        return pb.PlayRequest(
            resume=pb.Resume(
                match_id=self.match.match_id,
                seat=self.match.seat,
                resume_token=self.match.resume_token,
                last_sequence=self.last_sequence,
                bot_version=self.version,
            )
        )

    def send_action(self, pending: PendingDecision, action_id: int) -> None:
        """Answers *pending* with *action_id* (noted in the resume file before it is sent)."""
        pending.answers.append(action_id)
        self._save(force=True)  # before sending: a restarted process resends exactly this answer
        action = pb.Action(
            decision_id=pending.request.decision_id, action_id=action_id, time_capped=pending.time_capped
        )
        self.send(pb.PlayRequest(action=action))

    def send(self, request: pb.PlayRequest) -> None:
        """Puts *request* on the current stream as it is (no bookkeeping: see :meth:`send_action`)."""
        self._outbox.put(request)

    # --- one server message ---------------------------------------------------------

    def handle(self, response: pb.PlayResponse, resuming: bool) -> bool:
        """Handles one message; True when the session is done."""
        kind = response.WhichOneof("message")
        if kind == "welcome":
            self.handle_welcome(response.welcome, resuming)
            return False
        seq = response.sequence
        if seq <= self.last_sequence:
            log.debug("skipping message %d (already seen up to %d)", seq, self.last_sequence)
            return False
        if seq != self.last_sequence + 1:
            log.warning("messages %d..%d never arrived", self.last_sequence + 1, seq - 1)
        self.last_sequence = seq
        replayed = seq <= self.replay_through
        if kind == "decision_request":
            self._unfold(response.decision_request)
            if replayed:
                self._on_replayed_decision(response.decision_request)
            else:
                self.handle_decision(response.decision_request)
        elif kind == "action_rejected":
            if replayed:
                self.bot.on_rejected(response.action_rejected)
            else:
                self._on_rejected(response.action_rejected)
        elif kind == "event":
            self.handle_event(response.event)
        elif kind == "match_start":
            msg = response.match_start
            grace = msg.clock.resume_grace.ToTimedelta().total_seconds() if msg.clock.HasField("resume_grace") else None
            self.match = _Match(msg.match_id, msg.seat, msg.resume_token, grace or None)
            self.match_start_sequence = seq
            self.pending = None
            if self.matches is not None and self.matches_done + 1 >= self.matches and not self.leave_sent:
                self._outbox.put(pb.PlayRequest(leave=pb.Leave()))
                self.leave_sent = True
            self.bot.bot_seed = msg.bot_seed
            self.bot.on_match_start(msg)
            self._save(force=True)
        elif kind == "hand_start":
            self._on_hand_start(response.hand_start)
        elif kind == "hand_end":
            self._on_hand_end(response.hand_end)
        elif kind == "match_end":
            self.pending = None
            self._match_over()
            self.matches_done += 1
            self.bot.on_match_end(response.match_end)
            if self.matches is not None and self.matches_done >= self.matches:
                return True
        else:
            log.warning("ignoring a server message of unknown kind %r (sequence %d)", kind, seq)
        if kind != "match_end":
            self._save()
        return False

    def handle_event(self, event: game_pb2.Event) -> None:
        """An Event (also one unfolded from a compact DecisionRequest): to ``bot.on_event``."""
        if event.WhichOneof("kind") != "fault":  # a fault changes no game state: still open
            self.pending = None
        self.bot.on_event(event)

    def _on_hand_end(self, hand_end: game_pb2.HandEnd) -> None:
        self.pending = None
        self.bot.on_hand_end(hand_end)

    def _on_hand_start(self, hand_start: game_pb2.HandStart) -> None:
        self.pending = None
        self.bot.on_hand_start(hand_start)

    def _unfold(self, request: pb.DecisionRequest) -> None:
        """Compact mode: what rode in *request* (the ended hand's last Events and HandEnd, then the
        new HandStart and Events) goes to the same hooks, in the same order, as if it had come on
        its own; ``decide`` then sees the request as plain mode has it (the hooks keep their
        messages: clearing the fields detaches them)."""
        if request.ended_hand_events:
            for event in request.ended_hand_events:
                self.handle_event(event)
            request.ClearField("ended_hand_events")
        if request.HasField("hand_end"):
            self._on_hand_end(request.hand_end)
            request.ClearField("hand_end")
        if request.HasField("hand_start"):
            self._on_hand_start(request.hand_start)
            request.ClearField("hand_start")
        if request.events:
            for event in request.events:
                self.handle_event(event)
            request.ClearField("events")

    def handle_welcome(self, msg: pb.Welcome, resuming: bool) -> None:
        """A Welcome; after a Resume (*resuming*), resends the answer to the open decision."""
        self.session_id = msg.session_id
        log.info(
            "%s session %s as %r (server %s)",
            "resumed" if msg.resumed else "joined",
            msg.session_id,
            msg.bot_name,
            msg.server_version,
        )
        self.bot.on_welcome(msg)
        pending = self.pending
        if resuming and pending is not None and (pending.answers or not pending.replayed):
            # The decision was the last thing we heard of: our answer may have been lost
            # with the old stream, so send it (or a first one) again.
            action = pending.answers[-1] if pending.answers else self._decide(pending)
            if action is not None:
                self.send_action(pending, action)

    def _decide(self, pending: PendingDecision) -> int | None:
        """``bot.decide(request)``: an action id, or None for "send no answer"."""
        self.bot.time_capped = False
        answer = self.bot.decide(pending.request)
        pending.time_capped = bool(self.bot.time_capped)
        request = pending.request
        if answer is None:
            log.info(
                "decide returned None: no answer to decision %s (the server's timeout fallback plays)",
                request.decision_id,
            )
            return None
        try:
            return operator.index(answer)
        except TypeError:
            raise TypeError(
                f"{type(self.bot).__name__}.decide must return an int action id (or None), got {answer!r}"
            ) from None

    def _on_replayed_decision(self, request: pb.DecisionRequest) -> None:
        """A decision the previous process saw: resend its saved answer, never decide it again."""
        pending = PendingDecision(request)
        self.pending = pending
        saved = self.replay_answer
        if saved is not None and saved[0] == request.decision_id:
            # It may or may not have arrived; an identical resend is harmless either way.
            self.send_action(pending, saved[1])
        else:
            pending.replayed = True

    def handle_decision(self, request: pb.DecisionRequest) -> None:
        """A fresh DecisionRequest (not one replayed after a restart): ``bot.decide``, then the answer."""
        pending = PendingDecision(request)
        self.pending = pending
        action = self._decide(pending)
        if action is not None:
            self.send_action(pending, action)

    def _on_rejected(self, msg: pb.ActionRejected) -> None:
        log.warning(
            "action %d for decision %s rejected (%s, strike %d of limit %d): %s",
            msg.action_id,
            msg.decision_id,
            pb.RejectReason.Name(msg.reason),
            msg.strikes,
            msg.strikes_limit,
            msg.message,
        )
        self.bot.on_rejected(msg)
        pending = self.pending
        if not msg.decision_open or pending is None or msg.decision_id != pending.request.decision_id:
            return
        legal = [a.id for a in pending.request.legal_actions]
        untried = [a for a in legal if a not in pending.answers]
        action: int | None = None
        if len(pending.answers) == 1:
            action = self._decide(pending)
            if action is None:
                return  # no answer: the server's timeout fallback plays
        if action is None or action in pending.answers or action not in legal:
            if not untried:
                log.error("giving up on decision %s: the server rejected every legal action", msg.decision_id)
                return
            if action is not None:
                log.warning(
                    "decide answered %d again or illegally; falling back to the first legal action not tried yet, %d",
                    action,
                    untried[0],
                )
            action = untried[0]
        self.send_action(pending, action)


def compact_from_env() -> bool:
    """Compact mode unless ``$GAIGEL_COMPACT`` is 0, false, no or off."""
    return os.environ.get("GAIGEL_COMPACT", "1").strip().lower() not in ("0", "false", "no", "off")


def matches_from_env() -> int | None:
    """``$GAIGEL_MATCHES``: None (until the server ends the session) when unset, empty or 0.

    :raises ConfigError: for a value that is not a whole number of at least 0."""
    raw = os.environ.get("GAIGEL_MATCHES", "").strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()):
        raise ConfigError(f"GAIGEL_MATCHES must be a number, got {raw!r}")
    return int(raw) or None


def run(
    bot: Bot,
    server: str | None = None,
    token: str | None = None,
    *,
    matches: int | None = None,
    secure: bool = False,
    name: str | None = None,
    connect_timeout: float = 30.0,
    initial_backoff: float = 0.1,
    max_backoff: float = 5.0,
    resume_file: str | os.PathLike[str] | None = None,
    compact: bool | None = None,
) -> int:
    """Connects *bot* to a Gaigel server and plays until done; returns the matches played.

    * ``server`` (``host:port``) defaults to ``$GAIGEL_SERVER``, else ``127.0.0.1:50051``;
      ``token`` to ``$GAIGEL_TOKEN``; ``name`` to ``$GAIGEL_BOT_NAME``, else ``bot.name``.
    * Sends ``Join`` (protocol version 1), then answers every ``DecisionRequest`` with
      ``bot.decide(request)``.
    * ``decide`` may return None to send no answer: the server's timeout fallback then
      plays for the bot when the decision's time and bank run out (one strike), and a late
      answer, which would be rejected as stale (a second strike), is avoided.
    * When the server rejects an answer while the decision is still open, ``decide`` is
      called once more; if it repeats a rejected answer or names an action that is not
      legal, the first legal action not tried yet for this decision is sent instead, and
      after every further rejection the next one not tried yet (each rejection is one
      strike). If ``decide`` returns None there, no answer is sent.
    * When the stream breaks (``UNAVAILABLE``; inside a match also ``INTERNAL``, ``UNKNOWN``
      and ``CANCELLED``), it reconnects with exponential backoff (``initial_backoff``
      doubling up to ``max_backoff``) and sends ``Resume`` with the match's resume token and
      the last sequence number received, for as long as the match's resume grace period
      (else ``connect_timeout``). An answer to a decision that got no reply yet is sent
      again after the resume. Messages already seen are skipped. If the server refuses
      the Resume (match over, grace expired), the match counts as played and a new
      session is joined. Outside a match, an unreachable server is retried for
      ``connect_timeout`` seconds, so the bot may start before the server.
    * ``resume_file`` (default ``$GAIGEL_RESUME_FILE``; off when neither is set) lets a
      *restarted process* resume: from ``MatchStart`` on, the SDK keeps the match id, seat,
      resume token, last sequence number, server address and its last answer in that file
      (JSON, mode 0600, replaced atomically: at once for every answer, else at most every
      0.25 s) and deletes it at ``MatchEnd``. At start-up, if the file names a match for
      this bot and server, ``Resume`` is sent instead of ``Join`` and the server replays the
      match from its ``MatchStart``, so the ``on_*`` hooks rebuild the bot's state; decisions
      the previous process answered are not decided again (its last answer is resent as is,
      which the server ignores if it had arrived). If the Resume is refused, the file is
      deleted and the bot joins afresh. Use one file per bot process.
    * ``compact`` (default True; ``$GAIGEL_COMPACT=0`` turns it off when not given) joins in
      compact mode: the server folds HandStart, Events and HandEnd into the next
      DecisionRequest, one message per decision instead of several. The SDK unfolds them into
      the same ``on_event``, ``on_hand_end`` and ``on_hand_start`` calls, in the same order,
      before ``decide``, which sees the request without them: a bot behaves the same either way.
    * Returns after the ``matches``-th ``MatchEnd`` (having sent ``Leave`` when that match
      started), or when the server ends the stream with OK. ``matches`` defaults to
      ``$GAIGEL_MATCHES`` (unset or 0: no limit, the bot plays until the server ends its
      session, as every kit does; an arena that keeps one process per bot for the whole run
      relies on that).

    :raises ConfigError: when no token is given, or ``$GAIGEL_MATCHES`` is not a number.
    :raises ServerError: when the server ends the stream with an error such as
        ``UNAUTHENTICATED`` or ``FAILED_PRECONDITION``; its message says what to fix.
    :raises ConnectionLostError: when the server stays unreachable too long.
    """
    address = server or os.environ.get("GAIGEL_SERVER") or DEFAULT_SERVER
    token = token if token is not None else os.environ.get("GAIGEL_TOKEN", "")
    if not token:
        raise ConfigError(
            "no bot token: set GAIGEL_TOKEN (or pass token=...) to the token issued when the bot was registered"
        )
    bot_name = name or os.environ.get("GAIGEL_BOT_NAME") or bot.name
    if matches is None:
        matches = matches_from_env()
    if matches is not None and matches < 1:
        raise ConfigError(f"matches must be at least 1 (or None for no limit), got {matches}")
    if compact is None:
        compact = compact_from_env()
    resume_path = resume_file if resume_file is not None else os.environ.get("GAIGEL_RESUME_FILE") or None
    channel = grpc.secure_channel(address, grpc.ssl_channel_credentials()) if secure else grpc.insecure_channel(address)
    with channel:
        session = Session(
            bot,
            pb_grpc.BotServiceStub(channel),
            token=token,
            name=bot_name,
            version=bot.version,
            matches=matches,
            connect_timeout=connect_timeout,
            initial_backoff=initial_backoff,
            max_backoff=max_backoff,
            server=address,
            resume_file=ResumeFile(resume_path) if resume_path else None,
            compact=compact,
        )
        return session.run()
