"""The arena's HTML report of many matches: time and size of ``write_html_report``.

    python bench/report.py                  # 1,000 matches of 2 players, 8 hands (about a minute)
    python bench/report.py --matches 200 --json

Plays an arena of house bots (``first`` and ``random``, inline) into a temporary folder,
then writes its HTML report twice, each into a fresh folder:

* **shared**: as ``gaigel arena report --html`` does now: viewer pages that load one shared
  ``viewer.js``/``viewer.css`` and hold a compact, packed view (the seat views derived by the script);
* **standalone**: the reference, one self-contained ``gaigel view`` page per match (the
  report's pages before: a copy of the script and every seat's view in each page).

Both are measured in the same run, so compare the ratio; the absolute seconds depend on the
machine and its load, and on whether the engine is compiled (``gaigel --version``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "arena"), str(ROOT / "server"), str(ROOT / "harness")]

from gaigel_arena.config import parse_config  # noqa: E402
from gaigel_arena.report import load_report, write_html_report  # noqa: E402
from gaigel_arena.runner import run_arena  # noqa: E402


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _standalone(report_dir: Path, site: Path) -> None:
    """The reference: every page self-contained with all views (what the report wrote before)."""
    from gaigel_harness.viewer import write_viewer

    (site / "matches").mkdir(parents=True)
    for record in sorted((report_dir / "records").glob("*.json")):
        write_viewer(record, site / "matches" / f"{record.stem}.html")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matches", type=int, default=1000, help="about this many matches (default 1000)")
    parser.add_argument("--hands", type=int, default=8, help="hands per match (default 8, the config default)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    from gaigel_arena.commands import configure_logging

    configure_logging("warning")  # no line per match
    print("# python bench/report.py " + shlex.join(sys.argv[1:]), flush=True)
    bots = [{"name": f"bot{i}", "house": "first" if i % 2 else "random"} for i in range(5)]
    sets = max(1, round(args.matches / (10 * 2)))  # 10 pairs of 5 bots, 2 seatings each
    config = parse_config(
        {
            "arena": {"name": "bench", "seed": 1, "sets_per_pairing": sets},
            "game": {"players": 2, "hands": args.hands},
            "bots": bots,
        }
    )
    with tempfile.TemporaryDirectory(prefix="gaigel-bench-report-") as tmp:
        out = Path(tmp) / "arena"
        t0 = time.perf_counter()
        run_arena(config, out, executor="inline", bootstrap_samples=0)
        played = time.perf_counter() - t0
        results: dict[str, dict[str, float]] = {}
        for name in ("shared", "standalone"):
            site = Path(tmp) / name
            t0 = time.perf_counter()
            if name == "shared":
                write_html_report(load_report(out, samples=1000, details=True), site / "index.html")
            else:
                _standalone(out, site)
            seconds = time.perf_counter() - t0
            results[name] = {"seconds": round(seconds, 2), "mb": round(_size(site) / 1e6, 1)}
        matches = len(list((out / "records").glob("*.json")))
        records_mb = round(_size(out / "records") / 1e6, 1)
    ratio = {k: round(results["standalone"][k] / results["shared"][k], 1) for k in ("seconds", "mb")}
    if args.json:
        print(json.dumps({"matches": matches, "records_mb": records_mb, "play_s": round(played, 1), **results}))
        return 0
    print(f"{matches} matches of {args.hands} hands (records {records_mb} MB, played in {played:.1f} s)")
    print(f"{'report':<12} {'seconds':>8} {'MB':>7}")
    for name, row in results.items():
        print(f"{name:<12} {row['seconds']:>8.2f} {row['mb']:>7.1f}")
    print(f"standalone / shared: {ratio['seconds']}x the time, {ratio['mb']}x the size")
    return 0


if __name__ == "__main__":
    sys.exit(main())
