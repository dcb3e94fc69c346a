"""The Ray executor: a local Ray cluster plays an arena exactly like the local executor.

The tests that need Ray skip when it is not installed (``pip install -e '.[ray]'``),
except under CI (``CI`` set), where a missing Ray fails them. One local cluster of 2 CPUs
serves the module and is shut down at its end.
"""

from __future__ import annotations

import json
import os
import socket
import sys
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

    def test_command_bots_are_refused_with_the_reason(self) -> None:
        data = {**SMALL, "bots": [*SMALL["bots"], {"name": "mine", "command": ["python", "bot.py"]}]}
        with pytest.raises(ValueError, match=r"house bots only, not mine \(command\).*--executor grpc"):
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
