"""A change's effect on the server's speed: ``bench/server.py`` on a base commit and on the work
tree, in interleaved pairs.

Run from the repository root::

    python bench/ab.py BASE                                 # 3 pairs of --compact --streams 1,64 --seconds 3
    python bench/ab.py HEAD~3 --pairs 5 -- --streams 1,8,64 --seconds 5
    python bench/ab.py main --json

This machine's speed drifts by a quarter within minutes (a shared host), more than most
changes are worth, so one run before and one after a change prove little. Here the two
versions take turns, base first in each pair: each pair shares the host's state of the moment,
and a change that helps lowers the ratio to the echo (measured in the same run of each side) in
most pairs. BASE is checked out into a temporary git worktree and its compiled modules are
built there (``setup.py build_ext --inplace``); its packages are imported from it by
``PYTHONPATH`` (the roots its pyproject.toml names), the work tree's as installed. Prints, per stream count, each pair's server CPU
per decision and its ratio to the echo's, then the medians and how many pairs went down.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_ARGS = ["--compact", "--streams", "1,64", "--seconds", "3"]


def _run(tree: Path, args: list[str], pythonpath: str | None) -> dict[str, Any]:
    env = None if pythonpath is None else dict(os.environ, PYTHONPATH=pythonpath)
    out = subprocess.run(
        [sys.executable, "bench/server.py", *args, "--json"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if out.returncode != 0:
        raise SystemExit(f"bench/server.py failed in {tree} (exit {out.returncode}):\n{out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout[out.stdout.index("{") :])
    return result


def _package_roots(tree: Path) -> list[str]:
    """Where *tree*'s packages live: its pyproject's ``packages.find`` roots, as pip installs them."""
    pyproject = tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8"))
    roots: list[str] = pyproject["tool"]["setuptools"]["packages"]["find"]["where"]
    return roots


def _figures(result: dict[str, Any]) -> dict[int, tuple[float, float, float]]:
    """Per stream count: (server CPU us per decision, its ratio to the echo's, round trip ratio)."""
    out = {}
    for row in result["rows"]:
        full, echo = row["full"], row["echo"]
        cpu = full["server_cpu_us_per_decision"]
        out[row["streams"]] = (cpu, cpu / echo["server_cpu_us_per_decision"], full["rtt_p50_ms"] / echo["rtt_p50_ms"])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", help="the commit to compare the work tree with (any git revision)")
    parser.add_argument("--pairs", type=int, default=3, help="interleaved pairs (default 3)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.epilog = f"Arguments after -- go to bench/server.py (default: {shlex.join(DEFAULT_ARGS)})."
    given = sys.argv[1:] if argv is None else argv
    ours, server_args = (given[: given.index("--")], given[given.index("--") + 1 :]) if "--" in given else (given, [])
    args = parser.parse_args(ours)
    if args.pairs < 1:
        parser.error("--pairs N: N must be at least 1")
    server_args = server_args or DEFAULT_ARGS
    base = subprocess.run(
        ["git", "rev-parse", "--short", args.base], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if base.returncode != 0:
        parser.error(f"not a git revision here: {args.base!r}")
    commit = base.stdout.strip()
    pairs: list[dict[str, dict[int, tuple[float, float, float]]]] = []
    with tempfile.TemporaryDirectory(prefix="gaigel-ab-") as tmp:
        tree = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), commit], cwd=ROOT, check=True)
        try:
            subprocess.run(
                [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                cwd=tree,
                check=True,
                capture_output=True,
            )
            pythonpath = ":".join(str(tree / p) for p in _package_roots(tree))
            for i in range(args.pairs):
                before = _figures(_run(tree, server_args, pythonpath))
                after = _figures(_run(ROOT, server_args, None))
                pairs.append({"base": before, "work": after})
                if not args.json:
                    for n in sorted(after):
                        (b, br, _), (a, ar, _) = before[n], after[n]
                        print(
                            f"pair {i + 1}, {n} streams: {b:.0f} -> {a:.0f} us (x{br:.2f} -> x{ar:.2f} of the echo's)"
                        )
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
    summary = {}
    for n in sorted(pairs[0]["work"]):
        base_runs = [p["base"][n] for p in pairs]
        work_runs = [p["work"][n] for p in pairs]
        summary[n] = {
            "base_cpu_us": statistics.median(x[0] for x in base_runs),
            "work_cpu_us": statistics.median(x[0] for x in work_runs),
            "base_cpu_ratio": statistics.median(x[1] for x in base_runs),
            "work_cpu_ratio": statistics.median(x[1] for x in work_runs),
            "base_rtt_ratio": statistics.median(x[2] for x in base_runs),
            "work_rtt_ratio": statistics.median(x[2] for x in work_runs),
            "pairs_lower": sum(1 for x, y in zip(base_runs, work_runs, strict=True) if y[1] < x[1]),
            "pairs": len(pairs),
        }
    command = "python bench/ab.py " + shlex.join(given)
    if args.json:
        print(
            json.dumps({"command": command, "base": commit, "server_args": server_args, "streams": summary}, indent=2)
        )
        return 0
    print(command)
    print(
        f"base {commit} against the work tree, bench/server.py {shlex.join(server_args)}, medians of {len(pairs)} pairs:"
    )
    for n, s in summary.items():
        print(
            f"  {n} streams: server CPU {s['base_cpu_us']:.0f} -> {s['work_cpu_us']:.0f} us a decision, "
            f"x{s['base_cpu_ratio']:.2f} -> x{s['work_cpu_ratio']:.2f} of the echo's "
            f"(lower in {s['pairs_lower']} of {s['pairs']} pairs); round trip x{s['base_rtt_ratio']:.2f} -> "
            f"x{s['work_rtt_ratio']:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
