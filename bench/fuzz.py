"""Fuzzing a live server: hostile inputs by the hundred thousand, with statuses, rate and resources.

Run from the repository root::

    python bench/fuzz.py                                # 100,000 inputs
    python bench/fuzz.py --inputs 5000 --json
    python bench/fuzz.py --kinds admin --inputs 2000 --seed 3
    python bench/fuzz.py --replay /tmp/.../failures.jsonl   # send the failing inputs of a run again

The server is a real ``gaigel serve`` subprocess (so a crash is a dead process, and its file
descriptors, memory and asyncio tasks are measured from outside). The inputs are drawn by
the hypothesis strategies of ``bench/fuzzkit.py``, the same ones the CI test
``tests/server/test_fuzz.py`` uses with few examples: BotService.Play streams (wrong
oneofs, hostile strings, invalid UTF-8, out-of-range action ids, messages at and over the
size limit, floods read and unread), MatchService calls (with, without and with wrong admin
tokens, as protos and as raw bytes) and raw TCP connections (random bytes, HTTP/2 garbage,
broken gRPC framing, cut-off and silent connections). ``--concurrency`` inputs are in
flight at once; a few Play streams that send nothing at all run alongside.

Every input ends in a result: the gRPC status the server sent, OPEN (a stream still serving
when the client ended it), CANCELLED / FLOOD_* (the client ended it by design), HANG (no end
within 10 s) or, for TCP, the server's HTTP/2 reaction. A *problem* is a status outside the
defined set (UNKNOWN, INTERNAL, UNAVAILABLE, ...), a non-OK status without a message, a
hang, an undecodable response, or an admin call without the admin token that was not
refused. Before and after the run (after a warm-up, and after every connection is closed
and the server has settled) the server's open file descriptors, event-loop tasks and RSS
are measured; after it, the health check must say SERVING, a normal match must complete,
and matches where a seated bot sends garbage must end with their faults recorded.

The first output line is the command that reproduces the run (same seed, same inputs; the
results of concurrent inputs may still differ in timing). Exit status 1 on any problem,
crash, leak or failed check. Failing inputs are written as JSON lines for ``--replay``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import contextlib
import json
import os
import platform
import random
import re
import shlex
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parent.parent
# Run as python bench/fuzz.py, which puts bench/ on the path, not the project root: fuzzkit is
# imported as bench.fuzzkit, the same module tests/server/test_fuzz.py imports.
sys.path.insert(0, str(REPO))

from bench import fuzzkit as fk  # noqa: E402

KINDS = {"play": fk.play_inputs, "admin": fk.admin_inputs, "tcp": fk.tcp_inputs}
RSS_TOLERANCE_MIB = 64
SILENT_STREAMS = 8
"""Play streams that send nothing, run alongside the fuzz (each waits for the Join timeout)."""


class StopFuzz(Exception):
    """The server died: stop drawing inputs."""


@dataclass
class Tally:
    """Results of the fuzz run, updated from the client's event-loop thread."""

    counts: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    problems: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    """(result, problem class) -> [count, first outcome, first input, count by kind]"""
    failing: list[dict[str, Any]] = field(default_factory=list)
    done: int = 0
    busy_seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, inp: fk.Input | None, outcome: fk.Outcome) -> None:
        with self.lock:
            self.done += 1
            self.busy_seconds += outcome.seconds
            self.counts[(outcome.kind, outcome.result)] += 1
            if outcome.problem is None:
                return
            key = (outcome.result, problem_class(outcome))
            entry = self.problems.setdefault(key, [0, outcome, inp, collections.Counter()])
            entry[0] += 1
            entry[3][outcome.kind] += 1
            if entry[0] <= 3 and inp is not None:  # a few reproductions per kind of problem
                self.failing.append({"input": inp.to_json(), "outcome": outcome.describe()})

    @property
    def problem_count(self) -> int:
        return sum(e[0] for e in self.problems.values())


def problem_class(outcome: fk.Outcome) -> str:
    """The problem with the names, quoted values and numbers of its message blanked out, so that one
    bug met through many requests is reported once."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", outcome.details)
    return (outcome.problem or "") + " | " + re.sub(r"\d+", "N", text)[:120]


class Driver:
    """Feeds inputs from the hypothesis thread to the fuzzer's event loop, *concurrency* at a time."""

    def __init__(self, server: fk.LiveServer, loop: fk.LoopThread, concurrency: int, tally: Tally) -> None:
        self.server = server
        self.loop = loop
        self.tally = tally
        self.slots = threading.Semaphore(concurrency)
        self.pending: set[concurrent.futures.Future[fk.Outcome]] = set()
        self.crashed = False

        async def make() -> fk.Fuzzer:
            return fk.Fuzzer(server.address, channels=4)

        self.fuzzer = loop.run(make())

    def submit(self, inp: fk.Input) -> None:
        if self.crashed or not self.server.alive():
            self.crashed = True
            raise StopFuzz
        self.slots.acquire()
        fut = self.loop.submit(self.fuzzer.run(inp))
        self.pending.add(fut)
        fut.add_done_callback(lambda f: self._finished(inp, f))

    def _finished(self, inp: fk.Input, fut: concurrent.futures.Future[fk.Outcome]) -> None:
        self.pending.discard(fut)
        self.slots.release()
        try:
            outcome = fut.result()
        except Exception as e:  # a bug of the fuzzer itself: count it, do not hide it
            outcome = fk.Outcome(inp.kind(), "FUZZER_ERROR", repr(e), 0.0, f"fuzzer error {e!r}")
        self.tally.add(inp, outcome)

    def drain(self, timeout: float = 60.0) -> None:
        concurrent.futures.wait(list(self.pending), timeout)

    def close(self) -> None:
        self.loop.run(self.fuzzer.close())


def strategy(kinds: list[str]) -> st.SearchStrategy[fk.Input]:
    return st.one_of(*[KINDS[k]() for k in kinds])


def drive(n: int, seed_value: int, kinds: list[str], submit: Any, on_each: Any = None) -> float:
    """Draws *n* inputs with hypothesis and hands each to *submit*; the seconds spent in hypothesis."""
    spent = [0.0]
    last = [time.perf_counter()]

    @seed(seed_value)
    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy(kinds))
    def run(inp: fk.Input) -> None:
        t = time.perf_counter()
        spent[0] += t - last[0]
        submit(inp)
        if on_each is not None:
            on_each()
        last[0] = time.perf_counter()

    with contextlib.suppress(StopFuzz):
        run()
    return spent[0]


def mib(b: float) -> float:
    return b / 2**20


def sample(server: fk.LiveServer, done: int, samples: list[dict[str, Any]]) -> None:
    try:
        r = fk.measure(server)
    except (OSError, RuntimeError):
        return
    samples.append({"inputs": done, "fds": r.fds, "tasks": r.tasks, "rss_mib": round(mib(r.rss_bytes), 1)})


async def silent_streams(fuzzer: fk.Fuzzer, count: int) -> list[fk.Outcome]:
    return list(await asyncio.gather(*[fk.run_silent(fuzzer) for _ in range(count)]))


async def garbage_matches(address: str, count: int, rng: random.Random) -> list[dict[str, Any]]:
    """Matches where the seated bot sends garbage; each must end with the faults recorded."""
    out = []
    for i in range(count):
        moves = [rng.choice(fk.GARBAGE_MOVES) for _ in range(rng.randint(1, 6))]
        try:
            r = await fk.play_scripted_match(address, moves, hands=2, seed=rng.randrange(2**32), clock=fk.short_clock())
        except (grpc.RpcError, AssertionError, TimeoutError) as e:
            out.append({"moves": moves, "ok": False, "error": repr(e)})
            continue
        termination = r.record.get("result", {}).get("termination")
        ok = termination in ("completed", "forfeit") and r.faults_as_expected()
        out.append(
            {
                "match": i,
                "moves": r.sent,
                "termination": termination,
                "reasons": r.reasons,
                "expected": r.expected,
                "ok": ok,
            }
        )
    return out


def run_fuzz(args: argparse.Namespace, command: str) -> dict[str, Any]:
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    workdir = Path(tempfile.mkdtemp(prefix="gaigel-fuzz-"))
    extra = shlex.split(args.server_args)
    server = fk.start_server(workdir, extra)
    loop = fk.LoopThread()
    tally = Tally()
    samples: list[dict[str, Any]] = []
    result: dict[str, Any] = {
        "command": command,
        "python": platform.python_version(),
        "grpc": grpc.__version__,
        "cpus": os.cpu_count(),
        "server_command": shlex.join(server.command),
        "workdir": str(workdir),
        "seed": args.seed,
        "concurrency": args.concurrency,
        "kinds": kinds,
    }
    try:
        # Warm-up (other seed, not counted): one-time allocations must not count as growth.
        loop.run(fk.play_scripted_match(server.address, seed=1))
        warm = Driver(server, loop, args.concurrency, Tally())
        drive(args.warmup, args.seed + 1_000_003, kinds, warm.submit)
        warm.drain()
        warm.close()
        fk.settle(server)
        before = fk.measure(server)
        samples.append(
            {"inputs": 0, "fds": before.fds, "tasks": before.tasks, "rss_mib": round(mib(before.rss_bytes), 1)}
        )

        driver = Driver(server, loop, args.concurrency, tally)
        silent = driver.loop.submit(silent_streams(driver.fuzzer, SILENT_STREAMS))
        counter = [0]

        def on_each() -> None:
            counter[0] += 1
            if counter[0] % args.sample_every == 0:
                sample(server, counter[0], samples)
                if samples:
                    s = samples[-1]
                    rate = counter[0] / (time.perf_counter() - start)
                    print(
                        f"  .. {counter[0]} inputs, {rate:.0f}/s, RSS {s['rss_mib']} MiB, fds {s['fds']}, "
                        f"tasks {s['tasks']}, problems {tally.problem_count}",
                        file=sys.stderr,
                        flush=True,
                    )

        start = time.perf_counter()
        generation = drive(args.inputs, args.seed, kinds, driver.submit, on_each)
        driver.drain()
        for outcome in silent.result(60):
            tally.add(None, outcome)
        elapsed = time.perf_counter() - start
        created = driver.fuzzer.created
        driver.close()
        crashed = driver.crashed or not server.alive()
        result.update(
            {
                "inputs": counter[0],
                "seconds": round(elapsed, 2),
                "inputs_per_second": round(counter[0] / elapsed, 1) if elapsed else None,
                "generation_seconds": round(generation, 2),
                "matches_created_and_cancelled": created,
                "crashed": crashed,
            }
        )
        if crashed:
            result["server_exit_code"] = server.proc.poll()
            result["server_log_tail"] = server.log_tail(40)
        else:
            fk.settle(server)
            after = fk.measure(server)
            samples.append(
                {
                    "inputs": counter[0],
                    "fds": after.fds,
                    "tasks": after.tasks,
                    "rss_mib": round(mib(after.rss_bytes), 1),
                }
            )
            tolerance = fk.Tolerance(rss_bytes=RSS_TOLERANCE_MIB * 2**20)
            peak = fk.peak_rss(server)
            result.update(
                {
                    "resources_before": before.as_dict(),
                    "resources_after": after.as_dict(),
                    "peak_rss_mib": None if peak is None else round(mib(peak), 1),
                    "tolerance": {"fds": tolerance.fds, "tasks": tolerance.tasks, "rss_mib": RSS_TOLERANCE_MIB},
                    "leaks": fk.leaks(before, after, tolerance),
                    "health": fk.health_sync(server.address),
                }
            )
            normal = loop.run(fk.play_scripted_match(server.address, players=3, hands=1, seed=args.seed))
            result["normal_match"] = {
                "termination": normal.record.get("result", {}).get("termination"),
                "faults": normal.reasons,
                "ok": normal.record.get("result", {}).get("termination") == "completed" and not normal.reasons,
            }
            result["garbage_matches"] = loop.run(
                garbage_matches(server.address, args.matches, random.Random(args.seed))
            )
    finally:
        loop.close()
        code = server.stop()
        result.setdefault("server_exit_code", code)
    result["samples"] = samples
    result["counts"] = [{"kind": k, "result": r, "count": c} for (k, r), c in sorted(tally.counts.items())]
    result["problems"] = [
        {"result": r, "count": e[0], "kinds": dict(e[3]), "outcome": e[1].describe(), "input": repr(e[2])}
        for (r, _), e in sorted(tally.problems.items(), key=lambda kv: -kv[1][0])
    ]
    result["problem_count"] = tally.problem_count
    if tally.failing:
        path = workdir / "failures.jsonl"
        path.write_text("".join(json.dumps(f) + "\n" for f in tally.failing))
        result["failures_file"] = str(path)
    result["ok"] = verdict(result)
    return result


def verdict(result: dict[str, Any]) -> bool:
    return bool(
        not result.get("crashed")
        and result.get("problem_count", 1) == 0
        and not result.get("leaks")
        and result.get("health") == "SERVING"
        and result.get("normal_match", {}).get("ok")
        and all(m["ok"] for m in result.get("garbage_matches", []))
    )


# --- output -------------------------------------------------------------------------------------


def print_report(result: dict[str, Any]) -> None:
    print(result["command"])
    print(
        f"python {result['python']}, grpcio {result['grpc']}, {result['cpus']} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}; seed {result['seed']}, concurrency {result['concurrency']}, kinds {','.join(result['kinds'])}"
    )
    print(f"server: {result['server_command']}")
    if result.get("inputs_per_second") is not None:
        share = 100 * result["generation_seconds"] / result["seconds"] if result["seconds"] else 0
        print(
            f"{result['inputs']} inputs in {result['seconds']:.1f} s: {result['inputs_per_second']:.0f} inputs/s "
            f"(hypothesis drawing inputs: {share:.0f} % of the time); "
            f"{result['matches_created_and_cancelled']} matches created by the fuzz (each cancelled at once)"
        )
    print()
    print_table(result["counts"])
    print()
    print_resources(result)
    print()
    print_checks(result)


def print_table(counts: list[dict[str, Any]]) -> None:
    """Inputs by kind, and the results each kind ended with."""
    by_kind: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    totals: collections.Counter[str] = collections.Counter()
    for c in counts:
        by_kind[c["kind"]][c["result"]] += c["count"]
        totals[c["result"]] += c["count"]
    width = max((len(k) for k in by_kind), default=10)
    print(f"{'kind':<{width}} | {'inputs':>7} | results")
    print("-" * (width + 40))
    for kind in sorted(by_kind):
        results = by_kind[kind]
        text = ", ".join(f"{r} {n}" for r, n in results.most_common())
        print(f"{kind:<{width}} | {sum(results.values()):>7} | {text}")
    print("-" * (width + 40))
    print(f"{'all':<{width}} | {sum(totals.values()):>7} | " + ", ".join(f"{r} {n}" for r, n in totals.most_common()))


def print_resources(result: dict[str, Any]) -> None:
    if result.get("crashed"):
        print(f"SERVER CRASHED (exit code {result.get('server_exit_code')}); last lines of its output:")
        print(result.get("server_log_tail", ""))
        return
    b, a, tol = result["resources_before"], result["resources_after"], result["tolerance"]
    print(f"server resources (from {a['source']}), after warm-up and after the run (connections closed, settled):")
    print(f"  {'':<18} {'before':>9} {'after':>9} {'growth':>9} {'tolerance':>10}")
    print(f"  {'open fds':<18} {b['fds']:>9} {a['fds']:>9} {a['fds'] - b['fds']:>+9} {tol['fds']:>+10}")
    if b["tasks"] is not None and a["tasks"] is not None:
        print(
            f"  {'event-loop tasks':<18} {b['tasks']:>9} {a['tasks']:>9} {a['tasks'] - b['tasks']:>+9} {tol['tasks']:>+10}"
        )
    else:
        print(f"  {'event-loop tasks':<18} {'n/a (no gaigel_event_loop_tasks metric)':>40}")
    rb, ra = mib(b["rss_bytes"]), mib(a["rss_bytes"])
    print(f"  {'RSS MiB':<18} {rb:>9.1f} {ra:>9.1f} {ra - rb:>+9.1f} {tol['rss_mib']:>+10}")
    print(f"  peak RSS (VmHWM): {result['peak_rss_mib']} MiB")
    samples = result["samples"]
    if len(samples) > 2:
        shown = samples if len(samples) <= 12 else [*samples[:: max(1, len(samples) // 10)], samples[-1]]
        print("  RSS MiB by inputs done: " + ", ".join(f"{s['inputs']}: {s['rss_mib']}" for s in shown))


def print_checks(result: dict[str, Any]) -> None:
    if not result.get("crashed"):
        print(f"health after the run: {result['health']}")
        nm = result["normal_match"]
        print(f"normal match (scripted bot + 2 house bots): {nm['termination']}, faults {nm['faults'] or 'none'}")
        gms = result["garbage_matches"]
        good = sum(1 for m in gms if m["ok"])
        print(f"matches with a seated bot sending garbage: {good}/{len(gms)} ended with every fault recorded")
        for m in gms:
            if not m["ok"]:
                print(f"  FAILED: {m}")
        for leak in result["leaks"]:
            print(f"LEAK: {leak}")
    if result["problems"]:
        print(f"PROBLEMS: {result['problem_count']} inputs, {len(result['problems'])} distinct")
        for p in result["problems"]:
            print(f"  {p['count']:>6}x {p['outcome']}")
            print(
                f"          in: {', '.join(f'{k} {n}' for k, n in sorted(p['kinds'].items(), key=lambda kv: -kv[1]))}"
            )
            print(f"          first input: {p['input'][:300]}")
        print(f"failing inputs: {result.get('failures_file')} (python bench/fuzz.py --replay FILE)")
    else:
        print("problems: none (every input ended with a defined status, no hang)")
    print("verdict: " + ("PASS" if result["ok"] else "FAIL"))


# --- replay -------------------------------------------------------------------------------------


def replay(path: str, server_args: str) -> int:
    """Sends the inputs of a failures file, one at a time, to a fresh server and prints each outcome."""
    items = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    workdir = Path(tempfile.mkdtemp(prefix="gaigel-fuzz-replay-"))
    server = fk.start_server(workdir, shlex.split(server_args))
    loop = fk.LoopThread()
    bad = 0
    try:

        async def make() -> fk.Fuzzer:
            return fk.Fuzzer(server.address)

        fuzzer = loop.run(make())
        for item in items:
            inp = fk.input_from_json(item["input"])
            outcome = loop.run(fuzzer.run(inp))
            bad += outcome.problem is not None
            print(f"{inp!r}\n  -> {outcome.describe()}")
            if not server.alive():
                print(f"SERVER DIED (exit code {server.proc.poll()}):\n{server.log_tail()}")
                return 1
        loop.run(fuzzer.close())
    finally:
        loop.close()
        server.stop()
    print(f"{len(items)} inputs replayed, {bad} with a problem")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", type=int, default=100_000, help="inputs to send (default 100,000)")
    parser.add_argument("--concurrency", type=int, default=8, help="inputs in flight at once (default 8)")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0)")
    parser.add_argument("--kinds", default="play,admin,tcp", help="comma-separated: play, admin, tcp (default all)")
    parser.add_argument("--warmup", type=int, default=300, help="inputs before the 'before' measurement (default 300)")
    parser.add_argument("--matches", type=int, default=5, help="garbage matches after the run (default 5)")
    parser.add_argument("--sample-every", type=int, default=1000, help="measure the server every N inputs")
    parser.add_argument("--server-args", default="", help="extra arguments for gaigel serve, e.g. '--max-streams 64'")
    parser.add_argument("--replay", metavar="FILE", help="send the inputs of a failures.jsonl again, then exit")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    args = parser.parse_args(argv)
    if args.replay:
        return replay(args.replay, args.server_args)
    command = "python bench/fuzz.py " + shlex.join(
        [
            *("--inputs", str(args.inputs), "--concurrency", str(args.concurrency), "--seed", str(args.seed)),
            *("--kinds", args.kinds, "--warmup", str(args.warmup), "--matches", str(args.matches)),
            *(("--server-args", args.server_args) if args.server_args else ()),
            *(("--json",) if args.json else ()),
        ]
    )
    if set(args.kinds.split(",")) - set(KINDS):
        parser.error(f"--kinds: choose from {', '.join(KINDS)}")
    result = run_fuzz(args, command)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_report(result)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
