"""Start-up cost of one bot process in each sandbox, beside a bare process, in the same run.

Run from the repository root::

    python bench/sandbox.py                 # 20 starts each of `true` and of a Python SDK import
    python bench/sandbox.py --repeat 50 --json

Each start is timed from ``subprocess.Popen`` to the process's exit, for two programs:
``/usr/bin/true`` (what the sandbox itself costs) and ``python -c "import gaigel_client"``
(a Python SDK bot up to the point where it would connect). The sandboxes are set up exactly
as the arena sets them up for a bot (:mod:`gaigel_arena.botpool`): ``process`` is the
launcher with rlimits, ``bwrap`` the launcher, a cgroup where one can be made, bubblewrap's
namespaces with the seccomp filter and, as root, ``setpriv`` to a uid of its own; ``podman``
is ``podman run`` of the project image (skipped without podman or the image). The ratio
column divides each median by the bare process's median of the same program.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [
    str(ROOT),
    str(ROOT / "arena"),
    str(ROOT / "server"),
    str(ROOT / "harness"),
    str(ROOT / "clients" / "python"),
]

from gaigel_arena import bwrap, cgroup, sandbox  # noqa: E402

IMAGE = os.environ.get("GAIGEL_TEST_IMAGE", "localhost/gaigel-arena:test")


def commands(
    kind: str, program: list[str], private: Path, socket_dir: str
) -> tuple[list[str], dict[str, str], list[int], object]:
    limits = sandbox.SandboxConfig()
    if kind == "bare":
        return program, dict(os.environ), [], None
    if kind == "process":
        return sandbox.process_command(program, limits), dict(os.environ), [], None
    if kind == "bwrap":
        group = cgroup.create(
            f"gaigel-bench-{os.getpid()}-{time.monotonic_ns()}", limits.memory_mb * 2**20, limits.pids
        )
        fd = os.open(bwrap.seccomp_file(private), os.O_RDONLY)
        plan = bwrap.plan(
            program,
            executable=program[0],
            cwd=Path.cwd(),
            folders=[],
            hidden=[],
            socket_dir=socket_dir,
            files_dir=private,
            seccomp_fd=fd,
            tmpfs_mb=limits.tmpfs_mb,
        )
        cgroups = group.procs_files() if group else []
        argv = sandbox.launcher_command(plan.argv, limits.rlimits(memory=group is None), cgroups)
        return argv, bwrap.environment({}, {}, program[0]), [fd], group
    if kind == "podman":
        inner = ["python3", "-c", "import gaigel_client"] if program[0] != "/usr/bin/true" else ["true"]
        argv, env = sandbox.podman_command(f"gaigel-bench-{os.getpid()}", IMAGE, inner, {}, socket_dir, limits)
        return sandbox.launcher_command(argv), env, [], None
    raise ValueError(kind)


def time_one(kind: str, program: list[str], private: Path, socket_dir: str) -> float:
    argv, env, fds, group = commands(kind, program, private, socket_dir)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, pass_fds=fds, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    for fd in fds:
        os.close(fd)
    if isinstance(group, cgroup.BotCgroup):
        group.kill()
        group.remove()
    if proc.returncode != 0:
        raise RuntimeError(f"{kind}: exit {proc.returncode}: {proc.stderr.decode(errors='replace')[-500:]}")
    return elapsed


def podman_ready() -> bool:
    if shutil.which("podman") is None:
        return False
    env = sandbox.podman_env()
    return subprocess.run(["podman", "image", "exists", IMAGE], env=env, capture_output=True).returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20, help="starts per sandbox and program (default 20)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    print(f"# python bench/sandbox.py --repeat {args.repeat}; load average {os.getloadavg()[0]:.2f}", file=sys.stderr)
    kinds = ["bare", "process"]
    problem = bwrap.bwrap_problem()
    if problem:
        print(f"# bwrap skipped: {problem}", file=sys.stderr)
    else:
        kinds.append("bwrap")
    if podman_ready():
        kinds.append("podman")
    else:
        print(f"# podman skipped: no podman or no image {IMAGE} (docker/build_image.sh)", file=sys.stderr)
    programs = {"true": ["/usr/bin/true"], "python-sdk-import": [sys.executable, "-c", "import gaigel_client"]}
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as private, tempfile.TemporaryDirectory() as sockets:
        for name, program in programs.items():
            for kind in kinds:  # interleaved rounds: load changes hit every sandbox alike
                results.setdefault(name, {})[kind] = 0.0
            samples: dict[str, list[float]] = {k: [] for k in kinds}
            for _ in range(args.repeat):
                for kind in kinds:
                    samples[kind].append(time_one(kind, program, Path(private), sockets))
            for kind in kinds:
                results[name][kind] = statistics.median(samples[kind])
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'program':<20} {'sandbox':<8} {'median ms':>10} {'ratio':>7}")
    for name, row in results.items():
        for kind, value in row.items():
            print(f"{name:<20} {kind:<8} {value * 1000:>10.1f} {value / row['bare']:>6.2f}x")


if __name__ == "__main__":
    main()
