"""One seat of a match: the session bound to it, its answer ledger, its clock and its resume token.

A :class:`Seat` is the only writer of a session's seat fields (``session.seat``, its resume
token, its decision ids and resume buffer): :meth:`Seat.bind` at the start of a match and
:meth:`Seat.release` at its end. Whoever holds a session (the stream's reader, the lobby)
reaches the match through ``session.seat``; the seat passes what comes in to its table
through the :class:`SeatHost` it was made with, so it needs no table type.
"""

from __future__ import annotations

import secrets
from typing import Protocol

from gaigel.match import FaultReason
from gaigel_server.clock import Clock, SeatClock
from gaigel_server.ledger import SeatLedger
from gaigel_server.session import Answer, BotSession
from gaigel_server.states import TableState


class SeatHost(Protocol):
    """What a seat needs of its table (the table is one)."""

    @property
    def state(self) -> TableState: ...

    def on_action(self, seat: int, answer: Answer) -> None: ...

    def fault(self, seat: int, reason: FaultReason, message: str, strike: bool, decision_id: str = "") -> None: ...

    def on_disconnect(self, seat: int, session: BotSession) -> None: ...


class Seat:
    """Seat *index* of a table: the session playing it (None for a house seat and once the match
    has ended), and its ledger, clock and resume token for this match."""

    def __init__(self, host: SeatHost, index: int, clock: Clock) -> None:
        self.host = host
        self.index = index
        self.session: BotSession | None = None
        self.ledger = SeatLedger(index, clock.strikes_limit)
        self.clock = SeatClock(clock)
        self.resume_token = secrets.token_urlsafe(24)
        self.mode = ""
        """How the session joined: "compact" or "plain" ("" for a house seat and before the start)."""

    # --- binding (the only writes of a session's seat fields) --------------------------

    def bind(self, session: BotSession) -> None:
        """*session* plays this seat from now on."""
        self.session = session
        session.seat = self
        session.resume_token = self.resume_token
        # Answers to the previous match's decisions may still be in flight: not this match's faults.
        self.ledger = SeatLedger(self.index, self.ledger.strikes_limit, earlier=session.issued)
        session.issued = self.ledger.issued
        self.mode = "compact" if session.compact else "plain"

    def release(self) -> BotSession | None:
        """Unbinds the session of an ended match and returns it (for its pool)."""
        session, self.session = self.session, None
        if session is None or session.seat is not self:
            return None
        session.seat = None
        session.buffer = []  # the resume buffer: no Resume into an ended match
        session.drop_held()  # MatchEnd has flushed them; nothing of this match may reach the next
        return session

    # --- what comes in from the session's stream ----------------------------------------

    @property
    def running(self) -> bool:
        """The match of this seat is being played."""
        return self.host.state is TableState.RUNNING

    def act(self, answer: Answer) -> None:
        """An Action of the bot: its ledger judges it (through the table)."""
        self.host.on_action(self.index, answer)

    def stream_fault(self, reason: FaultReason, message: str) -> None:
        """The stream broke the protocol (it is being ended): a fault of this seat, no strike."""
        self.host.fault(self.index, reason, message, strike=False)

    def stream_broke(self, session: BotSession) -> None:
        """The stream of *session* ended during the match: the disconnect policy applies."""
        self.host.on_disconnect(self.index, session)


__all__ = ["Seat", "SeatHost"]
