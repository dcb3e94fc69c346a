"""Versioned JSON match records (DESIGN.md, Match records).

A record holds the format, engine and protocol versions, the full ruleset, the seed, the
deal format, the seats with bot names and versions, and for every hand the dealer, the
deal hash, every action (seat, id, label, time used, reason flags, state hash after it)
and the hand result, then the match result. :mod:`gaigel.replay` re-derives every state.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gaigel.actions import NUM_ACTIONS, action_label
from gaigel.botseed import LOCAL_MATCH_KEY, bot_seeds
from gaigel.deal import DEAL_FORMAT, Deal
from gaigel.ruleset import Ruleset, RulesetError
from gaigel.state import ENGINE_VERSION, HandOutcome

if TYPE_CHECKING:
    from gaigel.match import MatchScore, MatchSpec

RECORD_FORMAT = "gaigel-match-record"
RECORD_VERSION = 1
PROTOCOL_VERSION = "gaigel.v1"
"""The protocol package whose action ids a record uses (gaigel_api.PROTOCOL_PACKAGE; tests check they agree)."""

_LABELS = tuple(action_label(a) for a in range(NUM_ACTIONS))
"""Each action's label, spelled once: a record writes one per action applied."""


class RecordError(ValueError):
    """A file that is not a valid match record; the message says what is wrong."""


class RecordWriter:
    """Builds a match record hand by hand (used by every match runner)."""

    def __init__(
        self, spec: MatchSpec, versions: list[str] | None = None, match_id: str = "", match_key: str = ""
    ) -> None:
        """*match_key* derives the bot seeds (:mod:`gaigel.botseed`); default: *match_id*, else
        :data:`~gaigel.botseed.LOCAL_MATCH_KEY`."""
        self.spec = spec
        rules = spec.ruleset
        key = match_key or match_id or LOCAL_MATCH_KEY
        seeds = bot_seeds(spec.seed, rules.players, key)
        self.data: dict[str, Any] = {
            "format": RECORD_FORMAT,
            "format_version": RECORD_VERSION,
            "engine_version": ENGINE_VERSION,
            "protocol_version": PROTOCOL_VERSION,
            "deal_format": DEAL_FORMAT,
            "match_id": match_id,
            "match_key": key,
            "ruleset": rules.to_dict(),
            "seed": spec.seed,
            "players": rules.players,
            "hands_planned": spec.hands,
            "first_dealer": spec.first_dealer,
            "seats": [
                {
                    "seat": s,
                    "side": rules.side_of(s),
                    "bot": name,
                    "version": (versions or [])[s] if versions else "",
                    "bot_seed": seeds[s],
                }
                for s, name in enumerate(spec.bots)
            ],
            "hands": [],
            "faults": [],
            "result": None,
        }

    def begin_hand(self, index: int, dealer: int, forehand: int, deal: Deal) -> None:
        """Opens hand *index*."""
        self.data["hands"].append(
            {
                "index": index,
                "dealer": dealer,
                "forehand": forehand,
                "deal_hash": deal.digest(),
                "actions": [],
                "result": None,
            }
        )

    def action(self, seat: int, action: int, seconds: float, state_hash: str, flags: tuple[str, ...] = ()) -> None:
        """Adds one applied action of the open hand."""
        entry: dict[str, Any] = {
            "seat": seat,
            "action": action,
            "label": _LABELS[action] if 0 <= action < NUM_ACTIONS else action_label(action),
            "ms": round(seconds * 1000, 3),
            "hash": state_hash,
        }
        if flags:
            entry["flags"] = list(flags)
        self.data["hands"][-1]["actions"].append(entry)

    def fault(self, seat: int, reason: str, message: str, hand: int | None = None, step: int | None = None) -> None:
        """Notes a fault of a seat (rejected action, timeout, disconnect, ...) with its reason code."""
        self.data["faults"].append({"seat": seat, "reason": reason, "message": message, "hand": hand, "step": step})

    def end_hand(self, outcome: HandOutcome | None, aborted: bool = False) -> None:
        """Closes the open hand with its outcome (None and *aborted* for an interrupted hand)."""
        hand = self.data["hands"][-1]
        hand["result"] = outcome.to_dict() if outcome else None
        if aborted:
            hand["aborted"] = True

    def finish(self, score: MatchScore, termination: str, forfeit_sides: list[int] | None = None) -> dict[str, Any]:
        """Closes the match and returns the record."""
        result = score.to_dict()
        result["termination"] = termination
        result["hands_played"] = score.hands_played
        if forfeit_sides:
            result["forfeit_sides"] = forfeit_sides
            result["winners"] = [x for x in range(self.spec.ruleset.num_sides) if x not in forfeit_sides]
        self.data["result"] = result
        return self.data


def write_json_atomic(data: Any, path: str | Path, *, indent: int | None = None) -> None:
    """Writes *data* as JSON through a per-process temp file beside *path* and a rename, so no
    reader sees half a file, a crash leaves none, and concurrent writers never share a temp file.
    Compact unless *indent* is given. The one atomic JSON writer of the engine, server and arena
    (the SDK, which may not import the engine, has its own for its resume file)."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    text = json.dumps(data, separators=(",", ":")) if indent is None else json.dumps(data, indent=indent)
    try:
        tmp.write_text(text + "\n", encoding="utf-8")
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def dump_record(record: dict[str, Any], path: str | Path) -> None:
    """Writes *record* atomically, one line per key for people reading it."""
    write_json_atomic(record, path, indent=1)


MAX_RECORD_BYTES = 64 * 1024 * 1024
"""Largest record file read (a 100-hand 6-player record is about 2 MB); larger ones are refused
before they are read, so /dev/zero or a huge file cannot take the reader's memory."""
MAX_JSON_VALUES = 4_000_000
"""Most JSON values (counted as the brackets, braces and commas that open them) a record may
hold: a record of MAX_HANDS hands holds about 2 million, and 64 MiB of ``[]`` would be 32 million
Python lists, gigabytes of memory, before anything could check them."""
MAX_HANDS = 10_000
"""Most hands a record may plan: the record tools replay hands in bounded time."""


def load_record(path: str | Path) -> dict[str, Any]:
    """Reads and validates a record file.

    :raises RecordError: with a one-line reason for a missing, truncated, oversized or foreign file.
    """
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise RecordError(f"{path} is not a regular file (a record is a JSON file)")
            raw = f.read(MAX_RECORD_BYTES + 1)
    except OSError as e:
        raise RecordError(f"cannot read {path}: {e.strerror}") from None
    if len(raw) > MAX_RECORD_BYTES:
        raise RecordError(f"{path} is larger than {MAX_RECORD_BYTES // (1024 * 1024)} MiB: not a match record")
    values = raw.count(b"[") + raw.count(b"{") + raw.count(b",")  # an upper bound, counted in C
    if values > MAX_JSON_VALUES:
        raise RecordError(f"{path} holds more than {MAX_JSON_VALUES:,} JSON values: not a match record")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RecordError(f"{path} is not a text file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise RecordError(f"{path} is not valid JSON (truncated or corrupted?): {e.msg} at line {e.lineno}") from None
    except RecursionError:
        raise RecordError(f"{path} is nested too deeply to be a match record") from None
    validate_record(data)
    return data  # type: ignore[no-any-return]


def validate_record(data: Any) -> None:
    """Checks the shape of a record.

    :raises RecordError: naming the first problem.
    """
    if not isinstance(data, dict) or data.get("format") != RECORD_FORMAT:
        raise RecordError(f'not a Gaigel match record (missing "format": "{RECORD_FORMAT}")')
    if data.get("format_version") != RECORD_VERSION:
        raise RecordError(
            f"unsupported record format_version {data.get('format_version')!r} (this engine reads {RECORD_VERSION})"
        )
    if data.get("deal_format") != DEAL_FORMAT:
        raise RecordError(f"unsupported deal format {data.get('deal_format')!r} (this engine deals {DEAL_FORMAT})")
    for key, kind in (
        ("seed", int),
        ("players", int),
        ("hands_planned", int),
        ("seats", list),
        ("hands", list),
        ("ruleset", dict),
    ):
        if not isinstance(data.get(key), kind) or isinstance(data.get(key), bool):
            raise RecordError(f"record field {key!r} is missing or not a {kind.__name__}")
    optional: tuple[tuple[str, type], ...] = (
        ("faults", list),
        ("result", dict),
        ("match_id", str),
        ("first_dealer", int),
    )
    for key, want in optional:
        if key in data and (not isinstance(data[key], want) or isinstance(data[key], bool)):
            raise RecordError(f"record field {key!r} is not a {want.__name__}")
    if any(not isinstance(f, dict) for f in data.get("faults", [])):
        raise RecordError("record field 'faults' holds something other than fault objects")
    planned, held = data["hands_planned"], len(data["hands"])
    if not 1 <= planned <= MAX_HANDS:
        raise RecordError(f"record field 'hands_planned' is {planned}: a match plans 1 to {MAX_HANDS} hands")
    if held > planned:
        raise RecordError(f"the record holds {held} hands but planned only {planned}")
    try:
        Ruleset.from_dict(data["ruleset"])
    except (RulesetError, TypeError) as e:
        raise RecordError(f"record ruleset is invalid: {e}") from None
    for i, hand in enumerate(data["hands"]):
        if (
            not isinstance(hand, dict)
            or not isinstance(hand.get("actions"), list)
            or not isinstance(hand.get("index"), int)
        ):
            raise RecordError(f"hand {i} of the record is malformed")
        for j, act in enumerate(hand["actions"]):
            if (
                not isinstance(act, dict)
                or not isinstance(act.get("action"), int)
                or not isinstance(act.get("hash"), str)
            ):
                raise RecordError(f"hand {i} action {j} of the record is malformed")
