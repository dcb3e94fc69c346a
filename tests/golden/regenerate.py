"""Rewrites the golden playthroughs on purpose: ``python tests/golden/regenerate.py``.

Searches the seeds (see ``playthrough.selected_specs``), writes ``tests/golden/<name>.txt``,
deletes playthrough files that are no longer selected, and prints what changed. Review
the diff (``git diff tests/golden``) before committing: a changed golden file means the
engine now plays differently.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from playthrough import FORMAT_LINE, GOLDEN_DIR, first_difference, render, selected_specs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any file would change")
    args = parser.parse_args(argv)
    specs = selected_specs()
    wanted = {GOLDEN_DIR / f"{s.name}.txt": s for s in specs}
    changed = 0
    for path, spec in wanted.items():
        text = render(spec)
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old == text:
            print(f"unchanged {path.name}")
            continue
        changed += 1
        if old is None:
            print(f"added     {path.name} ({len(text.splitlines())} lines)")
        else:
            diff = first_difference(old.splitlines(), text.splitlines())
            where = f"first difference at line {diff[0]}" if diff else "line endings only"
            print(f"changed   {path.name} ({where})")
        if not args.check:
            path.write_text(text, encoding="utf-8", newline="\n")
    for path in sorted(GOLDEN_DIR.glob("*.txt")):
        if path not in wanted and path.read_text(encoding="utf-8").startswith(FORMAT_LINE):
            changed += 1
            print(f"removed   {path.name}")
            if not args.check:
                path.unlink()
    total = sum(p.stat().st_size for p in GOLDEN_DIR.glob("*.txt"))
    print(f"{len(wanted)} playthroughs, {changed} changed, {total / 1024:.0f} KiB in {GOLDEN_DIR}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
