"""Where one decision's round trip goes: timestamps at each hop, one compact stream.

Run from the repository root::

    python bench/stages.py                 # echo, the server through its door and without; ~40 s
    python bench/stages.py --seconds 10 --repeat 3 --json

``bench/server.py`` measures the round trip whole (the Action written -> the next
DecisionRequest read); this splits it. One compact bot plays a 2-player match against
``house:first`` (as ``bench/server.py --compact --streams 1``), and the server process
notes ``time.perf_counter_ns()`` (CLOCK_MONOTONIC, one clock for every process of the
machine) at each hop, beside the bot's own notes:

* **door in**: the front door read the Action's bytes from the bot's connection;
* **read**: the stream's reader task hands the decoded Action to its seat (``Seat.act``);
* **answered**: the table takes the settled decision (``Table._answered``: clock, metrics);
* **house**: the house bot decides (``Table._house_decide``), after the engine applied the
  bot's action, its events went out and the engine named the next seat (left out of the
  decisions after which the bot, having won the trick, leads again);
* **ask**: the table asks the bot again (``Table._ask``), after the house bot's move;
* **post**: the DecisionRequest's bytes are ready and go to the session
  (``BotSession.post_request``: the observation and the request were written);
* **write**: the writer task begins writing the next DecisionRequest (``BotServicer._write``);
* **door out**: the door read those bytes from grpc, to relay them to the bot;
* **received**: the bot read the DecisionRequest (the round trip's end).

The echo server (``bench/server.py``'s reference: grpc.aio, one message per decision, no
work) notes **read** and **write** in its handler, so the transport's two halves
(Action written -> a server's handler has it; a server's write begins -> the bot has it)
can be set beside ours. Each figure is the median over the decisions of the measured window
(milliseconds from the Action's write), and the stages between, with the medians over
``--repeat`` rounds in which the paths take turns.

The probes wrap methods of the server, private ones too (``frontdoor._Link``,
``Table._ask``, ``BotServicer._write``), in the benchmark's own server process: a diagnostic,
not an API; a renamed method fails here by name. They cost about a microsecond a hop.
The first output line is the command that reproduces the run.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import multiprocessing as mp
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from gaigel_api.v1 import bot_service_pb2 as bs
from gaigel_api.v1 import match_service_pb2 as ms
from gaigel_api.v1 import match_service_pb2_grpc as ms_grpc

ADMIN = "stages-admin-token"
BOT, TOKEN = "stages-bot", "stages-token"
HANDS = 100_000
"""Hands of the match: more than a run plays (it is aborted when the server stops)."""
PLAY = "/gaigel.v1.BotService/Play"
ECHO = "/bench.Echo/Play"
EOF: Any = getattr(grpc.aio, "EOF")  # noqa: B009 (missing from the type stubs)
STAGES = ("door_in", "read", "answered", "house", "ask", "post", "write", "door_out", "received")
PATHS = ("echo", "door", "direct")
SKIP = 200
"""Decisions left out at the start of the window (the match's first hand warms up)."""


def _join() -> bs.PlayRequest:
    join = bs.Join(bot_token=TOKEN, bot_name=BOT, bot_version="1", protocol_version=1)
    join.compact = join.compact_hand_end = True  # as every kit joins
    return bs.PlayRequest(join=join)


def _open(channel: grpc.aio.Channel, method: str) -> Any:
    multi: Any = channel.stream_stream(
        method, request_serializer=bs.PlayRequest.SerializeToString, response_deserializer=bs.PlayResponse.FromString
    )
    return multi()


# --- the servers, each in its own process, noting their hops ---------------------------------


def _probe(notes: dict[str, list[int]], owner: Any, name: str, stage: str) -> None:
    """Wraps *owner*.*name* (sync or async) to note the time of each call under *stage*."""
    inner = getattr(owner, name)  # AttributeError: the server renamed what this probes
    clock = time.perf_counter_ns
    times = notes.setdefault(stage, [])
    if asyncio.iscoroutinefunction(inner):

        async def noted_async(*args: Any) -> Any:
            times.append(clock())
            return await inner(*args)

        setattr(owner, name, noted_async)
    else:

        def noted(*args: Any) -> Any:
            times.append(clock())
            return inner(*args)

        setattr(owner, name, noted)


async def _stopped(stop: Any) -> None:
    """Returns once *stop* (a multiprocessing Event) is set. Waited for on a thread: polling it
    from the loop cost the server process about 5 ms of CPU a second, counted as the server's."""
    await asyncio.get_running_loop().run_in_executor(None, stop.wait)


async def _server(path: str, cycles: list[bytes], ready: Any, stop: Any, notes: dict[str, list[int]]) -> None:
    server: Any
    if path == "echo":
        clock = time.perf_counter_ns
        reads, writes = notes.setdefault("read", []), notes.setdefault("write", [])

        async def play(request_iterator: Any, context: Any) -> Any:
            i = 0
            async for _ in request_iterator:
                reads.append(clock())
                writes.append(clock())
                await context.write(cycles[i])
                i = i + 1 if i + 1 < len(cycles) else 1

        handler = grpc.stream_stream_rpc_method_handler(play, request_deserializer=None, response_serializer=None)
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Echo", {"Play": handler}),))
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        from gaigel_server import frontdoor, seat, servicer, session, table
        from gaigel_server.clock import Clock
        from gaigel_server.logging import configure_logging
        from gaigel_server.server import ServerConfig, create_server, tune_gc

        link = getattr(frontdoor, "_Link")  # noqa: B009 (the door's private per-connection relay)
        _probe(notes, link, "data_received", "door_in")
        _probe(notes, link, "from_backend", "door_out")
        _probe(notes, seat.Seat, "act", "read")
        _probe(notes, table.Table, "_answered", "answered")
        _probe(notes, table.Table, "_house_decide", "house")
        _probe(notes, table.Table, "_ask", "ask")
        _probe(notes, session.BotSession, "post_request", "post")
        _probe(notes, servicer.BotServicer, "_write", "write")
        configure_logging("error", json=True)
        config = ServerConfig(
            admin_token=ADMIN,
            bots={BOT: TOKEN},
            clock=Clock(decision_time=60.0, bank=60.0, strikes_limit=3, resume_grace=60.0),
            front_door=path == "door",
        )
        server, port = create_server("127.0.0.1:0", config)
    await server.start()
    if path != "echo":
        tune_gc()  # as gaigel serve does
    ready.put(port)
    await _stopped(stop)
    await server.stop(0.5)


def _serve(path: str, cycles: list[bytes], ready: Any, stop: Any, out: str) -> None:
    notes: dict[str, list[int]] = {}
    try:
        asyncio.run(_server(path, cycles, ready, stop, notes))
    finally:
        Path(out).write_text(json.dumps(notes))


# --- the bot ----------------------------------------------------------------------------------


async def _bot(port: int, path: str, warmup: float, seconds: float) -> tuple[list[int], list[int]]:
    """Plays until the window is over: the times each Action was written and each
    DecisionRequest read (the bot's own notes)."""
    sent: list[int] = []
    received: list[int] = []
    clock = time.perf_counter_ns
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = _open(channel, ECHO if path == "echo" else PLAY)
        await call.write(_join())
        if path != "echo":
            request = ms.CreateMatchRequest(players=2, seat_bots=[BOT, "house:first"], hands=HANDS, seed=1)
            await ms_grpc.MatchServiceStub(channel).CreateMatch(
                request, metadata=(("authorization", f"Bearer {ADMIN}"),)
            )
        start = time.monotonic()
        end = start + warmup + seconds
        while time.monotonic() < end:
            msg: Any = await call.read()
            if msg is EOF:
                raise RuntimeError(f"{path}: the server ended the stream")
            now = clock()
            if msg.WhichOneof("message") != "decision_request":
                continue
            measuring = time.monotonic() - start >= warmup
            if measuring and len(sent) > len(received):
                received.append(now)
            d = msg.decision_request
            answer = bs.PlayRequest(action=bs.Action(decision_id=d.decision_id, action_id=d.legal_actions[0].id))
            if measuring:
                sent.append(clock())
            await call.write(answer)
        call.cancel()
    return sent[: len(received)], received


def _stages(sent: list[int], received: list[int], notes: dict[str, list[int]]) -> dict[str, float]:
    """Median milliseconds from each Action's write to the first note of each stage before its
    DecisionRequest was read (decisions missing a stage are left out of that stage)."""
    out: dict[str, float] = {}
    pairs = list(zip(sent, received, strict=True))[SKIP:]
    for stage in STAGES:
        times = received if stage == "received" else sorted(notes.get(stage, []))
        if not times:
            continue
        spans = []
        for s, r in pairs:
            i = bisect.bisect_left(times, s)
            if i < len(times) and times[i] <= r:
                spans.append((times[i] - s) / 1e6)
        if spans:
            out[stage] = statistics.median(spans)
    return out


def measure(path: str, cycles: list[bytes], warmup: float, seconds: float) -> dict[str, float]:
    """One run of *path* ("echo", "door" or "direct") in a fresh server process."""
    ctx = mp.get_context("spawn")
    ready, stop = ctx.Queue(), ctx.Event()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "notes.json")
        proc = ctx.Process(target=_serve, args=(path, cycles, ready, stop, out), daemon=True)
        proc.start()
        try:
            port = ready.get(timeout=60)
            sent, received = asyncio.run(_bot(port, path, warmup, seconds))
        finally:
            stop.set()
            proc.join(10)
            if proc.is_alive():
                proc.kill()
        notes = json.loads(Path(out).read_text())
    if len(received) <= SKIP:
        raise RuntimeError(f"{path}: {len(received)} decisions in the window, too few (raise --seconds)")
    return _stages(sent, received, notes)


async def _record_cycles(decisions: int) -> list[bytes]:
    """The compact server's messages per decision, recorded from a real match (cycle 0: the
    Welcome up to the first DecisionRequest), each cycle's bytes in one: the echo's replies."""
    from gaigel_server.logging import configure_logging
    from gaigel_server.server import ServerConfig, create_server

    configure_logging("error", json=True)
    server, port = create_server("127.0.0.1:0", ServerConfig(admin_token=ADMIN, bots={BOT: TOKEN}))
    await server.start()
    cycles: list[bytes] = [b""]
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = _open(channel, PLAY)
            await call.write(_join())
            request = ms.CreateMatchRequest(players=2, seat_bots=[BOT, "house:first"], hands=HANDS, seed=12345)
            await ms_grpc.MatchServiceStub(channel).CreateMatch(
                request, metadata=(("authorization", f"Bearer {ADMIN}"),)
            )
            while len(cycles) <= decisions:
                msg: Any = await call.read()
                cycles[-1] += msg.SerializeToString()
                if msg.WhichOneof("message") == "decision_request":
                    d = msg.decision_request
                    cycles.append(b"")
                    await call.write(
                        bs.PlayRequest(action=bs.Action(decision_id=d.decision_id, action_id=d.legal_actions[0].id))
                    )
            call.cancel()
    finally:
        await server.stop(0.5)
    return cycles[:-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="measured seconds per run (default 6)")
    parser.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds per run (default 1)")
    parser.add_argument("--repeat", type=int, default=1, metavar="N", help="rounds, the paths taking turns (default 1)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat N: N must be at least 1")
    command = "python bench/stages.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    cycles = asyncio.run(_record_cycles(300))
    rounds: dict[str, list[dict[str, float]]] = {path: [] for path in PATHS}
    for _ in range(args.repeat):
        for path in PATHS:
            rounds[path].append(measure(path, cycles, args.warmup, args.seconds))
    medians = {
        path: {stage: statistics.median(r[stage] for r in runs) for stage in STAGES if all(stage in r for r in runs)}
        for path, runs in rounds.items()
    }
    load = os.getloadavg()
    if args.json:
        result = {"command": command, "load_average": list(load), "python": platform.python_version()}
        print(json.dumps({**result, "grpc": grpc.__version__, "medians": medians, "rounds": rounds}, indent=2))
        return 0
    print(command)
    print(
        f"python {platform.python_version()}, grpcio {grpc.__version__}, {os.cpu_count()} CPUs; one compact stream, "
        f"{args.warmup:g} s warm-up + {args.seconds:g} s measured per run, {args.repeat} round(s), "
        f"load average {load[0]:.1f} at the end"
    )
    print("ms from the Action's write to each hop (median over the decisions; medians over the rounds)")
    print()
    head = f"{'hop':<10} | " + " | ".join(f"{p:>16}" for p in PATHS)
    print(head)
    print("-" * len(head))
    for stage in STAGES:
        cells = []
        for path in PATHS:
            m = medians[path]
            if stage not in m:
                cells.append(f"{'-':>16}")
                continue
            before = [m[s] for s in STAGES[: STAGES.index(stage)] if s in m]
            step = m[stage] - before[-1] if before else m[stage]
            cells.append(f"{m[stage]:>7.3f} (+{step:.3f})".rjust(16))
        print(f"{stage:<10} | " + " | ".join(cells))
    echo, door, direct = medians["echo"], medians["door"], medians["direct"]
    print()
    for name, m in (("door", door), ("direct", direct)):
        step = m["write"] - m["read"]
        rest = m["received"] - step
        print(
            f"{name}: round trip x{m['received'] / echo['received']:.2f} the echo's; read -> write (the server's own "
            f"step) {step:.3f} ms; the rest (the transport's halves) {rest:.3f} ms, x{rest / echo['received']:.2f} "
            f"the echo's round trip by itself"
        )
    print(f"issue 25's target for the round trip, 1.6x the echo's: {1.6 * echo['received']:.3f} ms")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
