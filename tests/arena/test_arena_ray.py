"""The Ray executor: a local Ray cluster plays an arena exactly like the local executor.

The tests that need Ray skip when it is not installed (``pip install -e '.[ray]'``),
except under CI (``CI`` set), where a missing Ray fails them. One local cluster of 2 CPUs
serves the module and is shut down at its end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gaigel.cli import main
from gaigel_arena.config import ConfigError, parse_config
from gaigel_arena.journal import Journal
from gaigel_arena.ray_executor import RayConnectError, RayExecutor, check_reachable
from gaigel_arena.runner import make_executor, run_arena

SMALL: dict[str, Any] = {
    "arena": {"name": "ray small", "seed": 23, "sets_per_pairing": 3, "workers": 2},
    "game": {"players": 2, "hands": 2},
    "bots": [
        {"name": "r", "house": "random"},
        {"name": "f", "house": "first"},
        {"name": "h", "house": "heuristic"},
    ],
}


def _import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("ray is not installed (pip install -e '.[ray]')")
    return ray


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[ModuleType]:
    """A local Ray cluster with 2 CPUs for the module."""
    ray = _import_ray()
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="warning")
    try:
        yield ray
    finally:
        ray.shutdown()


def _results(db: Path) -> dict[str, object]:
    with Journal.open_existing(db) as journal:
        return {r.match_id: (r.status, r.result) for r in journal.rows()}


def _moves(record: dict[str, Any]) -> list[list[tuple[int, int, str]]]:
    """Every hand's (seat, action, state hash) list: the record without its timings."""
    return [[(a["seat"], a["action"], a["hash"]) for a in hand["actions"]] for hand in record["hands"]]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


class TestWithoutCluster:
    """Choosing the executor and its errors (no cluster is started)."""

    def test_config_keys(self) -> None:
        config = parse_config({**SMALL, "arena": {**SMALL["arena"], "executor": "ray", "ray_address": "h:6379"}})
        assert (config.executor, config.ray_address) == ("ray", "h:6379")
        plain = parse_config(SMALL)
        assert plain.ray_address is None
        assert config.config_hash() == plain.config_hash()  # how matches run never changes what they are
        with pytest.raises(ConfigError, match="ray_address"):
            parse_config({**SMALL, "arena": {**SMALL["arena"], "ray_address": 6379}})

    def test_remote_bots_are_refused_with_the_reason(self) -> None:
        data = {
            **SMALL,
            "arena": {**SMALL["arena"], "listen": "127.0.0.1:0"},
            "bots": [*SMALL["bots"], {"name": "friend", "remote": True, "token": "a-long-token"}],
        }
        with pytest.raises(ValueError, match=r"cannot play remote bots \(friend\).*--executor grpc"):
            make_executor(parse_config(data), 2, "ray")

    def test_missing_ray_names_the_extra(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
        with pytest.raises(NotImplementedError, match=r"pip install 'gaigel-arena\[ray\]'"):
            make_executor(parse_config(SMALL), 2, "ray")

    def test_unreachable_address_fails_fast(self) -> None:
        port = _closed_port()
        with pytest.raises(RayConnectError, match=f"cannot reach the Ray cluster at 127.0.0.1:{port}"):
            check_reachable(f"127.0.0.1:{port}")
        with pytest.raises(RayConnectError, match="cannot reach"):
            check_reachable(f"ray://127.0.0.1:{port}")
        check_reachable("auto")  # not HOST:PORT: left to ray.init

    def test_cli_error_is_one_line(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        ray = _import_ray()
        if ray.is_initialized():
            pytest.skip("Ray is already initialised in this process; the executor would use that connection")
        cfg = tmp_path / "a.toml"
        cfg.write_text('[[bots]]\nname = "a"\nhouse = "random"\n[[bots]]\nname = "b"\nhouse = "first"\n')
        port = _closed_port()
        code = main(["arena", "run", str(cfg), "--ray-address", f"127.0.0.1:{port}", "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2
        assert err[-1].startswith(f"gaigel arena: error: cannot reach the Ray cluster at 127.0.0.1:{port}")
        code = main(["arena", "run", str(cfg), "--executor", "local", "--ray-address", "auto"])
        assert code == 2
        assert "--ray-address needs --executor ray" in capsys.readouterr().err


class TestOnLocalCluster:
    """A small arena through Ray tasks on a 2-CPU local cluster."""

    def test_same_results_as_the_local_executor(self, ray_cluster: ModuleType, tmp_path: Path) -> None:
        config = parse_config(SMALL)
        a = run_arena(config, tmp_path / "ray", executor="ray", bootstrap_samples=50)
        assert ray_cluster.is_initialized()  # the test's connection was used and left open
        b = run_arena(config, tmp_path / "local", executor="local", bootstrap_samples=50)
        assert a.done == a.scheduled == b.done == 3 * 3 * 2  # 3 sets x 3 pairs x 2 rotations
        ray_results = _results(tmp_path / "ray" / "arena.sqlite")
        assert ray_results == _results(tmp_path / "local" / "arena.sqlite")
        assert all(status == "done" for status, _ in ray_results.values())
        assert [(r.name, r.elo) for r in a.standings.rows] == [(r.name, r.elo) for r in b.standings.rows]
        for match_id in ray_results:  # the scheduler wrote every record into its own folder
            mine = json.loads((tmp_path / "ray" / "records" / f"{match_id}.json").read_text())
            theirs = json.loads((tmp_path / "local" / "records" / f"{match_id}.json").read_text())
            assert mine["match_id"] == match_id
            assert mine["result"] == theirs["result"]
            assert _moves(mine) == _moves(theirs)

    def test_executor_uses_the_cluster_cpus(self, ray_cluster: ModuleType) -> None:
        pool = RayExecutor(parse_config(SMALL), workers=7)
        try:
            assert pool.workers == 2
        finally:
            pool.shutdown()
        assert ray_cluster.is_initialized()  # not its connection to close

    def test_cli(self, ray_cluster: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        cfg = tmp_path / "a.toml"
        cfg.write_text(
            '[arena]\nseed = 3\nexecutor = "ray"\n[game]\nhands = 1\n'
            '[[bots]]\nname = "a"\nhouse = "random"\n[[bots]]\nname = "b"\nhouse = "first"\n'
        )
        code = main(["arena", "run", str(cfg), "--out", str(tmp_path / "o"), "--quiet", "--json", "--bootstrap", "0"])
        assert code == 0
        report = json.loads(capsys.readouterr().out)
        assert report["matches_done"] == report["matches_scheduled"] == 2


# --- a 2-node cluster on this machine: table workers as Ray actors --------------------------------

ONLY_A = "gaigel-test-only-on-node-a"
"""A bot command on node A's PATH only."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _cluster_pids(temp_dir: str) -> list[int]:
    """The processes of the cluster under *temp_dir* (each Ray process names its session folder)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if temp_dir.encode() in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def _stop_cluster(temp_dir: str) -> None:
    """Stops only this cluster: its processes by id (never a global ``ray stop``)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _cluster_pids(temp_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 15
        while _cluster_pids(temp_dir) and time.monotonic() < deadline:
            time.sleep(0.2)


@dataclasses.dataclass(frozen=True)
class TwoNodes:
    address: str
    env: dict[str, str]
    """The environment of a driver: this cluster's token (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN``)."""
    nodes: dict[str, str]
    """Node id -> ``node_a`` or ``node_b`` (the custom resource each ``ray start`` gave it)."""

    def node(self, played_by: str) -> str:
        """``node_a`` or ``node_b`` from a record's ``played_by`` ("Ray node <id prefix> ...")."""
        prefix = played_by.split()[2]
        (name,) = [n for node_id, n in self.nodes.items() if node_id.startswith(prefix)]
        return name


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[TwoNodes]:
    """A Ray cluster of two nodes on this machine, 1 CPU each (``node_a``: the head; only its PATH
    has :data:`ONLY_A`), in a temporary folder of its own, stopped by process id at the end."""
    _import_ray()
    ray_cli = Path(sys.executable).parent / "ray"
    temp_dir = tempfile.mkdtemp(prefix="gw-ray-", dir="/tmp")  # short: Ray's socket paths must fit
    only_a = Path(temp_dir) / "only-a"
    only_a.mkdir()
    bot = only_a / ONLY_A
    bot.write_text(f"#!/bin/sh\nexec {sys.executable} -m gaigel.cli bot first\n")
    bot.chmod(0o755)
    port = _free_port()
    # A token of its own, stated: whether `ray start` turns authentication on by itself depends on
    # files in ~/.ray that this test neither reads nor writes.
    token = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **token}
    common = ["--num-cpus=1", f"--temp-dir={temp_dir}", "--node-ip-address=127.0.0.1", "--disable-usage-stats"]
    try:
        _ray_start(
            [
                str(ray_cli),
                "start",
                "--head",
                f"--port={port}",
                f"--ray-client-server-port={_free_port()}",
                "--include-dashboard=false",
                '--resources={"node_a": 1}',
                *common,
            ],
            {**env, "PATH": f"{only_a}{os.pathsep}{env.get('PATH', '')}"},
        )
        _ray_start([str(ray_cli), "start", f"--address=127.0.0.1:{port}", '--resources={"node_b": 1}', *common], env)
        address = f"127.0.0.1:{port}"
        listing = subprocess.run(
            [sys.executable, "-c", _NODES_SCRIPT, address],
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=180,
        )
        nodes = json.loads(listing.stdout.strip().splitlines()[-1])
        assert sorted(nodes.values()) == ["node_a", "node_b"]
        yield TwoNodes(address, env, nodes)
    finally:
        _stop_cluster(temp_dir)
        assert not _cluster_pids(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def _ray_start(command: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


_NODES_SCRIPT = """
import json, sys, time, ray
ray.init(address=sys.argv[1], logging_level="error")
for _ in range(100):  # both nodes registered
    nodes = [n for n in ray.nodes() if n["Alive"]]
    if len(nodes) == 2:
        break
    time.sleep(0.2)
print(json.dumps({n["NodeID"]: next(k for k in n["Resources"] if k in ("node_a", "node_b")) for n in nodes}))
"""

_MISSING_SCRIPT = """
import concurrent.futures, json, sys
from pathlib import Path
from gaigel_arena.config import parse_config
from gaigel_arena.ray_executor import RayExecutor
from gaigel_arena.runner import _job
from gaigel_arena.schedule import build_schedule
config = parse_config(json.loads(sys.argv[2]))
pool = RayExecutor(config, 2, sys.argv[1])
schedule = build_schedule(config.bot_names, config.ruleset, config.sets_per_pairing, config.seed)
futures = [pool.submit(_job(config, m, Path(sys.argv[3]))) for m in schedule[:2]]  # both actors are idle
out = []
for future in futures:
    try:
        outcome = future.result(timeout=300)
        out.append(["done", json.loads(Path(outcome.record_path).read_text())["played_by"]])
    except Exception as e:
        out.append([type(e).__name__, str(e)])
pool.shutdown()
print(json.dumps({"actor_nodes": sorted(pool.actor_nodes.values()), "results": out}))
"""


_KILL_SCRIPT = """
import json, os, signal, sys, threading
from pathlib import Path
from gaigel_arena.config import parse_config
from gaigel_arena.metrics import ArenaMetrics
from gaigel_arena.ray_executor import RayExecutor
from gaigel_arena.runner import run_arena
config = parse_config(json.loads(sys.argv[2]))
pools = []
def factory(c, w):
    pools.append(RayExecutor(c, w, sys.argv[1]))
    pid = pools[0].actor_pids[0]
    # Both actors get a match at once; per_match bot processes take longer than this to start.
    threading.Timer(0.5, os.kill, (pid, signal.SIGKILL)).start()
    return pools[0]
metrics = ArenaMetrics(config.bot_names)
summary = run_arena(config, Path(sys.argv[3]), executor_factory=factory, metrics=metrics, bootstrap_samples=0)
voids = metrics.matches_total.labels(outcome="void")._value.get()
print(json.dumps({"done": summary.done, "scheduled": summary.scheduled, "voids": voids, "killed": pools[0].actor_pids[0]}))
"""


def _command_bots_config(processes: str = "per_run") -> dict[str, Any]:
    bot = [sys.executable, "-m", "gaigel.cli", "bot"]
    return {
        "arena": {"name": "ray command bots", "seed": 31, "sets_per_pairing": 2, "bot_processes": processes},
        "game": {"players": 2, "hands": 2},
        "bots": [
            {"name": "cmd-random", "command": [*bot, "random"]},
            {"name": "cmd-heuristic", "command": [*bot, "heuristic"], "sandbox": "process"},
            {"name": "first", "house": "first"},
        ],
    }


class TestCommandBotsOnTwoNodes:
    """Table workers as Ray actors on a 2-node cluster play command bots (as ``gaigel arena run`` does)."""

    def test_arena_uses_both_nodes_with_the_local_results(self, two_nodes: TwoNodes, tmp_path: Path) -> None:
        data = _command_bots_config()
        cfg = tmp_path / "ray.toml"
        cfg.write_text(_toml(data))
        gaigel = Path(sys.executable).parent / "gaigel"
        run = subprocess.run(
            [
                str(gaigel),
                "arena",
                "run",
                str(cfg),
                "--ray-address",
                two_nodes.address,
                "--out",
                str(tmp_path / "ray"),
                "--quiet",
                "--json",
                "--bootstrap",
                "0",
            ],
            env=two_nodes.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        assert json.loads(run.stdout)["matches_done"] == 12
        records = {f.stem: json.loads(f.read_text()) for f in (tmp_path / "ray" / "records").glob("*.json")}
        assert len(records) == 12 and all(r["match_id"] == m for m, r in records.items())
        used = {two_nodes.node(r["played_by"]) for r in records.values()}
        assert used == {"node_a", "node_b"}  # the records came back from both nodes to the scheduler's folder
        local = run_arena(parse_config(data), tmp_path / "local", workers=2, executor="grpc", bootstrap_samples=0)
        assert _results(tmp_path / "ray" / "arena.sqlite") == _results(local.db_path)
        for match_id, record in records.items():
            theirs = json.loads((tmp_path / "local" / "records" / f"{match_id}.json").read_text())
            assert _moves(record) == _moves(theirs)

    def test_killed_actor_voids_its_match_which_is_replayed(self, two_nodes: TwoNodes, tmp_path: Path) -> None:
        """kill -9 of a table-worker actor's process mid-run: its match is void and replayed, Ray restarts
        the actor, and the journal equals that of a local run (nothing lost or counted twice)."""
        data = _command_bots_config("per_match")
        run = subprocess.run(
            [sys.executable, "-c", _KILL_SCRIPT, two_nodes.address, json.dumps(data), str(tmp_path / "ray")],
            env=two_nodes.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        out = json.loads(run.stdout.strip().splitlines()[-1])
        assert out["done"] == out["scheduled"] == 12
        voids = [line for line in run.stdout.splitlines() if "match_void" in line]  # the runner logs to stdout here
        assert out["voids"] == 1, [line for line in run.stdout.splitlines() if "void" in line or "error" in line]
        assert len(voids) == 1 and "table-worker actor" in voids[0] and "the match is void and replayed" in voids[0]
        played = [json.loads(f.read_text())["played_by"] for f in (tmp_path / "ray" / "records").glob("*.json")]
        assert len(played) == 12
        local = run_arena(parse_config(data), tmp_path / "local", workers=1, executor="grpc", bootstrap_samples=0)
        assert _results(tmp_path / "ray" / "arena.sqlite") == _results(local.db_path)

    def test_command_missing_on_a_node_voids_the_match_with_the_reason(
        self, two_nodes: TwoNodes, tmp_path: Path
    ) -> None:
        data = {
            "arena": {"seed": 3, "sets_per_pairing": 1},
            "game": {"players": 2, "hands": 1},
            # unconfined: the wrapper script execs the venv's Python, which it names only in its body,
            # and a bwrap sandbox shows only what the command line names; what is tested is Ray's placement
            "bots": [{"name": "a-only", "command": [ONLY_A], "sandbox": "none"}, {"name": "first", "house": "first"}],
        }
        (tmp_path / "records").mkdir()
        run = subprocess.run(
            [sys.executable, "-c", _MISSING_SCRIPT, two_nodes.address, json.dumps(data), str(tmp_path / "records")],
            env=two_nodes.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        out = json.loads(run.stdout.strip().splitlines()[-1])
        assert sorted(two_nodes.nodes[n] for n in out["actor_nodes"]) == ["node_a", "node_b"]
        results = sorted(out["results"])
        assert [kind for kind, _ in results] == ["BotMissingError", "done"]
        (_, message), (_, played_by) = results
        assert two_nodes.node(played_by) == "node_a"
        node_b = next(i for i, n in two_nodes.nodes.items() if n == "node_b")
        assert message.startswith(f"bot 'a-only' cannot run on Ray node {node_b[:12]} (")
        assert f"its command '{ONLY_A}' is not an executable there (install the bot on every node)" in message


def _toml(data: dict[str, Any]) -> str:
    """A small TOML writer for the test configs (strings, numbers, lists of strings, tables, [[bots]])."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return str(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(v)

    lines = []
    for section, table in data.items():
        if section == "bots":
            continue
        lines.append(f"[{section}]")
        lines += [f"{k} = {value(v)}" for k, v in table.items()]
    for bot in data["bots"]:
        lines.append("[[bots]]")
        lines += [f"{k} = {value(v)}" for k, v in bot.items()]
    return "\n".join(lines) + "\n"
