"""The clocks and strike limit of a match (DESIGN.md, Policies): plain values, no gRPC.

:class:`Clock` is the setting of a match; :class:`SeatClock` the time one seat has left in it.

The one source of the clock defaults: the server, ``gaigel serve``/``try`` flags, the arena
config and check-bot all read them from :class:`Clock`. The proto form is built in
:mod:`gaigel_server.codec`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

MAX_CLOCK_SECONDS = 7 * 24 * 3600
"""The longest decision time, bank or resume grace a match may set (and timers can hold)."""


@dataclasses.dataclass(frozen=True)
class Clock:
    """Clocks and limits of one match."""

    decision_time: float = 2.0
    """Seconds per decision before the bank is drawn on."""
    bank: float = 30.0
    """Reserve seconds per seat for the whole match."""
    strikes_limit: int = 3
    """Strikes a seat may collect; one more forfeits its side."""
    resume_grace: float = 20.0
    """Seconds a disconnected seat may take to resume."""

    def replaced(self, **changes: Any) -> Clock:
        """This clock with *changes*, each checked against its range.

        :raises ValueError: a value outside its range, naming the field.
        """
        for name, value in changes.items():
            if name == "strikes_limit":
                if int(value) < 0:
                    raise ValueError("clock.strikes_limit must not be negative")
            elif not 0 <= value <= MAX_CLOCK_SECONDS:
                raise ValueError(f"clock.{name} must be 0 to {MAX_CLOCK_SECONDS} s (one week), got {value:g} s")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, for the match record."""
        return dataclasses.asdict(self)


class SeatClock:
    """The decision time and the bank left of one seat during a match."""

    def __init__(self, clock: Clock) -> None:
        self.decision_time = clock.decision_time
        self.bank = clock.bank

    def deadline(self, start: float) -> float:
        """When a decision whose request went out at *start* falls back (same time base as *start*)."""
        return start + self.decision_time + self.bank

    def charge(self, used: float) -> None:
        """An answer after *used* seconds: the time beyond the decision time comes out of the bank."""
        if used > self.decision_time:
            self.bank = max(0.0, self.bank - (used - self.decision_time))

    def run_out(self) -> float:
        """No answer in time: the bank is spent. Returns the seconds the decision used."""
        used = self.decision_time + self.bank
        self.bank = 0.0
        return used


CLOCK_DEFAULTS: dict[str, Any] = Clock().to_dict()
"""The defaults by field name, for command-line help and config files."""

__all__ = ["CLOCK_DEFAULTS", "MAX_CLOCK_SECONDS", "Clock", "SeatClock"]
