"""Debug bundles: what a bot author needs to see why a match went as it did.

One zip file per match and bot (``bundles/MATCH/BOT.zip`` beside the report): the match
record, a table of every decision (hand, seat, bot, action, the time it took), the
faults, and the bot's own captured output of that match (its seats' log files, see
:mod:`gaigel_arena.botlog`). Another bot's output is never in it: an organiser who
publishes per-bot pages hands each author their own bundle. Like every published file,
a bundle is written only for a match whose duplicate set has finished (the caller's rule).
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["bundle_bytes", "decision_table", "write_bundle"]

_STAMP = (2026, 1, 1, 0, 0, 0)
"""Every member's date: a bundle is the same bytes for the same record and logs."""


def decision_table(record: dict[str, Any]) -> str:
    """Tab-separated: hand, step, seat, bot, action id, label, milliseconds."""
    seats = record.get("seats") or []
    lines = ["hand\tstep\tseat\tbot\taction\tlabel\tms"]
    for hand in record.get("hands", []):
        for step, action in enumerate(hand.get("actions", [])):
            seat = action.get("seat")
            bot = seats[seat].get("bot", "") if isinstance(seat, int) and seat < len(seats) else ""
            values = [hand.get("index", ""), step, seat, bot, action.get("action", ""), action.get("label", "")]
            values.append(action.get("ms", ""))
            lines.append("\t".join(str(v) for v in values))
    return "\n".join(lines) + "\n"


def bundle_bytes(record: dict[str, Any], bot: str, run_dir: Path) -> bytes:
    """The zip of *bot*'s bundle for *record* (logs read from *run_dir*, the arena's output folder)."""
    seats = record.get("seats") or []
    own = {str(i) for i, s in enumerate(seats) if isinstance(s, dict) and s.get("bot") == bot}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:

        def add(name: str, data: bytes) -> None:
            info = zipfile.ZipInfo(name, _STAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)

        add("record.json", json.dumps(record, indent=1, sort_keys=True).encode())
        add("decisions.tsv", decision_table(record).encode())
        add("faults.json", json.dumps(record.get("faults", []), indent=1).encode())
        for seat, name in sorted((record.get("bot_logs") or {}).items()):
            if seat not in own:
                continue  # another bot's output is that bot's author's business
            path = Path(name) if Path(name).is_absolute() else run_dir / name
            try:
                # only a file under the arena's logs/ (a symlink out of it, e.g. to a secret, is not read)
                path = path.resolve(strict=True)
                path.relative_to((run_dir / "logs").resolve(strict=True))
                data = path.read_bytes()
            except (OSError, ValueError):
                data = b"(no output kept)\n"
            add(f"seat{seat}-{bot}.log", data)
    return buffer.getvalue()


def write_bundle(record: dict[str, Any], bot: str, run_dir: Path, folder: Path) -> Path:
    """Writes *bot*'s bundle of *record* to ``folder/MATCH/BOT.zip``; returns its path."""
    path = folder / str(record.get("match_id", "match")) / f"{bot}.zip"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bundle_bytes(record, bot, run_dir))
    return path
