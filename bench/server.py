"""Server speed: decision round trip and throughput through the full server and a bare echo server.

Run from the repository root::

    python bench/server.py                       # 1, 8 and 64 streams; about 1 minute
    python bench/server.py --seconds 10 --streams 1,8,64,128 --json
    python bench/server.py --compact --streams 1,64  # compact mode against a one-message echo
    python bench/server.py --compact --streams 1,64 --repeat 5  # medians of 5 rounds, paths taking turns

What is measured, for each number N of concurrent bot streams, in one run:

* **full**: the real server (``gaigel_server.create_server``) in its own process; N bot
  streams, each in its own 2-player match against ``house:first`` (an instant in-process
  house bot), so every stream is busy all the time. The benchmark bots answer every
  ``DecisionRequest`` at once with its first legal action.
* **echo**: a bare ``grpc.aio`` bidirectional-stream server in its own process that does no
  work: for every message it receives it writes back the next *cycle* of byte strings
  recorded from a real match (below). Same message count and sizes, no game.

A *cycle* is what the server sends between one answer of a bot and its next
``DecisionRequest``: the events of the bot's own move, those of the house bot's move (and
hand ends and starts), then the ``DecisionRequest``. Before the timed runs, one match is
played through an in-process server and its cycles are recorded as serialized bytes; the
echo server replays them. Both paths use the very same client code (the same stub
serializers and protobuf parsing), which runs in this process with one event loop.

* **round trip**: from writing the ``Action`` to receiving the next ``DecisionRequest`` of
  that stream (one cycle), per decision; p50 and p99 over the measured window.
* **first reply**: from writing the ``Action`` to receiving the next message of any kind.
* **throughput**: decisions answered per second over all N streams in the window.
* **server CPU**: user + system CPU of the server process per decision (Linux ``/proc``).

With ``--compact`` the bots join in compact mode (Join.compact and Join.compact_hand_end, as every
kit does: HandStart, Events and HandEnd ride in the next DecisionRequest), and the reference
is the ideal of that mode: the echo server
writes ONE message per decision, each cycle's recorded compact bytes concatenated (a valid
PlayResponse: protobuf merges concatenated messages), so one round trip per decision with
the same bytes. The plain full server runs in the same run too (path ``plain``), for its
server CPU and messages per decision beside compact's.

* **messages per decision**: server messages the bots received per decision answered.

``--door`` adds the path ``direct``, the full server without its front door (grpc listens
itself), and ``--relay PROGRAM`` the path ``relayed``: that server behind PROGRAM, a native
relay (``cc -O2 -o /tmp/gaigel-relay bench/relay.c``), whose CPU counts as the server's: what
the door's hop costs when the relay is as cheap as it gets.

Each (N, path) runs in a fresh server process: ``--warmup`` seconds unmeasured, then
``--seconds`` measured. Ratios are full / echo (round trip: lower is better; throughput:
higher is better). The first output line is the command that reproduces the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc
from gaigel_server import loops

ADMIN = "bench-admin-token"
HANDS = 100_000
"""Hands per match: far more than a run plays (matches are aborted when the server stops)."""
PLAY = "/gaigel.v1.BotService/Play"
ECHO = "/bench.Echo/Play"
TARGET_RTT_RATIO = 1.25
TARGET_THROUGHPUT_RATIO = 0.8
TARGET_P99_MS = 20.0
# Issue 25's targets for the rebuilt core (compact mode), checked beside the ones above.
TARGET_CPU_RATIO = 2.5  # server CPU per decision / the echo's, at 1 and at 64 streams
TARGET_CORE_RTT_RATIO = 1.6  # round trip p50 at 1 stream
TARGET_CORE_THROUGHPUT_RATIO = 0.4  # decisions/s at 64 streams
EOF: Any = getattr(grpc.aio, "EOF")  # noqa: B009 (missing from the type stubs)


def bot_name(i: int) -> str:
    return f"bench-{i}"


def token(i: int) -> str:
    return f"bench-token-{i:04d}"


def open_stream(channel: grpc.aio.Channel, method: str) -> Any:
    """A Play-like stream call on *method* with the PlayRequest/PlayResponse (de)serializers."""
    multi: Any = channel.stream_stream(
        method, request_serializer=bs.PlayRequest.SerializeToString, response_deserializer=bs.PlayResponse.FromString
    )
    return multi()


def join(i: int, compact: bool = False) -> bs.PlayRequest:
    return bs.PlayRequest(
        join=bs.Join(
            bot_token=token(i),
            bot_name=bot_name(i),
            bot_version="1",
            protocol_version=1,
            compact=compact,
            compact_hand_end=compact,  # a compact bot of any kit: the hand's end rides too
        )
    )


# --- the two servers (each in its own process) ------------------------------------------------


async def _stopped(stop: Any) -> None:
    """Returns once *stop* (a multiprocessing Event) is set. Waited for on a thread: polling it
    from the loop cost the server process about 5 ms of CPU a second, counted as the server's."""
    await asyncio.get_running_loop().run_in_executor(None, stop.wait)


async def _full_server(streams: int, ready: Any, stop: Any, front_door: bool = True) -> None:
    from gaigel_server.clock import Clock
    from gaigel_server.logging import configure_logging
    from gaigel_server.server import ServerConfig, create_server, tune_gc

    configure_logging("error", json=True)
    config = ServerConfig(
        admin_token=ADMIN,
        bots={bot_name(i): token(i) for i in range(streams)},
        clock=Clock(decision_time=60.0, bank=60.0, strikes_limit=3, resume_grace=60.0),
        max_sessions_per_bot=4,
        front_door=front_door,
    )
    server, port = create_server("127.0.0.1:0", config)
    await server.start()
    tune_gc()  # as gaigel serve does
    ready.put(port)
    await _stopped(stop)
    await server.stop(0.5)


async def _echo_server(cycles: list[list[bytes]], ready: Any, stop: Any) -> None:
    async def play(request_iterator: Any, context: Any) -> Any:
        i = 0
        async for _ in request_iterator:
            for message in cycles[i]:
                await context.write(message)
            i = i + 1 if i + 1 < len(cycles) else 1  # cycle 0 (Welcome .. first decision) once

    handler = grpc.stream_stream_rpc_method_handler(play, request_deserializer=None, response_serializer=None)
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Echo", {"Play": handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    ready.put(port)
    await _stopped(stop)
    await server.stop(0.5)


def _serve(kind: str, arg: Any, ready: Any, stop: Any, profile: str | None = None, loop: str = "asyncio") -> None:
    if kind in ("direct", "relayed"):  # the full server without its front door: grpc listens itself
        main = _full_server(arg, ready, stop, front_door=False)
    elif kind != "full":
        main = _echo_server(arg, ready, stop)
    else:
        main = _full_server(arg, ready, stop)
    with asyncio.Runner(loop_factory=loops.factory(loops.EventLoop(loop))) as runner:
        if profile is None:
            runner.run(main)
        else:
            import cProfile

            cProfile.runctx("runner.run(main)", globals(), locals(), profile)


def _cpu_of(pids: list[int]) -> float | None:
    """The CPU seconds of all of *pids* (the server, and a relay in front of it)."""
    seconds = [_cpu_seconds(pid) for pid in pids]
    return None if None in seconds else sum(s for s in seconds if s is not None)


def _cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the benchmark bots --------------------------------------------------------------------


@dataclass
class Stats:
    measuring: bool = False
    stopping: bool = False
    rtt: list[float] = field(default_factory=list)
    first: list[float] = field(default_factory=list)
    decisions: int = 0
    messages: int = 0


async def _bot(channel: grpc.aio.Channel, method: str, first: bs.PlayRequest, stats: Stats) -> None:
    call = open_stream(channel, method)
    await call.write(first)
    sent: float | None = None
    replied = False
    try:
        while True:
            msg: Any = await call.read()
            if msg is EOF:
                return
            now = time.perf_counter()
            if stats.measuring:
                stats.messages += 1
            if sent is not None and not replied:
                replied = True
                if stats.measuring:
                    stats.first.append(now - sent)
            if msg.WhichOneof("message") != "decision_request":
                continue
            if sent is not None and stats.measuring:
                stats.rtt.append(now - sent)
                stats.decisions += 1
            if stats.stopping:
                return
            req = msg.decision_request
            answer = bs.PlayRequest(action=bs.Action(decision_id=req.decision_id, action_id=req.legal_actions[0].id))
            replied = False
            sent = time.perf_counter()
            await call.write(answer)
    finally:
        call.cancel()


async def _load(
    kind: str, port: int, streams: int, warmup: float, seconds: float, pids: list[int], compact: bool = False
) -> dict[str, Any]:
    stats = Stats()
    options = [("grpc.max_receive_message_length", 4 * 1024 * 1024)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        if kind in ("full", "direct", "relayed"):
            admin = ms_grpc.MatchServiceStub(channel)
            md = (("authorization", f"Bearer {ADMIN}"),)
            tasks = [asyncio.create_task(_bot(channel, PLAY, join(i, compact), stats)) for i in range(streams)]
            for i in range(streams):
                req = ms.CreateMatchRequest(players=2, seat_bots=[bot_name(i), "house:first"], hands=HANDS, seed=i + 1)
                await admin.CreateMatch(req, metadata=md)
        else:
            tasks = [asyncio.create_task(_bot(channel, ECHO, join(i), stats)) for i in range(streams)]
        await asyncio.sleep(warmup)
        cpu0 = _cpu_of(pids)
        stats.measuring = True
        t0 = time.perf_counter()
        await asyncio.sleep(seconds)
        stats.measuring = False
        elapsed = time.perf_counter() - t0
        cpu1 = _cpu_of(pids)
        stats.stopping = True
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    rtt = sorted(stats.rtt)
    first = sorted(stats.first)
    if not rtt:
        raise RuntimeError(f"{kind} with {streams} streams: no decision in the measured window")
    cpu = (cpu1 - cpu0) / stats.decisions * 1e6 if cpu0 is not None and cpu1 is not None else None
    return {
        "path": kind,
        "streams": streams,
        "decisions": stats.decisions,
        "seconds": round(elapsed, 3),
        "throughput": stats.decisions / elapsed,
        "rtt_p50_ms": _pct(rtt, 50) * 1e3,
        "rtt_p99_ms": _pct(rtt, 99) * 1e3,
        "rtt_mean_ms": statistics.fmean(rtt) * 1e3,
        "first_reply_p50_ms": _pct(first, 50) * 1e3 if first else None,
        "server_cpu_us_per_decision": cpu,
        "messages_per_decision": stats.messages / stats.decisions,
    }


SPREAD = ("rtt_p50_ms", "throughput", "server_cpu_us_per_decision")
"""The figures whose range over the rounds is reported beside their median (``--repeat``)."""


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One path's figures over *runs* (rounds of ``--repeat``): the median of each number, and
    the range of :data:`SPREAD` (a single run is returned as it is)."""
    if len(runs) == 1:
        return runs[0]
    out = dict(runs[0])
    for key, value in runs[0].items():
        values = [run[key] for run in runs]
        if isinstance(value, (int, float)) and not isinstance(value, bool) and None not in values:
            out[key] = statistics.median(values)
    out["rounds"] = len(runs)
    out["range"] = {key: [min(v), max(v)] for key in SPREAD if None not in (v := [run[key] for run in runs])}
    return out


def _pct(sorted_values: list[float], p: float) -> float:
    k = min(len(sorted_values) - 1, max(0, round(p / 100 * (len(sorted_values) - 1))))
    return sorted_values[k]


_LOOP: asyncio.AbstractEventLoop | None = None


def _client_loop() -> asyncio.AbstractEventLoop:
    """One event loop for every measurement of this run: grpc.aio binds its poller to the first
    loop it runs on, and a second ``asyncio.run`` left it posting to a closed one (tracebacks)."""
    global _LOOP
    if _LOOP is None:
        _LOOP = asyncio.new_event_loop()
    return _LOOP


def measure(
    kind: str,
    streams: int,
    cycles: list[list[bytes]],
    warmup: float,
    seconds: float,
    profile: str | None = None,
    compact: bool = False,
    loop: str = "asyncio",
    relay: str | None = None,
) -> dict[str, Any]:
    """One timed run of *kind* ("full", "direct", "relayed" or "echo") with *streams* streams, in a
    fresh server process (*compact*: the full server's bots join compact; "relayed": the server
    without its door, behind the *relay* program, whose CPU counts as the server's)."""
    ctx = mp.get_context("spawn")
    ready, stop = ctx.Queue(), ctx.Event()
    arg = streams if kind in ("full", "direct", "relayed") else cycles
    proc = ctx.Process(target=_serve, args=(kind, arg, ready, stop, profile, loop), daemon=True)
    proc.start()
    relayed: subprocess.Popen[str] | None = None
    try:
        port = ready.get(timeout=60)
        assert proc.pid is not None
        pids = [proc.pid]
        if kind == "relayed":
            assert relay is not None
            relayed = subprocess.Popen([relay, str(port)], stdout=subprocess.PIPE, text=True)
            assert relayed.stdout is not None
            port = int(relayed.stdout.readline())  # the relay prints the port it listens on
            pids.append(relayed.pid)
        return _client_loop().run_until_complete(_load(kind, port, streams, warmup, seconds, pids, compact))
    finally:
        if relayed is not None:
            relayed.kill()
            relayed.wait()
        stop.set()
        proc.join(10)
        if proc.is_alive():
            proc.kill()


# --- recording the message sizes of a real match ------------------------------------------


async def _record_cycles(decisions: int, compact: bool = False) -> tuple[list[list[bytes]], list[int]]:
    """Cycles of serialized server messages (cycle 0: Welcome up to the first decision) and Action sizes."""
    from gaigel_server.logging import configure_logging
    from gaigel_server.server import ServerConfig, create_server

    configure_logging("error", json=True)
    server, port = create_server("127.0.0.1:0", ServerConfig(admin_token=ADMIN, bots={bot_name(0): token(0)}))
    await server.start()
    cycles: list[list[bytes]] = [[]]
    actions: list[int] = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = open_stream(channel, PLAY)
            await call.write(join(0, compact))
            req = ms.CreateMatchRequest(players=2, seat_bots=[bot_name(0), "house:first"], hands=HANDS, seed=12345)
            await ms_grpc.MatchServiceStub(channel).CreateMatch(req, metadata=(("authorization", f"Bearer {ADMIN}"),))
            while len(actions) < decisions:
                msg: Any = await call.read()
                assert msg is not EOF
                cycles[-1].append(msg.SerializeToString())
                if msg.WhichOneof("message") == "decision_request":
                    d = msg.decision_request
                    answer = bs.PlayRequest(
                        action=bs.Action(decision_id=d.decision_id, action_id=d.legal_actions[0].id)
                    )
                    actions.append(answer.ByteSize())
                    cycles.append([])
                    await call.write(answer)
            call.cancel()
    finally:
        await server.stop(0.5)
    return cycles[:-1], actions


# --- output ---------------------------------------------------------------------------------


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="1,8,64", help="comma-separated stream counts (default 1,8,64)")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="measure every path N times, taking turns, and report medians with their ranges (default 1)",
    )
    parser.add_argument(
        "--loop",
        default=loops.EventLoop.ASYNCIO.value,
        choices=[kind.value for kind in loops.EventLoop],
        help="the event loop of both servers, echo and full (as gaigel serve --loop; default %(default)s)",
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="measured seconds per run (default 4)")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds per run (default 1)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument(
        "--compact",
        action="store_true",
        help="bots join compact; the echo server answers with one message per decision; plain runs beside",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="run each full server under cProfile and write DIR/server-N.prof (timings are then not comparable)",
    )
    parser.add_argument(
        "--door",
        action="store_true",
        help="also measure the full server without its front door (gaigel serve --no-front-door): the door's cost",
    )
    parser.add_argument(
        "--relay",
        metavar="PROGRAM",
        help="also measure the server without its door behind PROGRAM, a relay that takes the server's port as its "
        "argument and prints the port it listens on (bench/relay.c: what a native front door could at best cost)",
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat N: N must be at least 1")
    streams = [int(x) for x in args.streams.split(",") if x.strip()]
    command = "python bench/server.py " + shlex.join(sys.argv[1:] if argv is None else argv)

    cycles, actions = _client_loop().run_until_complete(_record_cycles(300, args.compact))
    decision_sizes = [len(c[-1]) for c in cycles[1:]]
    sizes = {
        "action_bytes_mean": statistics.fmean(actions),
        "decision_request_bytes_mean": statistics.fmean(decision_sizes),
        "messages_per_cycle_mean": statistics.fmean(len(c) for c in cycles[1:]),
        "bytes_per_cycle_mean": statistics.fmean(sum(map(len, c)) for c in cycles[1:]),
        "cycles_recorded": len(cycles) - 1,
    }
    if args.compact:  # the ideal of compact mode: one message per decision with the cycle's bytes
        cycles = [cycles[0]] + [[b"".join(c)] for c in cycles[1:]]
    rows: list[dict[str, Any]] = []
    for n in streams:
        # --repeat: the paths take turns, round after round, so that a slow spell of the machine
        # falls on all of them; each figure is the median over the rounds.
        rounds: dict[str, list[dict[str, Any]]] = {"echo": [], "full": [], "plain": [], "direct": [], "relayed": []}
        for r in range(args.repeat):
            rounds["echo"].append(measure("echo", n, cycles, args.warmup, args.seconds, loop=args.loop))
            profile = None
            if args.profile and r == 0:
                Path(args.profile).mkdir(parents=True, exist_ok=True)
                profile = str(Path(args.profile) / f"server-{n}.prof")
            rounds["full"].append(
                measure("full", n, cycles, args.warmup, args.seconds, profile, args.compact, args.loop)
            )
            if args.compact:
                rounds["plain"].append(measure("full", n, cycles, args.warmup, args.seconds, loop=args.loop))
            if args.door:
                rounds["direct"].append(
                    measure("direct", n, cycles, args.warmup, args.seconds, None, args.compact, args.loop)
                )
            if args.relay:
                rounds["relayed"].append(
                    measure("relayed", n, cycles, args.warmup, args.seconds, None, args.compact, args.loop, args.relay)
                )
        echo, full = _median_run(rounds["echo"]), _median_run(rounds["full"])
        plain = _median_run(rounds["plain"]) if rounds["plain"] else None
        direct = _median_run(rounds["direct"]) if rounds["direct"] else None
        relayed = _median_run(rounds["relayed"]) if rounds["relayed"] else None
        rows.append(
            {
                "streams": n,
                "echo": echo,
                "full": full,
                **({"plain": plain} if plain is not None else {}),
                **(
                    {
                        "direct": direct,
                        "door_rtt_p50_ratio": _ratio(full["rtt_p50_ms"], direct["rtt_p50_ms"]),
                        "door_throughput_ratio": _ratio(full["throughput"], direct["throughput"]),
                        "door_cpu_ratio": _ratio(
                            full["server_cpu_us_per_decision"], direct["server_cpu_us_per_decision"]
                        ),
                    }
                    if direct is not None
                    else {}
                ),
                **(
                    {
                        "relayed": relayed,
                        "relayed_rtt_p50_ratio": _ratio(relayed["rtt_p50_ms"], echo["rtt_p50_ms"]),
                        "relayed_cpu_ratio": _ratio(
                            relayed["server_cpu_us_per_decision"], echo["server_cpu_us_per_decision"]
                        ),
                    }
                    if relayed is not None
                    else {}
                ),
                "rtt_p50_ratio": _ratio(full["rtt_p50_ms"], echo["rtt_p50_ms"]),
                "rtt_p99_ratio": _ratio(full["rtt_p99_ms"], echo["rtt_p99_ms"]),
                "throughput_ratio": _ratio(full["throughput"], echo["throughput"]),
            }
        )
    checks = _targets(rows, args.compact)
    load = os.getloadavg()
    result: dict[str, Any] = {
        "command": command,
        "load_average": list(load),
        "python": platform.python_version(),
        "grpc": grpc.__version__,
        "cpus": os.cpu_count(),
        "loop": args.loop,
        "compact": args.compact,
        "message_sizes": sizes,
        "rows": rows,
        "targets": checks,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(command)
    print(
        f"python {result['python']}, grpcio {result['grpc']}, {result['cpus']} CPUs, servers on {result['loop']}; "
        f"{args.warmup:g} s warm-up + {args.seconds:g} s measured per row, a fresh server process each; "
        f"load average {load[0]:.1f} at the end (numbers are noisy when it exceeds the CPUs)"
    )
    print(
        "round trip: Action written -> next DecisionRequest of the stream (one cycle: the events of both moves, "
        "the house bot's move on the server); first reply: Action -> next message; throughput: decisions/s, all streams"
    )
    print(
        f"message sizes (recorded from a real match, replayed by the echo server): Action {sizes['action_bytes_mean']:.0f} B; "
        f"per cycle {sizes['messages_per_cycle_mean']:.1f} messages, {sizes['bytes_per_cycle_mean']:.0f} B, "
        f"DecisionRequest {sizes['decision_request_bytes_mean']:.0f} B"
    )
    if args.compact:
        print(
            "compact: full = the server with compact bots; echo = one message per decision (the cycle's compact "
            "bytes in one); plain = the server with plain bots, for CPU and messages per decision"
        )
    print()
    head = (
        f"{'streams':>7} | {'path':<7} | {'rtt p50 ms':>10} | {'rtt p99 ms':>10} | {'1st reply p50':>13} | "
        f"{'decisions/s':>11} | {'server CPU us/dec':>17} | {'msgs/dec':>8}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        for path in ("echo", "full", "plain", "direct", "relayed"):
            x = r.get(path)
            if x is None:
                continue
            print(
                f"{r['streams']:>7} | {path:<7} | {x['rtt_p50_ms']:>10.3f} | {x['rtt_p99_ms']:>10.3f} | "
                f"{_fmt(x['first_reply_p50_ms'], '>13.3f')} | {x['throughput']:>11.0f} | "
                f"{_fmt(x['server_cpu_us_per_decision'], '>17.0f')} | {x['messages_per_decision']:>8.2f}"
            )
        for path in ("echo", "full", "plain", "direct", "relayed"):
            x = r.get(path)
            if x is None or "range" not in x:
                continue
            spread = x["range"]
            cpu = spread.get("server_cpu_us_per_decision")
            print(
                f"{'':>7} | {path} over {x['rounds']} rounds: rtt p50 {spread['rtt_p50_ms'][0]:.3f}-{spread['rtt_p50_ms'][1]:.3f} ms, "
                f"decisions/s {spread['throughput'][0]:.0f}-{spread['throughput'][1]:.0f}"
                + (f", server CPU {cpu[0]:.0f}-{cpu[1]:.0f} us/dec" if cpu else "")
            )
        print(
            f"{'':>7} | {'compact' if args.compact else 'full'}/echo: round trip p50 x{_fmt(r['rtt_p50_ratio'], '.2f')}, p99 x{_fmt(r['rtt_p99_ratio'], '.2f')}, "
            f"throughput x{_fmt(r['throughput_ratio'], '.2f')}"
        )
        if "direct" in r:
            print(
                f"{'':>7} | full/direct (the front door's cost): round trip p50 x{_fmt(r['door_rtt_p50_ratio'], '.2f')}, "
                f"throughput x{_fmt(r['door_throughput_ratio'], '.2f')}, server CPU per decision x{_fmt(r['door_cpu_ratio'], '.2f')}"
            )
        if "relayed" in r:
            print(
                f"{'':>7} | relayed/echo (no door, a native relay in front, its CPU counted): round trip p50 "
                f"x{_fmt(r['relayed_rtt_p50_ratio'], '.2f')}, server CPU per decision x{_fmt(r['relayed_cpu_ratio'], '.2f')}"
            )
    print()
    for c in checks:
        print(f"{'PASS' if c['ok'] else 'FAIL'}  {c['target']}: {c['measured']}")
    return 0


def _check(target: str, measured: str, ok: bool) -> dict[str, Any]:
    return {"target": target, "measured": measured, "ok": ok}


def _targets(rows: list[dict[str, Any]], compact: bool = False) -> list[dict[str, Any]]:
    by = {r["streams"]: r for r in rows}
    out: list[dict[str, Any]] = []
    if 1 in by:
        ratio = by[1]["rtt_p50_ratio"]
        out.append(
            _check(
                f"1 stream: round trip p50 within {TARGET_RTT_RATIO}x of echo",
                f"x{ratio:.2f}",
                ratio <= TARGET_RTT_RATIO,
            )
        )
    if 64 in by:
        r = by[64]
        ratio = r["throughput_ratio"]
        out.append(
            _check(
                f"64 streams: throughput at least {TARGET_THROUGHPUT_RATIO}x of echo",
                f"x{ratio:.2f}",
                ratio >= TARGET_THROUGHPUT_RATIO,
            )
        )
        p99 = r["full"]["rtt_p99_ms"]
        out.append(
            _check(f"64 streams: round trip p99 under {TARGET_P99_MS:g} ms", f"{p99:.2f} ms", p99 < TARGET_P99_MS)
        )
    if compact:  # issue 25's targets are for compact mode
        out.extend(_core_targets(by))
    return out


def _core_targets(by: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """Issue 25's checks: server CPU per decision, round trip at 1 stream, throughput at 64."""
    out: list[dict[str, Any]] = []
    for n in (1, 64):
        if n not in by:
            continue
        full, echo = by[n]["full"]["server_cpu_us_per_decision"], by[n]["echo"]["server_cpu_us_per_decision"]
        if full is None or echo is None:
            continue
        out.append(
            _check(
                f"{n} stream{'s' if n > 1 else ''}: server CPU per decision at most {TARGET_CPU_RATIO}x the echo's",
                f"x{full / echo:.2f} ({full:.0f} vs {echo:.0f} us)",
                full / echo <= TARGET_CPU_RATIO,
            )
        )
    if 1 in by:
        ratio = by[1]["rtt_p50_ratio"]
        out.append(
            _check(
                f"1 stream: round trip p50 at most {TARGET_CORE_RTT_RATIO}x the echo's",
                f"x{ratio:.2f}",
                ratio <= TARGET_CORE_RTT_RATIO,
            )
        )
    if 64 in by:
        ratio = by[64]["throughput_ratio"]
        out.append(
            _check(
                f"64 streams: throughput at least {TARGET_CORE_THROUGHPUT_RATIO}x the echo's",
                f"x{ratio:.2f}",
                ratio >= TARGET_CORE_THROUGHPUT_RATIO,
            )
        )
    return out


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
