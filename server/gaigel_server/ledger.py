"""The seat ledger: what one seat was asked, what it answered, and the verdict on each answer.

A :class:`SeatLedger` keeps the decisions of one seat in one match (the open one, every id
issued, those the timeout fallback decided, the last accepted answer, resumes and strikes)
and judges each answer the bot sends (DESIGN.md, Policies). It returns a verdict and
does nothing else: no gRPC, no asyncio, no clock. The table carries the verdict out
(queues the accepted answer, sends ActionRejected, charges the fault).
"""

from __future__ import annotations

import base64
import dataclasses
import hmac
import os
from collections.abc import Callable, Collection

from gaigel.match import FaultReason
from gaigel.state import IllegalActionError
from gaigel_api.v1 import bot_service_pb2 as bs


@dataclasses.dataclass(frozen=True)
class Accept:
    """The answer to the open decision, legal: it is the seat's move."""


@dataclasses.dataclass(frozen=True)
class Ignore:
    """An identical repeat of the accepted answer, sent again after a Resume: a no-op."""


@dataclasses.dataclass(frozen=True)
class Reject:
    """The answer is refused with ActionRejected; with a *fault* code it also costs a strike."""

    reason: bs.RejectReason.ValueType
    message: str
    fault: FaultReason | None
    strikes: int
    """The seat's strikes once this rejection is charged."""
    decision_open: bool
    """Whether the bot may still answer its open decision afterwards."""

    @property
    def strike(self) -> bool:
        return self.fault is not None


Verdict = Accept | Ignore | Reject


ID_BYTES = 16
"""Random bytes of a decision id (128 bits), written as 22 URL-safe base64 characters."""
ID_CHARS = -(-ID_BYTES * 4 // 3)  # base64 without its padding
ID_BATCH = 256
"""Ids drawn from the OS per read. One ``getrandom`` per decision (``secrets.token_urlsafe``)
was 4 % of a busy server's event loop (py-spy, 64 compact streams)."""
_ids: list[str] = []
os.register_at_fork(after_in_child=_ids.clear)  # a forked process must not deal out its parent's ids


def decision_id() -> str:
    """A new unguessable decision id (from the OS's CSPRNG, :data:`ID_BATCH` at a time)."""
    if not _ids:
        pool = os.urandom(ID_BYTES * ID_BATCH)
        _ids.extend(
            base64.urlsafe_b64encode(pool[i : i + ID_BYTES])[:ID_CHARS].decode() for i in range(0, len(pool), ID_BYTES)
        )
    return _ids.pop()


def _same(a: str, b: str) -> bool:
    # Decision ids are capabilities: compared in constant time.
    return hmac.compare_digest(a.encode(), b.encode())


class SeatLedger:
    """The decisions of one seat in one match and the judge of its answers."""

    def __init__(self, seat: int, strikes_limit: int, earlier: Collection[str] = ()) -> None:
        self.seat = seat
        self.strikes_limit = strikes_limit
        self.strikes = 0
        self.open: str | None = None
        self.legal: list[int] = []
        self._why_illegal: Callable[[int], str] = lambda _: "not legal now"
        self.issued: set[str] = set()
        self.earlier = earlier  # decision ids of the session's previous match: answers may still be in flight
        self.resumes = 0
        # Decision ids decided by the timeout fallback -> the sequence number of their request;
        # and those whose request was then resent by a Resume (the bot could not know).
        self.fallbacks: dict[str, int] = {}
        self.resent_after_fallback: set[str] = set()
        # The last accepted (decision id, action id) and the resume count when it was accepted.
        self.accepted: tuple[str, int, int] | None = None

    # --- what the table tells the ledger ------------------------------------------------

    def issue(self, decision_id: str, legal: list[int], why_illegal: Callable[[int], str]) -> None:
        """Opens *decision_id* with its *legal* action ids; *why_illegal* explains any other id."""
        self.issued.add(decision_id)
        self.open = decision_id
        self.legal = legal
        self._why_illegal = why_illegal

    def timed_out(self, decision_id: str, request_sequence: int) -> None:
        """The fallback decided *decision_id*, whose request had sequence number *request_sequence*."""
        self.close()
        self.fallbacks[decision_id] = request_sequence

    def close(self) -> None:
        """No decision is open any more (the match ended or the seat's side forfeited)."""
        self.open = None

    def resumed(self, last_sequence: int) -> None:
        """The seat resumed having seen its messages up to *last_sequence*: later ones were resent."""
        self.resumes += 1
        for did, sequence in self.fallbacks.items():
            if sequence > last_sequence:
                self.resent_after_fallback.add(did)

    def strike(self) -> bool:
        """Counts one strike; True once the seat is over the limit (its side forfeits)."""
        self.strikes += 1
        return self.strikes > self.strikes_limit

    def compact(self) -> None:
        """Drops what only a running match needs: the lobby keeps ended tables for a long time.
        (The session keeps its own reference to *issued*: the next match's *earlier*.)"""
        self.legal = []
        self._why_illegal = lambda _: "not legal now"  # it holds the engine state of the last hand
        self.issued, self.earlier = set(), ()
        self.fallbacks, self.resent_after_fallback = {}, set()

    # --- the judge ------------------------------------------------------------------------

    def judge(self, decision_id: str, action_id: int) -> Verdict:
        """The verdict on an answer; an accepted answer closes its decision."""
        did = self.open
        if did is not None and _same(decision_id, did):
            if action_id in self.legal:
                self.open = None
                self.accepted = (decision_id, action_id, self.resumes)
                return Accept()
            why = self._why_illegal(action_id)
            return self._reject(
                bs.REJECT_REASON_ILLEGAL_ACTION, str(IllegalActionError(action_id, why)), FaultReason.ILLEGAL_ACTION
            )
        if self._is_resent(decision_id, action_id):
            # After a Resume the bot cannot know whether its last answer arrived, so it sends it
            # again: an identical repeat of an accepted answer is a no-op, not a strike.
            return Ignore()
        if decision_id in self.earlier:
            # In flight when the session's previous match ended: nothing to do with this match.
            message = f"decision {decision_id} belongs to a match that has ended"
            return self._reject(bs.REJECT_REASON_STALE_DECISION, message, None)
        if decision_id in self.resent_after_fallback:
            # The request reached the bot only with the messages resent after a Resume, after
            # the fallback had decided it: the bot could not know. The fallback's strike is enough.
            message = (
                f"decision {decision_id} was decided by the timeout fallback while this seat was away "
                "(no strike: the request was among the messages resent after Resume)"
            )
            return self._reject(bs.REJECT_REASON_STALE_DECISION, message, None)
        if decision_id in self.issued:
            message = f"decision {decision_id} is closed (already answered, or decided by a timeout fallback)"
            return self._reject(bs.REJECT_REASON_STALE_DECISION, message, FaultReason.STALE_DECISION)
        if did is None:
            message = (
                f"no decision is open for seat {self.seat}; decision {decision_id!r} was never issued to this session"
            )
            return self._reject(bs.REJECT_REASON_NOT_YOUR_TURN, message, FaultReason.STALE_DECISION)
        message = f"decision {decision_id!r} was never issued to this session (the open decision has another id)"
        return self._reject(bs.REJECT_REASON_UNKNOWN_DECISION, message, FaultReason.STALE_DECISION)

    def _reject(self, reason: bs.RejectReason.ValueType, message: str, fault: FaultReason | None) -> Reject:
        strikes = self.strikes + (fault is not None)
        open_after = self.open is not None and strikes <= self.strikes_limit
        return Reject(reason, message, fault, strikes, open_after)

    def _is_resent(self, decision_id: str, action_id: int) -> bool:
        last = self.accepted
        return last is not None and last[2] < self.resumes and last[1] == action_id and _same(last[0], decision_id)


__all__ = ["Accept", "Ignore", "Reject", "SeatLedger", "Verdict"]
