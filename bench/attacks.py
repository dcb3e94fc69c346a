"""Attacks on a running ``gaigel serve`` (issue 14), each against the server before and after the
hardening, in the same run, loopback only, bounded in count and time.

Run from the repository root::

    python bench/attacks.py all                 # every attack, before and after; about 6 minutes
    python bench/attacks.py memory --seconds 20 --json
    python bench/attacks.py reset --before 96bbe3f

Attacks (one subcommand each):

* **memory**: one bot token, 64 sessions sending Actions with 60,000-character decision ids as
  fast as the server takes them, never reading a reply.
* **prejoin**: 3,000 streams that never send Join (re-opened as the server ends them), while
  30 legitimate Joins arrive one by one and a bot in a match drops its stream and Resumes.
* **idle**: 1,500 connections that send the HTTP/2 preface and SETTINGS and then nothing, to
  a server limited to 1,024 descriptors; the after-server runs with ``--idle-timeout 5`` so the
  run stays short (the default is 60 s).
* **reset**: one connection opening Play streams and resetting each at once (RST_STREAM),
  5,400 a second (the report's 103,000 in 19 s; ``--reset-rate 0``: as fast as it can).

During each attack four legitimate bots play 2-hand matches against ``house:first``; their
decisions per second before the attack (5 s) and during it are the throughput figure. The
server's resident memory is sampled every 0.2 s. "before" is the server of ``--before`` (a git
revision, default 96bbe3f: the code before the hardening), extracted with ``git archive`` and
run by this interpreter; "after" is this checkout. Both use the same grpcio. The first output
line is the command that reproduces the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import multiprocessing as mp
import os
import resource
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import bot_service_pb2_grpc as bs_grpc
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc

REPO = Path(__file__).resolve().parent.parent

ADMIN = "attack-bench-admin-token-0123456789"
BOTS = {
    "good": "good-token-0123456789abcdef",
    "hostile": "hostile-token-0123456789abcd",
    "prober": "prober-token-0123456789abcde",  # the Resume probe: its own name, so no other match seats it
}
LEGIT_BOTS = 4
BASELINE_S = 5.0
CEILING_MIB = 512
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
EOF: Any = getattr(grpc.aio, "EOF")  # noqa: B009 (missing from the type stubs)


def _open_play(channel: grpc.aio.Channel) -> Any:
    """A Play call (typed Any: the stubs want a request iterator, these calls write instead)."""
    return bs_grpc.BotServiceStub(channel).Play()  # type: ignore[call-arg]


# --- servers --------------------------------------------------------------------------------


def source_tree(revision: str, into: Path) -> Path:
    """The repository at *revision*, extracted (not checked out) into *into*."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision], check=True, capture_output=True)
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


class Server:
    """A ``gaigel serve`` subprocess of one source tree."""

    def __init__(
        self, tree: Path, workdir: Path, extra: list[str], nofile: int | None = None, cpus: set[int] | None = None
    ) -> None:
        self.port = free_port()
        bots = workdir / "bots.json"
        bots.write_text(json.dumps(BOTS))
        paths = [tree, tree / "server", tree / "arena", tree / "clients" / "python"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in paths)}
        env.pop("GAIGEL_ADMIN_TOKEN", None)
        cmd = [
            sys.executable,
            "-c",
            "import sys; from gaigel.cli import main; sys.exit(main(sys.argv[1:]))",
            "serve",
            *("--address", f"127.0.0.1:{self.port}", "--bots", str(bots), "--admin-token", ADMIN),
            *("--metrics-port", "0", "--log-level", "error", *extra),
        ]

        def limit() -> None:
            if cpus:
                os.sched_setaffinity(0, cpus)
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.log = open(workdir / "server.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=limit)
        deadline = time.monotonic() + 30
        while health(self.address, 0.5) != "SERVING":
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start: {(workdir / 'server.log').read_text()[-2000:]}")
            time.sleep(0.2)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def rss_mib(self) -> float:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the server process has used so far."""
        return _cpu_s(self.proc.pid)

    def log_bytes(self) -> int:
        with contextlib.suppress(OSError):
            return os.path.getsize(self.log.name)
        return 0

    def fds(self) -> int:
        try:
            return len(os.listdir(f"/proc/{self.proc.pid}/fd"))
        except OSError:
            return -1

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (bench/metrics_size.py uses it too)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def health(address: str, timeout: float) -> str:
    """SERVING, or what went wrong, for a health check on a new connection."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    try:
        with grpc.insecure_channel(address) as ch:
            reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))
    except grpc.RpcError as e:
        return str(e.code().name)


# --- legitimate load ------------------------------------------------------------------------


def _join(name: str) -> bs.PlayRequest:
    return bs.PlayRequest(join=bs.Join(bot_name=name, bot_token=BOTS[name], bot_version="bench", protocol_version=1))


class Legit:
    """Four bots playing 2-hand matches against house:first, counting their decisions."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.decisions: list[float] = []  # time of each answer
        self.errors: list[str] = []
        self._stop = False

    def rate(self, start: float, end: float) -> float:
        return sum(start <= t < end for t in self.decisions) / max(end - start, 1e-9)

    async def run(self) -> None:
        self.channel = grpc.aio.insecure_channel(self.address)
        admin = ms_grpc.MatchServiceStub(self.channel)
        await asyncio.gather(*(self._bot(admin, i) for i in range(LEGIT_BOTS)))
        await self.channel.close(None)

    def stop(self) -> None:
        self._stop = True

    async def _bot(self, admin: Any, i: int) -> None:
        md = (("authorization", f"Bearer {ADMIN}"),)
        while not self._stop:
            call = _open_play(self.channel)
            try:
                await call.write(_join("good"))
                await asyncio.wait_for(call.read(), 30)  # Welcome
                await admin.CreateMatch(
                    ms.CreateMatchRequest(players=2, seat_bots=["good", "house:first"], hands=2, seed=i), metadata=md
                )
                while not self._stop:
                    msg = await asyncio.wait_for(call.read(), 30)
                    if msg is EOF:
                        break
                    kind = msg.WhichOneof("message")
                    if kind == "decision_request":
                        req = msg.decision_request
                        action = bs.Action(decision_id=req.decision_id, action_id=req.legal_actions[0].id)
                        await call.write(bs.PlayRequest(action=action))
                        self.decisions.append(time.monotonic())
                    elif kind == "match_end":
                        await admin.CreateMatch(
                            ms.CreateMatchRequest(players=2, seat_bots=["good", "house:first"], hands=2, seed=i),
                            metadata=md,
                        )
            except (grpc.aio.AioRpcError, TimeoutError) as e:
                self.errors.append(e.code().name if isinstance(e, grpc.aio.AioRpcError) else "TIMEOUT")
                await asyncio.sleep(0.5)
            finally:
                call.cancel()


# --- attacks (each in its own process) ---------------------------------------------------------


def attack_memory(address: str, seconds: float, sent: Any) -> None:
    async def session(channel: grpc.aio.Channel, action: bs.PlayRequest, end: float) -> None:
        call = _open_play(channel)
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError, TimeoutError):
            await call.write(_join("hostile"))
            while time.monotonic() < end:
                await asyncio.wait_for(call.write(action), max(end - time.monotonic(), 0.01))
                sent.value += 1
        call.cancel()

    async def main() -> None:
        end = time.monotonic() + seconds
        action = bs.PlayRequest(action=bs.Action(decision_id="x" * 60_000, action_id=0))
        channels = [grpc.aio.insecure_channel(address) for _ in range(4)]
        await asyncio.gather(*(session(channels[i % 4], action, end) for i in range(64)))
        for ch in channels:
            await ch.close(None)

    asyncio.run(main())


def attack_prejoin(address: str, seconds: float, sent: Any, streams: int = 3000) -> None:
    async def holder(channel: grpc.aio.Channel, end: float) -> None:
        while time.monotonic() < end:
            sent.value += 1
            call = _open_play(channel)
            with contextlib.suppress(grpc.aio.AioRpcError, TimeoutError):
                await asyncio.wait_for(call.code(), max(end - time.monotonic(), 0.01))
            call.cancel()

    async def main() -> None:
        end = time.monotonic() + seconds
        channels = [grpc.aio.insecure_channel(address) for _ in range(streams // 100)]
        await asyncio.gather(*(holder(channels[i // 100], end) for i in range(streams)))
        for ch in channels:
            await ch.close(None)

    asyncio.run(main())


def _settings_start() -> bytes:
    return PREFACE + _frame(4, 0, 0, b"")


def _frame(ftype: int, flags: int, stream: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") + payload


def _literal(name: str, value: str) -> bytes:
    n, v = name.encode(), value.encode()
    return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v


def attack_idle(address: str, seconds: float, sent: Any, connections: int = 1500) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, connections + 256)), hard))
    host, port = address.rsplit(":", 1)
    held = []
    for _ in range(connections):
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect((host, int(port)))
            s.sendall(_settings_start())
        except OSError:
            s.close()
            continue
        s.setblocking(False)
        held.append(s)
        sent.value += 1
    time.sleep(seconds)
    for s in held:
        s.close()


PLAY_HEADERS = b"".join(
    _literal(n, v)
    for n, v in (
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/gaigel.v1.BotService/Play"),
        (":authority", "127.0.0.1"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    )
)


RESET_RATE = 5400.0
"""Reset streams per second of the reset attack: the rate of the report (103,000 in 19 s);
``--reset-rate 0`` sends as fast as the socket takes them."""


def attack_reset(address: str, seconds: float, sent: Any, rate: float = RESET_RATE) -> None:
    headers = PLAY_HEADERS
    cancel = (8).to_bytes(4, "big")

    async def main() -> None:
        host, port = address.rsplit(":", 1)
        reader, writer = await asyncio.open_connection(host, int(port))

        async def drain() -> None:
            buf = b""
            with contextlib.suppress(ConnectionError, OSError):
                while chunk := await reader.read(65536):
                    buf += chunk
                    while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[0:3], "big"):
                        size = int.from_bytes(buf[0:3], "big")
                        if buf[3] == 7:  # GOAWAY
                            code = int.from_bytes(buf[13:17], "big") if size >= 8 else -1
                            print(f"reset: GOAWAY (code {code}) after {sent.value} resets", file=sys.stderr, flush=True)
                        buf = buf[9 + size :]

        sink = asyncio.ensure_future(drain())
        writer.write(_settings_start() + _frame(4, 1, 0, b""))
        start, stream = time.monotonic(), 1
        end = start + seconds
        with contextlib.suppress(ConnectionError, OSError):
            while time.monotonic() < end and not reader.at_eof() and stream < 2**31 - 400:
                batch = bytearray()
                for _ in range(100):
                    batch += _frame(1, 4, stream, headers) + _frame(3, 0, stream, cancel)
                    stream += 2
                writer.write(bytes(batch))
                await writer.drain()
                sent.value += 100
                if rate:  # keep to the rate: the next batch is due at sent / rate
                    await asyncio.sleep(max(0.0, start + sent.value / rate - time.monotonic()))
        sink.cancel()
        writer.close()

    asyncio.run(main())


ATTACKER = "127.0.0.2"
"""Source address of the issue-22 attacks: another client than the legitimate bots on 127.0.0.1."""


def _attacker_socket(address: str, timeout: float = 2.0) -> socket.socket:
    host, port = address.rsplit(":", 1)
    s = socket.socket()
    s.bind((ATTACKER, 0))
    s.settimeout(timeout)
    s.connect((host, int(port)))
    return s


def attack_slowloris(address: str, seconds: float, sent: Any, connections: int = 20_000) -> None:
    """Preface-only connections from one address, reopened as the server closes them (issue 22)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    want = min(connections, hard - 256)

    async def main() -> None:
        end = time.monotonic() + seconds
        loop = asyncio.get_running_loop()

        async def holder() -> None:
            while time.monotonic() < end:
                try:
                    s = _attacker_socket(address, 0.5)
                    s.sendall(_settings_start())
                    s.setblocking(False)
                except OSError:
                    await asyncio.sleep(0.05)
                    continue
                sent.value += 1
                with contextlib.suppress(OSError, TimeoutError):
                    while await asyncio.wait_for(loop.sock_recv(s, 4096), max(end - time.monotonic(), 0.01)):
                        pass  # until the server closes it
                s.close()

        await asyncio.gather(*(holder() for _ in range(min(want, 3000))))  # at once, more than the cap of 2,048

    asyncio.run(main())


def attack_churn(
    address: str, seconds: float, sent: Any, connections: int = 12, streams: int = 250, bad_ack: bool = False
) -> None:
    """Streams that never Join: 12 connections x 250 streams from one address, each reopened
    as the server ends it (issue 22). *sent* counts the streams the server ended. *bad_ack*:
    each connection also sends a SETTINGS ack nobody asked for, a connection error for grpc."""

    async def conn(end: float) -> None:
        try:
            s = _attacker_socket(address)
        except OSError:
            return
        s.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=s)
        writer.write(_settings_start() + (_frame(4, 1, 0, b"") if bad_ack else b""))  # the server's is acked below
        stream = 1

        def open_one() -> None:
            nonlocal stream
            if writer.is_closing():
                return
            writer.write(_frame(1, 4, stream, PLAY_HEADERS))
            stream += 2

        for _ in range(streams):
            open_one()
        ended: set[int] = set()
        buf = b""
        with contextlib.suppress(ConnectionError, OSError, TimeoutError):
            while time.monotonic() < end and stream < 2**31 - 1000:
                chunk = await asyncio.wait_for(reader.read(65536), max(end - time.monotonic(), 0.01))
                if not chunk or writer.is_closing():
                    break
                buf += chunk
                while len(buf) >= 9:
                    size = int.from_bytes(buf[0:3], "big")
                    if len(buf) < 9 + size:
                        break
                    kind, flags = buf[3], buf[4]
                    sid = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                    if ((kind == 1 and flags & 1) or kind == 3) and sid not in ended:  # trailers or RST_STREAM
                        ended.add(sid)  # one new stream for each that ended, so 250 stay open
                        sent.value += 1  # counted as the server ends them: work it did
                        open_one()
                    elif kind == 4 and not flags & 1 and not writer.is_closing():
                        writer.write(_frame(4, 1, 0, b""))  # SETTINGS ack
                    elif kind == 6 and not flags & 1 and not writer.is_closing():
                        writer.write(_frame(6, 1, 0, buf[9 : 9 + size]))  # PING ack
                    buf = buf[9 + size :]
                await writer.drain()
        writer.close()

    async def main() -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:  # reconnect what the server closes
            await asyncio.gather(*(conn(end) for _ in range(connections)))

    asyncio.run(main())


def attack_logflood(address: str, seconds: float, sent: Any) -> None:
    """Joins with a 60 KB bot_name and a wrong token, as fast as they are refused (issue 22)."""

    async def one(channel: grpc.aio.Channel, end: float, codes: dict[str, int]) -> None:
        join = bs.PlayRequest(join=bs.Join(bot_name="n" * 60_000, bot_token="wrong-token", protocol_version=1))
        while time.monotonic() < end:
            call = _open_play(channel)
            try:
                await call.write(join)
                await asyncio.wait_for(call.read(), 5)
            except grpc.aio.AioRpcError as e:
                codes[e.code().name] = codes.get(e.code().name, 0) + 1
            except (TimeoutError, asyncio.InvalidStateError):
                pass
            sent.value += 1
            call.cancel()

    async def main() -> None:
        end = time.monotonic() + seconds
        codes: dict[str, int] = {}
        async with grpc.aio.insecure_channel(address) as ch:
            await asyncio.gather(*(one(ch, end, codes) for _ in range(16)))
        print(f"logflood refusals by code: {json.dumps(codes)}", file=sys.stderr, flush=True)

    asyncio.run(main())


def attack_sessions(address: str, seconds: float, sent: Any) -> None:
    """One valid token opening sessions past its limit (64) again and again, never reading (issue 22)."""

    async def one(channel: grpc.aio.Channel, end: float) -> None:
        while time.monotonic() < end:
            call = _open_play(channel)
            with contextlib.suppress(grpc.aio.AioRpcError, TimeoutError, asyncio.InvalidStateError):
                await call.write(_join("hostile"))
                sent.value += 1
                await asyncio.wait_for(call.code(), max(end - time.monotonic(), 0.01))
            call.cancel()

    async def main() -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            async with grpc.aio.insecure_channel(address) as ch:  # a new connection when one is ended
                await asyncio.gather(*(one(ch, end) for _ in range(128)))

    asyncio.run(main())


ATTACKS: dict[str, Callable[..., None]] = {
    "memory": attack_memory,
    "prejoin": attack_prejoin,
    "idle": attack_idle,
    "reset": attack_reset,
    "slowloris": attack_slowloris,
    "churn": attack_churn,
    "badack": functools.partial(attack_churn, bad_ack=True),
    "logflood": attack_logflood,
    "sessions": attack_sessions,
}
ISSUE22 = ("slowloris", "churn", "logflood", "sessions", "reset")


# --- one measured run ------------------------------------------------------------------------


async def _probe_joins(address: str, count: int, spacing: float) -> dict[str, int]:
    """*count* Joins of the good bot one by one: how many got their Welcome."""
    out: dict[str, int] = {}
    async with grpc.aio.insecure_channel(address) as ch:
        for _ in range(count):
            call = _open_play(ch)
            try:
                await call.write(_join("good"))
                msg = await asyncio.wait_for(call.read(), 10)
                result = "welcome" if msg is not EOF and msg.HasField("welcome") else "ended"
            except grpc.aio.AioRpcError as e:
                result = e.code().name
            except TimeoutError:
                result = "timeout"
            out[result] = out.get(result, 0) + 1
            call.cancel()
            await asyncio.sleep(spacing)
    return out


async def _probe_resume(address: str, away: float) -> str:
    """A bot in a match drops its stream and Resumes *away* seconds later: OK, or what failed."""
    try:
        return await _resume_once(address, away)
    except grpc.aio.AioRpcError as e:
        return f"before the drop: {e.code().name}: {e.details()}"
    except TimeoutError:
        return "before the drop: timeout"


async def _resume_once(address: str, away: float) -> str:
    md = (("authorization", f"Bearer {ADMIN}"),)
    async with grpc.aio.insecure_channel(address) as ch:
        call = _open_play(ch)
        await call.write(_join("prober"))
        await asyncio.wait_for(call.read(), 30)
        clock = ms.CreateMatchRequest().clock
        clock.decision_time.FromSeconds(30)
        clock.resume_grace.FromSeconds(10)
        req = ms.CreateMatchRequest(players=2, seat_bots=["prober", "house:first"], hands=1, seed=5)
        req.clock.CopyFrom(clock)
        match = (await ms_grpc.MatchServiceStub(ch).CreateMatch(req, metadata=md)).match
        start = None
        while start is None:
            msg = await asyncio.wait_for(call.read(), 30)
            if msg.HasField("match_start"):
                start = msg.match_start
        call.cancel()
        await asyncio.sleep(away)
        again = _open_play(ch)
        resume = bs.Resume(match_id=match.match_id, seat=start.seat, resume_token=start.resume_token)
        try:
            await again.write(bs.PlayRequest(resume=resume))
            msg = await asyncio.wait_for(again.read(), 10)
            return "resumed" if msg.HasField("welcome") and msg.welcome.resumed else "no welcome"
        except grpc.aio.AioRpcError as e:
            return f"{e.code().name}: {e.details()}"
        except TimeoutError:
            return "timeout"
        finally:
            again.cancel()


async def _health_counts(address: str, until: float, probes: dict[str, Any]) -> None:
    """A health check on a new connection every second through the attack, counted by result."""
    counts: dict[str, int] = {}
    while time.monotonic() < until:
        began = time.monotonic()
        result = await asyncio.to_thread(health, address, 2.0)
        counts[result] = counts.get(result, 0) + 1
        await asyncio.sleep(max(0.0, began + 1.0 - time.monotonic()))
    probes["health_on_new_connections"] = counts


async def _probe_create(address: str) -> float | str:
    """Seconds a CreateMatch takes on a new connection (its deadline is 5 s), or the failure."""
    md = (("authorization", f"Bearer {ADMIN}"),)
    began = time.monotonic()
    try:
        async with grpc.aio.insecure_channel(address) as ch:
            await ms_grpc.MatchServiceStub(ch).ListMatches(ms.ListMatchesRequest(page_size=1), metadata=md, timeout=5)
            req = ms.CreateMatchRequest(players=2, seat_bots=["house:first", "house:random"], hands=1, seed=9)
            await ms_grpc.MatchServiceStub(ch).CreateMatch(req, metadata=md, timeout=5)
    except grpc.aio.AioRpcError as e:
        return f"{e.code().name} after {time.monotonic() - began:.1f} s"
    return round(time.monotonic() - began, 3)


def _cpu_s(pid: int) -> float:
    with contextlib.suppress(OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def cpu_split(pin: bool) -> tuple[set[int] | None, set[int] | None]:
    """The cores of the server and legitimate bots, and the attacker's: with *pin* the attacker
    gets a core of its own (as it would be another machine), the rest share the others."""
    cores = sorted(os.sched_getaffinity(0))
    if not pin or len(cores) < 2:
        return None, None
    return set(cores[:-1]), {cores[-1]}


def _pinned(cpus: set[int] | None, target: Callable[..., None], *args: Any) -> None:
    if cpus:
        os.sched_setaffinity(0, cpus)
    target(*args)


def measure(
    name: str, tree: Path, attack: str, seconds: float, extra: list[str], reset_rate: float, pin: bool = True
) -> dict[str, Any]:
    nofile = 1024 if attack == "idle" else None
    home, away = cpu_split(pin)
    mine = os.sched_getaffinity(0)
    if home:
        os.sched_setaffinity(0, home)
    with tempfile.TemporaryDirectory(prefix=f"attack-{attack}-{name}-") as tmp:
        server = Server(tree, Path(tmp), extra, nofile, home)
        try:
            return asyncio.run(_measure(server, attack, seconds, reset_rate, away))
        finally:
            server.stop()
            os.sched_setaffinity(0, mine)


async def _measure(
    server: Server, attack: str, seconds: float, reset_rate: float, away: set[int] | None = None
) -> dict[str, Any]:
    legit = Legit(server.address)
    playing = asyncio.ensure_future(legit.run())
    await asyncio.sleep(1.0)
    cpu_base = server.cpu_s()
    await asyncio.sleep(BASELINE_S)
    rss_before = server.rss_mib()
    t0 = time.monotonic()
    cpu_t0 = server.cpu_s()
    ctx = mp.get_context("spawn")
    sent = ctx.Value("q", 0, lock=False)  # what the attacker got out: Actions, streams or connections
    args: tuple[Any, ...] = (server.address, seconds, sent)
    if attack == "reset":
        args += (reset_rate,)
    proc = ctx.Process(target=_pinned, args=(away, ATTACKS[attack], *args))
    proc.start()
    peak = {"rss": rss_before, "fds": float(server.fds())}
    sampler = asyncio.ensure_future(_sample(server, peak))  # all along, probes included
    probes: dict[str, Any] = {}
    if attack in ISSUE22:
        log_before = server.log_bytes()
        watch = asyncio.ensure_future(_health_counts(server.address, t0 + seconds, probes))
        await asyncio.sleep(3.0)
        probes["resume_within_grace"] = await _probe_resume(server.address, 1.0)
        probes["create_match_s"] = await _probe_create(server.address)
        await watch
        probes["server_log_bytes_during_attack"] = server.log_bytes() - log_before
    if attack == "prejoin":
        await asyncio.sleep(3.0)
        probes["joins"] = await _probe_joins(server.address, 30, 0.2)
        probes["resume_within_grace"] = await _probe_resume(server.address, 1.0)
    if attack == "idle":
        await asyncio.sleep(3.0)
        probes["health_at_3s"] = await asyncio.to_thread(health, server.address, 3.0)
        await asyncio.sleep(max(0.0, t0 + 10 - time.monotonic()))
        probes["server_fds_at_10s"] = server.fds()
        probes["health_at_10s"] = await asyncio.to_thread(health, server.address, 3.0)
    attacker_cpu = 0.0
    while proc.is_alive() and time.monotonic() < t0 + seconds + 30:
        attacker_cpu = max(attacker_cpu, _cpu_s(proc.pid or 0))  # until it exits (then it is reaped)
        await asyncio.sleep(0.2)
    if proc.is_alive():
        proc.kill()
    proc.join()
    t1 = time.monotonic()
    cpu_t1 = server.cpu_s()
    sampler.cancel()
    if attack == "idle":
        probes["server_fds_peak"] = int(peak["fds"])
    await asyncio.sleep(2.0)
    probes["health_after"] = await asyncio.to_thread(health, server.address, 5.0)
    legit.stop()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(playing, 35)
    base = legit.rate(t0 - BASELINE_S, t0)
    during = legit.rate(t0, t1)
    return {
        "rss_before_mib": round(rss_before, 1),
        "rss_peak_mib": round(peak["rss"], 1),
        "rss_after_mib": round(server.rss_mib(), 1),
        "legit_decisions_per_s_before_attack": round(base, 1),
        "legit_decisions_per_s_during_attack": round(during, 1),
        "legit_kept": round(during / base, 2) if base else None,
        "attack_sent": int(sent.value),
        "attack_seconds": round(t1 - t0, 1),
        "server_cpu_share_before_attack": round((cpu_t0 - cpu_base) / BASELINE_S, 2),
        "server_cpu_share_during_attack": round((cpu_t1 - cpu_t0) / (t1 - t0), 2),
        "attacker_cpu_s": round(attacker_cpu, 1),
        "cores": "attacker on its own core" if away else "shared",
        "legit_errors": {code: legit.errors.count(code) for code in sorted(set(legit.errors))},
        "server_alive": server.proc.poll() is None,
        **probes,
    }


async def _sample(server: Server, peak: dict[str, float]) -> None:
    while True:
        peak["rss"] = max(peak["rss"], server.rss_mib())
        peak["fds"] = max(peak["fds"], server.fds())
        await asyncio.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("attack", choices=[*ATTACKS, "all", "issue22"])
    p.add_argument("--seconds", type=float, default=20.0, help="length of each attack (default 20)")
    p.add_argument("--before", default="96bbe3f", help="git revision of the 'before' server (default 96bbe3f)")
    p.add_argument("--only", choices=("before", "after"), help="measure one server only")
    p.add_argument(
        "--reset-rate",
        type=float,
        default=RESET_RATE,
        help=f"reset streams per second (default {RESET_RATE:g}, the report's rate; 0: as fast as possible)",
    )
    p.add_argument(
        "--no-pin",
        dest="pin",
        action="store_false",
        help="let the attacker share every core with the server (default: a core of its own, as another machine)",
    )
    p.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        help="the 'after' server's event loop (gaigel serve --loop; default: its own default)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object at the end")
    args = p.parse_args(argv)
    print("# " + shlex.join([sys.executable, "bench/attacks.py", *(argv or sys.argv[1:])]), flush=True)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="attack-before-") as tmp:
        trees = {"before": source_tree(args.before, Path(tmp)), "after": REPO}
        chosen = {"all": [*ATTACKS], "issue22": list(ISSUE22)}.get(args.attack, [args.attack])
        for attack in chosen:
            extra_after = ["--idle-timeout", "5"] if attack == "idle" else []
            if attack in ("logflood", "sessions"):  # refusals and sessions are INFO lines: what reaches the log
                extra_after = ["--log-level", "info"]
            for name in ("before", "after"):
                if args.only and name != args.only:
                    continue
                extra = extra_after if name == "after" or attack in ("logflood", "sessions") else []
                if name == "after" and args.loop:
                    extra = [*extra, "--loop", args.loop]
                r = measure(name, trees[name], attack, args.seconds, extra, args.reset_rate, args.pin)
                results.setdefault(attack, {})[name] = r
                print(f"{attack:8s} {name:6s} {json.dumps(r)}", flush=True)
    if args.json:
        print(json.dumps({"ceiling_mib": CEILING_MIB, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
