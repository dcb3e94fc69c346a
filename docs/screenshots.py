"""Makes the screenshots of the docs: the match viewer and the arena report (headless Chromium).

    python docs/screenshots.py            # writes docs/viewer.png, docs/viewer-seat.png, docs/report.png

Everything is played afresh with fixed seeds (a ``gaigel play`` record, and a gRPC arena
of house bots and a chaos bot for the faults), so the pictures change little between
runs. Needs the Debian package ``chromium``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
GAIGEL = [sys.executable, "-c", "import sys; from gaigel.cli import main; sys.exit(main(sys.argv[1:]))"]

ARENA = """
[arena]
name = "house bots and a chaos bot (docs screenshot)"
seed = 2026
sets_per_pairing = 2
executor = "grpc"

[game]
players = 2
hands = 2

[clock]
decision_ms = 500
bank_ms = 1000

[[bots]]
name = "chaos"
command = CHAOS

[[bots]]
name = "heuristic"
house = "heuristic"

[[bots]]
name = "first"
house = "first"

[[bots]]
name = "random"
house = "random"
"""


def _run(*args: str) -> None:
    done = subprocess.run([*GAIGEL, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"gaigel {' '.join(args)} failed: {done.stderr.strip()}")


def _shoot(browser: str, url: str, out: Path, size: str) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             f"--user-data-dir={profile}", f"--window-size={size}", f"--screenshot={out}", url],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
    print(f"wrote {out}")


def main() -> int:
    browser = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        print("screenshots.py: chromium not found (Debian package chromium)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        # 4 players: partners, robbing and melds on one table
        _run(
            "play",
            "--players",
            "4",
            "--hands",
            "2",
            "--seed",
            "6",
            "--bot",
            "heuristic",
            "--record",
            str(tmp / "m.json"),
        )
        _run("view", str(tmp / "m.json"), "--out", str(tmp / "m.html"))
        _run("view", str(tmp / "m.json"), "--seat", "2", "--out", str(tmp / "seat.html"))
        _shoot(browser, (tmp / "m.html").as_uri() + "#step=33&seat=all", DOCS / "viewer.png", "1300,1000")
        _shoot(browser, (tmp / "seat.html").as_uri() + "#step=33&seat=2", DOCS / "viewer-seat.png", "1300,1000")
        # a bot that answers illegally or with stale decision ids now and then: faults to show
        chaos = [sys.executable, "-m", "gaigel.cli", "chaos-bot", "--chaos", "illegal=0.05,stale=0.03", "--seed", "1"]
        chaos += ["--fault-log", str(tmp / "faults.jsonl")]
        (tmp / "arena.toml").write_text(ARENA.replace("CHAOS", json.dumps(chaos)), encoding="utf-8")
        _run("arena", "run", str(tmp / "arena.toml"), "--out", str(tmp / "out"), "--quiet", "--bootstrap", "200")
        _run("arena", "report", str(tmp / "out"), "--html", str(tmp / "site" / "report.html"), "--bootstrap", "200")
        _shoot(browser, (tmp / "site" / "report.html").as_uri(), DOCS / "report.png", "1240,3000")
        faulty = "s0000-r1-chaos-heuristic"  # a forfeit after repeated faults
        _shoot(browser, (tmp / "site" / "matches" / f"{faulty}.html").as_uri() + "#step=end&seat=all",
               DOCS / "viewer-faults.png", "1300,1000")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
