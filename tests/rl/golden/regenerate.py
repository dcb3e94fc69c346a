"""Writes the OpenSpiel playthroughs of python_gaigel, one per player count (needs the rl extra).

Run ``python tests/rl/golden/regenerate.py`` from the project root after an intended change
of the game, the observer or the engine, and review ``git diff tests/rl/golden``.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
GAMES = {n: f"python_gaigel(players={n})" for n in (2, 3, 4, 6)}
SEED = 7


def playthrough(players: int) -> str:
    """The playthrough text of the *players*-player game (random actions from a fixed seed)."""
    from open_spiel.python.algorithms import generate_playthrough

    import gaigel_rl.openspiel_game  # noqa: F401  (registers the game)

    return str(generate_playthrough.playthrough(GAMES[players], action_sequence=None, seed=SEED))


def path(players: int) -> Path:
    """The golden file of *players*."""
    return HERE / f"python_gaigel_{players}p.txt"


if __name__ == "__main__":
    for n in GAMES:
        path(n).write_text(playthrough(n), encoding="utf-8")
        print(path(n).relative_to(Path.cwd()) if path(n).is_relative_to(Path.cwd()) else path(n))
