"""The operator guide's recipe for Ray on one machine: two nodes in a network namespace with only
loopback, an arena played on them, every listening socket on 127.0.0.1.

The recipe is read from docs/operator-guide.md and run as printed (with a small arena, ports
of its own and this checkout's venv first on PATH). Skipped without Ray (the ``ray`` extra),
and where the kernel does not allow the unprivileged namespaces the recipe needs.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "operator-guide.md"
UNSHARE = ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--mount-proc"]


def _recipe() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("**Ray on one machine, on loopback only.**") :]
    found = re.search(r"```sh\n(unshare .*?)\n```", section, re.S)
    assert found is not None, "the Ray loopback recipe is gone from the operator guide"
    return found[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_ray_recipe_stays_on_loopback(tmp_path: Path) -> None:
    if shutil.which("ray", path=str(Path(sys.executable).parent)) is None:
        if os.environ.get("CI"):
            pytest.fail("ray is not installed in CI (pip install -e '.[ray]')")
        pytest.skip("ray is not installed (pip install -e '.[ray]')")
    if subprocess.run([*UNSHARE, "true"], capture_output=True, timeout=30).returncode != 0:
        pytest.skip("this kernel allows no unprivileged user, network and pid namespaces")
    recipe = _recipe()
    assert recipe.startswith(" ".join(UNSHARE) + " sh -c '")
    (tmp_path / "contest.toml").write_text(
        "[arena]\nseed = 1\nsets_per_pairing = 1\n[game]\nplayers = 2\nhands = 1\n"
        '[[bots]]\nname = "a"\nhouse = "first"\n[[bots]]\nname = "b"\nhouse = "random"\n',
        encoding="utf-8",
    )
    port = str(_free_port())  # inside the namespace any port is free; the host's 6379 may be taken by a test
    script = recipe.replace("6379", port).replace("--num-cpus=2", "--num-cpus=1")
    # before the shell ends (and its namespace with it): what listens there
    script = script.rstrip().removesuffix("'") + "  ss -ltnH > listening.txt\n'"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    ray_tmp = tempfile.mkdtemp(prefix="gray", dir="/tmp")  # short: Ray's socket paths have a length limit
    env["RAY_TMPDIR"] = ray_tmp
    try:
        done = subprocess.run(script, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "2/2 matches done" in done.stdout, done.stdout[-2000:]
    listening = [line.split()[3] for line in (tmp_path / "listening.txt").read_text().splitlines() if line.strip()]
    assert len(listening) >= 3, listening  # the GCS, two raylets at least
    outside = [a for a in listening if not re.match(r"^(127\.\d+\.\d+\.\d+|\[::ffff:127\.\d+\.\d+\.\d+\]|\[::1\]):", a)]
    assert outside == [], listening
