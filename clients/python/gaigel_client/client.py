"""The session loop: connect, Join, answer decisions, handle rejections, Resume after a drop.

Synchronous and thread-free on our side: grpc's sync API reads the outgoing messages from a
generator fed by a queue, and the bot's ``decide`` runs on the calling thread.
"""

from __future__ import annotations

import dataclasses
import logging
import operator
import os
import queue
import random
import time
from collections.abc import Iterator

import grpc

from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_api.v1 import bot_service_pb2_grpc as pb_grpc
from gaigel_client.bot import Bot
from gaigel_client.errors import ConfigError, ConnectionLostError, ServerError

PROTOCOL_VERSION = 1
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


@dataclasses.dataclass
class _Pending:
    request: pb.DecisionRequest
    answers: list[int] = dataclasses.field(default_factory=list)


def _requests(outbox: queue.SimpleQueue[pb.PlayRequest | None]) -> Iterator[pb.PlayRequest]:
    while True:
        item = outbox.get()
        if item is None:
            return
        yield item


class _Session:
    """One bot's connection state across reconnects."""

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
    ) -> None:
        self.bot = bot
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
        self.pending: _Pending | None = None
        self.matches_done = 0
        self.leave_sent = False
        self.session_id = ""
        self._outbox: queue.SimpleQueue[pb.PlayRequest | None] = queue.SimpleQueue()

    # --- the connection loop ---------------------------------------------------------

    def run(self) -> int:
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
                    if self._handle(response, resuming):
                        call.cancel()  # type: ignore[no-untyped-call]
                        return self.matches_done
                log.info("the server ended the session")
                return self.matches_done
            except grpc.RpcError as e:
                code = e.code() if isinstance(e, grpc.Call) else grpc.StatusCode.UNKNOWN
                details = (e.details() if isinstance(e, grpc.Call) else None) or str(e)
                if (
                    resuming
                    and not welcomed
                    and code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND)
                ):
                    assert self.match is not None
                    log.warning(
                        "could not resume match %s (%s: %s); joining afresh", self.match.match_id, code.name, details
                    )
                    self.match = None
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
                        f"server unreachable for {now - lost_since:.1f} s (limit {limit:.1f} s); last status {code.name}: {details}"
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

    def _send_action(self, pending: _Pending, action_id: int) -> None:
        pending.answers.append(action_id)
        self._outbox.put(pb.PlayRequest(action=pb.Action(decision_id=pending.request.decision_id, action_id=action_id)))

    # --- one server message ---------------------------------------------------------

    def _handle(self, response: pb.PlayResponse, resuming: bool) -> bool:
        """Handles one message; True when the session is done."""
        kind = response.WhichOneof("message")
        if kind == "welcome":
            self._on_welcome(response.welcome, resuming)
            return False
        seq = response.sequence
        if seq <= self.last_sequence:
            log.debug("skipping message %d (already seen up to %d)", seq, self.last_sequence)
            return False
        if seq != self.last_sequence + 1:
            log.warning("messages %d..%d never arrived", self.last_sequence + 1, seq - 1)
        self.last_sequence = seq
        if kind == "decision_request":
            self._on_decision(response.decision_request)
        elif kind == "action_rejected":
            self._on_rejected(response.action_rejected)
        elif kind == "event":
            self.pending = None
            self.bot.on_event(response.event)
        elif kind == "match_start":
            msg = response.match_start
            grace = msg.clock.resume_grace.ToTimedelta().total_seconds() if msg.clock.HasField("resume_grace") else None
            self.match = _Match(msg.match_id, msg.seat, msg.resume_token, grace or None)
            self.pending = None
            if self.matches is not None and self.matches_done + 1 >= self.matches and not self.leave_sent:
                self._outbox.put(pb.PlayRequest(leave=pb.Leave()))
                self.leave_sent = True
            self.bot.on_match_start(msg)
        elif kind == "hand_start":
            self.pending = None
            self.bot.on_hand_start(response.hand_start)
        elif kind == "hand_end":
            self.pending = None
            self.bot.on_hand_end(response.hand_end)
        elif kind == "match_end":
            self.pending = None
            self.match = None
            self.matches_done += 1
            self.bot.on_match_end(response.match_end)
            if self.matches is not None and self.matches_done >= self.matches:
                return True
        else:
            log.warning("ignoring a server message of unknown kind %r (sequence %d)", kind, seq)
        return False

    def _on_welcome(self, msg: pb.Welcome, resuming: bool) -> None:
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
        if resuming and pending is not None:
            # The decision was the last thing we heard of: our answer may have been lost
            # with the old stream, so send it (or a first one) again.
            action = pending.answers[-1] if pending.answers else self._decide(pending.request)
            self._send_action(pending, action)

    def _decide(self, request: pb.DecisionRequest) -> int:
        answer = self.bot.decide(request)
        try:
            return operator.index(answer)
        except TypeError:
            raise TypeError(f"{type(self.bot).__name__}.decide must return an int action id, got {answer!r}") from None

    def _on_decision(self, request: pb.DecisionRequest) -> None:
        pending = _Pending(request)
        self.pending = pending
        self._send_action(pending, self._decide(request))

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
        if len(pending.answers) == 1:
            action = self._decide(pending.request)
            if action in pending.answers or action not in legal:
                log.warning("decide answered %d again; falling back to the first legal action %d", action, legal[0])
                action = legal[0]
        else:
            action = legal[0]
        if action in pending.answers:
            log.error(
                "giving up on decision %s: the server rejected every answer, the first legal one included",
                msg.decision_id,
            )
            return
        self._send_action(pending, action)


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
) -> int:
    """Connects *bot* to a Gaigel server and plays until done; returns the matches played.

    * ``server`` (``host:port``) defaults to ``$GAIGEL_SERVER``, else ``127.0.0.1:50051``;
      ``token`` to ``$GAIGEL_TOKEN``; ``name`` to ``$GAIGEL_BOT_NAME``, else ``bot.name``.
    * Sends ``Join`` (protocol version 1), then answers every ``DecisionRequest`` with
      ``bot.decide(request)``.
    * When the server rejects an answer while the decision is still open, ``decide`` is
      called once more; if it repeats a rejected answer or names an action that is not
      legal, the first legal action is sent instead, and after a second rejection also that.
      So a buggy bot costs at most two strikes per decision, usually one.
    * When the stream breaks (``UNAVAILABLE``; inside a match also ``INTERNAL``, ``UNKNOWN``
      and ``CANCELLED``), it reconnects with exponential backoff (``initial_backoff``
      doubling up to ``max_backoff``) and sends ``Resume`` with the match's resume token and
      the last sequence number received, for as long as the match's resume grace period
      (else ``connect_timeout``). An answer to a decision that got no reply yet is sent
      again after the resume. Messages already seen are skipped. If the server refuses
      the Resume (match over, grace expired), the match counts as played and a new
      session is joined. Outside a match, an unreachable server is retried for
      ``connect_timeout`` seconds, so the bot may start before the server.
    * Returns after the ``matches``-th ``MatchEnd`` (having sent ``Leave`` when that match
      started), or when the server ends the stream with OK.

    :raises ConfigError: when no token is given.
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
    if matches is not None and matches < 1:
        raise ConfigError(f"matches must be at least 1 (or None for no limit), got {matches}")
    channel = grpc.secure_channel(address, grpc.ssl_channel_credentials()) if secure else grpc.insecure_channel(address)
    with channel:
        session = _Session(
            bot,
            pb_grpc.BotServiceStub(channel),
            token=token,
            name=bot_name,
            version=bot.version,
            matches=matches,
            connect_timeout=connect_timeout,
            initial_backoff=initial_backoff,
            max_backoff=max_backoff,
        )
        return session.run()
