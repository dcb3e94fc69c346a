"""The stdio bridge: plays a bot that speaks JSON lines on stdin/stdout (docs/stdio-protocol.md).

:class:`StdioBot` is an SDK :class:`~gaigel_client.bot.Bot` that launches the bot command and
turns every server message into one JSON line on the command's stdin. For a decision it
reads one line back: ``{"action": ID}`` (optionally with ``"decision_id"``) or a bare integer.

Faults stay the server's business: an unreadable answer is sent on as action id -1, which the
server rejects (one strike) before the bot gets the decision again; a missing answer lets the
server's timeout fallback play, and the bridge then sends no answer at all (``decide`` returns
None), so a late line costs no second (stale) strike. A bot process that exits ends the bridge with an error.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Any

from google.protobuf import descriptor as _descriptor
from google.protobuf import duration_pb2
from google.protobuf.message import Message

from gaigel_api.v1 import bot_service_pb2 as pb
from gaigel_api.v1 import common_pb2, game_pb2
from gaigel_client.bot import Bot

INVALID_ACTION = -1
"""Sent for an answer that cannot be read: the server rejects it as illegal (one strike)."""

_SUITS: dict[int, str] = {
    common_pb2.SUIT_EICHEL: "E",
    common_pb2.SUIT_BLATT: "B",
    common_pb2.SUIT_HERZ: "H",
    common_pb2.SUIT_SCHELLEN: "S",
}
_RANKS: dict[int, str] = {
    common_pb2.RANK_ACE: "A",
    common_pb2.RANK_TEN: "T",
    common_pb2.RANK_KING: "K",
    common_pb2.RANK_OBER: "O",
    common_pb2.RANK_UNTER: "U",
    common_pb2.RANK_SEVEN: "7",
}
_FD = _descriptor.FieldDescriptor


class BridgeError(Exception):
    """The bot process broke the line protocol for good (exited, closed its stdout)."""


def _enum_prefix(enum_name: str) -> str:
    out = []
    for i, ch in enumerate(enum_name):
        if ch.isupper() and i:
            out.append("_")
        out.append(ch.upper())
    return "".join(out) + "_"


def _enum(field: Any, value: int) -> Any:
    if value == 0:
        return None
    full = field.enum_type.full_name
    if full == "gaigel.v1.Suit":
        return _SUITS.get(value)
    if full == "gaigel.v1.Rank":
        return _RANKS.get(value)
    try:
        name = field.enum_type.values_by_number[value].name
    except KeyError:
        return value
    return name.removeprefix(_enum_prefix(field.enum_type.name)).lower()


def _ms(d: duration_pb2.Duration) -> int:
    return int(d.seconds * 1000 + d.nanos // 1_000_000)


def friendly(msg: Message) -> dict[str, Any]:
    """*msg* as plain JSON data: cards as codes ("HKa"), suits as letters, other enums as
    lower-case names without their prefix (null when unspecified), durations as ``<name>_ms``
    integers, absent fields as null, 64-bit integers as strings."""
    out: dict[str, Any] = {}
    field: Any
    for field in msg.DESCRIPTOR.fields:
        name = field.name
        value = getattr(msg, name)
        is_repeated = field.is_repeated
        if field.type == _FD.TYPE_MESSAGE:
            full = field.message_type.full_name
            if full == "google.protobuf.Duration":
                out[name + "_ms"] = _ms(value) if msg.HasField(name) else None
            elif full == "gaigel.v1.Card":
                out[name] = [c.code for c in value] if is_repeated else (value.code if msg.HasField(name) else None)
            elif is_repeated:
                out[name] = [friendly(v) for v in value]
            else:
                out[name] = friendly(value) if msg.HasField(name) else None
        elif is_repeated:
            if field.type == _FD.TYPE_ENUM:
                out[name] = [_enum(field, v) for v in value]
            else:
                out[name] = list(value)
        elif field.has_presence and not msg.HasField(name):
            out[name] = None
        elif field.type == _FD.TYPE_ENUM:
            out[name] = _enum(field, value)
        elif field.type in (_FD.TYPE_UINT64, _FD.TYPE_INT64, _FD.TYPE_FIXED64, _FD.TYPE_SINT64, _FD.TYPE_SFIXED64):
            out[name] = str(value)
        else:
            out[name] = value
    return out


# --- the lines sent to the bot -------------------------------------------------------


def decision_line(request: pb.DecisionRequest, retry: bool = False) -> dict[str, Any]:
    """The ``decision`` line of *request*."""
    return {
        "type": "decision",
        "decision_id": request.decision_id,
        "retry": retry,
        "legal_actions": [
            {k: v for k, v in friendly(a).items() if v is not None or k in ("id", "label")}
            for a in request.legal_actions
        ],
        "observation": friendly(request.observation),
        "time_left_ms": _ms(request.time_left),
        "bank_left_ms": _ms(request.bank_left),
    }


def match_start_line(msg: pb.MatchStart) -> dict[str, Any]:
    """The ``match_start`` line (without the resume token, which the bridge keeps)."""
    data = friendly(msg)
    data.pop("resume_token", None)
    try:
        data["ruleset"] = json.loads(msg.ruleset_json) if msg.ruleset_json else None
    except json.JSONDecodeError:
        data["ruleset"] = None
    data.pop("ruleset_json", None)
    return {"type": "match_start", **data}


def event_line(msg: game_pb2.Event) -> dict[str, Any]:
    """The ``event`` line: ``kind`` names the oneof member, which is also the key of its data."""
    kind = msg.WhichOneof("kind")
    line: dict[str, Any] = {"type": "event", "hand_index": msg.hand_index, "kind": kind}
    if kind is not None:
        line[kind] = friendly(getattr(msg, kind))
    return line


def parse_answer(line: str) -> tuple[int | None, str | None, str]:
    """Reads one answer line: (action id or None, the decision id it names or None, error text)."""
    text = line.strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None, None, f"not JSON and not an integer: {text[:80]!r}"
    if isinstance(data, bool):
        return None, None, f"expected an action id, got {text[:80]!r}"
    if isinstance(data, int):
        return data, None, ""
    if isinstance(data, dict):
        action = data.get("action")
        did = data.get("decision_id")
        if isinstance(action, bool) or not isinstance(action, int):
            return None, None, f'expected {{"action": <integer id>}}, got {text[:80]!r}'
        return action, did if isinstance(did, str) else None, ""
    return None, None, f'expected {{"action": <integer id>}} or an integer, got {text[:80]!r}'


# --- the bridge ------------------------------------------------------------------------


class StdioBot(Bot):
    """Runs *cmd* and relays the session to it as JSON lines (see docs/stdio-protocol.md)."""

    name = "stdio-bot"

    def __init__(
        self,
        cmd: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        answer_margin: float = 1.0,
        err: IO[str] | None = None,
    ) -> None:
        self.cmd = list(cmd)
        self.answer_margin = answer_margin
        self.err = err or sys.stderr
        self.decisions = 0
        self.bad_answers = 0
        try:
            self.proc = subprocess.Popen(
                self.cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=None,  # the bot's own log goes to our stderr
                text=True,
                bufsize=1,
                env=env,
            )
        except OSError as e:
            raise BridgeError(f"cannot start bot command {' '.join(self.cmd)!r}: {e.strerror or e}") from None
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read_stdout, name="stdio-bot-reader", daemon=True)
        self._reader.start()
        self._retry_of: str | None = None

    # --- process plumbing -----------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                self._lines.put(line)
        except (OSError, ValueError):
            pass
        self._lines.put(None)

    def _error(self, text: str) -> None:
        print(f"gaigel stdio-bot: error: {text}", file=self.err, flush=True)

    def _exit_text(self) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(0.5)
        code = self.proc.returncode
        return "closed its stdout" if code is None else f"exited with code {code}"

    def send(self, data: dict[str, Any]) -> None:
        """Writes one line to the bot."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(data, separators=(",", ":")) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise BridgeError(
                f"the bot process {self._exit_text()} (writing a {data.get('type')!r} line failed)"
            ) from None

    def close(self, timeout: float = 3.0) -> int | None:
        """Closes the bot's stdin and waits for it to exit (terminating it after *timeout*)."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(2.0)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            return None

    # --- the SDK hooks --------------------------------------------------------------

    def decide(self, request: pb.DecisionRequest) -> int | None:
        self.decisions += 1
        retry = self._retry_of == request.decision_id
        self._retry_of = None
        while True:  # lines written outside a decision are stale
            try:
                stale = self._lines.get_nowait()
            except queue.Empty:
                break
            if stale is None:
                self._lines.put(None)
                raise BridgeError(f"the bot process {self._exit_text()} before decision {request.decision_id}")
            if stale.strip():
                self._error(f"ignoring a line written outside a decision: {stale.strip()[:80]!r}")
        self.send(decision_line(request, retry))
        wait = request.time_left.ToTimedelta().total_seconds() + request.bank_left.ToTimedelta().total_seconds()
        deadline = time.monotonic() + wait + self.answer_margin
        legal = {a.id for a in request.legal_actions}
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(0.0, remaining)) if remaining > 0 else self._lines.get_nowait()
            except queue.Empty:
                # Too late: the server's timeout fallback has played (one strike). Sending an
                # answer now would only be rejected as stale, a second strike, so send none.
                self._error(
                    f"no answer to decision {request.decision_id} within {wait:.1f} s: the server plays its "
                    "timeout fallback; sending no answer"
                )
                return None
            if line is None:
                self._lines.put(None)
                raise BridgeError(
                    f"the bot process {self._exit_text()} instead of answering decision {request.decision_id}"
                )
            if not line.strip():
                continue
            action, did, problem = parse_answer(line)
            if action is None:
                self.bad_answers += 1
                self._error(
                    f"unreadable answer to decision {request.decision_id}: {problem}; "
                    f"sending action {INVALID_ACTION} (the server rejects it: one strike)"
                )
                return INVALID_ACTION
            if did is not None and did != request.decision_id:
                self._error(f"ignoring an answer for decision {did} (the open decision is {request.decision_id})")
                continue
            if action not in legal:
                self.bad_answers += 1
                self._error(f"action {action} is not legal for decision {request.decision_id} (the server rejects it)")
            return action

    def on_welcome(self, msg: pb.Welcome) -> None:
        self.send({"type": "welcome", **friendly(msg)})

    def on_match_start(self, msg: pb.MatchStart) -> None:
        self.send(match_start_line(msg))

    def on_hand_start(self, msg: game_pb2.HandStart) -> None:
        self.send({"type": "hand_start", **friendly(msg)})

    def on_event(self, msg: game_pb2.Event) -> None:
        self.send(event_line(msg))

    def on_hand_end(self, msg: game_pb2.HandEnd) -> None:
        self.send({"type": "hand_end", **friendly(msg)})

    def on_match_end(self, msg: game_pb2.MatchEnd) -> None:
        self.send({"type": "match_end", **friendly(msg)})

    def on_rejected(self, msg: pb.ActionRejected) -> None:
        if msg.decision_open:
            self._retry_of = msg.decision_id
        self.send({"type": "rejected", **friendly(msg)})


def run_stdio_bot(
    cmd: Sequence[str],
    *,
    server: str | None = None,
    token: str | None = None,
    name: str | None = None,
    matches: int | None = None,
    secure: bool = False,
) -> int:
    """Runs the bridge; returns the exit code for ``gaigel stdio-bot``."""
    from gaigel_client.client import run
    from gaigel_client.errors import GaigelClientError

    env = dict(os.environ)
    for key, value in (("GAIGEL_SERVER", server), ("GAIGEL_BOT_NAME", name)):
        if value:
            env[key] = value
    env.pop("GAIGEL_TOKEN", None)  # the bot process needs no token: the bridge holds the session
    try:
        bot = StdioBot(cmd, env=env)
    except BridgeError as e:
        print(f"gaigel stdio-bot: error: {e}", file=sys.stderr)
        return 1
    code = 0
    try:
        played = run(bot, server, token, matches=matches, secure=secure, name=name)
        print(
            f"gaigel stdio-bot: played {played} match{'es' if played != 1 else ''}, {bot.decisions} decisions"
            + (f", {bot.bad_answers} bad answers" if bot.bad_answers else ""),
            file=sys.stderr,
        )
    except BridgeError as e:
        print(f"gaigel stdio-bot: error: {e}", file=sys.stderr)
        code = 1
    except GaigelClientError as e:
        print(f"gaigel stdio-bot: error: {e}", file=sys.stderr)
        code = 1
    finally:
        rc = bot.close()
    if code == 0 and rc not in (0, None):
        print(f"gaigel stdio-bot: error: the bot process exited with code {rc}", file=sys.stderr)
        code = 1
    return code


__all__ = ["BridgeError", "StdioBot", "decision_line", "event_line", "friendly", "parse_answer", "run_stdio_bot"]
