"""Hostile clients against a live ``gaigel serve`` process: inputs, how they are sent, what must hold.

Shared by ``tests/server/test_fuzz.py`` (a bounded run in CI) and ``bench/fuzz.py`` (the long
run with figures), which both import it as ``bench.fuzzkit``. The server under test is a real
subprocess, not an in-process server, because a crash must be observable as a dead process
and its file descriptors, memory and asyncio tasks must be measurable from outside.

Three kinds of input, each a frozen dataclass drawn by a hypothesis strategy:

* :class:`PlayInput`: one ``BotService.Play`` stream: a sequence of ``PlayRequest`` byte
  strings (valid protos with hostile field values, wrong oneofs, hand-encoded wire garbage,
  invalid UTF-8, messages just under and over the size limit) and an *ending*: ``probe``
  (a final Action whose ActionRejected proves the server processed everything before it),
  ``flood`` (hundreds of Actions, read concurrently), ``noread`` (hundreds of Actions, never
  read), ``half_close`` or ``cancel``.
* :class:`AdminInput`: one ``MatchService`` call, as a proto with hostile values or as raw
  bytes, with a good, missing or wrong admin token.
* :class:`TcpInput`: a raw TCP connection to the gRPC port: random bytes, an HTTP/2 preface
  followed by garbage frames, a hand-made gRPC request with broken framing, a connection cut
  off halfway, or one that sends nothing.

:meth:`Fuzzer.run` sends one input and returns an :class:`Outcome` whose ``problem`` is set
when the server broke the contract: a status outside :data:`DEFINED_CODES` (UNKNOWN and
INTERNAL above all), a non-OK status without a message, no answer within
:data:`INPUT_DEADLINE` seconds (a hang), or a response that is not a valid message.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import functools
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc._cython import cygrpc  # type: ignore[attr-defined]
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import strategies as st

from gaigel.ruleset import preset
from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import common_pb2 as cm
from gaigel_api.v1 import match_service_pb2 as ms

T = TypeVar("T")
EOF: Any = getattr(grpc.aio, "EOF")  # noqa: B009 (missing from the type stubs)

ADMIN_TOKEN = "fuzz-admin-token-0123456789"
FUZZ_BOT, FUZZ_TOKEN = "fuzz", "fuzz-token-0123456789"
"""The bot the Play fuzzing joins as (a valid Join gets a real idle session)."""
IDLE_BOT, IDLE_TOKEN = "idle", "idle-token-0123456789"
"""A registered bot that never connects: CreateMatch inputs may name it."""
PLAYER_BOT, PLAYER_TOKEN = "player", "player-token-0123456789"
"""The bot of the scripted matches; the fuzzing never names it, so no fuzz match can take its session."""
RESERVED_BOTS = (FUZZ_BOT, IDLE_BOT, PLAYER_BOT)
MAX_MESSAGE_BYTES = 64 * 1024
"""The server's default --max-message-bytes."""
JOIN_TIMEOUT = 1.0
"""--join-timeout of the server under test (short, so a silent stream is answered quickly)."""
INPUT_DEADLINE = 10.0
"""Seconds one input may take before it counts as a hang."""
PROBE_ID = "fuzz-probe"
WATCH_WAIT = 0.3
"""Seconds a WatchMatch is read before the fuzzer ends it itself (OPEN). Refusals that gRPC
itself makes (metadata over its size limit) take about 0.1 s to arrive."""
PLAY_METHOD = "/gaigel.v1.BotService/Play"
MATCH_METHODS = (
    "CreateMatch",
    "GetMatch",
    "ListMatches",
    "CancelMatch",
    "GetMatchRecord",
    "RegisterBot",
    "WatchMatch",
)
RESPONSE_TYPES: dict[str, Any] = {
    "CreateMatch": ms.CreateMatchResponse,
    "GetMatch": ms.GetMatchResponse,
    "ListMatches": ms.ListMatchesResponse,
    "CancelMatch": ms.CancelMatchResponse,
    "GetMatchRecord": ms.GetMatchRecordResponse,
    "RegisterBot": ms.RegisterBotResponse,
    "WatchMatch": ms.WatchMatchResponse,
}
DEFINED_CODES = frozenset(
    {
        "OK",
        "INVALID_ARGUMENT",
        "FAILED_PRECONDITION",
        "UNAUTHENTICATED",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "DEADLINE_EXCEEDED",
        "ABORTED",
        "OUT_OF_RANGE",
    }
)
"""Statuses a server may end a hostile call with. DEADLINE_EXCEEDED is always the server's own
(the Join timeout): the fuzzer sets no gRPC deadline and detects hangs with its own timer."""
CLIENT_RESULTS = frozenset({"OPEN", "CANCELLED", "FLOOD_WRITTEN", "FLOOD_BLOCKED"})
"""Results where the client ended the call itself while the server was still serving it."""


# --- the server under test ----------------------------------------------------------------------


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gaigel_command() -> list[str]:
    """The ``gaigel`` command of this interpreter's environment."""
    script = Path(sys.executable).parent / "gaigel"
    if script.exists():
        return [str(script)]
    found = shutil.which("gaigel")
    if found:
        return [found]
    return [sys.executable, "-c", "import sys; from gaigel.cli import main; sys.exit(main(sys.argv[1:]))"]


@dataclasses.dataclass
class LiveServer:
    """A ``gaigel serve`` subprocess with the fuzz bots, a known admin token and a metrics port."""

    proc: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    workdir: Path
    command: list[str]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the server's output, for failure messages."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after 10 s; the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def serve_command(port: int, metrics_port: int, workdir: Path, extra: Sequence[str] = ()) -> list[str]:
    """The ``gaigel serve`` command line of the server under test."""
    return [
        *gaigel_command(),
        "serve",
        "--address",
        f"127.0.0.1:{port}",
        "--metrics-port",
        str(metrics_port),
        "--bots",
        str(workdir / "bots.toml"),
        "--admin-token",
        ADMIN_TOKEN,
        "--join-timeout",
        str(JOIN_TIMEOUT),
        "--log-level",
        "warning",
        *extra,
    ]


def start_server(workdir: Path, extra: Sequence[str] = (), timeout: float = 30.0) -> LiveServer:
    """Starts ``gaigel serve`` in *workdir* and waits until its health check says SERVING.

    :raises RuntimeError: if it exits or is not serving within *timeout* seconds.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "bots.toml").write_text(
        f'[bots]\n{FUZZ_BOT} = "{FUZZ_TOKEN}"\n{IDLE_BOT} = "{IDLE_TOKEN}"\n{PLAYER_BOT} = "{PLAYER_TOKEN}"\n'
    )
    port, metrics_port = free_port(), free_port()
    command = serve_command(port, metrics_port, workdir, extra)
    env = {k: v for k, v in os.environ.items() if k != "GAIGEL_ADMIN_TOKEN"}
    with open(workdir / "server.log", "wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL)
    server = LiveServer(proc, port, metrics_port, workdir, command)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not server.alive():
            raise RuntimeError(f"gaigel serve exited with {proc.returncode}:\n{server.log_tail()}")
        if health_sync(server.address, 0.5) == "SERVING":
            return server
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"gaigel serve not serving after {timeout:g} s:\n{server.log_tail()}")


def health_sync(address: str, timeout: float = 5.0) -> str:
    """The overall health status name (SERVING, ...) or the gRPC error code name."""
    with grpc.insecure_channel(address) as ch:
        try:
            resp = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
        except grpc.RpcError as e:
            return str(e.code().name)
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status))


# --- resources: file descriptors, memory, tasks ---------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Resources:
    """One measurement of the server process. *tasks* is None until the server exports it."""

    fds: int
    rss_bytes: int
    tasks: int | None
    source: str
    """"metrics" (the server's own process metrics) or "proc" (/proc of the subprocess)."""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def scrape(metrics_port: int, timeout: float = 5.0) -> dict[str, float]:
    """The unlabelled samples of the server's Prometheus endpoint (name -> value); labelled ones summed."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=timeout) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", line)
        if m:
            with contextlib.suppress(ValueError):
                out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
    return out


def _proc_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _proc_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def measure(server: LiveServer) -> Resources:
    """File descriptors, resident memory and event-loop tasks of *server*.

    Prefers the server's own ``process_open_fds``, ``process_resident_memory_bytes`` and
    ``gaigel_event_loop_tasks`` metrics; falls back to ``/proc`` (tasks then unknown).
    """
    try:
        samples = scrape(server.metrics_port)
    except OSError:
        samples = {}
    tasks = samples.get("gaigel_event_loop_tasks")
    if "process_open_fds" in samples and "process_resident_memory_bytes" in samples:
        return Resources(
            int(samples["process_open_fds"]),
            int(samples["process_resident_memory_bytes"]),
            None if tasks is None else int(tasks),
            "metrics",
        )
    pid = server.proc.pid
    return Resources(_proc_fds(pid), _proc_rss(pid), None if tasks is None else int(tasks), "proc")


def peak_rss(server: LiveServer) -> int | None:
    """The peak resident memory of the server process so far (VmHWM), or None once it is gone."""
    try:
        for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def settle(server: LiveServer, timeout: float = 10.0, quiet: float = 0.5) -> None:
    """Waits until the server has no open bot session (per its metrics), then *quiet* seconds more."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if scrape(server.metrics_port).get("gaigel_active_sessions", 0.0) <= 0:
                break
        except OSError:
            break
        time.sleep(0.1)
    time.sleep(quiet)


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """How much the server may grow over a fuzz run before it counts as a leak."""

    fds: int = 4
    tasks: int = 4
    rss_bytes: int = 64 * 1024 * 1024


def leaks(before: Resources, after: Resources, tol: Tolerance = Tolerance()) -> list[str]:
    """What grew beyond *tol* between two measurements (empty: flat)."""
    out = []
    if after.fds > before.fds + tol.fds:
        out.append(f"open fds {before.fds} -> {after.fds} (tolerance +{tol.fds})")
    if before.tasks is not None and after.tasks is not None and after.tasks > before.tasks + tol.tasks:
        out.append(f"event-loop tasks {before.tasks} -> {after.tasks} (tolerance +{tol.tasks})")
    if after.rss_bytes > before.rss_bytes + tol.rss_bytes:
        out.append(
            f"RSS {before.rss_bytes / 2**20:.1f} -> {after.rss_bytes / 2**20:.1f} MiB (tolerance +{tol.rss_bytes / 2**20:.0f} MiB)"
        )
    return out


# --- protobuf wire format by hand (for bytes no proto class would write) --------------------------


def varint(n: int) -> bytes:
    """Base-128 varint of *n* (negative numbers as 64-bit two's complement)."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field: int, wire_type: int) -> bytes:
    return varint((field << 3) | wire_type)


def length_delimited(field: int, data: bytes) -> bytes:
    return key(field, 2) + varint(len(data)) + data


BAD_UTF8 = (b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\xe2\x82", b"\xfe\xfe\xff\xff")
"""Byte strings that are not UTF-8: stray bytes, overlong NUL, a surrogate, beyond U+10FFFF, truncated."""


@functools.lru_cache(maxsize=256)
def sized_action(total: int) -> bytes:
    """A valid ``PlayRequest`` with an Action whose serialized size is *total* bytes (close to it
    where the length prefixes make *total* unreachable)."""
    n = max(0, total - 8)
    msg = b""
    for _ in range(8):
        msg = bs.PlayRequest(action=bs.Action(decision_id="d" * n, action_id=1)).SerializeToString()
        if len(msg) == total:
            break
        n = max(0, n - (len(msg) - total))
    return msg


# --- the inputs ---------------------------------------------------------------------------------


def _short(data: bytes, limit: int = 24) -> str:
    return data[:limit].hex() + (f"..(+{len(data) - limit} B)" if len(data) > limit else "")


@dataclasses.dataclass(frozen=True)
class PlayInput:
    """One BotService.Play stream: tagged serialized messages, sent in order, then *ending*."""

    messages: tuple[tuple[str, bytes], ...]
    ending: str = "probe"

    def kind(self) -> str:
        first = self.messages[0][0] if self.messages else "nothing"
        return f"play:{first}" + ("" if self.ending == "probe" else f"/{self.ending}")

    def to_json(self) -> dict[str, Any]:
        return {"type": "play", "messages": [[t, m.hex()] for t, m in self.messages], "ending": self.ending}

    def __repr__(self) -> str:
        shown = ", ".join(f"{t}:{_short(m)}" for t, m in self.messages[:8])
        more = f", ... {len(self.messages) - 8} more" if len(self.messages) > 8 else ""
        return f"PlayInput([{shown}{more}], ending={self.ending!r})"


def token_accepted(auth: str | None) -> bool:
    """Whether *auth* is ``Bearer <admin token>`` as match_service.proto defines it (the scheme
    is case-insensitive, spaces around the token do not count)."""
    if auth is None:
        return False
    scheme, _, tok = auth.partition(" ")
    return scheme.lower() == "bearer" and tok.strip() == ADMIN_TOKEN


@dataclasses.dataclass(frozen=True)
class AdminInput:
    """One MatchService call: the serialized request (or raw bytes) and the authorization value."""

    method: str
    request: bytes
    auth: str | None
    raw: bool = False
    match_ref: int | None = None
    """When set, the request's match_id (field 1) is replaced by a match id the fuzzer has seen."""

    def kind(self) -> str:
        token = "" if token_accepted(self.auth) else "/no-token" if self.auth is None else "/bad-token"
        return f"admin:{self.method}" + ("(raw)" if self.raw else "") + token

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "admin",
            "method": self.method,
            "request": self.request.hex(),
            "auth": self.auth,
            "raw": self.raw,
            "match_ref": self.match_ref,
        }

    def __repr__(self) -> str:
        auth = (
            None
            if self.auth is None
            else self.auth[:40] + (f"..(+{len(self.auth) - 40})" if len(self.auth) > 40 else "")
        )
        return f"AdminInput({self.method}, raw={self.raw}, request={_short(self.request, 48)}, auth={auth}, match_ref={self.match_ref})"


@dataclasses.dataclass(frozen=True)
class TcpInput:
    """Raw bytes on a plain TCP connection to the gRPC port, then *linger* seconds of reading."""

    label: str
    chunks: tuple[bytes, ...]
    linger: float

    def kind(self) -> str:
        return f"tcp:{self.label}"

    def to_json(self) -> dict[str, Any]:
        return {"type": "tcp", "label": self.label, "chunks": [c.hex() for c in self.chunks], "linger": self.linger}

    def __repr__(self) -> str:
        return f"TcpInput({self.label!r}, [{', '.join(_short(c, 32) for c in self.chunks)}], linger={self.linger})"


Input = PlayInput | AdminInput | TcpInput


def input_from_json(data: dict[str, Any]) -> Input:
    """The inverse of ``to_json`` (for replaying a reported input)."""
    if data["type"] == "play":
        return PlayInput(tuple((t, bytes.fromhex(m)) for t, m in data["messages"]), data["ending"])
    if data["type"] == "admin":
        return AdminInput(
            data["method"], bytes.fromhex(data["request"]), data["auth"], data["raw"], data.get("match_ref")
        )
    return TcpInput(data["label"], tuple(bytes.fromhex(c) for c in data["chunks"]), data["linger"])


# --- strategies: field values -------------------------------------------------------------------

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
UINT64 = st.integers(0, 2**64 - 1)
SPECIAL_TEXT = (
    "",
    " ",
    "\x00",
    "\n\r\t",
    "house:random",
    "house:",
    "../../etc/passwd",
    "%s%n%x",
    "'; DROP TABLE matches; --",
    "\u202eevil",
    "😀" * 8,
    "A" * 65,
    "-1",
    "0",
    "9" * 30,
)
huge_text = st.builds(lambda c, n: c * n, st.characters(codec="utf-8"), st.integers(1_000, 70_000))
"""Strings from 1,000 characters to well past the message size limit (up to 280 KB in UTF-8)."""
texts = st.one_of(st.text(max_size=40), st.sampled_from(SPECIAL_TEXT), huge_text)
names = st.one_of(
    st.sampled_from([FUZZ_BOT, IDLE_BOT, "house:random", "house:first", "house:nope", "nobody", "house:"]),
    st.text(max_size=30),
    st.sampled_from(SPECIAL_TEXT),
)
action_ids = st.one_of(st.integers(-3, 170), st.sampled_from([-1, 164, 165, 255, 2**31 - 1, -(2**31)]), INT32)
decision_ids = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="0123456789abcdef", min_size=16, max_size=32),
    st.just(""),
    st.just(PROBE_ID),
    huge_text,
)
bad_utf8 = st.builds(
    lambda pre, bad, post: pre + bad + post, st.binary(max_size=8), st.sampled_from(BAD_UTF8), st.binary(max_size=8)
)
field_numbers = st.one_of(st.integers(1, 6), st.integers(0, 2**29 - 1))
wire_field = st.one_of(
    st.builds(lambda f, v: key(f, 0) + varint(v), field_numbers, UINT64),
    st.builds(length_delimited, field_numbers, st.binary(max_size=64)),
    st.builds(length_delimited, st.integers(1, 10), bad_utf8),
    st.builds(lambda f, b: key(f, 1) + b, field_numbers, st.binary(min_size=8, max_size=8)),
    st.builds(lambda f, b: key(f, 5) + b, field_numbers, st.binary(min_size=4, max_size=4)),
    st.builds(lambda f, w, b: key(f, w) + b, field_numbers, st.sampled_from([3, 4, 6, 7]), st.binary(max_size=8)),
    st.builds(lambda f, n, b: key(f, 2) + varint(n) + b, field_numbers, UINT64, st.binary(max_size=8)),
)
"""One field in protobuf wire format: valid, with invalid UTF-8, with wire types 3/4 (groups) and
6/7 (invalid), or with a length prefix that lies."""
wire_message = st.lists(wire_field, max_size=6).map(b"".join)
nested_wire = st.builds(length_delimited, st.integers(1, 5), wire_message)
"""A oneof member (Join, Resume, Action, Leave) whose body is wire garbage."""
raw_bytes = st.one_of(wire_message, nested_wire, st.binary(max_size=300))


def _play(**fields: Any) -> bytes:
    return bs.PlayRequest(**fields).SerializeToString()


def _tagged(tag: str, strategy: st.SearchStrategy[bytes]) -> st.SearchStrategy[tuple[str, bytes]]:
    return strategy.map(lambda b: (tag, b))


valid_join = _tagged(
    "join_ok",
    st.text(max_size=20).map(
        lambda v: _play(join=bs.Join(bot_token=FUZZ_TOKEN, bot_name=FUZZ_BOT, bot_version=v, protocol_version=1))
    ),
)
bad_join = _tagged(
    "join_bad",
    st.builds(
        lambda tok, name, ver, pv: _play(
            join=bs.Join(bot_token=tok, bot_name=name, bot_version=ver, protocol_version=pv)
        ),
        st.one_of(st.just(FUZZ_TOKEN), texts),
        names,
        texts,
        st.one_of(st.just(1), INT32),
    ),
)
resume = _tagged(
    "resume",
    st.builds(
        lambda mid, seat, tok, seq, ver: _play(
            resume=bs.Resume(match_id=mid, seat=seat, resume_token=tok, last_sequence=seq, bot_version=ver)
        ),
        texts,
        st.one_of(st.integers(-2, 8), INT32),
        texts,
        UINT64,
        st.text(max_size=10),
    ),
)
action = _tagged(
    "action",
    st.builds(lambda d, a: _play(action=bs.Action(decision_id=d, action_id=a)), decision_ids, action_ids),
)
leave = _tagged("leave", st.just(_play(leave=bs.Leave())))
empty = _tagged("empty", st.just(b""))
raw = _tagged("raw", raw_bytes)
sized = _tagged(
    "sized",
    st.one_of(
        st.integers(-40, 40).map(lambda d: sized_action(MAX_MESSAGE_BYTES + d)),
        st.sampled_from([2, 4, 16]).map(lambda k: sized_action(k * MAX_MESSAGE_BYTES)),
    ),
)
"""Actions from 40 bytes under to 40 bytes over the size limit, and far over it (up to 1 MiB)."""
any_message = st.one_of(valid_join, bad_join, resume, action, leave, empty, raw, sized)
in_session = st.one_of(action, action, action, leave, bad_join, valid_join, resume, empty, raw, sized)


@st.composite
def play_inputs(draw: st.DrawFn) -> PlayInput:
    """A Play stream: mostly a valid Join (so later messages reach a real session), then anything."""
    first = draw(st.one_of(valid_join, valid_join, any_message))
    rest = draw(st.lists(in_session, max_size=6))
    ending = draw(st.sampled_from(["probe", "probe", "probe", "probe", "flood", "noread", "half_close", "cancel"]))
    if ending in ("flood", "noread"):
        _, one = draw(action)
        if len(one) > 1024:  # keep floods of small messages: many of them, fast
            one = _play(action=bs.Action(decision_id="flood", action_id=1))
        count = draw(st.integers(50, 1500))
        if ending == "noread" and draw(st.integers(0, 7)) == 0:
            count = 20_000  # far more than the server queues for one stream: backpressure must hold
        rest += [("action", one)] * count
    return PlayInput((first, *rest), ending)


# --- strategies: MatchService -------------------------------------------------------------------

RULESET_KEYS = tuple(preset("default", 2).to_dict())
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
overrides_json = st.one_of(
    st.dictionaries(st.one_of(st.sampled_from(RULESET_KEYS), st.text(max_size=16)), json_values, max_size=5).map(
        json.dumps
    ),
    st.builds(
        lambda depth, opener, closer: opener * depth + closer * depth,
        st.integers(1, 20_000),
        st.sampled_from(['{"a":', "[", '{"meld":']),
        st.sampled_from(["}", "]", "1}"]),
    ),
    st.text(max_size=60),
    st.sampled_from(['{"meld.timing": "any_time", "target": 101}', "{}", '{"players": 3}', "null", "[]", '"x"']),
)
"""Ruleset overrides: random JSON over real and unknown option names, deeply nested brackets
(up to 20,000 levels), non-JSON text and a few valid ones."""


def _bot_lists() -> st.SearchStrategy[list[str]]:
    return st.one_of(
        st.lists(names, max_size=9),
        st.builds(lambda n, k: [n] * k, names, st.integers(0, 30_000)),
    )


def _duration(seconds: int, nanos: int) -> Any:
    from google.protobuf import duration_pb2

    return duration_pb2.Duration(seconds=seconds, nanos=nanos)


durations = st.builds(
    _duration,
    st.one_of(st.integers(-2, 100), INT64, st.sampled_from([315_576_000_000, 2**62, 2**63 - 1])),
    st.one_of(st.just(0), st.integers(-(10**9) + 1, 10**9 - 1), INT32),
)


@st.composite
def clocks(draw: st.DrawFn) -> cm.ClockSettings:
    c = cm.ClockSettings()
    for name in ("decision_time", "bank", "resume_grace"):
        if draw(st.booleans()):
            getattr(c, name).CopyFrom(draw(durations))
    if draw(st.booleans()):
        c.strikes_limit = draw(st.one_of(st.integers(-1, 5), INT32))
    return c


@st.composite
def plausible_create_requests(draw: st.DrawFn) -> ms.CreateMatchRequest:
    """Requests close to valid ones (right seat counts, real bots), so many create a match and
    the hostile values in the optional fields (clock, overrides) reach the code that uses them."""
    players = draw(st.sampled_from([2, 3, 4, 6]))
    bots = st.sampled_from(["house:random", "house:first", IDLE_BOT])
    req = ms.CreateMatchRequest(players=players, hands=draw(st.integers(1, 3)))
    if draw(st.integers(0, 3)):
        req.seat_bots.extend(draw(st.lists(bots, min_size=players, max_size=players)))
    else:
        req.side_bots.extend(draw(st.lists(bots, min_size=2, max_size=3)))
    if draw(st.booleans()):
        req.seed = draw(UINT64)
    if draw(st.booleans()):
        req.ruleset_preset = draw(st.sampled_from(["default", "parlett"]))
    if draw(st.integers(0, 3)) == 0:
        req.ruleset_overrides_json = draw(overrides_json)
    if draw(st.booleans()):
        req.clock.CopyFrom(draw(clocks()))
    if draw(st.booleans()):
        req.request_id = draw(st.text(max_size=4))
    return req


@st.composite
def create_match_requests(draw: st.DrawFn) -> ms.CreateMatchRequest:
    if draw(st.booleans()):
        return draw(plausible_create_requests())
    req = ms.CreateMatchRequest(
        players=draw(st.one_of(st.sampled_from([2, 3, 4, 6, 8]), INT32)),
        hands=draw(st.one_of(st.integers(-1, 3), INT32)),
        ruleset_preset=draw(st.one_of(st.sampled_from(["", "default", "parlett"]), texts)),
        request_id=draw(st.one_of(st.just(""), st.text(max_size=12), huge_text)),
    )
    which = draw(st.sampled_from(["seat", "side", "both", "none"]))
    if which in ("seat", "both"):
        req.seat_bots.extend(draw(_bot_lists()))
    if which in ("side", "both"):
        req.side_bots.extend(draw(_bot_lists()))
    if draw(st.booleans()):
        req.ruleset_overrides_json = draw(overrides_json)
    if draw(st.booleans()):
        req.seed = draw(UINT64)
    if draw(st.booleans()):
        req.first_dealer_seat = draw(st.one_of(st.integers(-2, 8), INT32))
    if draw(st.booleans()):
        req.clock.CopyFrom(draw(clocks()))
    return req


def _register_names() -> st.SearchStrategy[str]:
    # Never one of the fuzz bots: rotating their tokens would lock the other inputs out.
    return st.one_of(
        st.text(max_size=70), st.sampled_from(SPECIAL_TEXT), st.from_regex(r"[A-Za-z0-9_.\-]{1,64}", fullmatch=True)
    ).filter(lambda n: n not in RESERVED_BOTS)


page_tokens = st.one_of(
    st.text(max_size=20),
    st.integers(-(10**6), 10**6).map(str),
    st.integers(1, 6_000).map(lambda n: "9" * n),
    st.sampled_from(["", "0", "-1", "1e3", "٣", " 7 ", "0x10"]),
)


def admin_requests(method: str) -> st.SearchStrategy[tuple[bytes, bool]]:
    """(serialized request, whether it may name a known match id) for *method*."""
    match_id = texts
    protos: dict[str, st.SearchStrategy[Any]] = {
        "CreateMatch": create_match_requests(),
        "GetMatch": st.builds(lambda m: ms.GetMatchRequest(match_id=m), match_id),
        "CancelMatch": st.builds(lambda m, r: ms.CancelMatchRequest(match_id=m, reason=r), match_id, texts),
        "GetMatchRecord": st.builds(lambda m: ms.GetMatchRecordRequest(match_id=m), match_id),
        "WatchMatch": st.builds(lambda m, f: ms.WatchMatchRequest(match_id=m, from_start=f), match_id, st.booleans()),
        "ListMatches": st.builds(
            lambda size, tok, state, bot: ms.ListMatchesRequest(
                page_size=size, page_token=tok, state=state, bot_name=bot
            ),
            st.one_of(st.integers(-2, 2000), INT32),
            page_tokens,
            st.one_of(st.integers(0, 4), INT32),
            names,
        ),
        "RegisterBot": st.builds(
            lambda n, r: ms.RegisterBotRequest(bot_name=n, rotate_token=r), _register_names(), st.booleans()
        ),
    }
    refers = method in ("GetMatch", "CancelMatch", "GetMatchRecord", "WatchMatch")
    return protos[method].map(lambda m: (m.SerializeToString(), refers))


GOOD_AUTH = f"Bearer {ADMIN_TOKEN}"
ascii_text = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=60)
auths = st.one_of(
    st.just(GOOD_AUTH),
    st.just(GOOD_AUTH),
    st.just(GOOD_AUTH),
    st.none(),
    st.sampled_from(["Bearer wrong-token", f"Basic {ADMIN_TOKEN}", "Bearer", f"bearer {ADMIN_TOKEN}", ADMIN_TOKEN]),
    ascii_text.map(lambda t: f"Bearer {t}"),
    st.integers(100, 16_000).map(lambda n: "Bearer " + "x" * n),
)
"""Authorization values: the admin token (most often, so requests reach the handlers), none, wrong
ones, other schemes, and tokens up to 16 KB (past gRPC's default 8 KiB metadata limit)."""


@st.composite
def admin_inputs(draw: st.DrawFn) -> AdminInput:
    method = draw(st.sampled_from(MATCH_METHODS))
    auth = draw(auths)
    if draw(st.integers(0, 4)) == 0:
        return AdminInput(
            method,
            draw(st.one_of(raw_bytes, st.builds(length_delimited, st.integers(1, 10), bad_utf8))),
            auth,
            raw=True,
        )
    request, refers = draw(admin_requests(method))
    ref = draw(st.one_of(st.none(), st.integers(0, 63))) if refers else None
    return AdminInput(method, request, auth, match_ref=ref)


# --- strategies: raw TCP ------------------------------------------------------------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FRAME_NAMES = {
    0: "DATA",
    1: "HEADERS",
    2: "PRIORITY",
    3: "RST_STREAM",
    4: "SETTINGS",
    5: "PUSH_PROMISE",
    6: "PING",
    7: "GOAWAY",
    8: "WINDOW_UPDATE",
    9: "CONTINUATION",
}
H2_ERRORS = {
    0: "NO_ERROR",
    1: "PROTOCOL_ERROR",
    2: "INTERNAL_ERROR",
    3: "FLOW_CONTROL_ERROR",
    4: "SETTINGS_TIMEOUT",
    5: "STREAM_CLOSED",
    6: "FRAME_SIZE_ERROR",
    7: "REFUSED_STREAM",
    8: "CANCEL",
    9: "COMPRESSION_ERROR",
    10: "CONNECT_ERROR",
    11: "ENHANCE_YOUR_CALM",
    12: "INADEQUATE_SECURITY",
    13: "HTTP_1_1_REQUIRED",
}


def frame(ftype: int, flags: int, stream: int, payload: bytes, length: int | None = None) -> bytes:
    """An HTTP/2 frame; *length* may lie about the payload size."""
    n = len(payload) if length is None else length
    return (
        struct.pack(">I", n)[1:]
        + bytes([ftype & 0xFF, flags & 0xFF])
        + struct.pack(">I", stream & 0xFFFFFFFF)
        + payload
    )


def hpack_literal(name: str, value: str) -> bytes:
    """A literal header field without indexing, new name, no Huffman (lengths under 127)."""
    n, v = name.encode(), value.encode()
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def grpc_headers(path: str) -> bytes:
    """The HPACK block of a gRPC request to *path*."""
    fields = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", path),
        (":authority", "127.0.0.1"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("authorization", GOOD_AUTH),
    ]
    return b"".join(hpack_literal(n, v) for n, v in fields)


SETTINGS_EMPTY = frame(4, 0, 0, b"")
random_frame = st.builds(
    frame,
    st.one_of(st.integers(0, 9), st.integers(0, 255)),
    st.integers(0, 255),
    st.one_of(st.integers(0, 5), st.integers(0, 2**32 - 1)),
    st.binary(max_size=64),
    st.one_of(st.none(), st.none(), st.integers(0, 2**24 - 1)),
)
grpc_paths = st.sampled_from(
    [
        PLAY_METHOD,
        "/gaigel.v1.MatchService/CreateMatch",
        "/gaigel.v1.MatchService/ListMatches",
        "/grpc.health.v1.Health/Check",
        "/nope/Nope",
    ]
)
grpc_bodies = st.one_of(
    st.builds(
        lambda flag, n, body: bytes([flag]) + struct.pack(">I", n) + body,
        st.integers(0, 255),
        st.integers(0, 2**32 - 1),
        st.binary(max_size=32),
    ),
    st.binary(max_size=8),
    raw_bytes.map(lambda b: b"\x00" + struct.pack(">I", len(b)) + b),
)
"""gRPC message framing: a wrong compressed flag, a length prefix that lies (up to 4 GiB), a
truncated prefix, or a correct prefix around wire garbage."""


@st.composite
def tcp_inputs(draw: st.DrawFn) -> TcpInput:
    label = draw(st.sampled_from(["random", "http1", "preface+frames", "grpc-framing", "half", "silent"]))
    linger = draw(st.sampled_from([0.0, 0.02, 0.1]))
    chunks: list[bytes]
    if label == "random":
        chunks = draw(st.lists(st.binary(min_size=1, max_size=512), min_size=1, max_size=4))
    elif label == "http1":
        line = draw(
            st.sampled_from(
                [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"POST /gaigel.v1.BotService/Play HTTP/1.1\r\n\r\n", b"\r\n\r\n"]
            )
        )
        chunks = [line + draw(st.binary(max_size=64))]
    elif label == "preface+frames":
        chunks = [PREFACE + SETTINGS_EMPTY, *draw(st.lists(random_frame, min_size=1, max_size=6))]
    elif label == "grpc-framing":
        headers = frame(1, 0x4, 1, grpc_headers(draw(grpc_paths)))
        body = frame(0, draw(st.sampled_from([0, 1])), 1, draw(grpc_bodies))
        chunks = [PREFACE + SETTINGS_EMPTY + headers, body]
    elif label == "half":
        whole = PREFACE + SETTINGS_EMPTY + frame(1, 0x4, 1, grpc_headers(PLAY_METHOD))
        chunks = [whole[: draw(st.integers(1, len(whole) - 1))]]
    else:
        chunks = []
        linger = draw(st.sampled_from([0.0, 0.05, 0.3]))
    return TcpInput(label, tuple(chunks), linger)


def inputs() -> st.SearchStrategy[Input]:
    """Any hostile input: a Play stream, a MatchService call or a raw TCP connection."""
    return st.one_of(play_inputs(), admin_inputs(), tcp_inputs())


# --- outcomes -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What happened to one input. *result* is a gRPC status name, a client-side ending
    (:data:`CLIENT_RESULTS`), HANG, or for TCP a summary of the server's reaction."""

    kind: str
    result: str
    details: str
    seconds: float
    problem: str | None = None

    def describe(self) -> str:
        return f"{self.kind} -> {self.result} ({self.seconds * 1000:.1f} ms): {self.details[:300]!r}" + (
            f" PROBLEM: {self.problem}" if self.problem else ""
        )


def status_problem(code: str, details: str) -> str | None:
    """Why a final status breaks the contract, or None."""
    if code in CLIENT_RESULTS:
        return None
    if code not in DEFINED_CODES:
        return f"status {code} is not a defined status for a hostile input"
    if code != "OK" and not details.strip():
        return f"status {code} without a message"
    return None


def auth_problem(inp: AdminInput, result: str) -> str | None:
    """Why an admin call without the admin token got past the token check, or None.

    Before the check a server may only refuse a request it cannot read (RESOURCE_EXHAUSTED for
    its size, INVALID_ARGUMENT for raw bytes that are not the request message). A WatchMatch
    still OPEN is judged by what it streamed (see ``Fuzzer._watch``).
    """
    if token_accepted(inp.auth) or result in ("UNAUTHENTICATED", "RESOURCE_EXHAUSTED", "OPEN"):
        return None
    if inp.raw and result == "INVALID_ARGUMENT":
        return None
    return f"{inp.method} without a valid admin token ended {result}, not UNAUTHENTICATED"


# --- the fuzzer ---------------------------------------------------------------------------------


async def send(call: Any, data: bytes) -> bool:
    """Writes one message on a grpc.aio stream call; False when the call has already ended.

    ``call.write`` is not used on purpose: when a write races with the server ending the call,
    grpc.aio replaces the server's status by a client-side INTERNAL ("Internal error from Core"),
    which would hide the status the server actually sent. This is ``write`` without that step.
    """
    if call.done():
        return False
    if not call._metadata_sent.is_set():
        await call._metadata_sent.wait()
        if call.done():
            return False
    try:
        await call._cython_call.send_serialized_message(data)
    except cygrpc.InternalError:
        return False
    return True


async def send_all(call: Any, messages: Sequence[bytes]) -> bool:
    """Writes *messages* in order; False as soon as the call has ended."""
    for m in messages:
        if not await send(call, m):
            return False
    return True


class LoopThread:
    """An asyncio event loop in a daemon thread, so synchronous code (hypothesis) can drive grpc.aio."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fuzz-loop", daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return self.submit(coro).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


class _PlayState:
    def __init__(self) -> None:
        self.welcome = asyncio.Event()
        self.probe = asyncio.Event()
        self.bad_response = ""


class Fuzzer:
    """Sends inputs to one live server. Create, use and close it inside one event loop."""

    def __init__(self, address: str, channels: int = 2) -> None:
        self.address = address
        self._channels = [grpc.aio.insecure_channel(address) for _ in range(channels)]
        self._next = 0
        self.match_ids: collections.deque[str] = collections.deque(maxlen=64)
        self.created = 0

    def _channel(self) -> grpc.aio.Channel:
        self._next = (self._next + 1) % len(self._channels)
        return self._channels[self._next]

    async def close(self) -> None:
        for ch in self._channels:
            await ch.close(None)

    async def run(self, inp: Input, deadline: float = INPUT_DEADLINE) -> Outcome:
        """Sends *inp*; a hang past *deadline* seconds is an outcome with a problem, not an exception."""
        start = time.perf_counter()
        try:
            if isinstance(inp, PlayInput):
                result, details, bad = await asyncio.wait_for(self._play(inp), deadline)
            elif isinstance(inp, AdminInput):
                result, details, bad = await asyncio.wait_for(self._admin(inp), deadline)
            else:
                result, details, bad = await asyncio.wait_for(self._tcp(inp), deadline)
        except TimeoutError:
            return Outcome(inp.kind(), "HANG", f"no end within {deadline:g} s", time.perf_counter() - start, "hang")
        problem = bad or (None if isinstance(inp, TcpInput) else status_problem(result, details))
        if problem is None and isinstance(inp, AdminInput):
            problem = auth_problem(inp, result)
        return Outcome(inp.kind(), result, details, time.perf_counter() - start, problem)

    # --- Play ---

    def _open_play(self) -> Any:
        multi: Any = self._channel().stream_stream(PLAY_METHOD, request_serializer=None, response_deserializer=None)
        return multi()

    async def _read_play(self, call: Any, state: _PlayState) -> None:
        """Reads the responses until the call ends (its status is then read from the call)."""
        with contextlib.suppress(grpc.aio.AioRpcError):
            await self._read_play_messages(call, state)

    async def _read_play_messages(self, call: Any, state: _PlayState) -> None:
        async for raw in call:
            try:
                msg = bs.PlayResponse.FromString(raw)
            except Exception as e:  # a server that sends garbage breaks the contract
                state.bad_response = f"undecodable PlayResponse ({e})"
                continue
            kind = msg.WhichOneof("message")
            if kind == "welcome":
                state.welcome.set()
            elif kind == "action_rejected" and msg.action_rejected.decision_id == PROBE_ID:
                state.probe.set()

    async def _play(self, inp: PlayInput) -> tuple[str, str, str | None]:
        call = self._open_play()
        if inp.ending == "noread":
            return await self._noread(call, inp)
        state = _PlayState()
        reader = asyncio.ensure_future(self._read_play(call, state))
        try:
            ended = not await send_all(call, [m for _, m in inp.messages])
            if inp.ending == "cancel":
                call.cancel()
                return "CANCELLED", "", state.bad_response or None
            if not ended and inp.ending in ("probe", "flood"):
                ended = not await send(call, _play(action=bs.Action(decision_id=PROBE_ID, action_id=0)))
                if not ended:
                    await _first_of(reader, state.probe.wait())
            elif not ended:
                with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                    await call.done_writing()
                await _first_of(reader, _welcome_then(state, 0.05))
            if ended:  # the server ended the call while we wrote: its status is on the way
                await asyncio.wait([reader])
            if not reader.done():
                call.cancel()
                with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                    await reader
                return "OPEN", "", state.bad_response or None
            with contextlib.suppress(grpc.aio.AioRpcError):
                await reader
            code = await call.code()
            return code.name, await call.details() or "", state.bad_response or None
        finally:
            if not reader.done():
                reader.cancel()
                call.cancel()

    async def _noread(self, call: Any, inp: PlayInput) -> tuple[str, str, str | None]:
        """A client that writes and never reads: writes may block (backpressure); that is fine."""
        try:
            written = await asyncio.wait_for(send_all(call, [m for _, m in inp.messages]), 2.0)
        except TimeoutError:
            call.cancel()
            return "FLOOD_BLOCKED", "", None
        if written:
            call.cancel()
            return "FLOOD_WRITTEN", "", None
        # The server ended the call; its status arrives once the messages before it are read.
        with contextlib.suppress(grpc.aio.AioRpcError):
            async for _ in call:
                pass
        code = await call.code()
        return code.name, await call.details() or "", None

    # --- MatchService ---

    async def _admin(self, inp: AdminInput) -> tuple[str, str, str | None]:
        request = inp.request
        if inp.match_ref is not None and self.match_ids:
            request += length_delimited(1, self.match_ids[inp.match_ref % len(self.match_ids)].encode())
        md = None if inp.auth is None else (("authorization", inp.auth),)
        path = f"/gaigel.v1.MatchService/{inp.method}"
        channel = self._channel()
        try:
            if inp.method == "WatchMatch":
                return await self._watch(channel, path, request, md, token_accepted(inp.auth))
            multi: Any = channel.unary_unary(path, request_serializer=None, response_deserializer=None)
            raw = await multi(request, metadata=md)
        except grpc.aio.AioRpcError as e:
            return e.code().name, e.details() or "", None
        try:
            resp = RESPONSE_TYPES[inp.method].FromString(raw)
        except Exception as e:
            return "OK", "", f"undecodable {inp.method} response ({e})"
        if inp.method == "CreateMatch":
            await self._cancel_created(channel, resp.match.match_id)
        return "OK", "", None

    async def _cancel_created(self, channel: grpc.aio.Channel, match_id: str) -> None:
        """Cancels a match the fuzz created, so no fuzz match runs (or waits) after its input."""
        self.created += 1
        self.match_ids.append(match_id)
        multi: Any = channel.unary_unary(
            "/gaigel.v1.MatchService/CancelMatch",
            request_serializer=ms.CancelMatchRequest.SerializeToString,
            response_deserializer=ms.CancelMatchResponse.FromString,
        )
        with contextlib.suppress(grpc.aio.AioRpcError):  # FAILED_PRECONDITION if it has ended already
            await multi(
                ms.CancelMatchRequest(match_id=match_id, reason="fuzz cleanup"),
                metadata=(("authorization", GOOD_AUTH),),
            )

    async def _watch(
        self, channel: grpc.aio.Channel, path: str, request: bytes, md: Any, authorized: bool
    ) -> tuple[str, str, str | None]:
        """WatchMatch: read for up to :data:`WATCH_WAIT` seconds (a running match streams on)."""
        multi: Any = channel.unary_stream(path, request_serializer=None, response_deserializer=None)
        call = multi(request, metadata=md)
        bad: str | None = None

        async def read() -> None:
            nonlocal bad
            async for raw in call:
                if not authorized:
                    bad = "WatchMatch streamed a message without a valid admin token"
                try:
                    ms.WatchMatchResponse.FromString(raw)
                except Exception as e:
                    bad = f"undecodable WatchMatchResponse ({e})"

        reader = asyncio.ensure_future(read())
        done, _ = await asyncio.wait([reader], timeout=WATCH_WAIT)
        if not done:
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await reader
            return "OPEN", "", bad
        with contextlib.suppress(grpc.aio.AioRpcError):
            await reader
        code = await call.code()
        return code.name, await call.details() or "", bad

    # --- raw TCP ---

    async def _tcp(self, inp: TcpInput) -> tuple[str, str, str | None]:
        host, port = self.address.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))
        received = bytearray()
        end = "open"
        try:
            for chunk in inp.chunks:
                writer.write(chunk)
                await writer.drain()
            deadline = time.monotonic() + inp.linger
            while (left := deadline - time.monotonic()) > 0:
                data = await asyncio.wait_for(reader.read(65536), left)
                if not data:
                    end = "eof"
                    break
                received += data
        except TimeoutError:
            pass
        except (ConnectionResetError, BrokenPipeError):
            end = "reset"
        finally:
            writer.close()
            with contextlib.suppress(OSError, TimeoutError):
                await asyncio.wait_for(writer.wait_closed(), 1.0)
        summary = summarize_h2(bytes(received))
        return (f"{summary}/{end}" if summary else end), f"{len(received)} bytes back", None


def summarize_h2(data: bytes) -> str:
    """The server's reaction in HTTP/2 terms: GOAWAY and RST_STREAM error codes, else ''."""
    out: list[str] = []
    i = 0
    while i + 9 <= len(data):
        n = int.from_bytes(data[i : i + 3], "big")
        ftype = data[i + 3]
        payload = data[i + 9 : i + 9 + n]
        if ftype == 7 and len(payload) >= 8:
            out.append("GOAWAY " + H2_ERRORS.get(int.from_bytes(payload[4:8], "big"), "?"))
        elif ftype == 3 and len(payload) >= 4:
            out.append("RST " + H2_ERRORS.get(int.from_bytes(payload[:4], "big"), "?"))
        elif ftype == 1 and "HEADERS" not in out:
            out.append("HEADERS")
        i += 9 + n
    return ",".join(dict.fromkeys(out))


async def _first_of(task: asyncio.Future[Any], coro: Coroutine[Any, Any, Any]) -> None:
    """Waits until *task* is done or *coro* returns."""
    other = asyncio.ensure_future(coro)
    try:
        await asyncio.wait([task, other], return_when=asyncio.FIRST_COMPLETED)
    finally:
        other.cancel()


async def _welcome_then(state: _PlayState, grace: float) -> None:
    """Returns *grace* seconds after the Welcome: a half-closed session may stay open (it is idle)."""
    await state.welcome.wait()
    await asyncio.sleep(grace)


# --- fixed inputs that the strategies reach only rarely -------------------------------------------


async def run_silent(fuzzer: Fuzzer) -> Outcome:
    """Opens a Play stream, sends nothing, and waits for the server to end it."""
    start = time.perf_counter()
    call = fuzzer._open_play()
    try:
        async for _ in call:
            pass
        code = await asyncio.wait_for(call.code(), JOIN_TIMEOUT + INPUT_DEADLINE)
    except grpc.aio.AioRpcError as e:
        code = e.code()
    except TimeoutError:
        call.cancel()
        return Outcome("play:nothing", "HANG", "", time.perf_counter() - start, "hang")
    details = await call.details() or ""
    return Outcome("play:nothing", code.name, details, time.perf_counter() - start, status_problem(code.name, details))


# --- scripted matches ---------------------------------------------------------------------------

GARBAGE_MOVES = (
    "illegal",
    "unknown_decision",
    "stale",
    "legal",
    "empty_decision",
    "undecodable",
    "second_join",
    "oversize",
    "drop",
)
"""What a seated bot may send when a decision is open. The last five end its stream."""
STREAM_ENDING = frozenset({"empty_decision", "undecodable", "second_join", "oversize", "drop"})
EXPECTED_REASON = {
    "illegal": "ILLEGAL_ACTION",
    "unknown_decision": "STALE_DECISION",
    "stale": "STALE_DECISION",
    "empty_decision": "MALFORMED_MESSAGE",
    "undecodable": "MALFORMED_MESSAGE",
    "second_join": "MISSING_JOIN",
    "oversize": "DISCONNECT",
    "drop": "DISCONNECT",
}
"""The fault reason code each garbage move must leave in the match record."""


@dataclasses.dataclass
class MatchResult:
    """A scripted match: the record, the moves sent and the reasons they must have caused."""

    match_id: str
    state: int
    record: dict[str, Any]
    sent: list[str]
    expected: list[str]
    """The fault reasons the moves must have caused, in order."""
    stream_status: str

    @property
    def reasons(self) -> list[str]:
        return [f["reason"] for f in self.record.get("faults", [])]

    def faults_as_expected(self) -> bool:
        """True when the record's faults begin with :attr:`expected`, one per garbage move and in
        order (timeout fallbacks, which a slow machine may interleave, aside; FORFEIT and the
        fallbacks of a disconnected seat may follow)."""
        got = [r for r in self.reasons if r != "TIMEOUT_FALLBACK"]
        return got[: len(self.expected)] == self.expected


def _admin_md() -> tuple[tuple[str, str], ...]:
    return (("authorization", GOOD_AUTH),)


def _illegal_id(req: bs.DecisionRequest, pick: int) -> int:
    legal = {a.id for a in req.legal_actions}
    candidates = [-1, -(2**31), 165, 2**31 - 1, 9999, *[a for a in range(165) if a not in legal]]
    return candidates[pick % len(candidates)]


def _move_message(move: str, req: bs.DecisionRequest, previous: str, pick: int) -> bytes:
    """The bytes of one garbage *move* answering *req*."""
    if move == "legal":
        return _play(
            action=bs.Action(decision_id=req.decision_id, action_id=req.legal_actions[pick % len(req.legal_actions)].id)
        )
    if move == "illegal":
        return _play(action=bs.Action(decision_id=req.decision_id, action_id=_illegal_id(req, pick)))
    if move == "unknown_decision":
        return _play(action=bs.Action(decision_id=f"{pick:032x}", action_id=req.legal_actions[0].id))
    if move == "stale":
        return _play(action=bs.Action(decision_id=previous or "never-issued", action_id=req.legal_actions[0].id))
    if move == "empty_decision":
        return _play(action=bs.Action(decision_id="", action_id=req.legal_actions[0].id))
    if move == "undecodable":
        return length_delimited(3, length_delimited(1, BAD_UTF8[pick % len(BAD_UTF8)]))
    if move == "second_join":
        return _play(join=bs.Join(bot_token=PLAYER_TOKEN, bot_name=PLAYER_BOT, protocol_version=1))
    if move == "oversize":
        return sized_action(MAX_MESSAGE_BYTES + 1 + pick % 1000)
    raise ValueError(move)


async def play_scripted_match(
    address: str,
    moves: Sequence[str] = (),
    *,
    players: int = 2,
    house: str = "house:random",
    hands: int = 1,
    seed: int = 7,
    clock: cm.ClockSettings | None = None,
    timeout: float = 30.0,
) -> MatchResult:
    """Seats the scripted bot (``player``, seat 0) against house bots in a real match.

    At each open decision it sends the next of *moves* (then legal answers once they run out);
    a rejected move leaves the decision open and the next move answers it. A stream-ending move
    ends the bot's part: the match goes on under the disconnect policy until it ends.
    """
    async with grpc.aio.insecure_channel(address) as channel:
        multi: Any = channel.stream_stream(PLAY_METHOD, request_serializer=None, response_deserializer=None)
        call = multi()
        await call.write(
            _play(join=bs.Join(bot_token=PLAYER_TOKEN, bot_name=PLAYER_BOT, bot_version="fuzz", protocol_version=1))
        )
        first = bs.PlayResponse.FromString(await call.read())
        assert first.WhichOneof("message") == "welcome", first
        create: Any = channel.unary_unary(
            "/gaigel.v1.MatchService/CreateMatch",
            request_serializer=ms.CreateMatchRequest.SerializeToString,
            response_deserializer=ms.CreateMatchResponse.FromString,
        )
        req = ms.CreateMatchRequest(
            players=players, seat_bots=[PLAYER_BOT] + [house] * (players - 1), hands=hands, seed=seed
        )
        if clock is not None:
            req.clock.CopyFrom(clock)
        match_id = (await create(req, metadata=_admin_md(), timeout=10)).match.match_id
        todo = list(moves)
        sent: list[str] = []
        status = await asyncio.wait_for(_seat_loop(call, todo, sent), timeout)
        match = await _wait_ended(channel, match_id, timeout)
        record_call: Any = channel.unary_unary(
            "/gaigel.v1.MatchService/GetMatchRecord",
            request_serializer=ms.GetMatchRecordRequest.SerializeToString,
            response_deserializer=ms.GetMatchRecordResponse.FromString,
        )
        resp = await record_call(ms.GetMatchRecordRequest(match_id=match_id), metadata=_admin_md(), timeout=10)
    expected = [EXPECTED_REASON[m] for m in sent if m in EXPECTED_REASON]
    if any(m in STREAM_ENDING for m in sent) and expected[-1] != "DISCONNECT":
        expected.append("DISCONNECT")  # the stream ended during the match: the disconnect policy
    return MatchResult(match_id, match.state, json.loads(resp.record_json), sent, expected, status)


async def _seat_loop(call: Any, todo: list[str], sent: list[str]) -> str:
    """Plays the seat until MatchEnd (then Leave) or until the server ends the stream; the final status."""
    previous = ""
    pick = 0
    current: bs.DecisionRequest | None = None
    try:
        while True:
            raw = await call.read()
            if raw is EOF:
                break
            msg = bs.PlayResponse.FromString(raw)
            kind = msg.WhichOneof("message")
            req: bs.DecisionRequest | None = None
            if kind == "decision_request":
                req = msg.decision_request
                current = req
            elif kind == "action_rejected" and msg.action_rejected.decision_open:
                req = current
            elif kind == "match_end":
                await send(call, _play(leave=bs.Leave()))
                continue
            if req is None:
                continue
            move = todo.pop(0) if todo else "legal"
            pick += 1
            sent.append(move)
            if move == "drop":
                call.cancel()
                return "CANCELLED"
            if not await send(call, _move_message(move, req, previous, pick)):
                break
            if move not in ("illegal", "unknown_decision", "stale"):
                previous = req.decision_id
            if move in STREAM_ENDING:
                with contextlib.suppress(grpc.aio.AioRpcError):
                    while await call.read() is not EOF:
                        pass
                break
    except grpc.aio.AioRpcError as e:
        return str(e.code().name)
    return str((await call.code()).name)


async def _wait_ended(channel: grpc.aio.Channel, match_id: str, timeout: float) -> ms.Match:
    get: Any = channel.unary_unary(
        "/gaigel.v1.MatchService/GetMatch",
        request_serializer=ms.GetMatchRequest.SerializeToString,
        response_deserializer=ms.GetMatchResponse.FromString,
    )
    deadline = time.monotonic() + timeout
    while True:
        match = (await get(ms.GetMatchRequest(match_id=match_id), metadata=_admin_md(), timeout=10)).match
        if match.state == ms.MATCH_STATE_ENDED or time.monotonic() > deadline:
            return match  # type: ignore[no-any-return]
        await asyncio.sleep(0.05)


def short_clock(decision: float = 0.5, bank: float = 0.5, grace: float = 0.2, strikes: int = 3) -> cm.ClockSettings:
    """A fast clock for matches with a misbehaving seat: timeouts and forfeits come in a second or two."""
    c = cm.ClockSettings(strikes_limit=strikes)
    c.decision_time.FromNanoseconds(int(decision * 1e9))
    c.bank.FromNanoseconds(int(bank * 1e9))
    c.resume_grace.FromNanoseconds(int(grace * 1e9))
    return c


garbage_moves = st.lists(st.sampled_from(GARBAGE_MOVES), min_size=1, max_size=6)


__all__ = [
    "ADMIN_TOKEN",
    "DEFINED_CODES",
    "AdminInput",
    "Fuzzer",
    "Input",
    "LiveServer",
    "LoopThread",
    "MatchResult",
    "Outcome",
    "PlayInput",
    "Resources",
    "TcpInput",
    "Tolerance",
    "admin_inputs",
    "garbage_moves",
    "health_sync",
    "input_from_json",
    "inputs",
    "leaks",
    "measure",
    "peak_rss",
    "play_inputs",
    "play_scripted_match",
    "run_silent",
    "settle",
    "short_clock",
    "start_server",
    "tcp_inputs",
]
