"""Records: the arena's post-processing of a match record the server handed back.

The server's record names the processes that played (one-match aliases under
``bot_processes = "per_match"``); the arena's record names the configured bots, links each
seat's bot log, says which sandbox ran each command bot with which limits, adds the faults of
the sandbox (a bot killed by a limit) to the seats that disconnected, and the result names
why a side forfeited (``result["forfeit"]``: side, seat, bot, reason code, message). The
forfeit comes from the server's table (:class:`gaigel_server.table.Forfeit`); a seat whose
bot a sandbox limit killed names that limit instead, as the arena knows it and the server
cannot.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from gaigel.match import FaultReason
from gaigel_arena import sandbox

if TYPE_CHECKING:
    from gaigel_server.table import Forfeit

__all__ = [
    "configured_bot",
    "disconnected_seats",
    "finish_record",
    "forfeit_reason",
    "forfeit_result",
    "match_alias",
    "rename",
]


def match_alias(bot: str) -> str:
    """A one-match name for a process of *bot* (``bot_processes = "per_match"``): the bot's name, a
    dot and 12 hex digits, within the server's 64 characters."""
    return f"{bot[:50]}.{secrets.token_hex(6)}"


def configured_bot(process: str, bots: Iterable[str]) -> str:
    """The configured bot of a process name (a bot's name or its :func:`match_alias`); *process* if none."""
    base, dot, tail = process.rpartition(".")
    if process in bots or not dot or len(tail) != 12:
        return process
    return next((b for b in bots if b[:50] == base), process)


def rename(value: Any, aliases: dict[str, str]) -> Any:
    """*value* (a record) with every string that is a one-match alias replaced by its bot's configured name."""
    if not aliases:
        return value
    if isinstance(value, str):
        return aliases.get(value, value)
    if isinstance(value, list):
        return [rename(v, aliases) for v in value]
    if isinstance(value, dict):
        return {k: rename(v, aliases) for k, v in value.items()}
    return value


def disconnected_seats(record: dict[str, Any]) -> set[int]:
    """The seats of *record* that disconnected and did not resume."""
    gone: set[int] = set()
    for fault in record.get("faults", []):
        if isinstance(fault, dict) and fault.get("reason") == FaultReason.DISCONNECT:
            gone.add(fault.get("seat", -1))
        elif isinstance(fault, dict) and fault.get("reason") == FaultReason.RESUMED:
            gone.discard(fault.get("seat", -1))
    return gone


def forfeit_result(forfeit: Forfeit, record: dict[str, Any], aliases: dict[str, str]) -> dict[str, Any]:
    """``result["forfeit"]`` of a forfeit the server's table knew (*forfeit*), in a *record* already
    post-processed by :func:`finish_record`: a sandbox fault of the forfeiting seat names the limit
    that killed its bot (why it did not resume)."""
    out: dict[str, Any] = {
        "side": forfeit.side,
        "seat": forfeit.seat,
        "bot": aliases.get(forfeit.bot, forfeit.bot),
        "reason": forfeit.reason.value,
        "message": forfeit.message,
    }
    caused = [f for f in record.get("sandbox_faults", []) if f["seat"] == forfeit.seat]
    if caused:
        out["reason"] = caused[-1]["reason"]
    return out


def finish_record(
    record: dict[str, Any],
    *,
    match_id: str,
    server_match_id: str,
    sandboxes: dict[str, dict[str, Any]],
    bot_logs: dict[str, str],
    bot_faults: list[dict[str, Any]],
    window: tuple[float, float],
) -> None:
    """Adds to *record* (renamed already) what the arena knows about its match: the ids, the sandbox
    of each command bot, the seats' bot logs, and the sandbox faults of *bot_faults* that fell in
    *window* (monotonic start and end) for seats that disconnected."""
    record["server_match_id"] = server_match_id  # links the record to the server's logs and the bots' view
    record["match_id"] = match_id
    if sandboxes:  # which sandbox ran each command bot, and which limits it really had
        record["sandboxes"] = sandboxes
    if bot_logs:
        record["bot_logs"] = bot_logs
    sandbox.annotate_record(record, bot_faults, *window)


def forfeit_reason(record: dict[str, Any]) -> dict[str, Any] | None:
    """Why a forfeited match was forfeited, read from a record's faults alone; None without a forfeit.

    For records read back from disk (``bench/soak.py`` checks the journal's ``result["forfeit"]``
    against the record); the arena itself takes a forfeit from the server's table
    (:func:`forfeit_result`). ``reason`` is the code of the last fault of the forfeiting seat
    before the FORFEIT (``DISCONNECT`` for a bot that crashed and did not resume,
    ``TIMEOUT_FALLBACK`` or ``ILLEGAL_ACTION`` for strikes over the limit), ``message`` the
    server's FORFEIT message.
    """
    result = record.get("result") or {}
    if not result.get("forfeit_sides"):
        return None
    faults = [f for f in record.get("faults", []) if isinstance(f, dict)]
    final = next((f for f in reversed(faults) if f.get("reason") == FaultReason.FORFEIT), None)
    if final is None:
        return {"side": result["forfeit_sides"][0], "reason": FaultReason.FORFEIT.value, "message": ""}
    seat = final.get("seat")
    before = [
        f for f in faults[: faults.index(final)] if f.get("seat") == seat and f.get("reason") != FaultReason.RESUMED
    ]
    seats = record.get("seats") or []
    bot = (
        seats[seat].get("bot")
        if isinstance(seat, int) and seat < len(seats) and isinstance(seats[seat], dict)
        else None
    )
    return {
        "side": result["forfeit_sides"][0],
        "seat": seat,
        "bot": bot,
        "reason": before[-1].get("reason", FaultReason.FORFEIT.value) if before else FaultReason.FORFEIT.value,
        "message": final.get("message", ""),
    }
