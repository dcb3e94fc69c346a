"""A table's life cycle as a type: the one source of its states, checked against the protocol's
``MatchState`` when imported (a state added on one side only fails here, not in a reply)."""

from __future__ import annotations

import enum

from gaigel_api.v1 import match_service_pb2 as ms


class TableState(enum.StrEnum):
    """A table's life: waiting for its sessions, running, ended (the protocol's MatchState)."""

    WAITING = "waiting"
    RUNNING = "running"
    ENDED = "ended"

    @property
    def proto(self) -> ms.MatchState.ValueType:
        return _MATCH_STATES[self]


_MATCH_STATES = {
    s: ms.MatchState.Value(f"MATCH_STATE_{s.name}") for s in TableState
}  # fails at import if one is missing
if set(_MATCH_STATES.values()) != {v for v in ms.MatchState.values() if v}:
    raise ImportError("TableState and the protocol's MatchState differ")


__all__ = ["TableState"]
